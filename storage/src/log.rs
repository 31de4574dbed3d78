//! One partition's log (Kafka's `LocalLog` + the append/read half of `UnifiedLog`):
//! its segments ordered by base offset, `log_start_offset`, `log_end_offset`, the
//! idempotent producer state, the leader epoch cache and the recovery point. Opening
//! is `log/load.rs`; the recovery point and producer snapshots `log/recovery_point.rs`.
//!
//! Invariants: segments do not overlap and only the last (active) one is written;
//! `log_end_offset` is the offset after the last batch; an append is validated entirely
//! (batches, sizes, producer sequences) before a byte is written, so a rejected append
//! changes nothing. Synchronous and not thread-safe: `LogHandle` wraps it in a mutex.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::config::LogConfig;
use crate::error::{io_err, Result, StorageError};
use crate::producer_state::ProducerStateManager;
use crate::recovery::sync_dir;
use crate::segment::Segment;

mod append;
mod clean;
mod deletion;
#[cfg(test)]
mod disk_full_tests;
pub mod epoch_cache;
mod follower;
pub(crate) mod listing;
mod load;
mod read;
mod read_ranges;
mod recovery_point;
mod relocate;
mod truncate;
mod txn;

pub use deletion::{DueDeletions, RetentionOutcome};
pub use epoch_cache::LeaderEpochCache;
pub use follower::FollowerAppend;
pub use load::LoadStats;
pub use read::ReadPlan;
pub use read_ranges::RangesRead;
pub(crate) use txn::TxnShared;

/// The result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended (or of the original batch for a duplicate).
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker time stamped on the batches, for LogAppendTime topics.
    pub log_append_time: Option<i64>,
    pub log_start_offset: i64,
    /// True when the append was a retry of an idempotent batch: nothing was written.
    pub duplicate: bool,
}

/// Whether a read returns its first batch even when it exceeds `max_bytes`
/// (Kafka's `minOneMessage`, so that consumers always make progress).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinOneBatch {
    Yes,
    No,
}

/// The result of a read: whole batches, untouched, plus the log bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    pub records: Bytes,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// An (offset, timestamp) answer to a ListOffsets-style lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub offset: i64,
    pub timestamp: i64,
}

/// A partition log on disk.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    log_end_offset: i64,
    /// Every byte below it is fsynced (`log/recovery_point.rs`).
    recovery_point: i64,
    /// The newest producer snapshot file's offset.
    snapshot_offset: Option<i64>,
    /// What the open trusted and scanned.
    load_stats: LoadStats,
    producers: ProducerStateManager,
    /// Leader epoch → start offset (`log/epoch_cache.rs`), persisted by each operation.
    epochs: LeaderEpochCache,
    unflushed_messages: u64,
    last_flush_ms: i64,
    /// The partition directory and its new segment files are not fsynced in their
    /// parent yet: a new log defers that to its first flush (no fsync on a partition's
    /// first produce; an empty log lost in a machine crash is created again).
    dir_sync_pending: bool,
    /// The base offset of a segment whose `.txnindex` missed aborted entries when its
    /// write failed (a full disk): rewritten from memory before the next flush moves the
    /// recovery point (`log/txn.rs`).
    txn_index_behind: Option<i64>,
    /// Renamed `.deleted` segment files and when they may be unlinked.
    pending_deletions: Vec<(i64, PathBuf)>,
    /// Compaction checkpoint and delete horizon (`log/clean.rs`).
    cleaner: crate::cleaner::CleanerState,
    /// Bumped before any file is changed in place, so reads planned earlier and run
    /// without the lock know to redo (`log/read.rs`).
    rewrites: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Set while a compaction pass runs its unlocked phase (`cleaner/job.rs`).
    cleaning: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Aborted and open transactions, shared with the `LogHandle` (`log/txn.rs`).
    txns: std::sync::Arc<txn::TxnShared>,
}

impl Log {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }

    /// The leader epoch cache (read-only; the log keeps it in step with its data).
    pub fn leader_epoch_cache(&self) -> &LeaderEpochCache {
        &self.epochs
    }

    /// The latest leader epoch recorded in this log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }

    /// OffsetForLeaderEpoch: see [`LeaderEpochCache::end_offset_for`], with this log end
    /// offset.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.epochs.end_offset_for(epoch, self.log_end_offset)
    }

    /// Records that `epoch` starts at the log end offset (Kafka's `makeLeader`: a broker
    /// becoming leader with a new epoch, before it appends anything). An epoch not newer
    /// than the latest one changes nothing. Memory only: the checkpoint file is written
    /// by the next flush (`flush_to_end`), as Kafka writes it without fsync off the append
    /// path (KAFKA-15046); a crash loses nothing the batch headers do not say again.
    pub fn assign_epoch_start(&mut self, epoch: i32) -> Result<()> {
        self.epochs.assign_if_newer(epoch, self.log_end_offset);
        Ok(())
    }

    /// Replaces the topic config; it applies from the next append.
    pub fn set_config(&mut self, config: LogConfig) {
        for segment in self.segments.values_mut() {
            segment.set_config(&config);
        }
        self.config = config;
    }

    /// Closes the active segment (fsynced, as Kafka flushes on roll) and starts a new
    /// one at the log end offset.
    fn roll(&mut self, now_ms: i64) -> Result<()> {
        self.roll_at(self.log_end_offset, now_ms)
    }

    /// Like `roll`, with the new segment based at `base_offset` (`>=` the log end
    /// offset: a follower rolls at the incoming batch's base offset, as Kafka's
    /// `LocalLog.roll(expectedNextOffset)`, so its relative offsets always fit).
    fn roll_at(&mut self, base_offset: i64, now_ms: i64) -> Result<()> {
        // Everything written so far becomes durable and the recovery point moves to the
        // log end, with a producer snapshot there (Kafka snapshots on roll too).
        self.flush_to_end()?;
        self.snapshot_at_recovery_point()?;
        let mut segment = Segment::open(&self.dir, base_offset, &self.config, now_ms)?;
        // Clears any stale index left by a crashed earlier attempt at this offset.
        segment.recover(&self.config, &mut |_, _| {})?;
        segment.reset_txn_index(&[])?;
        sync_dir(&self.dir)?;
        tracing::debug!(dir = %self.dir.display(), base_offset, "segment rolled");
        self.segments.insert(base_offset, segment);
        Ok(())
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has at least one segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has at least one segment")
    }

    /// Reads whole batches from the one holding `start_offset`, up to `max_bytes`, never
    /// returning a batch whose last offset reaches `max_offset_exclusive` (the high
    /// watermark for consumers). A read at the log end offset returns nothing. Under the
    /// caller's exclusive access; `LogHandle` plans under the lock and reads outside it
    /// (`log/read.rs`).
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
        min_one_batch: MinOneBatch,
    ) -> Result<ReadResult> {
        let plan = self.plan_read(start_offset, max_bytes, max_offset_exclusive)?;
        // No truncation can run while `self` is borrowed, so the plan cannot go stale.
        plan.execute(max_bytes, min_one_batch)?
            .ok_or_else(|| StorageError::TaskFailed {
                reason: "a read under the log's borrow saw a truncation".to_string(),
            })
    }

    /// The first record whose timestamp is `>= timestamp` (ListOffsets by time): its
    /// offset (at least the log start) and timestamp; `None` if there is none.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampOffset>> {
        for segment in self.segments.values() {
            if let Some((offset, ts)) =
                segment.find_offset_by_timestamp(timestamp, self.log_start_offset)?
            {
                return Ok(Some(TimestampOffset {
                    offset,
                    timestamp: ts,
                }));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP (KIP-734): the first record holding the largest
    /// timestamp of the log; `None` for an empty log.
    pub fn max_timestamp_offset(&self) -> Result<Option<TimestampOffset>> {
        let mut best: Option<(i64, &Segment)> = None;
        for segment in self.segments.values() {
            if let Some((timestamp, _)) = segment.max_timestamp() {
                if best.is_none_or(|(b, _)| timestamp > b) {
                    best = Some((timestamp, segment));
                }
            }
        }
        let Some((_, segment)) = best else {
            return Ok(None);
        };
        Ok(segment
            .max_timestamp_offset()?
            .map(|(offset, timestamp)| TimestampOffset { offset, timestamp }))
    }

    /// Fsyncs what is not yet durable (the active segment; older ones were fsynced when
    /// they rolled, unless recovered after a crash) and moves the recovery point to the
    /// log end offset.
    pub fn flush(&mut self, now_ms: i64) -> Result<()> {
        self.flush_to_end()?;
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// Flushes and closes the log. A log with nothing appended since its last flush (or
    /// since it was opened with its recovery point at its end) is closed without an
    /// fsync: on a broker with many quiet partitions, three fsyncs each made a clean
    /// shutdown take seconds.
    pub fn close(mut self, now_ms: i64) -> Result<()> {
        if self.unflushed_messages == 0 && self.recovery_point >= self.log_end_offset {
            return Ok(());
        }
        self.flush(now_ms)
    }

    /// Deletes every file of the log and its directory.
    pub fn delete(self) -> Result<()> {
        drop(self.segments);
        fs::remove_dir_all(&self.dir).map_err(io_err("delete log dir", &self.dir))
    }
}
