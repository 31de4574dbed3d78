//! Pending transactional offset commits (KIP-98, KIP-447), after Kafka's
//! `OffsetMetadataManager` (`pendingTransactionalOffsets`, `openTransactions`,
//! `replayEndTransactionMarker`). Pure bookkeeping: no I/O; the coordinator keeps one
//! behind a `parking_lot::Mutex` and the start-up replay uses its own.
//!
//! A TxnOffsetCommit is appended to the group's `__consumer_offsets` partition as a
//! transactional batch and kept here, per (partition, producer id), until the
//! transaction's marker: COMMIT applies the offsets, ABORT drops them. Rules, as Kafka's:
//! - every pending offset remembers the log offset of its record; at COMMIT it is applied
//!   only if no record with a higher log offset has set the partition's committed offset
//!   meanwhile (a plain OffsetCommit after it, or another transaction's later record that
//!   committed first): such an entry is marked `superseded` when that happens;
//! - an offset tombstone (OffsetDelete, DeleteGroups, expiry) removes the pending offsets
//!   of that partition from every open transaction, so a later COMMIT cannot resurrect
//!   them;
//! - a (group, topic, partition) with a pending offset is "unstable" for OffsetFetch with
//!   `require_stable` until the marker, even when superseded (Kafka's `openTransactions`
//!   is only cleared by the marker or a tombstone);
//! - offsets retention skips partitions with pending offsets and keeps groups with open
//!   transactions (Kafka's `cleanupExpiredOffsets`).
//!
//! The store's applied position of a partition (`OffsetStore::apply`) must never pass the
//! first record of a transaction still open: start-up replays from the record after the
//! applied position and must see every record of the open transactions to rebuild them.
//! [`TxnOffsets::position`] is therefore `min(last offset processed, first offset of the
//! oldest open transaction - 1)`. We chose this over persisting pending offsets in
//! RocksDB: the log stays the only record of a pending commit, no new store format is
//! needed, and replay re-derives the exact state Kafka would (re-applying the log's
//! plain records from that point is harmless: puts and deletes of whole keys, in order).

use std::collections::{BTreeMap, BTreeSet};

use brook_storage::offsets::{CommittedOffset, OffsetRecord};

/// (group, topic, partition).
pub type OffsetKey = (String, String, i32);

/// One transactional offset commit waiting for its marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffset {
    pub offset: CommittedOffset,
    /// The log offset of the record carrying it (a local sequence without a log).
    pub record_offset: i64,
    /// A record with a higher log offset set this partition's committed offset while
    /// this one waited: at COMMIT it is not applied.
    pub superseded: bool,
}

/// The offsets one producer's open transaction committed to groups of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTxn {
    pub producer_epoch: i16,
    /// Log offset of the transaction's first batch in this partition.
    pub first_offset: i64,
    pub offsets: BTreeMap<OffsetKey, PendingOffset>,
}

/// Open transactions per `__consumer_offsets` partition and producer id, and how far
/// each partition's log has been processed.
#[derive(Debug, Default)]
pub struct TxnOffsets {
    open: BTreeMap<i32, BTreeMap<i64, OpenTxn>>,
    processed: BTreeMap<i32, i64>,
    /// Record offsets for changes made without a log (unit tests, before
    /// `__consumer_offsets` exists): only their order matters.
    local_sequence: i64,
}

impl TxnOffsets {
    /// `count` consecutive record offsets for changes that have no log offset.
    pub fn local_offsets(&mut self, count: usize) -> i64 {
        let base = self.local_sequence;
        self.local_sequence += i64::try_from(count).unwrap_or(i64::MAX / 2);
        base
    }

    /// A transactional batch of `producer_id` appended at `base_offset`: its commits
    /// become pending (record `i` at `base_offset + i`). Tombstones in a transactional
    /// batch act at once, as Kafka replays them.
    pub fn add(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        base_offset: i64,
        records: &[OffsetRecord],
    ) {
        for (i, record) in records.iter().enumerate() {
            let record_offset = base_offset + i as i64;
            match record {
                OffsetRecord::Commit {
                    group,
                    topic,
                    partition: p,
                    offset,
                } => {
                    let txn = self
                        .open
                        .entry(partition)
                        .or_default()
                        .entry(producer_id)
                        .or_insert_with(|| OpenTxn {
                            producer_epoch,
                            first_offset: record_offset,
                            offsets: BTreeMap::new(),
                        });
                    txn.producer_epoch = producer_epoch;
                    txn.offsets.insert(
                        (group.clone(), topic.clone(), *p),
                        PendingOffset {
                            offset: offset.clone(),
                            record_offset,
                            superseded: false,
                        },
                    );
                }
                other => self.observe_plain(partition, std::slice::from_ref(other), record_offset),
            }
        }
    }

    /// Non-transactional records of `partition` appended at `base_offset`: a commit
    /// supersedes older pending offsets of its partition, a tombstone removes them.
    pub fn observe_plain(&mut self, partition: i32, records: &[OffsetRecord], base_offset: i64) {
        let Some(open) = self.open.get_mut(&partition) else {
            return;
        };
        for (i, record) in records.iter().enumerate() {
            let record_offset = base_offset + i as i64;
            match record {
                OffsetRecord::Commit {
                    group,
                    topic,
                    partition: p,
                    ..
                } => {
                    let key = (group.clone(), topic.clone(), *p);
                    supersede(open.values_mut(), &key, record_offset);
                }
                OffsetRecord::DeleteOffset {
                    group,
                    topic,
                    partition: p,
                } => {
                    let key = (group.clone(), topic.clone(), *p);
                    for txn in open.values_mut() {
                        txn.offsets.remove(&key);
                    }
                }
                OffsetRecord::PutGroup { .. }
                | OffsetRecord::DeleteGroup { .. }
                | OffsetRecord::PutGroupRecord { .. }
                | OffsetRecord::DeleteGroupRecord { .. } => {}
            }
        }
    }

    /// The marker of `producer_id`'s transaction on `partition`: the offsets to apply
    /// (COMMIT, not superseded) or nothing (ABORT, or no pending offsets).
    pub fn complete(
        &mut self,
        partition: i32,
        producer_id: i64,
        commit: bool,
    ) -> Vec<(OffsetKey, CommittedOffset)> {
        let Some(open) = self.open.get_mut(&partition) else {
            return Vec::new();
        };
        let Some(txn) = open.remove(&producer_id) else {
            return Vec::new();
        };
        if open.is_empty() {
            self.open.remove(&partition);
        }
        if !commit {
            return Vec::new();
        }
        let mut applied = Vec::new();
        for (key, pending) in txn.offsets {
            if pending.superseded {
                continue;
            }
            if let Some(open) = self.open.get_mut(&partition) {
                supersede(open.values_mut(), &key, pending.record_offset);
            }
            applied.push((key, pending.offset));
        }
        applied
    }

    /// The log of `partition` has been processed up to `offset` (inclusive).
    pub fn processed(&mut self, partition: i32, offset: i64) {
        let entry = self.processed.entry(partition).or_insert(offset);
        *entry = (*entry).max(offset);
    }

    /// The applied position `partition` may be stored with (see the module docs);
    /// `None` if nothing of it was processed yet.
    pub fn position(&self, partition: i32) -> Option<i64> {
        let processed = *self.processed.get(&partition)?;
        let oldest_open = self
            .open
            .get(&partition)
            .and_then(|open| open.values().map(|t| t.first_offset).min());
        Some(oldest_open.map_or(processed, |first| processed.min(first - 1)))
    }

    /// Whether `group` has a pending offset for `topic`-`partition`.
    pub fn is_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (group.to_owned(), topic.to_owned(), partition);
        self.open
            .values()
            .flat_map(|open| open.values())
            .any(|txn| txn.offsets.contains_key(&key))
    }

    /// The (topic, partition)s of `group` with pending offsets.
    pub fn pending_of_group(&self, group: &str) -> BTreeSet<(String, i32)> {
        self.open
            .values()
            .flat_map(|open| open.values())
            .flat_map(|txn| txn.offsets.keys())
            .filter(|(g, _, _)| g == group)
            .map(|(_, topic, partition)| (topic.clone(), *partition))
            .collect()
    }

    /// Every group with pending offsets.
    pub fn groups(&self) -> BTreeSet<String> {
        self.open
            .values()
            .flat_map(|open| open.values())
            .flat_map(|txn| txn.offsets.keys())
            .map(|(group, _, _)| group.clone())
            .collect()
    }

    /// The open transactions of `partition`, taken out (the replay hands them over).
    pub fn take_partition(&mut self, partition: i32) -> BTreeMap<i64, OpenTxn> {
        self.open.remove(&partition).unwrap_or_default()
    }

    /// Replaces what is known of `partition` by what its replay found.
    pub fn load_partition(
        &mut self,
        partition: i32,
        open: BTreeMap<i64, OpenTxn>,
        processed: Option<i64>,
    ) {
        self.open.remove(&partition);
        if !open.is_empty() {
            self.open.insert(partition, open);
        }
        match processed {
            Some(p) => {
                self.processed.insert(partition, p);
            }
            None => {
                self.processed.remove(&partition);
            }
        }
    }

    /// This broker no longer leads `partition`: forget its open transactions.
    pub fn unload_partition(&mut self, partition: i32) {
        self.open.remove(&partition);
        self.processed.remove(&partition);
    }

    /// How many transactions are open on `partition` (tests, logs).
    pub fn open_count(&self, partition: i32) -> usize {
        self.open.get(&partition).map_or(0, BTreeMap::len)
    }
}

/// Marks the pending offsets of `key` with a record offset below `record_offset` as
/// superseded: a newer record now holds the committed offset.
fn supersede<'a>(txns: impl Iterator<Item = &'a mut OpenTxn>, key: &OffsetKey, record_offset: i64) {
    for txn in txns {
        if let Some(pending) = txn.offsets.get_mut(key) {
            if pending.record_offset < record_offset {
                pending.superseded = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(group: &str, partition: i32, offset: i64) -> OffsetRecord {
        OffsetRecord::Commit {
            group: group.into(),
            topic: "t".into(),
            partition,
            offset: CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 1,
            },
        }
    }

    fn offsets(applied: &[(OffsetKey, CommittedOffset)]) -> Vec<(i32, i64)> {
        applied
            .iter()
            .map(|((_, _, p), c)| (*p, c.offset))
            .collect()
    }

    #[test]
    fn a_commit_marker_applies_and_an_abort_marker_drops() {
        let mut t = TxnOffsets::default();
        t.add(3, 7, 0, 10, &[commit("g", 0, 5), commit("g", 1, 6)]);
        t.add(3, 8, 0, 12, &[commit("g", 2, 9)]);
        assert!(t.is_pending("g", "t", 0));
        assert_eq!(t.open_count(3), 2);
        assert_eq!(offsets(&t.complete(3, 7, true)), vec![(0, 5), (1, 6)]);
        assert!(!t.is_pending("g", "t", 0));
        assert!(t.complete(3, 8, false).is_empty());
        assert!(!t.is_pending("g", "t", 2));
        assert!(
            t.complete(3, 8, true).is_empty(),
            "a second marker finds nothing"
        );
    }

    #[test]
    fn the_most_recent_record_wins_between_plain_and_transactional_commits() {
        let mut t = TxnOffsets::default();
        t.add(0, 1, 0, 10, &[commit("g", 0, 5), commit("g", 1, 5)]);
        // A plain commit of partition 0 after the transactional record.
        t.observe_plain(0, &[commit("g", 0, 99)], 11);
        assert!(t.is_pending("g", "t", 0), "still unstable until the marker");
        assert_eq!(offsets(&t.complete(0, 1, true)), vec![(1, 5)]);

        // Two transactions on one partition: the later record wins whatever the order
        // of the markers.
        t.add(0, 1, 0, 20, &[commit("g", 0, 1)]);
        t.add(0, 2, 0, 21, &[commit("g", 0, 2)]);
        assert_eq!(offsets(&t.complete(0, 2, true)), vec![(0, 2)]);
        assert!(t.complete(0, 1, true).is_empty());
        t.add(0, 1, 0, 30, &[commit("g", 0, 1)]);
        t.add(0, 2, 0, 31, &[commit("g", 0, 2)]);
        assert_eq!(offsets(&t.complete(0, 1, true)), vec![(0, 1)]);
        assert_eq!(offsets(&t.complete(0, 2, true)), vec![(0, 2)]);
    }

    #[test]
    fn a_tombstone_removes_pending_offsets_so_a_commit_cannot_resurrect_them() {
        let mut t = TxnOffsets::default();
        t.add(0, 1, 0, 10, &[commit("g", 0, 5), commit("g", 1, 6)]);
        let tombstone = OffsetRecord::DeleteOffset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        t.observe_plain(0, &[tombstone], 11);
        assert!(!t.is_pending("g", "t", 0));
        assert_eq!(
            t.pending_of_group("g"),
            BTreeSet::from([("t".to_string(), 1)])
        );
        assert_eq!(offsets(&t.complete(0, 1, true)), vec![(1, 6)]);
    }

    #[test]
    fn the_applied_position_stays_below_the_oldest_open_transaction() {
        let mut t = TxnOffsets::default();
        assert_eq!(t.position(0), None);
        t.processed(0, 9);
        assert_eq!(t.position(0), Some(9));
        t.add(0, 1, 0, 10, &[commit("g", 0, 5)]);
        t.processed(0, 10);
        t.add(0, 2, 0, 11, &[commit("g", 1, 5)]);
        t.processed(0, 11);
        t.observe_plain(0, &[commit("h", 0, 1)], 12);
        t.processed(0, 12);
        assert_eq!(t.position(0), Some(9));
        t.complete(0, 1, true);
        assert_eq!(t.position(0), Some(10));
        t.complete(0, 2, false);
        assert_eq!(t.position(0), Some(12));
        assert_eq!(t.position(1), None);
    }
}
