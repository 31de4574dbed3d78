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

use super::store::{CF_GROUPS, CF_META, CF_OFFSETS};
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
        let offsets = self.cf(CF_OFFSETS)?;
        let groups = self.cf(CF_GROUPS)?;
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
            }
        }
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
}
