//! `LogHandle`: the one async door to a partition log.
//!
//! The log's core is synchronous (file I/O, fsync, CRC); every async method runs it on
//! tokio's blocking pool under the partition's mutex, so runtime workers never wait on
//! the disk and the lock is never held across an `.await`. The one exception is the
//! append fast path: a write that only copies into the page cache (no roll, no fsync due)
//! runs inline when the lock is free, because the hand-off to the blocking pool cost more
//! than the write itself (profile in issue 5). Cheap getters read atomics published after
//! every operation, and a `watch` channel carries the log end offset, notified when the
//! log end offset or the high watermark changes (consumers' long-poll fetches wait for
//! the high watermark, followers' for the log end offset).
//!
//! The high watermark lives here, not in the `Log`: the broker moves it from async code
//! (follower fetches, ISR changes) and must not take the partition lock to do so. It is
//! kept within [log start, log end] by `set_high_watermark` and by every operation that
//! moves those bounds (a truncation lowers it, DeleteRecords / retention raise it).
//!
//! A log directory that failed (`log_dir_failure`) fails every operation of its logs
//! with `LogOffline` before the log is touched, and an operation's I/O error that fails
//! the directory is reported to it here, the one door every log operation goes through.
//!
//! Cancellation: dropping a returned future does not cancel the blocking operation; an
//! append that has started will complete and be published.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::file_records::{FetchedRecords, ReadWait, MIN_ZERO_COPY_BYTES};
use crate::log::{
    AppendInfo, DueDeletions, FollowerAppend, Log, MinOneBatch, ReadPlan, ReadResult,
    RetentionOutcome, TimestampOffset,
};
use crate::log_dir_failure::LogDirFailures;
use crate::producer_state::ActiveProducer;
use crate::txn_index::{AbortedTxn, OngoingTxn};

mod lazy;
pub use lazy::ShutdownClose;
#[cfg(test)]
pub(crate) use lazy::BEFORE_CREATE;
pub(crate) use lazy::{ClosedLog, Slot};

/// `latest_epoch` when the log has no leader epoch (epochs are never negative).
const NO_EPOCH: i32 = i32::MIN;

/// What is published to the atomics after every operation.
#[derive(Debug, Clone, Copy)]
struct Snapshot {
    log_start_offset: i64,
    log_end_offset: i64,
    latest_epoch: i32,
}

impl Snapshot {
    fn of(log: &Log) -> Self {
        Snapshot {
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            latest_epoch: log.latest_epoch().unwrap_or(NO_EPOCH),
        }
    }
}

/// Where a log lives; changes only when it moves to another log directory
/// (`log_move.rs`).
#[derive(Debug)]
struct Location {
    dir: PathBuf,
    /// The log directory holding `dir`.
    log_dir: PathBuf,
}

impl Location {
    fn of(log: &Log) -> Arc<Self> {
        Arc::new(Location {
            dir: log.dir().to_path_buf(),
            log_dir: log
                .dir()
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        })
    }
}

#[derive(Debug)]
struct Shared {
    topic: String,
    partition: i32,
    location: parking_lot::RwLock<Arc<Location>>,
    /// The broker's failed directories.
    failures: Arc<LogDirFailures>,
    /// The log: open, not opened (or not created) yet (`lazy.rs`), or deleted.
    log: Mutex<Slot>,
    /// False while the log is a new one whose files are not created yet (`lazy.rs`):
    /// checkpoints leave it out without taking its lock.
    on_disk: AtomicBool,
    /// Notified when a background creation of the log's files ends (`lazy.rs`).
    creation_done: parking_lot::Condvar,
    log_end_offset: AtomicI64,
    log_start_offset: AtomicI64,
    /// Within [log start, log end]; see the module docs.
    high_watermark: AtomicI64,
    /// The log's latest leader epoch, `NO_EPOCH` for none.
    latest_epoch: AtomicI32,
    /// `cleanup.policy` contains `compact` (mirrors the log's config for the produce
    /// path, which must refuse key-less records on such topics without taking the lock).
    compacted: AtomicBool,
    appends: watch::Sender<i64>,
    /// The log's aborted and open transactions (`log/txn.rs`), read without the lock.
    txns: Arc<crate::log::TxnShared>,
}

/// A read planned under the partition lock, executed without it (`log/read.rs`).
#[derive(Debug)]
pub struct PlannedRead {
    handle: LogHandle,
    plan: ReadPlan,
}

impl PlannedRead {
    /// Reads at most `max_bytes` (no more than planned). Blocking file I/O: call it on a
    /// blocking thread. A read raced by a truncation is redone under the lock.
    pub fn execute(&self, max_bytes: usize, min_one_batch: MinOneBatch) -> Result<ReadResult> {
        if let Some(read) = self.plan.execute(max_bytes, min_one_batch)? {
            return Ok(read);
        }
        self.handle
            .with_log_blocking(|log| self.plan.read_locked(log, max_bytes, min_one_batch))
    }

    /// The read as a fetch sends it (issue #13): file ranges for a zero-copy send; bytes
    /// when the record set is small (`MIN_ZERO_COPY_BYTES`) or when a truncation raced
    /// the header scan (then it is read again under the lock). Unlike [`Self::execute`]
    /// the last batch may be partial, as in Kafka's fetch responses. Blocking file I/O:
    /// call it on a blocking thread. Returns the records and the log start offset.
    pub fn execute_for_send(
        &self,
        max_bytes: usize,
        min_one_batch: MinOneBatch,
    ) -> Result<(FetchedRecords, i64)> {
        if let Some(sent) = self.send_unlocked(max_bytes, min_one_batch, ReadWait::Block)? {
            return Ok(sent);
        }
        let read = self
            .handle
            .with_log_blocking(|log| self.plan.read_locked(log, max_bytes, min_one_batch))?;
        Ok((FetchedRecords::Memory(read.records), read.log_start_offset))
    }

    /// [`Self::execute_for_send`] from the page cache alone, for an async worker: `None`
    /// when a byte it needs is not cached or a truncation raced it (then run
    /// `execute_for_send` on a blocking thread). Recent data, what consumers at the tail
    /// and followers fetch, is nearly always cached, and this spares those fetches the
    /// two thread switches of a blocking-pool hop.
    pub fn try_execute_for_send_cached(
        &self,
        max_bytes: usize,
        min_one_batch: MinOneBatch,
    ) -> Result<Option<(FetchedRecords, i64)>> {
        match self.send_unlocked(max_bytes, min_one_batch, ReadWait::CachedOnly) {
            Err(StorageError::NotCached) => Ok(None),
            other => other,
        }
    }

    /// The unlocked part of `execute_for_send`; `None` when a truncation raced it.
    fn send_unlocked(
        &self,
        max_bytes: usize,
        min_one_batch: MinOneBatch,
        wait: ReadWait,
    ) -> Result<Option<(FetchedRecords, i64)>> {
        let Some(read) = self.plan.execute_ranges(max_bytes, min_one_batch, wait)? else {
            return Ok(None);
        };
        let log_start = read.log_start_offset;
        let records = if read.records.len() >= MIN_ZERO_COPY_BYTES {
            match read.records.lend() {
                Ok(lent) => return Ok(Some((FetchedRecords::Files(lent), log_start))),
                // Every descriptor the pool may lend is out: copied, the files let go.
                Err(records) => records,
            }
        } else {
            read.records
        };
        let bytes = records.load(wait)?;
        if records.is_stale() {
            return Ok(None);
        }
        Ok(Some((FetchedRecords::Memory(bytes), log_start)))
    }

    /// The most bytes the read was planned for.
    pub fn max_bytes(&self) -> usize {
        self.plan.max_bytes()
    }

    /// See [`ReadPlan::bytes_at_most`].
    pub fn bytes_at_most(&self) -> u64 {
        self.plan.bytes_at_most()
    }
}

/// A cheap-to-clone handle on one partition log.
#[derive(Debug, Clone)]
pub struct LogHandle {
    shared: Arc<Shared>,
}

impl LogHandle {
    /// A handle whose high watermark starts at the log end offset (a new log, or one
    /// whose owner sets it from a checkpoint next).
    pub(crate) fn new(
        topic: &str,
        partition: i32,
        log: Log,
        failures: Arc<LogDirFailures>,
    ) -> Self {
        let (appends, _) = watch::channel(log.log_end_offset());
        let snapshot = Snapshot::of(&log);
        LogHandle {
            shared: Arc::new(Shared {
                topic: topic.to_string(),
                partition,
                location: parking_lot::RwLock::new(Location::of(&log)),
                failures,
                log_end_offset: AtomicI64::new(log.log_end_offset()),
                log_start_offset: AtomicI64::new(log.log_start_offset()),
                high_watermark: AtomicI64::new(snapshot.log_end_offset),
                latest_epoch: AtomicI32::new(snapshot.latest_epoch),
                compacted: AtomicBool::new(log.config().cleanup_compact),
                txns: log.txn_shared(),
                log: Mutex::new(Slot::Open(Box::new(log))),
                on_disk: AtomicBool::new(true),
                creation_done: parking_lot::Condvar::new(),
                appends,
            }),
        }
    }

    pub fn topic(&self) -> &str {
        &self.shared.topic
    }

    /// Whether both handles are the same log's.
    pub fn same_log(&self, other: &LogHandle) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Whether the log's files exist: false for a new log until its first open creates
    /// them (`lazy.rs`).
    pub fn is_created(&self) -> bool {
        self.shared.on_disk.load(Ordering::Acquire)
    }

    pub fn partition(&self) -> i32 {
        self.shared.partition
    }

    /// The partition's directory.
    pub fn dir(&self) -> PathBuf {
        self.location().dir.clone()
    }

    fn location(&self) -> Arc<Location> {
        Arc::clone(&self.shared.location.read())
    }

    /// The offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.shared.log_end_offset.load(Ordering::Acquire)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.shared.log_start_offset.load(Ordering::Acquire)
    }

    /// The high watermark: offsets below it are committed (replicated to the ISR).
    pub fn high_watermark(&self) -> i64 {
        self.shared.high_watermark.load(Ordering::SeqCst)
    }

    /// Sets the high watermark, clamped to [log start, log end]; notifies
    /// `subscribe_appends` receivers if it changed and returns the stored value. Atomics
    /// only (plus the watch channel's short internal lock): callable from async code.
    pub fn set_high_watermark(&self, high_watermark: i64) -> i64 {
        let shared = &self.shared;
        let mut changed = false;
        loop {
            let start = shared.log_start_offset.load(Ordering::SeqCst);
            let end = shared.log_end_offset.load(Ordering::SeqCst);
            let clamped = high_watermark.min(end).max(start);
            changed |= shared.high_watermark.swap(clamped, Ordering::SeqCst) != clamped;
            // A concurrent operation may have moved the bounds after we read them and
            // clamped before our store: re-check, so a stale bound never sticks (that
            // operation clamps after publishing its bounds, so one of us sees the other).
            let still_start = shared.log_start_offset.load(Ordering::SeqCst) == start;
            let still_end = shared.log_end_offset.load(Ordering::SeqCst) == end;
            if still_start && still_end {
                if changed {
                    self.notify();
                }
                return clamped;
            }
        }
    }

    /// The last stable offset (KIP-98): min(high watermark, first unstable offset), the
    /// bound of `read_committed` fetches and of their ListOffsets LATEST. Atomics, plus
    /// a short lock while a completed transaction's marker is not yet below the high
    /// watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.shared
            .txns
            .last_stable_offset(self.high_watermark(), self.log_start_offset())
    }

    /// Kafka's first unstable offset: the first offset of the oldest open transaction,
    /// or of a completed one whose marker the high watermark has not passed yet (until
    /// then a new leader might not have the marker). `None` when every transaction is
    /// decided and replicated. Never below the log start offset.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.shared
            .txns
            .first_unstable_offset(self.high_watermark())
            .map(|first| first.max(self.log_start_offset()))
    }

    /// The aborted transactions whose offsets overlap `[start_offset,
    /// end_offset_exclusive)` (Kafka's `collectAbortedTxns`, for a `read_committed`
    /// fetch's `aborted_transactions`), oldest marker first. Memory only, no disk I/O.
    pub fn aborted_transactions(
        &self,
        start_offset: i64,
        end_offset_exclusive: i64,
    ) -> Vec<AbortedTxn> {
        self.shared
            .txns
            .aborted_transactions(start_offset, end_offset_exclusive)
    }

    /// The transactions open on this partition, oldest first (DescribeProducers,
    /// hanging transactions). Memory only.
    pub fn ongoing_transactions(&self) -> Vec<OngoingTxn> {
        self.shared.txns.ongoing_transactions()
    }

    /// Whether the producer has a transaction open on this partition at this epoch: a
    /// leader asks the transaction coordinator before the first batch of one (KIP-890).
    /// Memory only.
    pub fn has_ongoing_transaction(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.shared.txns.has_ongoing(producer_id, producer_epoch)
    }

    /// The partition's producers with their last sequence and open transaction
    /// (DescribeProducers). Memory only, but under the partition lock, which a roll or
    /// fsync may hold: hence the blocking pool.
    pub async fn active_producers(&self) -> Result<Vec<ActiveProducer>> {
        self.run(|log| Ok(log.producer_state().active_producers()))
            .await
    }

    /// The latest leader epoch of the log (as of the last operation).
    pub fn latest_epoch(&self) -> Option<i32> {
        let epoch = self.shared.latest_epoch.load(Ordering::Acquire);
        (epoch != NO_EPOCH).then_some(epoch)
    }

    /// Whether the log's `cleanup.policy` contains `compact` (as last configured).
    pub fn is_compacted(&self) -> bool {
        self.shared.compacted.load(Ordering::Acquire)
    }

    /// A receiver of the log end offset, notified when the log end offset or the high
    /// watermark changes (read the latter with `high_watermark`).
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
        self.try_inline(|log| log.try_append_inline(records, leader_epoch, now_ms))
    }

    /// Runs `f` on this thread when the partition lock is free; `None` when it is taken or
    /// `f` declines (`Ok(None)`: nothing done), so the caller takes the blocking pool.
    fn try_inline<R>(&self, f: impl FnOnce(&mut Log) -> Result<Option<R>>) -> Option<Result<R>> {
        if let Err(offline) = self.check_log_dir() {
            return Some(Err(offline));
        }
        let mut guard = self.shared.log.try_lock()?;
        // A log not opened yet is opened on the blocking pool (file I/O), never here.
        let log = guard.open_mut()?;
        let result = self.report(f(log)).transpose()?;
        // Published under the lock: publishes in log order, so the bounds (and the high
        // watermark clamped to them) never step back to an older operation's values.
        self.publish(Snapshot::of(log));
        drop(guard);
        Some(result)
    }

    /// See [`Log::append_as_follower`]: the leader's batches, stored unchanged. Like a
    /// leader's append, the common case (no roll, no fsync, no new epoch) is a write into
    /// the page cache done on this thread; profiling a 3-node acks=all run showed the
    /// blocking pool's hand-offs (two context switches per call) as the largest cost.
    pub async fn append_as_follower(&self, records: Bytes, now_ms: i64) -> Result<FollowerAppend> {
        if let Some(result) =
            self.try_inline(|log| log.try_append_as_follower_inline(&records, now_ms))
        {
            return result;
        }
        self.run(move |log| log.append_as_follower(&records, now_ms))
            .await
    }

    /// See [`Log::truncate_to`]; returns the new log end offset. The high watermark is
    /// lowered with it if needed.
    pub async fn truncate_to(&self, offset: i64) -> Result<i64> {
        self.run(move |log| log.truncate_to(offset)).await
    }

    /// See [`Log::truncate_fully_and_start_at`]; the high watermark becomes `offset`.
    pub async fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        self.run(move |log| log.truncate_fully_and_start_at(offset))
            .await
    }

    /// See [`Log::end_offset_for_epoch`] (OffsetForLeaderEpoch, and every follower fetch's
    /// divergence check): an in-memory lookup, done on this thread when the lock is free.
    pub async fn end_offset_for_epoch(&self, epoch: i32) -> Result<(i32, i64)> {
        if let Some(found) = self.shared.log.try_lock().and_then(|guard| {
            // A read: nothing to publish, unlike `try_inline`.
            guard.open_ref().map(|log| log.end_offset_for_epoch(epoch))
        }) {
            return Ok(found);
        }
        self.run(move |log| Ok(log.end_offset_for_epoch(epoch)))
            .await
    }

    /// See [`Log::assign_epoch_start`]: this broker leads from `epoch` on. Memory only,
    /// so done on this thread when the lock is free: a broker leading 100,000 partitions
    /// makes them all leader at start, and a blocking-pool hop each cost seconds.
    /// A log not opened yet keeps the epoch to assign when it opens, without opening.
    pub async fn assign_epoch_start(&self, epoch: i32) -> Result<()> {
        let closed = move |log: &mut ClosedLog| log.assign_epoch_start(epoch);
        let open = move |log: &mut Log| log.assign_epoch_start(epoch);
        self.memory_op(closed, open).await
    }

    /// See [`Log::read`]: planned under the partition lock (memory only, on this thread
    /// when the lock is free), read on the blocking pool without it.
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        high_watermark_exclusive: i64,
        min_one_batch: MinOneBatch,
    ) -> Result<ReadResult> {
        let planned = self
            .plan_read(offset, max_bytes, high_watermark_exclusive)
            .await?;
        tokio::task::spawn_blocking(move || planned.execute(max_bytes, min_one_batch))
            .await
            .map_err(|e| StorageError::TaskFailed {
                reason: e.to_string(),
            })?
    }

    /// See [`Log::plan_read`]: the first half of a read, to be finished by
    /// [`PlannedRead::execute`] on a blocking thread (a fetch runs all its partitions'
    /// reads in one blocking-pool hop). Waits for the lock on the blocking pool only when
    /// another operation holds it.
    pub async fn plan_read(
        &self,
        offset: i64,
        max_bytes: usize,
        high_watermark_exclusive: i64,
    ) -> Result<PlannedRead> {
        // Inline only when the lock is free and the pool holds every file the read needs
        // open (reopening one is a syscall that may wait on the disk).
        self.check_log_dir()?;
        let inline = self.shared.log.try_lock().and_then(|guard| {
            guard
                .open_ref()
                .map(|log| log.plan_read_cached(offset, max_bytes, high_watermark_exclusive))
        });
        let plan = match inline {
            Some(Ok(Some(plan))) => plan,
            Some(Err(e)) => return Err(e),
            _ => {
                self.run(move |log| log.plan_read(offset, max_bytes, high_watermark_exclusive))
                    .await?
            }
        };
        Ok(PlannedRead {
            handle: self.clone(),
            plan,
        })
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

    /// See [`Log::enforce_retention`]: one retention pass with the current config; the
    /// due `.deleted` files are unlinked after the lock is released.
    /// An empty log not opened yet passes without being opened.
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<RetentionOutcome> {
        if let Some(nothing) = self.closed_empty_retention() {
            return Ok(nothing);
        }
        let (mut outcome, unlinked) = self
            .run_then_unlink(move |log| log.retention_pass(now_ms))
            .await?;
        outcome.files_unlinked = unlinked;
        Ok(outcome)
    }

    /// See [`Log::increment_log_start_offset`] (DeleteRecords); returns the new log start.
    /// The due `.deleted` files are unlinked after the lock is released.
    pub async fn increment_log_start_offset(&self, offset: i64, now_ms: i64) -> Result<i64> {
        let (start, _) = self
            .run_then_unlink(move |log| log.advance_log_start_offset(offset, now_ms))
            .await?;
        Ok(start)
    }

    /// See [`Log::cleaning_priority`]: `Some(dirty ratio)` when the log is due for
    /// compaction.
    /// A log that is not compacted answers from the config mirror, with no lock and no
    /// blocking-pool hop: the cleaner asks every log each pass, and at 100,000 partitions
    /// those hops (and, for logs not opened yet, the opens) were the pass.
    pub async fn cleaning_priority(&self, now_ms: i64) -> Result<Option<f64>> {
        if !self.is_compacted() {
            return Ok(None);
        }
        self.run(move |log| Ok(log.cleaning_priority(now_ms))).await
    }

    /// See [`Log::clean`]: one compaction pass if due, on the blocking pool, holding the
    /// partition lock only to capture the pass (memory only) and to install its result;
    /// the reading and rewriting in between runs without it, so produce and fetch on
    /// this partition go on meanwhile (`cleaner/job.rs`).
    pub async fn clean(
        &self,
        now_ms: i64,
        dedupe_buffer_bytes: usize,
    ) -> Result<crate::cleaner::CleanOutcome> {
        let handle = self.clone();
        tokio::task::spawn_blocking(move || handle.clean_blocking(now_ms, dedupe_buffer_bytes))
            .await
            .map_err(|e| StorageError::TaskFailed {
                reason: e.to_string(),
            })?
    }

    fn clean_blocking(
        &self,
        now_ms: i64,
        dedupe_buffer_bytes: usize,
    ) -> Result<crate::cleaner::CleanOutcome> {
        let Some(job) =
            self.with_log_blocking(|log| Ok(log.prepare_clean(now_ms, dedupe_buffer_bytes)))?
        else {
            return Ok(crate::cleaner::CleanOutcome::default());
        };
        let generation = job.generation();
        // A log deleted meanwhile drops the result unused, which removes its files.
        let (outcome, due) = match job.build() {
            Ok(built) => self.with_log_blocking(|log| {
                let outcome = log.commit_clean(built)?;
                Ok((outcome, log.take_due_deletions(now_ms)))
            })?,
            Err(e) => return self.with_log_blocking(|log| log.clean_failed(generation, e)),
        };
        // Unlinking large files frees their extents: not under the lock.
        due.unlink()?;
        Ok(outcome)
    }

    /// Fsyncs the active segment.
    pub async fn flush(&self, now_ms: i64) -> Result<()> {
        self.run(move |log| log.flush(now_ms)).await
    }

    /// Replaces the topic config (applies from the next append). Memory only, so done on
    /// this thread when the lock is free, and nothing at all when the config is the one
    /// the log has: metadata changes push every topic's config again.
    /// A log not opened yet keeps the config to open with, without opening.
    pub async fn set_config(&self, config: LogConfig) -> Result<()> {
        self.shared
            .compacted
            .store(config.cleanup_compact, Ordering::Release);
        let for_closed = config.clone();
        let closed = move |log: &mut ClosedLog| {
            log.config = for_closed;
            Ok(())
        };
        let open = move |log: &mut Log| {
            if *log.config() != config {
                log.set_config(config);
            }
            Ok(())
        };
        self.memory_op(closed, open).await
    }

    /// Runs `f` on the log from synchronous code (startup, shutdown, deletion); never
    /// call it on a runtime worker thread.
    pub fn with_log_blocking<R>(&self, f: impl FnOnce(&mut Log) -> Result<R>) -> Result<R> {
        self.check_log_dir()?;
        let mut guard = self.shared.log.lock();
        let log = self.ensure_open(&mut guard)?;
        let result = self.report(f(log));
        self.publish(Snapshot::of(log)); // under the lock: see `try_append_inline`
        drop(guard);
        result
    }

    /// Replaces the log, under its lock, by the one `f` makes from it (the same partition
    /// in another log directory: `log_move.rs`); the handle serves the new one from then
    /// on, at its directory. On an error the old log stays and serves on.
    pub(crate) fn replace_log_blocking(
        &self,
        f: impl FnOnce(&mut Log) -> Result<Log>,
    ) -> Result<()> {
        self.check_log_dir()?;
        let mut guard = self.shared.log.lock();
        // A log not opened yet (`lazy.rs`) opens first: the move copies its files.
        let old = self.ensure_open(&mut guard)?;
        // Not `report`: an error may be the target directory's (`log_move.rs` says whose).
        let new = f(old)?;
        *self.shared.location.write() = Location::of(&new);
        self.publish(Snapshot::of(&new));
        let old = std::mem::replace(&mut *guard, Slot::Open(Box::new(new)));
        drop(guard);
        drop(old);
        Ok(())
    }

    /// `LogOffline` if the log's directory has failed.
    fn check_log_dir(&self) -> Result<()> {
        if !self.shared.failures.any_failed() {
            return Ok(());
        }
        let location = self.location();
        match self.shared.failures.failure(&location.log_dir) {
            None => Ok(()),
            Some(reason) => Err(StorageError::LogOffline {
                topic: self.shared.topic.clone(),
                partition: self.shared.partition,
                reason: format!(
                    "log directory {} failed: {reason}",
                    location.log_dir.display()
                ),
            }),
        }
    }

    /// Hands an operation's error to the directory failure state (an I/O error other than
    /// a full disk takes the directory offline), and returns the result unchanged.
    fn report<R>(&self, result: Result<R>) -> Result<R> {
        if let Err(e) = &result {
            self.shared.failures.fail_on(&self.location().log_dir, e);
        }
        result
    }

    /// Whether the log's directory has failed.
    pub fn log_dir_failed(&self) -> bool {
        self.shared.failures.any_failed()
            && self
                .shared
                .failures
                .failure(&self.location().log_dir)
                .is_some()
    }

    /// Takes the log out of the handle (for deletion or close), open or not; later calls
    /// fail with `LogDeleted`.
    pub(crate) fn take_blocking(&self) -> Slot {
        let mut guard = self.shared.log.lock();
        self.wait_creation(&mut guard);
        std::mem::replace(&mut *guard, Slot::Deleted)
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

    /// `run` for an operation that leaves `.deleted` files due: they are unlinked on the
    /// same blocking thread once the lock is released (unlinking a large file frees its
    /// extents, which can take tens of milliseconds). Returns how many were unlinked.
    async fn run_then_unlink<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Log) -> Result<(R, DueDeletions)> + Send + 'static,
    ) -> Result<(R, usize)> {
        let handle = self.clone();
        tokio::task::spawn_blocking(move || {
            let (result, due) = handle.with_log_blocking(f)?;
            Ok((result, due.unlink()?))
        })
        .await
        .map_err(|e| StorageError::TaskFailed {
            reason: e.to_string(),
        })?
    }

    /// Publishes the log's bounds and epoch, clamps the high watermark into the new
    /// bounds (bounds first: see `set_high_watermark`), and notifies receivers if the log
    /// end offset or the high watermark changed.
    fn publish(&self, snapshot: Snapshot) {
        let shared = &self.shared;
        shared
            .latest_epoch
            .store(snapshot.latest_epoch, Ordering::Release);
        shared
            .log_start_offset
            .store(snapshot.log_start_offset, Ordering::SeqCst);
        shared
            .log_end_offset
            .store(snapshot.log_end_offset, Ordering::SeqCst);
        let clamp = |hw: i64| {
            let clamped = hw
                .min(snapshot.log_end_offset)
                .max(snapshot.log_start_offset);
            (clamped != hw).then_some(clamped)
        };
        let hw_changed = shared
            .high_watermark
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, clamp)
            .is_ok();
        shared
            .txns
            .forget_replicated_below(shared.high_watermark.load(Ordering::SeqCst));
        let end = snapshot.log_end_offset;
        shared.appends.send_if_modified(|leo| {
            let changed = *leo != end || hw_changed;
            *leo = end;
            changed
        });
    }

    /// Wakes every receiver without touching the value: only `publish` writes the log
    /// end offset, so a racing notification never stores a stale one.
    fn notify(&self) {
        self.shared.appends.send_modify(|_| {});
    }
}
