//! Logs opened on first use. After a clean shutdown (`clean_shutdown.rs`) a handle is
//! created from its summary entry without touching the log's files: its bounds and
//! latest epoch are published from the entry, and the first operation that needs the log
//! (a read, an append, a truncation, retention, compaction, a follower fetch) opens it
//! on the blocking pool with the ordinary `Log::open_with_recovery_point`, under the
//! partition lock, before running. What needs only memory is kept for the open instead:
//! a topic config and a new leader epoch (every partition gets both at start) and the
//! recovery point for checkpoints; a clean shutdown closes such a log without opening it.
//!
//! A new log starts the same way (`LogManager::get_or_register`): a closed handle whose
//! directory does not exist yet (`ClosedLog::create`), empty bounds and no epoch, so
//! registering a partition costs no I/O and holds no lock across the file system. Its
//! open creates the files: the broker's background creator opens it soon after, and a
//! request that needs it first opens it itself (under the partition lock, which makes
//! the creation happen once). Until then checkpoints leave it out and a clean shutdown
//! forgets it: nothing of it is on disk, and the next start registers it again.
//!
//! Invariants: a slot only moves Closed → Open / Unopenable → Deleted, never back; while
//! Closed the log's files are unchanged since the shutdown that wrote the entry, so the
//! entry's bounds are the log's. Runtime workers never open a log: the inline paths
//! (`try_inline`, read planning, epoch lookups) see a closed slot as "not here" and take
//! the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::watch;

use super::{Location, LogHandle, Shared, NO_EPOCH};
use crate::clean_shutdown::SummaryEntry;
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::log::{Log, RetentionOutcome, TxnShared};
use crate::log_dir_failure::{fails_log_dir, LogDirFailures};
use crate::log_manager::now_ms;

/// Test hook: runs before a new log's files are created (a slow disk, in tests).
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(crate) static BEFORE_CREATE: Mutex<Option<Arc<dyn Fn(&Path) + Send + Sync>>> =
    parking_lot::const_mutex(None);

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
    /// A new log not created yet: its open creates `dir` and its files.
    pub(crate) create: bool,
    /// `LogHandle::create_blocking` is creating the files without the partition lock:
    /// until it is done only it replaces this slot; memory-only operations change it in
    /// place (replayed on the created log), the others wait (`wait_creation`).
    pub(crate) creating: bool,
}

impl ClosedLog {
    /// A new log at `dir`, created by its first open (see the module docs).
    pub(crate) fn to_create(
        dir: PathBuf,
        config: LogConfig,
        any_unopenable: Arc<AtomicBool>,
    ) -> Self {
        ClosedLog {
            dir,
            config,
            recovery_point: 0,
            checkpointed_log_start: None,
            entry: SummaryEntry {
                log_start_offset: 0,
                log_end_offset: 0,
                recovery_point: 0,
                latest_epoch: None,
            },
            any_unopenable,
            create: true,
            creating: false,
        }
    }

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
        let log = open_files(
            &self.dir,
            self.config.clone(),
            self.recovery_point,
            self.create,
        )?;
        self.replay(log, txns)
    }

    /// What was kept for the open, applied to the opened `log`.
    fn replay(&self, mut log: Log, txns: &Arc<TxnShared>) -> Result<Log> {
        if *log.config() != self.config {
            // Changed while a background creation ran with the earlier one.
            log.set_config(self.config.clone());
        }
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

/// `Log::open_with_recovery_point` (which creates the files of a new log).
fn open_files(dir: &Path, config: LogConfig, recovery_point: i64, create: bool) -> Result<Log> {
    #[cfg(test)]
    if create {
        let hook = BEFORE_CREATE.lock().clone();
        if let Some(hook) = hook {
            hook(dir);
        }
    }
    let _ = create;
    Log::open_with_recovery_point(dir, config, now_ms(), recovery_point)
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
                on_disk: AtomicBool::new(!closed.create),
                creation_done: parking_lot::Condvar::new(),
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

    /// Waits, the lock released meanwhile, until no background creation of the log's
    /// files is under way (`create_blocking`).
    pub(super) fn wait_creation(&self, guard: &mut MutexGuard<'_, Slot>) {
        while matches!(&**guard, Slot::Closed(closed) if closed.creating) {
            self.shared.creation_done.wait(guard);
        }
    }

    /// Creates a new log's files (a no-op for a log that exists). Unlike a creation by
    /// the first use (`ensure_open`), the file system work runs without the partition
    /// lock, so memory-only operations (an apply's epoch and config, a reconcile) never
    /// wait for it: a scan over every log would otherwise advance at the pace of the
    /// background creator it follows. Blocking.
    pub fn create_blocking(&self) -> Result<()> {
        if self.is_created() {
            return Ok(());
        }
        self.check_log_dir()?;
        let (dir, config) = {
            let mut guard = self.shared.log.lock();
            match &mut *guard {
                Slot::Closed(closed) if closed.create && !closed.creating => {
                    closed.creating = true;
                    (closed.dir.clone(), closed.config.clone())
                }
                // Being created by another thread, or not a new log: as any use would.
                _ => {
                    drop(guard);
                    return self.with_log_blocking(|_| Ok(()));
                }
            }
        };
        let opened = open_files(&dir, config, 0, true);
        let mut guard = self.shared.log.lock();
        let result = match &mut *guard {
            Slot::Closed(closed) => {
                closed.creating = false;
                opened.and_then(|log| closed.replay(log, &self.shared.txns))
            }
            // Unreachable: nothing else replaces the slot during the creation.
            _ => Err(StorageError::LogDeleted { dir: dir.clone() }),
        };
        let result = match result {
            Ok(log) => {
                tracing::debug!(topic = %self.shared.topic, partition = self.shared.partition, dir = %dir.display(), "log created");
                self.shared.on_disk.store(true, Ordering::Release);
                self.publish(super::Snapshot::of(&log));
                *guard = Slot::Open(Box::new(log));
                Ok(())
            }
            // The slot stays a log to create: tried once more as a first use would, which
            // takes the partition offline if it fails for good (`ensure_open`).
            Err(e) => Err(e),
        };
        drop(guard);
        self.shared.creation_done.notify_all();
        match result {
            Err(_) => self.with_log_blocking(|_| Ok(())),
            ok => ok,
        }
    }

    /// The open log in the slot, opening it first if it is not yet (file I/O: blocking
    /// threads only, under the partition lock).
    pub(super) fn ensure_open<'a>(
        &self,
        guard: &'a mut MutexGuard<'_, Slot>,
    ) -> Result<&'a mut Log> {
        self.wait_creation(guard);
        let slot: &'a mut Slot = guard;
        if let Slot::Closed(closed) = slot {
            match closed.open(&self.shared.txns) {
                Ok(log) => {
                    if closed.create {
                        tracing::debug!(topic = %self.shared.topic, partition = self.shared.partition, dir = %closed.dir.display(), "log created");
                        self.shared.on_disk.store(true, Ordering::Release);
                    }
                    *slot = Slot::Open(Box::new(log));
                }
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
        slot: &mut MutexGuard<'_, Slot>,
        closed: impl FnOnce(&mut ClosedLog) -> Result<R>,
        open: impl FnOnce(&mut Log) -> Result<R>,
    ) -> Result<R> {
        if let Slot::Closed(log) = &mut **slot {
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
    /// opened yet keeps the checkpointed one without being opened, and one not created
    /// yet has none (`None`). Blocking.
    pub(crate) fn checkpoint_recovery_point_blocking(&self) -> Result<Option<i64>> {
        if let Slot::Closed(closed) = &*self.shared.log.lock() {
            return Ok((!closed.create).then_some(closed.recovery_point));
        }
        self.with_log_blocking(Log::checkpoint_recovery_point)
            .map(Some)
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
        self.wait_creation(&mut guard);
        let taken = std::mem::replace(&mut *guard, Slot::Deleted);
        match taken {
            Slot::Deleted | Slot::Unopenable(_) => Ok(None),
            // Nothing on disk: the next start registers it again.
            Slot::Closed(closed) if closed.create => Ok(None),
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
