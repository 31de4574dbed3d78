//! Applying `__consumer_offsets` records to the store: the materialised view of the log.
//!
//! The broker appends commits, group metadata and their tombstones to a partition of
//! `__consumer_offsets`, fsyncs the log (the durability point), then calls
//! [`OffsetStore::apply`] with the decoded records and the offset of the last one. The
//! changes and the partition's applied position go in one `WriteBatch` *without* sync:
//! after a crash the store may lag the log, never lead it, and start-up replays the log
//! from [`OffsetStore::applied_position_of`] + 1 (re-applying a record is harmless: every
//! operation is a put or a delete of a whole key).
//!
//! Applied positions are per `__consumer_offsets` partition, key `applied/` ‖ i32 BE
//! partition in the `meta` column family (see `storage/FORMAT.md`).

use rocksdb::{WriteBatch, WriteOptions};

use super::store::{CF_GROUPS, CF_GROUP_RECORDS, CF_META, CF_OFFSETS};
use super::{codec, CommittedOffset, OffsetStore};
use crate::error::Result;

/// Prefix of the per-partition applied-position keys in the `meta` column family.
const APPLIED_PREFIX: &[u8] = b"applied/";

/// One change to the store, as one `__consumer_offsets` record carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetRecord {
    /// An OffsetCommit value: stores (or replaces) the partition's committed offset.
    Commit {
        group: String,
        topic: String,
        partition: i32,
        offset: CommittedOffset,
    },
    /// An OffsetCommit tombstone (OffsetDelete, expiry, DeleteGroups).
    DeleteOffset {
        group: String,
        topic: String,
        partition: i32,
    },
    /// A GroupMetadata value: the coordinator's bytes of the group, stored opaquely.
    PutGroup { group: String, metadata: Vec<u8> },
    /// A GroupMetadata tombstone: the group's metadata goes (its offsets have their own
    /// tombstones, as Kafka writes them).
    DeleteGroup { group: String },
    /// One record of a KIP-848 consumer group (Kafka's record types 3–8 and 16: group
    /// epoch, member, target assignment, current assignment, regex), kept by its whole
    /// `__consumer_offsets` key, value opaque: the store holds the latest value of each key,
    /// as compaction leaves the log, and the coordinator rebuilds the group from them.
    PutGroupRecord {
        group: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// A tombstone of [`OffsetRecord::PutGroupRecord`]'s key.
    DeleteGroupRecord { group: String, key: Vec<u8> },
}

fn applied_key(partition: i32) -> Vec<u8> {
    let mut key = APPLIED_PREFIX.to_vec();
    key.extend_from_slice(&partition.to_be_bytes());
    key
}

impl OffsetStore {
    /// Applies `records` of `__consumer_offsets` partition `partition` and records
    /// `position` (the offset of the last of them) as applied, in one unsynced batch.
    pub fn apply(&self, partition: i32, records: &[OffsetRecord], position: i64) -> Result<()> {
        let mut batch = self.batch_of(records)?;
        batch.put_cf(
            self.cf(CF_META)?,
            applied_key(partition),
            position.to_be_bytes(),
        );
        let _shared = self.inner.rmw_lock.read();
        // No sync: the fsynced log is the source of truth and start-up replays its tail.
        self.inner
            .db
            .write_opt(batch, &WriteOptions::default())
            .map_err(|source| self.db_err("apply offsets records", source))
    }

    /// Applies `records` in one synced batch, with no log position: the path used before
    /// `__consumer_offsets` exists.
    pub fn apply_synced(&self, records: &[OffsetRecord]) -> Result<()> {
        let batch = self.batch_of(records)?;
        let _shared = self.inner.rmw_lock.read();
        self.write_synced(batch, "apply offsets records")
    }

    fn batch_of(&self, records: &[OffsetRecord]) -> Result<WriteBatch> {
        let offsets = self.cf(CF_OFFSETS)?;
        let groups = self.cf(CF_GROUPS)?;
        let group_records = self.cf(CF_GROUP_RECORDS)?;
        let mut batch = WriteBatch::default();
        for record in records {
            match record {
                OffsetRecord::Commit {
                    group,
                    topic,
                    partition,
                    offset,
                } => {
                    let key = self.encoded(codec::offset_key(group, topic, *partition))?;
                    batch.put_cf(offsets, key, self.encoded(codec::encode_value(offset))?);
                }
                OffsetRecord::DeleteOffset {
                    group,
                    topic,
                    partition,
                } => {
                    batch.delete_cf(
                        offsets,
                        self.encoded(codec::offset_key(group, topic, *partition))?,
                    );
                }
                OffsetRecord::PutGroup { group, metadata } => {
                    batch.put_cf(groups, group.as_bytes(), metadata);
                }
                OffsetRecord::DeleteGroup { group } => batch.delete_cf(groups, group.as_bytes()),
                OffsetRecord::PutGroupRecord { group, key, value } => {
                    batch.put_cf(
                        group_records,
                        self.encoded(codec::record_key(group, key))?,
                        value,
                    );
                }
                OffsetRecord::DeleteGroupRecord { group, key } => {
                    batch.delete_cf(group_records, self.encoded(codec::record_key(group, key))?);
                }
            }
        }
        Ok(batch)
    }

    /// The offset of the last record of `__consumer_offsets` partition `partition`
    /// applied to this store, if any.
    pub fn applied_position_of(&self, partition: i32) -> Result<Option<i64>> {
        let value = self
            .inner
            .db
            .get_cf(self.cf(CF_META)?, applied_key(partition))
            .map_err(|source| self.db_err("read applied position", source))?;
        value
            .map(|v| {
                codec::decode_meta::<8>(&v, "applied position")
                    .map(i64::from_be_bytes)
                    .map_err(|reason| self.codec_err(reason))
            })
            .transpose()
    }

    /// Forgets the applied position of `partition` (its log was deleted or truncated
    /// below it), so the next replay starts from the log's beginning.
    pub fn reset_applied_position(&self, partition: i32) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.delete_cf(self.cf(CF_META)?, applied_key(partition));
        let _shared = self.inner.rmw_lock.read();
        self.inner
            .db
            .write_opt(batch, &WriteOptions::default())
            .map_err(|source| self.db_err("reset applied position", source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(group: &str, offset: i64) -> OffsetRecord {
        OffsetRecord::Commit {
            group: group.into(),
            topic: "t".into(),
            partition: 0,
            offset: CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 1,
            },
        }
    }

    #[test]
    fn applied_records_and_positions_are_read_back_per_partition() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = OffsetStore::open(dir.path()).expect("open");
        assert_eq!(store.applied_position_of(3).expect("read"), None);
        store
            .apply(3, &[commit("g", 5), commit("g", 7)], 11)
            .expect("apply");
        store
            .apply(
                4,
                &[OffsetRecord::PutGroup {
                    group: "h".into(),
                    metadata: b"m".to_vec(),
                }],
                2,
            )
            .expect("apply");
        assert_eq!(store.applied_position_of(3).expect("read"), Some(11));
        assert_eq!(store.applied_position_of(4).expect("read"), Some(2));
        let fetched = store.fetch("g").expect("fetch");
        assert_eq!(fetched.len(), 1);
        assert_eq!(fetched[0].2.offset, 7);
        assert_eq!(store.get_group("h").expect("get"), Some(b"m".to_vec()));

        store
            .apply(
                3,
                &[
                    OffsetRecord::DeleteOffset {
                        group: "g".into(),
                        topic: "t".into(),
                        partition: 0,
                    },
                    OffsetRecord::DeleteGroup { group: "h".into() },
                ],
                12,
            )
            .expect("apply");
        assert!(store.fetch("g").expect("fetch").is_empty());
        assert_eq!(store.get_group("h").expect("get"), None);
        store.reset_applied_position(3).expect("reset");
        assert_eq!(store.applied_position_of(3).expect("read"), None);
    }

    #[test]
    fn group_records_are_kept_per_key_and_listed_per_group() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = OffsetStore::open(dir.path()).expect("open");
        let put = |group: &str, key: &[u8], value: &[u8]| OffsetRecord::PutGroupRecord {
            group: group.into(),
            key: key.to_vec(),
            value: value.to_vec(),
        };
        store
            .apply(
                0,
                &[
                    put("g", b"k1", b"v1"),
                    put("g", b"k2", b"v2"),
                    put("gh", b"k1", b"x"),
                ],
                1,
            )
            .expect("apply");
        store.apply(0, &[put("g", b"k1", b"v3")], 2).expect("apply");
        assert_eq!(
            store.group_records("g").expect("read"),
            vec![
                (b"k1".to_vec(), b"v3".to_vec()),
                (b"k2".to_vec(), b"v2".to_vec())
            ]
        );
        assert_eq!(store.list_record_groups().expect("list"), vec!["g", "gh"]);
        assert_eq!(store.list_groups().expect("list"), vec!["g", "gh"]);
        store
            .apply(
                0,
                &[OffsetRecord::DeleteGroupRecord {
                    group: "gh".into(),
                    key: b"k1".to_vec(),
                }],
                3,
            )
            .expect("apply");
        assert!(store.group_records("gh").expect("read").is_empty());
        assert_eq!(store.list_record_groups().expect("list"), vec!["g"]);
        store.delete_group("g").expect("delete");
        assert!(store.group_records("g").expect("read").is_empty());
        assert_eq!(store.applied_position_of(3).expect("read"), None);
    }
}
