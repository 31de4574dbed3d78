//! The group coordinator's side of transactions (KIP-98, KIP-447): TxnOffsetCommit
//! appends a producer's offsets to the group's `__consumer_offsets` partition as a
//! transactional batch and keeps them pending (`txn_offsets`); the transaction marker
//! writer calls [`GroupCoordinator::complete_transaction`] once a COMMIT or ABORT marker
//! for the producer is in that partition's log, which applies or drops them.
//!
//! Applying a COMMIT writes nothing to the log (the records and the marker are there):
//! the offsets go to the store and the cache, under the partition's write lock so they
//! land in log order with the partition's other writes. The store's applied position
//! then moves only as far as `TxnOffsets::position` allows (below any transaction still
//! open), so a restart replays exactly what it needs.

use std::collections::BTreeSet;

use brook_storage::offsets::{CommittedOffset, OffsetRecord};
use tracing::debug;

use super::offsets_log::TxnProducer;
use super::state::Group;
use super::GroupCoordinator;
use crate::error::BrokerError;

/// Who commits offsets in a transaction: the producer, and (TxnOffsetCommit v3+,
/// KIP-447) the consumer's group identity; generation -1 and an empty member id (v0-2,
/// or a producer outside the group) skip the member checks.
#[derive(Debug, Clone)]
pub struct TxnCommitter {
    pub producer: TxnProducer,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
}

impl GroupCoordinator {
    /// TxnOffsetCommit: validates the committer against the group (as OffsetCommit, in
    /// Kafka's transactional flavour), then appends `entries` durably as pending
    /// offsets of the producer's transaction. They are not visible to OffsetFetch until
    /// the transaction commits.
    pub async fn commit_transactional_offsets(
        &self,
        group_id: &str,
        committer: TxnCommitter,
        entries: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), BrokerError> {
        if group_id.is_empty() {
            return Err(super::GroupError::InvalidGroupId.into());
        }
        self.serves(group_id)?;
        {
            let mut groups = self.shared.groups.lock();
            match groups.get(group_id) {
                Some(group) => group.validate_txn_offset_commit(
                    &committer.member_id,
                    committer.group_instance_id.as_deref(),
                    committer.generation_id,
                )?,
                // A consumer group (KIP-848): its members commit in transactions too.
                None if self.shared.consumer.exists(group_id) => {
                    let (member, epoch) = (&committer.member_id, committer.generation_id);
                    let consumer = &self.shared.consumer;
                    if let Some(checked) =
                        consumer.validate_commit(group_id, member, epoch, true, &entries)
                    {
                        checked?;
                    }
                }
                None if committer.generation_id < 0 => {
                    // A producer outside any group creates the (Empty) group, as Kafka does.
                    groups.insert(group_id.to_owned(), Group::new(group_id));
                }
                // Kafka answers ILLEGAL_GENERATION here at every version.
                None => {
                    return Err(super::GroupError::IllegalGeneration {
                        given: committer.generation_id,
                        current: -1,
                    }
                    .into())
                }
            }
        }
        if entries.is_empty() {
            return Ok(());
        }
        let records = entries
            .into_iter()
            .map(|(topic, partition, offset)| OffsetRecord::Commit {
                group: group_id.to_owned(),
                topic,
                partition,
                offset,
            })
            .collect();
        self.shared
            .persist_transactional(group_id, committer.producer, records)
            .await
    }

    /// Applies (commit) or drops (abort) the offsets `producer_id` committed in its
    /// transaction to groups of `partition` (of `__consumer_offsets`). Called after the
    /// marker is in the partition's log; a marker with nothing pending is a no-op.
    pub async fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        commit: bool,
    ) -> Result<(), BrokerError> {
        let _ordered = match &self.shared.log {
            Some(log) => Some(log.lock_partition(partition).await),
            None => None,
        };
        // The pending offsets leave and the committed ones arrive in one critical section
        // (locks in the coordinator's order: groups, offsets, txns): an OffsetFetch in
        // between would otherwise see neither, answer the previous offsets as stable, and
        // a new owner of the partition would copy the transaction's input again. The log
        // holds the marker already, so memory may run ahead of the RocksDB write below.
        let (applied, position) = {
            let mut groups = self.shared.groups.lock();
            let mut offsets = self.shared.offsets.lock();
            let mut txns = self.shared.txns.lock();
            let applied = txns.complete(partition, producer_id, commit);
            for ((group, topic, p), offset) in &applied {
                super::loading::add_offsets_only_group(&mut groups, &self.shared.consumer, group);
                offsets
                    .entry(group.clone())
                    .or_default()
                    .insert((topic.clone(), *p), offset.clone());
            }
            (applied, txns.position(partition))
        };
        debug!(
            partition,
            producer_id,
            commit,
            offsets = applied.len(),
            "transaction completed on the offsets partition"
        );
        if !applied.is_empty() || position.is_some() {
            let records: Vec<OffsetRecord> = applied
                .iter()
                .map(|((group, topic, p), offset)| OffsetRecord::Commit {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *p,
                    offset: offset.clone(),
                })
                .collect();
            let with_log = self
                .shared
                .log
                .as_ref()
                .is_some_and(|log| log.partitions().is_some());
            self.shared
                .store
                .run_blocking(move |s| {
                    if !with_log {
                        for record in &records {
                            if let OffsetRecord::Commit {
                                group,
                                topic,
                                partition,
                                offset,
                            } = record
                            {
                                s.commit(group, &[(topic.clone(), *partition, offset.clone())])?;
                            }
                        }
                        return Ok(());
                    }
                    // Without a position yet, keep the stored one: nothing of the log
                    // was processed here that it could cover.
                    let position = match position {
                        Some(p) => p,
                        None => s.applied_position_of(partition)?.unwrap_or(-1),
                    };
                    s.apply(partition, &records, position)
                })
                .await?;
        }
        Ok(())
    }

    /// The (topic, partition)s of `group_id` with transactional offsets waiting for their
    /// transaction's end: OffsetFetch with `require_stable` answers them
    /// UNSTABLE_OFFSET_COMMIT.
    pub fn pending_transactional_offsets(&self, group_id: &str) -> BTreeSet<(String, i32)> {
        self.shared.txns.lock().pending_of_group(group_id)
    }
}
