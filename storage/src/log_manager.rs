//! `LogManager`: every partition log under one or more log directories (Kafka's
//! `LogManager`). A partition lives in `<log_dir>/<topic>-<partition>`; the name splits
//! at the LAST '-' because topic names may contain '-'.
//!
//! `open` recovers every partition found; new logs go to the directory holding the
//! fewest partitions. Deletion renames the directory to `<name>.<nanos>-delete` first (so
//! a crash mid-delete never resurrects a partial log) and `open` finishes such leftovers.
//! Each directory's `log-start-offset-checkpoint` is applied on open and rewritten by
//! `checkpoint_log_start_offsets` (and after a deletion); likewise its
//! `replication-offset-checkpoint` (high watermarks) and `checkpoint_high_watermarks`,
//! which the broker calls periodically (Kafka: every 5 s) and `shutdown` calls last;
//! and its `recovery-point-offset-checkpoint` (`checkpoint_recovery_points`, called
//! periodically by the broker and by `shutdown` after the final flush), whose offsets let
//! `open` skip scanning what was fsynced.
//! A log that cannot be opened (at start or when created) does not stop the broker: it
//! is logged once and kept in an offline set until the next start (`LogOffline` to every
//! later request; Kafka takes a failed log directory offline the same way), which the
//! broker reports in Metadata. A log directory that fails while running (an I/O error
//! other than a full disk from a write, an fsync or a checkpoint: `log_dir_failure`)
//! takes all its logs offline the same way, gets no new logs, and is skipped by
//! checkpoints. A new log costs no fsync: its directory entries are
//! fsynced by its first flush (`Log::flush_to_end`).
//! A new log is registered first (`get_or_register`: a handle on a log whose files do not
//! exist yet, no I/O) and created by its first open (`handle/lazy.rs`), outside the map
//! lock and under the partition's own lock, so two creators of one partition create it
//! once and a creation never blocks requests for other partitions. A creation cut short
//! by a crash leaves a directory holding a prefix of a new log's files, which `open`
//! recovers as an empty log (`Log::open` creates what is missing).
//! Methods are synchronous and do file I/O: call them at startup or from
//! `spawn_blocking`. The map lock is held only for map operations.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::checkpoint::{self, WhenEmpty, RECOVERY_POINT_FILE_NAME, REPLICATION_FILE_NAME};
use crate::clean_shutdown::{self, SummaryEntry};
pub use crate::config::LogConfig;
use crate::error::{io_err, Result, StorageError};
use crate::handle::{ClosedLog, LogHandle, ShutdownClose};
use crate::log::Log;
use crate::log_dir_failure::LogDirFailures;
use crate::recovery::sync_dir;
use crate::start_state::{DirFiles, DirState};

/// A log and the recovery point to checkpoint for it.
type RecoveryPoint = (LogHandle, i64);

/// The `(log, offset)` pairs of the logs in `log_dir`, as a checkpoint's entries; logs
/// not created yet have no files to describe and are left out.
fn offsets_in<'a>(
    log_dir: &Path,
    pairs: impl Iterator<Item = (&'a LogHandle, i64)>,
) -> checkpoint::Offsets {
    pairs
        .filter(|(h, _)| h.is_created() && h.dir().parent() == Some(log_dir))
        .map(|(h, offset)| ((h.topic().to_string(), h.partition()), offset))
        .collect()
}

/// Threads closing (fsyncing) logs at a clean shutdown.
const SHUTDOWN_FLUSH_THREADS: usize = 8;

/// Suffix of a log directory being deleted.
const DELETE_SUFFIX: &str = "-delete";
/// Kafka's limit on topic name length.
const MAX_TOPIC_LEN: usize = 249;

/// A partition directory found at start, with its checkpointed offsets.
struct Found {
    key: (String, i32),
    path: PathBuf,
    recovery_point: i64,
    log_start: Option<i64>,
    /// `None`: no high watermark checkpoint in its log directory.
    high_watermark: Option<i64>,
    /// Its clean shutdown summary entry: the log opens on first use (`handle/lazy.rs`).
    lazy: Option<SummaryEntry>,
}

/// Threads opening logs at start: the work is mostly small reads and opens of files the
/// page cache holds, so a few more threads than cores keep them all busy.
fn open_threads(logs: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    (cores * 2).min(logs).max(1)
}

/// Opens the logs found on several threads: the open ones, and those that failed (each
/// logged once) with why.
#[allow(clippy::type_complexity)]
fn open_all(
    found: Vec<Found>,
    config: &LogConfig,
    failures: &Arc<LogDirFailures>,
    any_unopenable: &Arc<AtomicBool>,
) -> (
    BTreeMap<(String, i32), LogHandle>,
    BTreeMap<(String, i32), String>,
) {
    let now = now_ms();
    let (lazy, found): (Vec<Found>, Vec<Found>) = found.into_iter().partition(|f| f.lazy.is_some());
    let mut logs = BTreeMap::new();
    for f in lazy {
        let Some(entry) = f.lazy else { continue };
        let closed = ClosedLog {
            dir: f.path,
            config: config.clone(),
            recovery_point: f.recovery_point,
            checkpointed_log_start: f.log_start,
            entry,
            any_unopenable: Arc::clone(any_unopenable),
            create: false,
            creating: false,
        };
        let handle = LogHandle::closed(&f.key.0, f.key.1, closed, Arc::clone(failures));
        if let Some(hw) = f.high_watermark {
            handle.set_high_watermark(hw);
        }
        logs.insert(f.key, handle);
    }
    let workers = open_threads(found.len());
    let queue = Mutex::new(found.into_iter());
    let next = || queue.lock().next();
    let opened: Vec<Vec<(Found, Result<Log>)>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    while let Some(f) = next() {
                        let log = Log::open_with_recovery_point(
                            &f.path,
                            config.clone(),
                            now,
                            f.recovery_point,
                        );
                        done.push((f, log));
                    }
                    done
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_default())
            .collect()
    });
    let mut offline = BTreeMap::new();
    for (f, log) in opened.into_iter().flatten() {
        let (topic, partition) = &f.key;
        let mut log = match log {
            Ok(log) => log,
            Err(e) => {
                tracing::error!(topic = %topic, partition, dir = %f.path.display(), error = %e, "log could not be opened; the partition is offline");
                offline.insert(f.key, e.to_string());
                continue;
            }
        };
        if let Some(start) = f.log_start {
            log.restore_log_start_offset(start);
        }
        let stats = log.load_stats();
        // One line per partition only when the open had work to do: 100,000 quiet
        // partitions after a clean stop would otherwise log 100,000 lines.
        if stats.scanned_segments > 0 && log.log_end_offset() > log.log_start_offset() {
            tracing::info!(topic = %topic, partition, log_end_offset = log.log_end_offset(), recovery_point = f.recovery_point, trusted_segments = stats.trusted_segments, scanned_segments = stats.scanned_segments, "log recovered");
        } else {
            tracing::debug!(topic = %topic, partition, log_end_offset = log.log_end_offset(), trusted_segments = stats.trusted_segments, "log loaded");
        }
        let handle = LogHandle::new(topic, *partition, log, Arc::clone(failures));
        if let Some(hw) = f.high_watermark {
            handle.set_high_watermark(hw);
        }
        logs.insert(f.key, handle);
    }
    (logs, offline)
}

/// All partition logs of this broker.
#[derive(Debug)]
pub struct LogManager {
    log_dirs: Vec<PathBuf>,
    default_config: LogConfig,
    logs: Mutex<BTreeMap<(String, i32), LogHandle>>,
    /// Partitions whose log failed to open, with the error (see the module docs).
    offline: Mutex<BTreeMap<(String, i32), String>>,
    /// Whether `offline` has any entry: the Metadata path asks per partition and must not
    /// take a lock when, as nearly always, none failed.
    any_offline: std::sync::atomic::AtomicBool,
    /// Which log directories failed while running.
    failures: Arc<LogDirFailures>,
    /// Whether a log opened on first use failed to open (`handle/lazy.rs`): it is
    /// offline as one that failed at start.
    any_unopenable: Arc<AtomicBool>,
    /// Serialises checkpoint writers (they share one tmp file name per directory).
    checkpoint_lock: Mutex<()>,
    /// Logs being moved to another directory, with the target (`log_move.rs`).
    moves: Mutex<BTreeMap<(String, i32), PathBuf>>,
}

/// Wall-clock milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Splits `<topic>-<partition>` at the last '-'.
pub fn parse_partition_dir(name: &str) -> Option<(String, i32)> {
    split_partition_dir(name).map(|(topic, partition)| (topic.to_string(), partition))
}

/// [`parse_partition_dir`], borrowing the topic from `name`.
fn split_partition_dir(name: &str) -> Option<(&str, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    let partition: i32 = partition.parse().ok()?;
    (partition >= 0 && validate_topic(topic).is_ok()).then_some((topic, partition))
}

/// Kafka's topic name rule: 1-249 chars of `[a-zA-Z0-9._-]`, not "." or "..".
pub fn validate_topic(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name.len() > MAX_TOPIC_LEN {
        Some("longer than 249 characters")
    } else if name == "." || name == ".." {
        Some("'.' and '..' are not allowed")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        Some("only ASCII alphanumerics, '.', '_' and '-' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(StorageError::InvalidTopicName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

impl LogManager {
    /// Opens every `<topic>-<partition>` directory under `log_dirs` (created if
    /// missing) and recovers it with `default_config`; the broker then applies topic
    /// overrides with `LogHandle::set_config`.
    pub fn open(log_dirs: &[PathBuf], default_config: LogConfig) -> Result<Self> {
        let started = std::time::Instant::now();
        let mut found: Vec<Found> = Vec::new();
        // Whether every directory's checkpoints are as this start's handles would rewrite
        // them (`start_state.rs`).
        let mut checkpoints_current = true;
        for log_dir in log_dirs {
            fs::create_dir_all(log_dir).map_err(io_err("create log dir", log_dir))?;
            // Before anything here is written (the deletions below): see `clean_shutdown`.
            let files = DirFiles::read(log_dir)?;
            let mut state = DirState::build(log_dir, &files);
            let dir_found_from = found.len();
            let mut warned_missing = false;
            for entry in fs::read_dir(log_dir).map_err(io_err("list log dir", log_dir))? {
                let entry = entry.map_err(io_err("list log dir", log_dir))?;
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = entry.file_name();
                let Some(name) = name.to_str() else {
                    continue;
                };
                if name.ends_with(DELETE_SUFFIX) {
                    let path = entry.path();
                    fs::remove_dir_all(&path).map_err(io_err("finish deleting log", &path))?;
                    checkpoints_current = false;
                    continue;
                }
                let Some((topic, partition)) = split_partition_dir(name) else {
                    continue;
                };
                // Missing (a crash before the first checkpoint, or a directory from before
                // recovery points) or malformed (warned): every log starts from recovery
                // point 0, a full scan.
                if !state.has_recovery_points() && !warned_missing {
                    warned_missing = true;
                    tracing::warn!(dir = %log_dir.display(), "no recovery point checkpoint; recovering every log fully");
                }
                let start = state.listed(topic, partition);
                found.push(Found {
                    key: (topic.to_string(), partition),
                    path: entry.path(),
                    recovery_point: start.recovery_point,
                    log_start: start.log_start,
                    high_watermark: start.high_watermark,
                    lazy: start.lazy,
                });
            }
            let finished = state.finish();
            // An entry whose directory is gone: the summary is not this directory's state.
            if !finished.summary_listed {
                found[dir_found_from..]
                    .iter_mut()
                    .for_each(|f| f.lazy = None);
            }
            checkpoints_current &= finished.checkpoints_current;
        }
        // Sorted, a partition in two directories sits next to itself, and the map below is
        // built from sorted keys.
        found.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        if let Some(pair) = found.windows(2).find(|w| w[0].key == w[1].key) {
            return Err(StorageError::DuplicateLog {
                topic: pair[1].key.0.clone(),
                partition: pair[1].key.1,
                first: pair[0].path.clone(),
                second: pair[1].path.clone(),
            });
        }
        let listed = started.elapsed();
        let lazy = found.iter().filter(|f| f.lazy.is_some()).count();
        let failures = LogDirFailures::new(log_dirs);
        let any_unopenable = Arc::default();
        let (logs, offline) = open_all(found, &default_config, &failures, &any_unopenable);
        let opened = started.elapsed();
        let manager = LogManager {
            log_dirs: log_dirs.to_vec(),
            default_config,
            logs: Mutex::new(logs),
            any_offline: (!offline.is_empty()).into(),
            offline: Mutex::new(offline),
            failures,
            any_unopenable,
            checkpoint_lock: Mutex::new(()),
            moves: Mutex::default(),
        };
        if !checkpoints_current {
            // Drops entries of logs that no longer exist, so a re-created topic of the
            // same name never inherits an old log start offset.
            manager.checkpoint_log_start_offsets()?;
            // Written at once, so a crash before the first periodic checkpoint does not
            // make the next start take this directory for a pre-replication one.
            manager.checkpoint_high_watermarks()?;
            // Drops entries of logs that no longer exist (a re-created partition must
            // never trust an old recovery point).
            manager.checkpoint_recovery_points()?;
        }
        tracing::info!(
            logs = manager.logs.lock().len(),
            offline = manager.offline.lock().len(),
            not_opened_until_used = lazy,
            checkpoints_rewritten = !checkpoints_current,
            listed_ms = listed.as_millis() as u64,
            opened_ms = opened.as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "partition logs loaded"
        );
        Ok(manager)
    }

    /// Writes every log directory's `recovery-point-offset-checkpoint` from the logs'
    /// current recovery points, first snapshotting the producer state of each log whose
    /// recovery point moved (`Log::checkpoint_recovery_point`, under its lock). Every
    /// open log is listed; with none the file is removed. No data is fsynced here: a
    /// point moves only when its log flushes or rolls. Blocking.
    pub fn checkpoint_recovery_points(&self) -> Result<()> {
        let handles = self.logs();
        let mut points = Vec::with_capacity(handles.len());
        for handle in &handles {
            match handle.checkpoint_recovery_point_blocking() {
                Ok(Some(point)) => points.push((handle.clone(), point)),
                // Not created yet: nothing on disk to recover.
                Ok(None) => {}
                // Deleted since `logs()`: no longer listed. Or in a failed log directory:
                // that failure was logged once, not once per log and checkpoint.
                Err(StorageError::LogDeleted { .. } | StorageError::LogOffline { .. }) => {}
                // One log's disk error must not cost the others their points: this one
                // is left out, so its next open recovers it fully.
                Err(e) => {
                    tracing::error!(topic = handle.topic(), partition = handle.partition(), error = %e, "recovery point checkpoint of a log failed")
                }
            }
        }
        self.write_recovery_points(&points)
    }

    /// Writes the recovery point checkpoint of every log directory from `points`.
    fn write_recovery_points(&self, points: &[RecoveryPoint]) -> Result<()> {
        let _writer = self.checkpoint_lock.lock();
        for log_dir in &self.log_dirs {
            let offsets = offsets_in(log_dir, points.iter().map(|(h, point)| (h, *point)));
            // With no logs, absent and empty mean the same (nothing to recover).
            self.write_checkpoint(log_dir, |dir| {
                checkpoint::write_named(
                    dir,
                    RECOVERY_POINT_FILE_NAME,
                    &offsets,
                    WhenEmpty::RemoveFile,
                )
            })?;
        }
        Ok(())
    }

    /// Writes every log directory's `replication-offset-checkpoint` from the logs'
    /// current high watermarks (every open log is listed; the file is written even with
    /// none, see `open`). Blocking.
    pub fn checkpoint_high_watermarks(&self) -> Result<()> {
        let _writer = self.checkpoint_lock.lock();
        let handles = self.logs();
        for log_dir in &self.log_dirs {
            let offsets = offsets_in(log_dir, handles.iter().map(|h| (h, h.high_watermark())));
            self.write_checkpoint(log_dir, |dir| {
                checkpoint::write_named(dir, REPLICATION_FILE_NAME, &offsets, WhenEmpty::WriteFile)
            })?;
        }
        Ok(())
    }

    /// Writes every log directory's `log-start-offset-checkpoint` from the logs' current
    /// log start offsets (after retention or DeleteRecords moved one). Blocking.
    pub fn checkpoint_log_start_offsets(&self) -> Result<()> {
        let _writer = self.checkpoint_lock.lock();
        let handles = self.logs();
        for log_dir in &self.log_dirs {
            let started = handles.iter().filter(|h| h.log_start_offset() > 0);
            let offsets = offsets_in(log_dir, started.map(|h| (h, h.log_start_offset())));
            self.write_checkpoint(log_dir, |dir| checkpoint::write(dir, &offsets))?;
        }
        Ok(())
    }

    /// Runs one checkpoint write of `log_dir`, unless the directory failed. An I/O error
    /// that fails the directory takes it offline and is not returned: the other
    /// directories' checkpoints go on (Kafka: `LogDirFailureChannel.maybeAddOfflineLogDir`).
    fn write_checkpoint(
        &self,
        log_dir: &Path,
        write: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<()> {
        if self.failures.failure(log_dir).is_some() {
            return Ok(());
        }
        match write(log_dir) {
            Err(e) if self.failures.fail_on(log_dir, &e) => Ok(()),
            other => other,
        }
    }

    /// The failure state of the log directories (which failed, a watch on new failures).
    pub fn log_dir_failures(&self) -> &Arc<LogDirFailures> {
        &self.failures
    }

    pub fn default_config(&self) -> &LogConfig {
        &self.default_config
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<LogHandle> {
        self.logs
            .lock()
            .get(&(topic.to_string(), partition))
            .cloned()
    }

    /// Whether the partition's log failed to open or its directory failed (see the
    /// module docs). No lock while nothing failed.
    pub fn is_offline(&self, topic: &str, partition: i32) -> bool {
        self.in_failed_dir(topic, partition)
            || self.offline_error(topic, partition).is_some()
            || (self
                .any_unopenable
                .load(std::sync::atomic::Ordering::Acquire)
                && self
                    .get(topic, partition)
                    .is_some_and(|h| h.unopenable_reason().is_some()))
    }

    /// The partitions whose log failed to open or whose directory failed, with why.
    pub fn offline_logs(&self) -> Vec<((String, i32), String)> {
        let unopenable = self
            .any_unopenable
            .load(std::sync::atomic::Ordering::Acquire);
        if !self.failures.any_failed()
            && !self.any_offline.load(std::sync::atomic::Ordering::Acquire)
            && !unopenable
        {
            return Vec::new();
        }
        let mut offline: Vec<_> = self
            .logs()
            .iter()
            .filter_map(|h| {
                let reason = self.failures.failure(h.dir().parent()?)?;
                Some(((h.topic().to_string(), h.partition()), reason.to_string()))
            })
            .collect();
        if unopenable {
            offline.extend(self.logs().iter().filter_map(|h| {
                let reason = h.unopenable_reason()?;
                Some(((h.topic().to_string(), h.partition()), reason))
            }));
        }
        if self.any_offline.load(std::sync::atomic::Ordering::Acquire) {
            offline.extend(
                self.offline
                    .lock()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        offline
    }

    /// Whether the partition's log is in a directory that failed. Takes the map lock
    /// when some directory failed: never call it with the lock held.
    fn in_failed_dir(&self, topic: &str, partition: i32) -> bool {
        self.failures.any_failed()
            && self
                .get(topic, partition)
                .is_some_and(|h| h.log_dir_failed())
    }

    /// The error of a partition whose log failed to open (not of a failed directory's:
    /// its handle answers that). Called with the map lock held by `get_or_register`.
    fn offline_error(&self, topic: &str, partition: i32) -> Option<StorageError> {
        if !self.any_offline.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        let offline = self.offline.lock();
        let reason = offline.get(&(topic.to_string(), partition))?;
        Some(StorageError::LogOffline {
            topic: topic.to_string(),
            partition,
            reason: reason.clone(),
        })
    }

    /// Every open log.
    pub fn logs(&self) -> Vec<LogHandle> {
        self.logs.lock().values().cloned().collect()
    }

    /// Returns the existing log (its config unchanged) or creates it with `config`.
    /// The file system work runs outside the map lock (see the module docs).
    pub fn get_or_create(
        &self,
        topic: &str,
        partition: i32,
        config: LogConfig,
    ) -> Result<LogHandle> {
        let handle = self.get_or_register(topic, partition, config)?;
        handle.create_blocking().inspect_err(|e| {
            tracing::error!(topic, partition, dir = %handle.dir().display(), error = %e, "log could not be created");
        })?;
        Ok(handle)
    }

    /// Returns the existing log (its config unchanged) or a handle on a new one with
    /// `config`, whose files its first open creates (`LogHandle::create_blocking`, or any
    /// operation that needs them). No I/O; the map lock is held for the lookup and insert.
    pub fn get_or_register(
        &self,
        topic: &str,
        partition: i32,
        config: LogConfig,
    ) -> Result<LogHandle> {
        validate_topic(topic)?;
        if partition < 0 {
            return Err(StorageError::InvalidTopicName {
                name: format!("{topic}-{partition}"),
                reason: "negative partition",
            });
        }
        let mut logs = self.logs.lock();
        if let Some(handle) = logs.get(&(topic.to_string(), partition)) {
            return Ok(handle.clone());
        }
        if let Some(offline) = self.offline_error(topic, partition) {
            return Err(offline);
        }
        let Some(log_dir) = self.least_loaded_dir(&logs) else {
            return Err(StorageError::LogOffline {
                topic: topic.to_string(),
                partition,
                reason: "every log directory has failed".to_string(),
            });
        };
        let dir = log_dir.join(format!("{topic}-{partition}"));
        let closed = ClosedLog::to_create(dir, config, Arc::clone(&self.any_unopenable));
        let handle = LogHandle::closed(topic, partition, closed, Arc::clone(&self.failures));
        logs.insert((topic.to_string(), partition), handle.clone());
        Ok(handle)
    }

    /// Deletes a log and its files; returns whether it existed. Handles still held
    /// elsewhere fail with `LogDeleted` afterwards.
    pub fn delete_log(&self, topic: &str, partition: i32) -> Result<bool> {
        self.delete_logs([(topic, partition)])
            .map(|deleted| deleted > 0)
    }

    /// Deletes logs and their files, as `delete_log` does each, and returns how many
    /// existed. The renames are fsynced once per log directory and the checkpoints
    /// rewritten once for all: deleting a topic of N partitions one by one rewrote the three
    /// checkpoint files (a line per partition of the broker, each file fsynced) N times, 22 ms
    /// a partition at 20,000 partitions. Every victim is tried; the first failure is
    /// returned after the others are deleted and the checkpoints rewritten.
    pub fn delete_logs<'a>(
        &self,
        victims: impl IntoIterator<Item = (&'a str, i32)>,
    ) -> Result<usize> {
        let mut first_error = None;
        let mut doomed = Vec::new();
        let mut deleted = 0;
        for (topic, partition) in victims {
            match self.unlink_log(topic, partition) {
                Ok(Unlinked::Absent) => {}
                Ok(Unlinked::NoFiles) => deleted += 1,
                Ok(Unlinked::Renamed(dir)) => {
                    deleted += 1;
                    doomed.push((topic, partition, dir));
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if doomed.is_empty() {
            return first_error.map_or(Ok(deleted), Err);
        }
        let mut parents: Vec<PathBuf> = doomed
            .iter()
            .filter_map(|(_, _, dir)| dir.parent().map(Path::to_path_buf))
            .collect();
        parents.sort();
        parents.dedup();
        let removed = parents
            .iter()
            .try_for_each(|parent| sync_dir(parent))
            .and_then(|()| {
                doomed.iter().try_for_each(|(topic, partition, dir)| {
                    fs::remove_dir_all(dir).map_err(io_err("delete log dir", dir))?;
                    tracing::info!(topic, partition, "log deleted");
                    Ok(())
                })
            })
            .and_then(|()| self.checkpoint_log_start_offsets())
            // A re-created partition of the same name must not inherit the old high
            // watermark, nor the old recovery point.
            .and_then(|()| self.checkpoint_high_watermarks())
            .and_then(|()| self.checkpoint_recovery_points());
        match (first_error, removed) {
            (Some(e), _) | (None, Err(e)) => Err(e),
            (None, Ok(())) => Ok(deleted),
        }
    }

    /// Takes a log out of the map and renames its directory for deletion (not fsynced).
    fn unlink_log(&self, topic: &str, partition: i32) -> Result<Unlinked> {
        // A deleted (or re-created) partition starts afresh, even if its log was offline.
        if self.any_offline.load(std::sync::atomic::Ordering::Acquire) {
            self.offline.lock().remove(&(topic.to_string(), partition));
        }
        let Some(handle) = self.logs.lock().remove(&(topic.to_string(), partition)) else {
            return Ok(Unlinked::Absent);
        };
        // Open or not, its files are closed once the slot is dropped.
        match handle.take_blocking() {
            crate::handle::Slot::Deleted => return Ok(Unlinked::Absent),
            // Never created: no files, and in no checkpoint.
            crate::handle::Slot::Closed(closed) if closed.create => {
                tracing::debug!(topic, partition, "log deleted before it was created");
                return Ok(Unlinked::NoFiles);
            }
            _ => {}
        }
        let dir = handle.dir().to_path_buf();
        let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let doomed = parent.join(format!("{topic}-{partition}.{}{DELETE_SUFFIX}", now_ms()));
        fs::rename(&dir, &doomed).map_err(io_err("rename log for deletion", &dir))?;
        Ok(Unlinked::Renamed(doomed))
    }

    /// Flushes and closes every log (clean shutdown), then writes the recovery points
    /// (each log's end, with a producer snapshot there), so the next start scans nothing,
    /// and last each directory's clean shutdown summary, so the next start opens no log
    /// until it is used. Logs never opened since the start are closed without I/O.
    pub fn shutdown(&self) -> Result<()> {
        self.checkpoint_log_start_offsets()?;
        self.checkpoint_high_watermarks()?;
        let handles: Vec<LogHandle> = std::mem::take(&mut *self.logs.lock())
            .into_values()
            .collect();
        let now = now_ms();
        // fsyncs of different files proceed in parallel on the device, so a few threads
        // close the logs; every log is closed even if another one fails.
        let workers = SHUTDOWN_FLUSH_THREADS.min(handles.len()).max(1);
        let queue = Mutex::new(handles.into_iter());
        let next = || queue.lock().next();
        type Closed = (LogHandle, ShutdownClose);
        let results: Vec<(Vec<Closed>, Vec<StorageError>)> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut closed = Vec::new();
                        let mut failed = Vec::new();
                        while let Some(handle) = next() {
                            match handle.close_for_shutdown(now) {
                                Ok(Some(done)) => closed.push((handle, done)),
                                Ok(None) | Err(StorageError::LogDeleted { .. }) => {}
                                // Not listed: the next open recovers it fully.
                                Err(e) => failed.push(e),
                            }
                        }
                        (closed, failed)
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().unwrap_or_default())
                .collect()
        });
        let (closed, failures): (Vec<_>, Vec<_>) = results.into_iter().unzip();
        let closed: Vec<Closed> = closed.into_iter().flatten().collect();
        let points: Vec<RecoveryPoint> = closed
            .iter()
            .map(|(h, done)| (h.clone(), done.recovery_point))
            .collect();
        // New logs' entries in their log directory, fsynced once per directory before the
        // recovery points claim them (`Log::flush_for_shutdown_parent_deferred`).
        for log_dir in &self.log_dirs {
            let needed = closed.iter().any(|(h, done)| {
                done.parent_sync_needed && h.dir().parent() == Some(log_dir.as_path())
            });
            if needed && self.failures.failure(log_dir).is_none() {
                sync_dir(log_dir)?;
            }
        }
        // Written even if some log failed: the others then restart without a scan.
        let written = self.write_recovery_points(&points);
        let failed = failures.into_iter().flatten().next();
        // Only after a wholly clean close: a failed log's summary entry would be a guess.
        if written.is_ok() && failed.is_none() {
            self.write_summaries(&closed)?;
        }
        failed.map_or(written, Err)
    }

    /// Writes each log directory's clean shutdown summary (`clean_shutdown.rs`) from the
    /// logs closed by `shutdown`.
    fn write_summaries(&self, closed: &[(LogHandle, ShutdownClose)]) -> Result<()> {
        let _writer = self.checkpoint_lock.lock();
        for log_dir in &self.log_dirs {
            let summary: clean_shutdown::Summary = closed
                .iter()
                .filter(|(h, _)| h.dir().parent() == Some(log_dir.as_path()))
                .filter_map(|(h, done)| {
                    Some(((h.topic().to_string(), h.partition()), done.summary?))
                })
                .collect();
            self.write_checkpoint(log_dir, |dir| clean_shutdown::write(dir, &summary))?;
        }
        Ok(())
    }

    /// The online log directory holding the fewest partitions (Kafka's placement rule);
    /// `None` when every directory has failed.
    fn least_loaded_dir(&self, logs: &BTreeMap<(String, i32), LogHandle>) -> Option<PathBuf> {
        let online = |d: &&PathBuf| self.failures.failure(d).is_none();
        // One directory: no count (counting walks every log, which made creating N
        // partitions cost O(N^2)).
        if let [only] = self.log_dirs.as_slice() {
            return Some(only).filter(online).cloned();
        }
        let mut counts: Vec<(usize, &PathBuf)> = self
            .log_dirs
            .iter()
            .filter(online)
            .map(|d| (0, d))
            .collect();
        for handle in logs.values() {
            let dir = handle.dir();
            let parent = dir.parent();
            if let Some(c) = counts.iter_mut().find(|(_, d)| Some(d.as_path()) == parent) {
                c.0 += 1;
            }
        }
        counts
            .into_iter()
            .min_by_key(|(count, _)| *count)
            .map(|(_, d)| d.clone())
    }
}

#[path = "log_move.rs"]
mod log_move;

/// What taking one log out for deletion found.
enum Unlinked {
    /// No such log (or deleted meanwhile).
    Absent,
    /// A log whose files were never created.
    NoFiles,
    /// Its directory, renamed for deletion.
    Renamed(PathBuf),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dirs_split_at_the_last_dash() {
        assert_eq!(
            parse_partition_dir("my-topic-12"),
            Some(("my-topic".to_string(), 12))
        );
        assert_eq!(parse_partition_dir("t-0"), Some(("t".to_string(), 0)));
        assert_eq!(parse_partition_dir("t-x"), None);
        assert_eq!(parse_partition_dir("t-0.123-delete"), None);
        assert_eq!(parse_partition_dir("-3"), None);
    }

    #[test]
    fn a_log_that_cannot_be_opened_is_offline_and_the_others_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dirs = vec![dir.path().to_path_buf()];
        let manager = LogManager::open(&dirs, LogConfig::default()).expect("open");
        manager
            .get_or_create("t", 0, LogConfig::default())
            .expect("create t-0");
        manager
            .get_or_create("t", 1, LogConfig::default())
            .expect("create t-1");
        manager.shutdown().expect("shutdown");
        let segment = dir
            .path()
            .join("t-1")
            .join(crate::segment::file_name(0, "log"));
        fs::remove_file(&segment).expect("remove");
        fs::create_dir(&segment).expect("a directory where the segment was");
        assert!(dir
            .path()
            .join(crate::clean_shutdown::MARKER_FILE_NAME)
            .exists());

        // After a clean shutdown the log is opened on first use, and found broken then.
        let manager = LogManager::open(&dirs, LogConfig::default()).expect("opens");
        assert!(!manager.is_offline("t", 1) && manager.offline_logs().is_empty());
        let t1 = manager.get("t", 1).expect("a handle until used");
        assert!(matches!(
            t1.with_log_blocking(|log| Ok(log.log_end_offset())),
            Err(StorageError::LogOffline { partition: 1, .. })
        ));
        assert!(manager.is_offline("t", 1) && !manager.is_offline("t", 0));
        assert_eq!(manager.offline_logs().len(), 1);
        assert!(manager.log_dir_failures().failure(dir.path()).is_none());
        drop(manager);

        // The start consumed the marker, so with no shutdown since (a crash) the next
        // start opens every log and finds this one broken at once.
        let manager = LogManager::open(&dirs, LogConfig::default()).expect("still opens");
        assert!(manager.get("t", 0).is_some());
        assert!(manager.is_offline("t", 1) && !manager.is_offline("t", 0));
        assert!(matches!(
            manager.get_or_create("t", 1, LogConfig::default()),
            Err(StorageError::LogOffline { partition: 1, .. })
        ));
        assert_eq!(manager.offline_logs().len(), 1);
        // Deleting the partition forgets it: a re-created one starts afresh.
        manager.delete_log("t", 1).expect("delete");
        assert!(!manager.is_offline("t", 1));
    }

    fn append_one(log: &LogHandle) -> i64 {
        let mut batch = bytes::BytesMut::from(
            &crate::testing::encode_batch(&crate::testing::TestBatch::sized(0, 1, 10))[..],
        );
        log.with_log_blocking(|log| log.append(&mut batch, 0, now_ms()))
            .expect("append")
            .base_offset
    }

    #[test]
    fn concurrent_creators_of_one_partition_get_one_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manager =
            LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).expect("open");
        let start = std::sync::Barrier::new(8);
        let handles: Vec<LogHandle> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        manager
                            .get_or_create("t", 0, LogConfig::default())
                            .expect("create")
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("join"))
                .collect()
        });
        assert!(handles
            .iter()
            .all(|h| h.same_log(&handles[0]) && h.is_created()));
        assert_eq!(manager.logs().len(), 1);
        assert_eq!(append_one(&handles[3]), 0);
        assert_eq!(append_one(&handles[5]), 1);
        assert_eq!(
            handles[0].log_end_offset(),
            2,
            "one log behind every handle"
        );
    }

    #[test]
    fn a_slow_creation_blocks_no_other_partition_and_its_racers_get_its_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manager =
            LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).expect("open");
        // The creation of `slow-0` waits in the hook until the test lets it go.
        let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let entered_tx = Mutex::new(entered_tx);
        let go_rx = Mutex::new(go_rx);
        *crate::handle::BEFORE_CREATE.lock() = Some(Arc::new(move |dir: &Path| {
            if dir.ends_with("slow-0") {
                let _ = entered_tx.lock().send(());
                let _ = go_rx.lock().recv();
            }
        }));
        std::thread::scope(|scope| {
            let slow = scope.spawn(|| manager.get_or_create("slow", 0, LogConfig::default()));
            entered.recv().expect("the slow creation started");
            let racer = scope.spawn(|| manager.get_or_create("slow", 0, LogConfig::default()));
            // Meanwhile the map serves: another partition is created, listed, looked up.
            let other = manager
                .get_or_create("other", 0, LogConfig::default())
                .expect("create another partition");
            assert_eq!(append_one(&other), 0);
            assert!(manager.get("other", 0).is_some());
            assert_eq!(manager.logs().len(), 2);
            let pending = manager.get("slow", 0).expect("registered");
            assert!(!pending.is_created() && !racer.is_finished());
            // Memory-only operations on the log being created do not wait for it, and
            // the created log has them.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime");
            runtime
                .block_on(pending.assign_epoch_start(7))
                .expect("epoch");
            let compact = LogConfig {
                cleanup_compact: true,
                ..LogConfig::default()
            };
            runtime
                .block_on(pending.set_config(compact.clone()))
                .expect("config");
            manager.checkpoint_recovery_points().expect("checkpoint");
            manager.checkpoint_high_watermarks().expect("checkpoint");
            go.send(()).expect("release");
            let slow = slow.join().expect("join").expect("created");
            let racer = racer.join().expect("join").expect("created");
            assert!(slow.same_log(&racer) && slow.same_log(&pending) && slow.is_created());
            let (epoch, config) = slow
                .with_log_blocking(|log| Ok((log.latest_epoch(), log.config().clone())))
                .expect("open");
            assert_eq!((epoch, config), (Some(7), compact));
        });
        *crate::handle::BEFORE_CREATE.lock() = None;
    }

    #[test]
    fn a_log_not_created_yet_is_in_no_checkpoint_and_a_clean_stop_forgets_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dirs = vec![dir.path().to_path_buf()];
        let manager = LogManager::open(&dirs, LogConfig::default()).expect("open");
        let created = manager
            .get_or_create("t", 0, LogConfig::default())
            .expect("create");
        append_one(&created);
        let pending = manager
            .get_or_register("t", 1, LogConfig::default())
            .expect("register");
        assert!(!pending.is_created() && !dir.path().join("t-1").exists());
        manager.checkpoint_recovery_points().expect("checkpoint");
        manager.checkpoint_high_watermarks().expect("checkpoint");
        let listed = fs::read_to_string(dir.path().join(REPLICATION_FILE_NAME)).expect("read");
        assert!(
            listed.contains("t 0 ") && !listed.contains("t 1 "),
            "{listed}"
        );
        manager.shutdown().expect("shutdown");
        assert!(!dir.path().join("t-1").exists());

        // The clean start opens nothing eagerly and knows only the created log.
        let manager = LogManager::open(&dirs, LogConfig::default()).expect("reopen");
        assert_eq!(manager.logs().len(), 1);
        assert!(!manager.get("t", 0).expect("t-0").is_open());
        // Registered again, and created on first use.
        let again = manager
            .get_or_register("t", 1, LogConfig::default())
            .expect("register");
        assert_eq!(append_one(&again), 0);
        assert!(again.is_created() && dir.path().join("t-1").is_dir());
        // Deleting a log never created touches no file.
        let never = manager
            .get_or_register("t", 2, LogConfig::default())
            .expect("register");
        assert!(manager.delete_log("t", 2).expect("delete"));
        assert!(matches!(
            never.create_blocking(),
            Err(StorageError::LogDeleted { .. })
        ));
        assert!(!dir.path().join("t-2").exists());
    }

    #[test]
    fn deleting_logs_together_removes_each_and_rewrites_the_checkpoints_once_for_all() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manager =
            LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).expect("open");
        for p in 0..4 {
            let log = manager
                .get_or_create("t", p, LogConfig::default())
                .expect("create");
            append_one(&log);
            log.set_high_watermark(1);
        }
        let kept = manager
            .get_or_create("u", 0, LogConfig::default())
            .expect("create");
        append_one(&kept);
        manager
            .get_or_register("t", 9, LogConfig::default())
            .expect("register");
        manager.checkpoint_high_watermarks().expect("checkpoint");
        let listed = fs::read_to_string(dir.path().join(REPLICATION_FILE_NAME)).expect("read");
        assert!(listed.contains("t 3 1"), "{listed}");

        // Three with files, one never created, one absent.
        let victims = [("t", 1), ("t", 3), ("t", 0), ("t", 9), ("t", 7)];
        assert_eq!(manager.delete_logs(victims).expect("delete"), 4);
        for p in [0, 1, 3, 9] {
            assert!(manager.get("t", p).is_none() && !dir.path().join(format!("t-{p}")).exists());
        }
        assert!(dir.path().join("t-2").is_dir() && dir.path().join("u-0").is_dir());
        let left: Vec<String> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(DELETE_SUFFIX))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        for file in [REPLICATION_FILE_NAME, RECOVERY_POINT_FILE_NAME] {
            let listed = fs::read_to_string(dir.path().join(file)).expect("read");
            assert!(
                !listed.contains("t 0 ") && !listed.contains("t 3 "),
                "{file}: {listed}"
            );
            assert!(
                listed.contains("t 2 ") && listed.contains("u 0 "),
                "{file}: {listed}"
            );
        }
        // A partition created again under the name starts afresh.
        let again = manager
            .get_or_create("t", 3, LogConfig::default())
            .expect("create");
        assert_eq!((again.high_watermark(), append_one(&again)), (0, 0));
        assert_eq!(manager.delete_logs([("t", 5)]).expect("none"), 0);
    }

    #[test]
    fn a_partially_created_log_opens_as_an_empty_log() {
        let model = tempfile::tempdir().expect("tempdir");
        let manager =
            LogManager::open(&[model.path().to_path_buf()], LogConfig::default()).expect("open");
        manager
            .get_or_create("t", 0, LogConfig::default())
            .expect("create");
        drop(manager);
        let mut files: Vec<PathBuf> = fs::read_dir(model.path().join("t-0"))
            .expect("list")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty());
        // A crash during a creation leaves the directory with any subset of its files,
        // each possibly empty (created, nothing written yet).
        let mut cases: Vec<Vec<(PathBuf, bool)>> = vec![Vec::new()];
        for (i, file) in files.iter().enumerate() {
            cases.push(vec![(file.clone(), true)]);
            cases.push(vec![(file.clone(), false)]);
            cases.push(files[..=i].iter().map(|f| (f.clone(), false)).collect());
        }
        for case in cases {
            let dir = tempfile::tempdir().expect("tempdir");
            let partial = dir.path().join("t-0");
            fs::create_dir(&partial).expect("mkdir");
            for (file, copy) in &case {
                let target = partial.join(file.file_name().expect("name"));
                match copy {
                    true => fs::copy(file, &target).map(|_| ()),
                    false => fs::write(&target, b""),
                }
                .expect("write");
            }
            let dirs = vec![dir.path().to_path_buf()];
            let manager = LogManager::open(&dirs, LogConfig::default()).expect("open");
            assert!(manager.offline_logs().is_empty(), "{case:?}");
            let log = manager.get("t", 0).expect("t-0 found");
            assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
            assert_eq!(append_one(&log), 0, "{case:?}");
            manager.shutdown().expect("shutdown");
        }
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic("a.b_c-D9").is_ok());
        assert!(validate_topic("").is_err());
        assert!(validate_topic("..").is_err());
        assert!(validate_topic("a/b").is_err());
        assert!(validate_topic(&"x".repeat(250)).is_err());
    }
}
