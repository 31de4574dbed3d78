//! The RocksDB-backed raft log: entries, vote, committed and purged log ids.
//!
//! Layout (see `raft/FORMAT.md`): column family `logs` maps the big-endian u64 log index to
//! the serde_json of the entry, so RocksDB's byte order is log order; column family `meta`
//! holds `vote`, `committed` and `last_purged` as serde_json values, plus `format_version`.
//!
//! Durability: every write is a `WriteBatch` with `sync = true`, so when a call returns (and
//! before openraft's `LogFlushed` callback fires) the WAL is on disk — raft must never
//! acknowledge an entry or a vote it could forget in a crash.
//!
//! Threading: RocksDB calls block, so every one runs on `spawn_blocking`, never on a tokio
//! worker. openraft serialises all log writes (the trait requires it); the `LogStore` value
//! and its readers share one `Arc<DB>`, which RocksDB makes safe for concurrent use.

// openraft's storage traits fix `StorageError` (224 bytes) as the error type, so
// boxing it here would only add a conversion at every trait boundary.
#![allow(clippy::result_large_err)]

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    AnyError, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, StorageError,
    StorageIOError, Vote,
};
use rocksdb::{
    ColumnFamilyDescriptor, Direction, IteratorMode, Options, WriteBatch, WriteOptions, DB,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::TypeConfig;

type NodeId = u64;
type Entry = openraft::Entry<TypeConfig>;
type StResult<T> = Result<T, StorageError<NodeId>>;

const CF_LOGS: &str = "logs";
const CF_META: &str = "meta";
const KEY_VOTE: &[u8] = b"vote";
const KEY_COMMITTED: &[u8] = b"committed";
const KEY_LAST_PURGED: &[u8] = b"last_purged";
const KEY_FORMAT_VERSION: &[u8] = b"format_version";
/// Bumped on any incompatible change of this layout; see `raft/FORMAT.md`.
pub const LOG_FORMAT_VERSION: u32 = 1;

/// The raft log store; cheap to clone (clones share the database).
#[derive(Clone)]
pub struct LogStore {
    db: Arc<DB>,
}

impl LogStore {
    /// Opens (creating if absent) the log database in `dir`. Blocks: call it from a blocking
    /// thread or through [`LogStore::open_async`].
    pub fn open(dir: &Path) -> StResult<Self> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let cfs =
            [CF_LOGS, CF_META].map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&opts, dir, cfs).map_err(|e| StorageIOError::read(&e))?;
        let store = LogStore { db: Arc::new(db) };
        match store.get_meta::<u32>(KEY_FORMAT_VERSION)? {
            None => store.put_meta(KEY_FORMAT_VERSION, &LOG_FORMAT_VERSION)?,
            Some(LOG_FORMAT_VERSION) => {}
            Some(other) => {
                return Err(StorageIOError::read(AnyError::error(format!(
                "raft log in {} has format version {other}, this build reads {LOG_FORMAT_VERSION}",
                dir.display()
            )))
                .into())
            }
        }
        Ok(store)
    }

    /// [`LogStore::open`] on a blocking thread.
    pub async fn open_async(dir: std::path::PathBuf) -> StResult<Self> {
        blocking(move || LogStore::open(&dir)).await
    }

    fn cf(&self, name: &str) -> StResult<&rocksdb::ColumnFamily> {
        self.db.cf_handle(name).ok_or_else(|| {
            StorageIOError::read(AnyError::error(format!("missing column family {name}"))).into()
        })
    }

    fn get_meta<T: DeserializeOwned>(&self, key: &[u8]) -> StResult<Option<T>> {
        let bytes = self
            .db
            .get_cf(self.cf(CF_META)?, key)
            .map_err(|e| StorageIOError::read(&e))?;
        bytes
            .map(|b| serde_json::from_slice(&b).map_err(|e| StorageIOError::read(&e).into()))
            .transpose()
    }

    fn put_meta<T: Serialize>(&self, key: &[u8], value: &T) -> StResult<()> {
        let bytes = serde_json::to_vec(value).map_err(|e| StorageIOError::write(&e))?;
        let mut batch = WriteBatch::default();
        batch.put_cf(self.cf(CF_META)?, key, bytes);
        self.write_synced(batch, ErrorSubject::Store)
    }

    fn write_synced(&self, batch: WriteBatch, subject: ErrorSubject<NodeId>) -> StResult<()> {
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db
            .write_opt(batch, &opts)
            .map_err(|e| StorageIOError::new(subject, ErrorVerb::Write, &e).into())
    }

    fn last_entry_id(&self) -> StResult<Option<LogId<NodeId>>> {
        let mut iter = self.db.iterator_cf(self.cf(CF_LOGS)?, IteratorMode::End);
        match iter.next() {
            None => Ok(None),
            Some(item) => {
                let (_, value) = item.map_err(|e| StorageIOError::read_logs(&e))?;
                let entry: Entry =
                    serde_json::from_slice(&value).map_err(|e| StorageIOError::read_logs(&e))?;
                Ok(Some(entry.log_id))
            }
        }
    }

    fn read_range(&self, start: u64, end: Option<u64>) -> StResult<Vec<Entry>> {
        let start_key = start.to_be_bytes();
        let mode = IteratorMode::From(&start_key, Direction::Forward);
        let mut out = Vec::new();
        for item in self.db.iterator_cf(self.cf(CF_LOGS)?, mode) {
            let (key, value) = item.map_err(|e| StorageIOError::read_logs(&e))?;
            let index = decode_index(&key)?;
            if end.is_some_and(|end| index >= end) {
                break;
            }
            let entry: Entry = serde_json::from_slice(&value)
                .map_err(|e| StorageIOError::read_log_at_index(index, &e))?;
            out.push(entry);
        }
        Ok(out)
    }

    /// Deletes entries `0..=upto` and records `upto` as the last purged id, in one synced batch.
    fn purge_upto(&self, upto: LogId<NodeId>) -> StResult<()> {
        let purged = serde_json::to_vec(&upto).map_err(|e| StorageIOError::write(&e))?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(
            self.cf(CF_LOGS)?,
            0u64.to_be_bytes(),
            upto.index.saturating_add(1).to_be_bytes(),
        );
        batch.put_cf(self.cf(CF_META)?, KEY_LAST_PURGED, purged);
        self.write_synced(batch, ErrorSubject::Logs)
    }
}

fn decode_index(key: &[u8]) -> StResult<u64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| {
        StorageIOError::read_logs(AnyError::error(format!(
            "bad log key of {} bytes",
            key.len()
        )))
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// Runs blocking storage work off the tokio workers.
async fn blocking<T, F>(f: F) -> StResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> StResult<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StorageError::from(StorageIOError::write(&e)))?
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StResult<Vec<Entry>> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => Some(e.saturating_add(1)),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => None,
        };
        let store = self.clone();
        blocking(move || store.read_range(start, end)).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StResult<LogState<TypeConfig>> {
        let store = self.clone();
        blocking(move || {
            let last_purged_log_id: Option<LogId<NodeId>> = store.get_meta(KEY_LAST_PURGED)?;
            // With every entry purged, the last log id is the last purged one.
            let last_log_id = store.last_entry_id()?.or(last_purged_log_id);
            Ok(LogState {
                last_purged_log_id,
                last_log_id,
            })
        })
        .await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StResult<()> {
        let store = self.clone();
        let vote = *vote;
        blocking(move || {
            store
                .put_meta(KEY_VOTE, &vote)
                .map_err(|e| StorageIOError::write_vote(&e).into())
        })
        .await
    }

    async fn read_vote(&mut self) -> StResult<Option<Vote<NodeId>>> {
        let store = self.clone();
        blocking(move || store.get_meta(KEY_VOTE)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StResult<()> {
        // Persisting `committed` lets a restart re-apply the log past the last snapshot
        // (openraft does so in `Raft::new`), so the state machine need not sync every apply.
        let store = self.clone();
        blocking(move || store.put_meta(KEY_COMMITTED, &committed)).await
    }

    async fn read_committed(&mut self) -> StResult<Option<LogId<NodeId>>> {
        let store = self.clone();
        blocking(move || {
            Ok(store
                .get_meta::<Option<LogId<NodeId>>>(KEY_COMMITTED)?
                .flatten())
        })
        .await
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StResult<()>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let store = self.clone();
        let result = blocking(move || {
            let cf = store.cf(CF_LOGS)?;
            let mut batch = WriteBatch::default();
            for entry in &entries {
                let value = serde_json::to_vec(entry)
                    .map_err(|e| StorageIOError::write_log_entry(entry.log_id, &e))?;
                batch.put_cf(cf, entry.log_id.index.to_be_bytes(), value);
            }
            store.write_synced(batch, ErrorSubject::Logs)
        })
        .await;
        // The batch was synced before `blocking` returned: the entries are both readable
        // and durable, so the flush callback can fire now.
        match &result {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
        result
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StResult<()> {
        tracing::debug!(%log_id, "truncating raft log");
        let store = self.clone();
        blocking(move || {
            let cf = store.cf(CF_LOGS)?;
            let mut batch = WriteBatch::default();
            batch.delete_range_cf(cf, log_id.index.to_be_bytes(), u64::MAX.to_be_bytes());
            // `delete_range` excludes its end; the entry at u64::MAX goes in the same batch.
            batch.delete_cf(cf, u64::MAX.to_be_bytes());
            store.write_synced(batch, ErrorSubject::Logs)
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StResult<()> {
        tracing::debug!(%log_id, "purging raft log");
        let store = self.clone();
        blocking(move || {
            // Record the purge point and delete in one atomic batch, so a crash cannot leave
            // a hole between the purged id and the first remaining entry.
            store.purge_upto(log_id)
        })
        .await
    }
}
