//! `LogHandle`: the one async door to a partition log.
//!
//! The log's core is synchronous (file I/O, fsync, CRC); every async method runs it on
//! tokio's blocking pool under the partition's mutex, so runtime workers never wait on
//! the disk and the lock is never held across an `.await`. The one exception is the
//! append fast path: a write that only copies into the page cache (no roll, no fsync due)
//! runs inline when the lock is free, because the hand-off to the blocking pool cost more
//! than the write itself (profile in issue 5). Cheap getters read atomics published after
//! every operation, and a `watch` channel carries the log end offset after each append
//! (the broker's long-poll fetch waits on it).
//!
//! Cancellation: dropping a returned future does not cancel the blocking operation; an
//! append that has started will complete and be published.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::log::{AppendInfo, Log, MinOneBatch, ReadResult, RetentionOutcome, TimestampOffset};

#[derive(Debug)]
struct Shared {
    topic: String,
    partition: i32,
    dir: PathBuf,
    /// `None` once the log was deleted.
    log: Mutex<Option<Log>>,
    log_end_offset: AtomicI64,
    log_start_offset: AtomicI64,
    /// `cleanup.policy` contains `compact` (mirrors the log's config for the produce
    /// path, which must refuse key-less records on such topics without taking the lock).
    compacted: AtomicBool,
    appends: watch::Sender<i64>,
}

/// A cheap-to-clone handle on one partition log.
#[derive(Debug, Clone)]
pub struct LogHandle {
    shared: Arc<Shared>,
}

impl LogHandle {
    pub(crate) fn new(topic: &str, partition: i32, log: Log) -> Self {
        let (appends, _) = watch::channel(log.log_end_offset());
        LogHandle {
            shared: Arc::new(Shared {
                topic: topic.to_string(),
                partition,
                dir: log.dir().to_path_buf(),
                log_end_offset: AtomicI64::new(log.log_end_offset()),
                log_start_offset: AtomicI64::new(log.log_start_offset()),
                compacted: AtomicBool::new(log.config().cleanup_compact),
                log: Mutex::new(Some(log)),
                appends,
            }),
        }
    }

    pub fn topic(&self) -> &str {
        &self.shared.topic
    }

    pub fn partition(&self) -> i32 {
        self.shared.partition
    }

    /// The partition's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.shared.log_end_offset.load(Ordering::Acquire)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.shared.log_start_offset.load(Ordering::Acquire)
    }

    /// Whether the log's `cleanup.policy` contains `compact` (as last configured).
    pub fn is_compacted(&self) -> bool {
        self.shared.compacted.load(Ordering::Acquire)
    }

    /// A receiver of the log end offset, updated after every append.
    pub fn subscribe_appends(&self) -> watch::Receiver<i64> {
        self.shared.appends.subscribe()
    }

    /// See [`Log::append`]. The common case runs on the caller's thread (see
    /// [`LogHandle::try_append_inline`]); a roll, an fsync, or a lock held by another
    /// operation sends it to the blocking pool.
    pub async fn append(
        &self,
        mut records: BytesMut,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        if let Some(result) = self.try_append_inline(&mut records, leader_epoch, now_ms) {
            return result;
        }
        self.run(move |log| log.append(&mut records, leader_epoch, now_ms))
            .await
    }

    /// The append fast path: when the partition lock is free (`try_lock`, so a runtime
    /// worker never waits behind an fsync or a read) and the append needs no roll and no
    /// fsync, it is a positional write into the page cache plus index entries, done here
    /// without the blocking pool's thread hand-off (two context switches per append).
    /// `None` means "not done, nothing changed": the caller takes the blocking path.
    fn try_append_inline(
        &self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Option<Result<AppendInfo>> {
        let mut guard = self.shared.log.try_lock()?;
        let log = guard.as_mut()?;
        let result = log
            .try_append_inline(records, leader_epoch, now_ms)
            .transpose()?;
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        drop(guard);
        self.publish(start, end);
        Some(result)
    }

    /// See [`Log::read`].
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        high_watermark_exclusive: i64,
        min_one_batch: MinOneBatch,
    ) -> Result<ReadResult> {
        self.run(move |log| log.read(offset, max_bytes, high_watermark_exclusive, min_one_batch))
            .await
    }

    /// See [`Log::offset_for_timestamp`].
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampOffset>> {
        self.run(move |log| log.offset_for_timestamp(timestamp))
            .await
    }

    /// See [`Log::max_timestamp_offset`].
    pub async fn max_timestamp_offset(&self) -> Result<Option<TimestampOffset>> {
        self.run(|log| log.max_timestamp_offset()).await
    }

    /// See [`Log::enforce_retention`]: one retention pass with the current config.
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<RetentionOutcome> {
        self.run(move |log| log.enforce_retention(now_ms)).await
    }

    /// See [`Log::increment_log_start_offset`] (DeleteRecords); returns the new log start.
    pub async fn increment_log_start_offset(&self, offset: i64, now_ms: i64) -> Result<i64> {
        self.run(move |log| log.increment_log_start_offset(offset, now_ms))
            .await
    }

    /// See [`Log::cleaning_priority`]: `Some(dirty ratio)` when the log is due for
    /// compaction.
    pub async fn cleaning_priority(&self, now_ms: i64) -> Result<Option<f64>> {
        self.run(move |log| Ok(log.cleaning_priority(now_ms))).await
    }

    /// See [`Log::clean`]: one compaction pass if due, under the partition lock.
    pub async fn clean(
        &self,
        now_ms: i64,
        dedupe_buffer_bytes: usize,
    ) -> Result<crate::cleaner::CleanOutcome> {
        self.run(move |log| log.clean(now_ms, dedupe_buffer_bytes))
            .await
    }

    /// Fsyncs the active segment.
    pub async fn flush(&self, now_ms: i64) -> Result<()> {
        self.run(move |log| log.flush(now_ms)).await
    }

    /// Replaces the topic config (applies from the next append).
    pub async fn set_config(&self, config: LogConfig) -> Result<()> {
        self.shared
            .compacted
            .store(config.cleanup_compact, Ordering::Release);
        self.run(move |log| {
            log.set_config(config);
            Ok(())
        })
        .await
    }

    /// Runs `f` on the log from synchronous code (startup, shutdown, deletion); never
    /// call it on a runtime worker thread.
    pub fn with_log_blocking<R>(&self, f: impl FnOnce(&mut Log) -> Result<R>) -> Result<R> {
        let mut guard = self.shared.log.lock();
        let log = guard.as_mut().ok_or_else(|| StorageError::LogDeleted {
            dir: self.shared.dir.clone(),
        })?;
        let result = f(log);
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        drop(guard);
        self.publish(start, end);
        result
    }

    /// Takes the log out of the handle (for deletion or close); later calls fail with
    /// `LogDeleted`.
    pub(crate) fn take_blocking(&self) -> Option<Log> {
        self.shared.log.lock().take()
    }

    async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Log) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let handle = self.clone();
        tokio::task::spawn_blocking(move || handle.with_log_blocking(f))
            .await
            .map_err(|e| StorageError::TaskFailed {
                reason: e.to_string(),
            })?
    }

    fn publish(&self, log_start_offset: i64, log_end_offset: i64) {
        self.shared
            .log_start_offset
            .store(log_start_offset, Ordering::Release);
        self.shared
            .log_end_offset
            .store(log_end_offset, Ordering::Release);
        self.shared.appends.send_if_modified(|leo| {
            let changed = *leo != log_end_offset;
            *leo = log_end_offset;
            changed
        });
    }
}
