//! Logs opened on first use. After a clean shutdown (`clean_shutdown.rs`) a handle is
//! created from its summary entry without touching the log's files: its bounds and
//! latest epoch are published from the entry, and the first operation that needs the log
//! (a read, an append, a truncation, retention, compaction, a follower fetch) opens it
//! on the blocking pool with the ordinary `Log::open_with_recovery_point`, under the
//! partition lock, before running. What needs only memory is kept for the open instead:
//! a topic config and a new leader epoch (every partition gets both at start) and the
//! recovery point for checkpoints; a clean shutdown closes such a log without opening it.
//!
//! Invariants: a slot only moves Closed → Open / Unopenable → Deleted, never back; while
//! Closed the log's files are unchanged since the shutdown that wrote the entry, so the
//! entry's bounds are the log's. Runtime workers never open a log: the inline paths
//! (`try_inline`, read planning, epoch lookups) see a closed slot as "not here" and take
//! the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use super::{Location, LogHandle, Shared, NO_EPOCH};
use crate::clean_shutdown::SummaryEntry;
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::log::{Log, RetentionOutcome, TxnShared};
use crate::log_dir_failure::{fails_log_dir, LogDirFailures};
use crate::log_manager::now_ms;

/// Where a handle's log is.
#[derive(Debug)]
pub(crate) enum Slot {
    /// Boxed: a handle never opened holds only the small `ClosedLog`.
    Open(Box<Log>),
    /// Not opened yet: see the module docs.
    Closed(Box<ClosedLog>),
    /// Its lazy open failed for a reason other than I/O (corrupt files): offline until
    /// the next start, as a log that fails an eager open.
    Unopenable(String),
    Deleted,
}

impl Slot {
    /// The log if it is open (no I/O).
    pub(crate) fn open_mut(&mut self) -> Option<&mut Log> {
        match self {
            Slot::Open(log) => Some(log),
            _ => None,
        }
    }

    pub(crate) fn open_ref(&self) -> Option<&Log> {
        match self {
            Slot::Open(log) => Some(log),
            _ => None,
        }
    }
}

/// A log not opened yet, and what its open needs.
#[derive(Debug)]
pub(crate) struct ClosedLog {
    pub(crate) dir: PathBuf,
    /// The config to open with (the latest `set_config`).
    pub(crate) config: LogConfig,
    /// From `recovery-point-offset-checkpoint`: the open trusts everything below it.
    pub(crate) recovery_point: i64,
    /// From `log-start-offset-checkpoint`, applied after the open as an eager open does.
    pub(crate) checkpointed_log_start: Option<i64>,
    /// The bounds and latest epoch published until the open.
    pub(crate) entry: SummaryEntry,
    /// Set when a lazy open fails for good, so `LogManager` looks for offline logs among
    /// the handles only once one did.
    pub(crate) any_unopenable: Arc<AtomicBool>,
}

impl ClosedLog {
    /// `Log::assign_epoch_start` kept for the open: only an epoch newer than the latest
    /// counts, and it starts at the log end, which cannot move while the log is closed.
    pub(crate) fn assign_epoch_start(&mut self, epoch: i32) -> Result<()> {
        if epoch >= 0 && self.entry.latest_epoch.is_none_or(|l| epoch > l) {
            self.entry.latest_epoch = Some(epoch);
        }
        Ok(())
    }

    /// Opens the log as `LogManager::open` would have, then replays what was kept.
    fn open(&self, txns: &Arc<TxnShared>) -> Result<Log> {
        let mut log = Log::open_with_recovery_point(
            &self.dir,
            self.config.clone(),
            now_ms(),
            self.recovery_point,
        )?;
        if let Some(start) = self.checkpointed_log_start {
            log.restore_log_start_offset(start);
        }
        if let Some(epoch) = self.entry.latest_epoch {
            log.assign_epoch_start(epoch)?;
        }
        if log.log_end_offset() != self.entry.log_end_offset
            || log.log_start_offset() != self.entry.log_start_offset
        {
            // The files changed behind the broker's back; the open's bounds win and are
            // published by the caller.
            tracing::warn!(dir = %self.dir.display(), summary_start = self.entry.log_start_offset, summary_end = self.entry.log_end_offset, log_start = log.log_start_offset(), log_end = log.log_end_offset(), "lazily opened log differs from its clean shutdown summary");
        }
        log.adopt_txn_shared(txns);
        Ok(log)
    }
}

/// What a clean shutdown's close of one log yields.
#[derive(Debug, Clone, Copy)]
pub struct ShutdownClose {
    /// For `recovery-point-offset-checkpoint`.
    pub recovery_point: i64,
    /// The log directory must be fsynced before the recovery point is persisted (a new
    /// log's entry in it: `Log::flush_for_shutdown_parent_deferred`).
    pub parent_sync_needed: bool,
    /// For the clean shutdown summary; `None` when the log must open eagerly next time
    /// (a transaction not yet decided and replicated, see `clean_shutdown.rs`).
    pub summary: Option<SummaryEntry>,
}

impl LogHandle {
    /// A handle on a log not opened yet; its high watermark starts at the entry's log
    /// end (the owner sets it from the checkpoint next, as for `new`).
    pub(crate) fn closed(
        topic: &str,
        partition: i32,
        closed: ClosedLog,
        failures: Arc<LogDirFailures>,
    ) -> Self {
        let e = closed.entry;
        let (appends, _) = watch::channel(e.log_end_offset);
        LogHandle {
            shared: Arc::new(Shared {
                topic: topic.to_string(),
                partition,
                location: parking_lot::RwLock::new(Arc::new(Location {
                    dir: closed.dir.clone(),
                    log_dir: closed
                        .dir
                        .parent()
                        .map(Path::to_path_buf)
                        .unwrap_or_default(),
                })),
                failures,
                log_end_offset: AtomicI64::new(e.log_end_offset),
                log_start_offset: AtomicI64::new(e.log_start_offset),
                high_watermark: AtomicI64::new(e.log_end_offset),
                latest_epoch: AtomicI32::new(e.latest_epoch.unwrap_or(NO_EPOCH)),
                compacted: AtomicBool::new(closed.config.cleanup_compact),
                // Empty: only logs without undecided transactions open lazily, and the
                // open moves the aborted ones in (`Log::adopt_txn_shared`).
                txns: Arc::default(),
                log: Mutex::new(Slot::Closed(Box::new(closed))),
                appends,
            }),
        }
    }

    /// Whether the log's files are open (false until a lazily opened log's first use).
    pub fn is_open(&self) -> bool {
        matches!(*self.shared.log.lock(), Slot::Open(_))
    }

    /// Why the log's lazy open failed for good, if it did.
    pub(crate) fn unopenable_reason(&self) -> Option<String> {
        match &*self.shared.log.lock() {
            Slot::Unopenable(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    /// The open log in `slot`, opening it first if it is not yet (file I/O: blocking
    /// threads only, under the partition lock).
    pub(super) fn ensure_open<'a>(&self, slot: &'a mut Slot) -> Result<&'a mut Log> {
        if let Slot::Closed(closed) = slot {
            match closed.open(&self.shared.txns) {
                Ok(log) => *slot = Slot::Open(Box::new(log)),
                // Passing (out of file descriptors or space): the next use tries again.
                Err(e) if matches!(e, StorageError::Io { .. }) && !fails_log_dir(&e) => {
                    return Err(e)
                }
                // As an eager open's failure: this partition goes offline, not the
                // directory (`report` is not told).
                Err(e) => {
                    tracing::error!(topic = %self.shared.topic, partition = self.shared.partition, error = %e, "log could not be opened; the partition is offline");
                    closed.any_unopenable.store(true, Ordering::Release);
                    *slot = Slot::Unopenable(e.to_string());
                }
            }
        }
        match slot {
            Slot::Open(log) => Ok(log),
            Slot::Unopenable(reason) => Err(StorageError::LogOffline {
                topic: self.shared.topic.clone(),
                partition: self.shared.partition,
                reason: reason.clone(),
            }),
            Slot::Deleted | Slot::Closed(_) => Err(StorageError::LogDeleted { dir: self.dir() }),
        }
    }

    /// A memory-only operation: `closed` on a log not opened yet (it stays closed), or
    /// `open` on an open one. On this thread when the lock is free, else on the blocking
    /// pool.
    pub(super) async fn memory_op<R: Send + 'static>(
        &self,
        closed: impl FnOnce(&mut ClosedLog) -> Result<R> + Send + 'static,
        open: impl FnOnce(&mut Log) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.check_log_dir()?;
        if let Some(mut guard) = self.shared.log.try_lock() {
            return self.memory_op_locked(&mut guard, closed, open);
        }
        let handle = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = handle.shared.log.lock();
            handle.memory_op_locked(&mut guard, closed, open)
        })
        .await
        .map_err(|e| StorageError::TaskFailed {
            reason: e.to_string(),
        })?
    }

    fn memory_op_locked<R>(
        &self,
        slot: &mut Slot,
        closed: impl FnOnce(&mut ClosedLog) -> Result<R>,
        open: impl FnOnce(&mut Log) -> Result<R>,
    ) -> Result<R> {
        if let Slot::Closed(log) = slot {
            let result = closed(log);
            let epoch = log.entry.latest_epoch.unwrap_or(NO_EPOCH);
            self.shared.latest_epoch.store(epoch, Ordering::Release);
            return result;
        }
        let log = self.ensure_open(slot)?;
        let result = self.report(open(log));
        self.publish(super::Snapshot::of(log));
        result
    }

    /// The recovery point to checkpoint (`Log::checkpoint_recovery_point`); a log not
    /// opened yet keeps the checkpointed one without being opened. Blocking.
    pub(crate) fn checkpoint_recovery_point_blocking(&self) -> Result<i64> {
        if let Slot::Closed(closed) = &*self.shared.log.lock() {
            return Ok(closed.recovery_point);
        }
        self.with_log_blocking(Log::checkpoint_recovery_point)
    }

    /// A retention pass on an empty log not opened yet: nothing to delete (Kafka never
    /// deletes an empty active segment), so the log stays closed. `None`: run the pass.
    pub(super) fn closed_empty_retention(&self) -> Option<RetentionOutcome> {
        let guard = self.shared.log.try_lock()?;
        let Slot::Closed(closed) = &*guard else {
            return None;
        };
        let e = closed.entry;
        (e.log_start_offset == e.log_end_offset).then_some(RetentionOutcome {
            segments_deleted: 0,
            reason: None,
            log_start_offset: e.log_start_offset,
            files_unlinked: 0,
        })
    }

    /// Clean shutdown of this log: flushed and closed if open, or closed as it is if
    /// never opened; `None` if it was deleted meanwhile. The log is gone from the handle
    /// afterwards, even when the flush fails. Blocking.
    pub(crate) fn close_for_shutdown(&self, now_ms: i64) -> Result<Option<ShutdownClose>> {
        self.check_log_dir()?;
        let mut guard = self.shared.log.lock();
        let taken = std::mem::replace(&mut *guard, Slot::Deleted);
        match taken {
            Slot::Deleted | Slot::Unopenable(_) => Ok(None),
            Slot::Closed(closed) => Ok(Some(ShutdownClose {
                recovery_point: closed.recovery_point,
                parent_sync_needed: false,
                summary: Some(closed.entry),
            })),
            Slot::Open(mut log) => {
                let flushed = self.report(log.flush_for_shutdown_parent_deferred(now_ms));
                // Condemned segment files go now, not after their delay (no reader is
                // left): an eager open would remove them at the next start, and a log
                // opened lazily might not be opened for a long time.
                let unlinked = self.report(log.take_due_deletions(i64::MAX).unlink());
                self.publish(super::Snapshot::of(&log));
                let undecided = self
                    .shared
                    .txns
                    .first_unstable_offset(self.high_watermark())
                    .is_some();
                let summary = match &flushed {
                    Ok((point, _))
                        if *point == log.log_end_offset() && !undecided && unlinked.is_ok() =>
                    {
                        Some(SummaryEntry {
                            log_start_offset: log.log_start_offset(),
                            log_end_offset: log.log_end_offset(),
                            recovery_point: *point,
                            latest_epoch: log.latest_epoch(),
                        })
                    }
                    _ => None,
                };
                let closed = self.report((*log).close(now_ms));
                let (recovery_point, parent_sync_needed) = flushed?;
                closed?;
                Ok(Some(ShutdownClose {
                    recovery_point,
                    parent_sync_needed,
                    summary,
                }))
            }
        }
    }
}
