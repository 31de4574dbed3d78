//! `OffsetStore`: the RocksDB calls behind the consumer-offset store.
//!
//! Every method blocks; the encodings live in `codec` and the module docs in `mod.rs`.
//!
//! Concurrency: blind writes (commit, delete, put) may run concurrently — RocksDB batches
//! are atomic and concurrent synced writers share one WAL fsync (group commit). The two
//! read-modify-write operations, `expire_offsets` and `delete_group`, take `rmw_lock`
//! exclusively and every writer takes it shared, so a commit can never land between such an
//! operation's scan and its delete and be silently removed.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, Options, PrefixRange, ReadOptions, WriteBatch,
    WriteOptions, DB,
};
use tracing::info;

use super::codec;
use super::CommittedOffset;
use crate::error::{Result, StorageError};

pub(super) const CF_OFFSETS: &str = "offsets";
pub(super) const CF_GROUPS: &str = "groups";
pub(super) const CF_META: &str = "meta";
/// KIP-848 consumer groups' records, by group (see `OffsetRecord::PutGroupRecord`).
pub(super) const CF_GROUP_RECORDS: &str = "group_records";
const KEY_FORMAT_VERSION: &[u8] = b"format_version";

/// Bumped on any incompatible change of the layout in `storage/FORMAT.md`.
pub const OFFSET_STORE_FORMAT_VERSION: u32 = 1;

pub(super) struct Inner {
    pub(super) db: DB,
    dir: PathBuf,
    /// Shared by plain writes, exclusive for read-modify-write operations (see module docs).
    pub(super) rmw_lock: RwLock<()>,
}

/// The consumer-offset store; cheap to clone (clones share the database).
#[derive(Clone)]
pub struct OffsetStore {
    pub(super) inner: Arc<Inner>,
}

impl fmt::Debug for OffsetStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OffsetStore")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl OffsetStore {
    /// Opens (creating if absent) the store in `dir`; refuses an unknown format version.
    pub fn open(dir: &Path) -> Result<Self> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let cfs = [CF_OFFSETS, CF_GROUPS, CF_META, CF_GROUP_RECORDS]
            .map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&opts, dir, cfs).map_err(|source| {
            StorageError::OffsetStoreDb {
                context: "open",
                path: dir.to_path_buf(),
                source,
            }
        })?;
        let store = OffsetStore {
            inner: Arc::new(Inner {
                db,
                dir: dir.to_path_buf(),
                rmw_lock: RwLock::new(()),
            }),
        };
        store.check_format_version()?;
        info!(path = %dir.display(), "offset store opened");
        Ok(store)
    }

    /// [`OffsetStore::open`] on a blocking thread.
    pub async fn open_async(dir: PathBuf) -> Result<Self> {
        tokio::task::spawn_blocking(move || OffsetStore::open(&dir))
            .await
            .map_err(|e| StorageError::TaskFailed {
                reason: e.to_string(),
            })?
    }

    /// Runs `f` on this store on tokio's blocking pool, so async callers never block a
    /// runtime worker: `store.run_blocking(move |s| s.fetch(&group)).await`.
    pub async fn run_blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&OffsetStore) -> Result<T> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StorageError::TaskFailed {
                reason: e.to_string(),
            })?
    }

    /// The directory of the database.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Stores `entries` for `group` (overwriting earlier commits of the same partitions) in
    /// one synced batch: all or nothing, durable when this returns.
    pub fn commit(&self, group: &str, entries: &[(String, i32, CommittedOffset)]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let cf = self.cf(CF_OFFSETS)?;
        let mut batch = WriteBatch::default();
        for (topic, partition, offset) in entries {
            let key = self.encoded(codec::offset_key(group, topic, *partition))?;
            batch.put_cf(cf, key, self.encoded(codec::encode_value(offset))?);
        }
        let _shared = self.inner.rmw_lock.read();
        self.write_synced(batch, "commit offsets")
    }

    /// The committed offsets of `group`, sorted by topic then partition.
    pub fn fetch(&self, group: &str) -> Result<Vec<(String, i32, CommittedOffset)>> {
        let mut out = Vec::new();
        self.scan_group(group, |_, topic, partition, value| {
            out.push((topic.to_string(), partition, value));
        })?;
        // Keys order topics by length first (they are length-prefixed), so sort by name here.
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(out)
    }

    /// Removes the given partitions' offsets of `group` (OffsetDelete); absent ones are fine.
    pub fn delete_offsets(&self, group: &str, partitions: &[(String, i32)]) -> Result<()> {
        if partitions.is_empty() {
            return Ok(());
        }
        let cf = self.cf(CF_OFFSETS)?;
        let mut batch = WriteBatch::default();
        for (topic, partition) in partitions {
            batch.delete_cf(
                cf,
                self.encoded(codec::offset_key(group, topic, *partition))?,
            );
        }
        let _shared = self.inner.rmw_lock.read();
        self.write_synced(batch, "delete offsets")
    }

    /// Stores the coordinator's opaque metadata of `group`, replacing any earlier value.
    pub fn put_group(&self, group: &str, metadata: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.put_cf(self.cf(CF_GROUPS)?, group.as_bytes(), metadata);
        let _shared = self.inner.rmw_lock.read();
        self.write_synced(batch, "put group")
    }

    /// The metadata stored by [`OffsetStore::put_group`], if any.
    pub fn get_group(&self, group: &str) -> Result<Option<Vec<u8>>> {
        self.inner
            .db
            .get_cf(self.cf(CF_GROUPS)?, group.as_bytes())
            .map_err(|source| self.db_err("get group", source))
    }

    /// The records of consumer group `group` as `(record key, value)`, in key order.
    pub fn group_records(&self, group: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = self.encoded(codec::group_prefix(group))?;
        let skip = prefix.len();
        let mut read_opts = ReadOptions::default();
        read_opts.set_iterate_range(PrefixRange(prefix));
        let mut iter = self
            .inner
            .db
            .raw_iterator_cf_opt(self.cf(CF_GROUP_RECORDS)?, read_opts);
        iter.seek_to_first();
        let mut out = Vec::new();
        while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
            out.push((key.get(skip..).unwrap_or_default().to_vec(), value.to_vec()));
            iter.next();
        }
        iter.status()
            .map_err(|source| self.db_err("read group records", source))?;
        Ok(out)
    }

    /// Every group with at least one consumer-group record, sorted.
    pub fn list_record_groups(&self) -> Result<Vec<String>> {
        let mut groups = BTreeSet::new();
        self.collect_prefixed_groups(CF_GROUP_RECORDS, &mut groups)?;
        Ok(groups.into_iter().collect())
    }

    /// Adds the group of every key of `cf` (keys starting with a group prefix) to
    /// `groups`: one seek per group instead of reading each of its keys.
    fn collect_prefixed_groups(
        &self,
        cf: &'static str,
        groups: &mut BTreeSet<String>,
    ) -> Result<()> {
        let mut iter = self.inner.db.raw_iterator_cf(self.cf(cf)?);
        iter.seek_to_first();
        while let Some(key) = iter.key() {
            let (group, prefix_len) = codec::decode_key_group(key)
                .map_err(|reason| self.codec_err(format!("{cf} key: {reason}")))?;
            groups.insert(group.to_string());
            match codec::prefix_successor(key.get(..prefix_len).unwrap_or(key)) {
                Some(next) => iter.seek(next),
                None => break,
            }
        }
        iter.status()
            .map_err(|source| self.db_err("list groups", source))
    }

    /// Every group with metadata, records or at least one committed offset, sorted,
    /// without repeats.
    pub fn list_groups(&self) -> Result<Vec<String>> {
        let mut groups = BTreeSet::new();
        let mut iter = self.inner.db.raw_iterator_cf(self.cf(CF_GROUPS)?);
        iter.seek_to_first();
        while let Some(key) = iter.key() {
            let group = std::str::from_utf8(key)
                .map_err(|e| self.codec_err(format!("group key is not UTF-8: {e}")))?;
            groups.insert(group.to_string());
            iter.next();
        }
        iter.status()
            .map_err(|source| self.db_err("list groups", source))?;

        self.collect_prefixed_groups(CF_OFFSETS, &mut groups)?;
        self.collect_prefixed_groups(CF_GROUP_RECORDS, &mut groups)?;
        Ok(groups.into_iter().collect())
    }

    /// Removes `group`'s metadata, records and all its offsets in one synced batch
    /// (DeleteGroups).
    pub fn delete_group(&self, group: &str) -> Result<()> {
        let _exclusive = self.inner.rmw_lock.write();
        let cf = self.cf(CF_OFFSETS)?;
        let mut batch = WriteBatch::default();
        batch.delete_cf(self.cf(CF_GROUPS)?, group.as_bytes());
        for (key, _) in self.group_records(group)? {
            batch.delete_cf(
                self.cf(CF_GROUP_RECORDS)?,
                self.encoded(codec::record_key(group, &key))?,
            );
        }
        let mut keys = Vec::new();
        self.scan_group_keys(group, |key| keys.push(key.to_vec()))?;
        for key in keys {
            batch.delete_cf(cf, key);
        }
        self.write_synced(batch, "delete group")
    }

    /// Removes `group`'s offsets committed strictly before `older_than_ms` (Kafka's
    /// `offsets.retention.minutes`; deciding *when* a group's offsets may expire, e.g. only
    /// once it is empty, is the coordinator's job). Returns how many were removed.
    pub fn expire_offsets(&self, group: &str, older_than_ms: i64) -> Result<usize> {
        let _exclusive = self.inner.rmw_lock.write();
        let mut expired = Vec::new();
        self.scan_group(group, |key, _, _, value| {
            if value.commit_timestamp_ms < older_than_ms {
                expired.push(key.to_vec());
            }
        })?;
        if expired.is_empty() {
            return Ok(0);
        }
        let cf = self.cf(CF_OFFSETS)?;
        let mut batch = WriteBatch::default();
        for key in &expired {
            batch.delete_cf(cf, key);
        }
        self.write_synced(batch, "expire offsets")?;
        Ok(expired.len())
    }

    fn check_format_version(&self) -> Result<()> {
        let meta = self.cf(CF_META)?;
        let stored = self
            .inner
            .db
            .get_cf(meta, KEY_FORMAT_VERSION)
            .map_err(|source| self.db_err("read format version", source))?;
        match stored {
            Some(bytes) => {
                let found = codec::decode_meta::<4>(&bytes, "format version")
                    .map(u32::from_be_bytes)
                    .map_err(|reason| self.codec_err(reason))?;
                if found != OFFSET_STORE_FORMAT_VERSION {
                    return Err(StorageError::UnsupportedOffsetStoreFormat {
                        path: self.inner.dir.clone(),
                        found,
                        supported: OFFSET_STORE_FORMAT_VERSION,
                    });
                }
                Ok(())
            }
            None => {
                // Only a store we just created may lack the version; data without one was
                // written by something else and is not ours to interpret.
                if !self.is_empty(CF_OFFSETS)? || !self.is_empty(CF_GROUPS)? {
                    return Err(self.codec_err("data present but no format_version".into()));
                }
                let mut batch = WriteBatch::default();
                batch.put_cf(
                    meta,
                    KEY_FORMAT_VERSION,
                    OFFSET_STORE_FORMAT_VERSION.to_be_bytes(),
                );
                self.write_synced(batch, "write format version")
            }
        }
    }

    fn is_empty(&self, cf: &'static str) -> Result<bool> {
        let mut iter = self.inner.db.raw_iterator_cf(self.cf(cf)?);
        iter.seek_to_first();
        let empty = !iter.valid();
        iter.status()
            .map_err(|source| self.db_err("scan", source))?;
        Ok(empty)
    }

    /// Calls `f(key)` for every `offsets` key of `group`, in key order.
    pub(super) fn scan_group_keys(&self, group: &str, mut f: impl FnMut(&[u8])) -> Result<()> {
        let prefix = self.encoded(codec::group_prefix(group))?;
        let mut read_opts = ReadOptions::default();
        read_opts.set_iterate_range(PrefixRange(prefix));
        let mut iter = self
            .inner
            .db
            .raw_iterator_cf_opt(self.cf(CF_OFFSETS)?, read_opts);
        iter.seek_to_first();
        while let Some(key) = iter.key() {
            f(key);
            iter.next();
        }
        iter.status()
            .map_err(|source| self.db_err("scan group offsets", source))
    }

    /// Calls `f(key, topic, partition, offset)` for every offset of `group`, decoding (and
    /// checking) both key and value.
    fn scan_group(
        &self,
        group: &str,
        mut f: impl FnMut(&[u8], &str, i32, CommittedOffset),
    ) -> Result<()> {
        let prefix = self.encoded(codec::group_prefix(group))?;
        let mut read_opts = ReadOptions::default();
        read_opts.set_iterate_range(PrefixRange(prefix));
        let mut iter = self
            .inner
            .db
            .raw_iterator_cf_opt(self.cf(CF_OFFSETS)?, read_opts);
        iter.seek_to_first();
        while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
            let (key_group, topic, partition) = codec::decode_offset_key(key)
                .map_err(|reason| self.codec_err(format!("offset key: {reason}")))?;
            if key_group != group {
                return Err(self.codec_err(format!(
                    "offset key of group {key_group:?} inside the range of {group:?}"
                )));
            }
            let offset = codec::decode_value(value).map_err(|reason| {
                self.codec_err(format!("offset of {group:?} {topic}-{partition}: {reason}"))
            })?;
            f(key, topic, partition, offset);
            iter.next();
        }
        iter.status()
            .map_err(|source| self.db_err("scan group offsets", source))
    }

    pub(super) fn cf(&self, name: &'static str) -> Result<&ColumnFamily> {
        self.inner
            .db
            .cf_handle(name)
            .ok_or_else(|| self.codec_err(format!("missing column family {name}")))
    }

    pub(super) fn write_synced(&self, batch: WriteBatch, context: &'static str) -> Result<()> {
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.inner
            .db
            .write_opt(batch, &opts)
            .map_err(|source| self.db_err(context, source))
    }

    pub(super) fn encoded(&self, encoded: std::result::Result<Vec<u8>, String>) -> Result<Vec<u8>> {
        encoded.map_err(|reason| self.codec_err(format!("cannot encode: {reason}")))
    }

    pub(super) fn db_err(&self, context: &'static str, source: rocksdb::Error) -> StorageError {
        StorageError::OffsetStoreDb {
            context,
            path: self.inner.dir.clone(),
            source,
        }
    }

    pub(super) fn codec_err(&self, reason: String) -> StorageError {
        StorageError::OffsetStoreCodec {
            path: self.inner.dir.clone(),
            reason,
        }
    }
}
