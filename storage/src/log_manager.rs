//! `LogManager`: every partition log under one or more log directories (Kafka's
//! `LogManager`). A partition lives in `<log_dir>/<topic>-<partition>`; the name splits
//! at the LAST '-' because topic names may contain '-'.
//!
//! `open` recovers every partition found; new logs go to the directory holding the
//! fewest partitions. Deletion renames the directory to `<name>.<nanos>-delete` first (so
//! a crash mid-delete never resurrects a partial log) and `open` finishes such leftovers.
//! Each directory's `log-start-offset-checkpoint` is applied on open and rewritten by
//! `checkpoint_log_start_offsets` (and after a deletion).
//! Methods are synchronous and do file I/O: call them at startup or from
//! `spawn_blocking`. The map lock is held only for map operations and creation.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::checkpoint;
pub use crate::config::LogConfig;
use crate::error::{io_err, Result, StorageError};
use crate::handle::LogHandle;
use crate::log::Log;
use crate::recovery::sync_dir;

/// Threads closing (fsyncing) logs at a clean shutdown.
const SHUTDOWN_FLUSH_THREADS: usize = 8;

/// Suffix of a log directory being deleted.
const DELETE_SUFFIX: &str = "-delete";
/// Kafka's limit on topic name length.
const MAX_TOPIC_LEN: usize = 249;

/// All partition logs of this broker.
#[derive(Debug)]
pub struct LogManager {
    log_dirs: Vec<PathBuf>,
    default_config: LogConfig,
    logs: Mutex<BTreeMap<(String, i32), LogHandle>>,
    /// Serialises checkpoint writers (they share one tmp file name per directory).
    checkpoint_lock: Mutex<()>,
}

/// Wall-clock milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Splits `<topic>-<partition>` at the last '-'.
pub fn parse_partition_dir(name: &str) -> Option<(String, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    let partition: i32 = partition.parse().ok()?;
    (partition >= 0 && validate_topic(topic).is_ok()).then(|| (topic.to_string(), partition))
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
        let mut logs: BTreeMap<(String, i32), LogHandle> = BTreeMap::new();
        let now = now_ms();
        for log_dir in log_dirs {
            fs::create_dir_all(log_dir).map_err(io_err("create log dir", log_dir))?;
            let log_starts = checkpoint::read(log_dir)?;
            for entry in fs::read_dir(log_dir).map_err(io_err("list log dir", log_dir))? {
                let entry = entry.map_err(io_err("list log dir", log_dir))?;
                let path = entry.path();
                if !path.is_dir() {
                    continue;
                }
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                if name.ends_with(DELETE_SUFFIX) {
                    fs::remove_dir_all(&path).map_err(io_err("finish deleting log", &path))?;
                    continue;
                }
                let Some((topic, partition)) = parse_partition_dir(&name) else {
                    continue;
                };
                if let Some(existing) = logs.get(&(topic.clone(), partition)) {
                    return Err(StorageError::DuplicateLog {
                        topic,
                        partition,
                        first: existing.dir().to_path_buf(),
                        second: path,
                    });
                }
                let mut log = Log::open(&path, default_config.clone(), now)?;
                if let Some(start) = log_starts.get(&(topic.clone(), partition)) {
                    log.restore_log_start_offset(*start);
                }
                tracing::info!(topic = %topic, partition, log_end_offset = log.log_end_offset(), "log recovered");
                logs.insert(
                    (topic.clone(), partition),
                    LogHandle::new(&topic, partition, log),
                );
            }
        }
        let manager = LogManager {
            log_dirs: log_dirs.to_vec(),
            default_config,
            logs: Mutex::new(logs),
            checkpoint_lock: Mutex::new(()),
        };
        // Drops entries of logs that no longer exist, so a re-created topic of the same
        // name never inherits an old log start offset.
        manager.checkpoint_log_start_offsets()?;
        Ok(manager)
    }

    /// Writes every log directory's `log-start-offset-checkpoint` from the logs' current
    /// log start offsets (after retention or DeleteRecords moved one). Blocking.
    pub fn checkpoint_log_start_offsets(&self) -> Result<()> {
        let _writer = self.checkpoint_lock.lock();
        let handles = self.logs();
        for log_dir in &self.log_dirs {
            let offsets: checkpoint::Offsets = handles
                .iter()
                .filter(|h| h.dir().parent() == Some(log_dir.as_path()))
                .filter(|h| h.log_start_offset() > 0)
                .map(|h| ((h.topic().to_string(), h.partition()), h.log_start_offset()))
                .collect();
            checkpoint::write(log_dir, &offsets)?;
        }
        Ok(())
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

    /// Every open log.
    pub fn logs(&self) -> Vec<LogHandle> {
        self.logs.lock().values().cloned().collect()
    }

    /// Returns the existing log (its config unchanged) or creates it with `config`.
    pub fn get_or_create(
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
        let log_dir = self.least_loaded_dir(&logs)?;
        let dir = log_dir.join(format!("{topic}-{partition}"));
        let log = Log::open(&dir, config, now_ms())?;
        sync_dir(&log_dir)?;
        tracing::info!(topic, partition, dir = %dir.display(), "log created");
        let handle = LogHandle::new(topic, partition, log);
        logs.insert((topic.to_string(), partition), handle.clone());
        Ok(handle)
    }

    /// Deletes a log and its files; returns whether it existed. Handles still held
    /// elsewhere fail with `LogDeleted` afterwards.
    pub fn delete_log(&self, topic: &str, partition: i32) -> Result<bool> {
        let Some(handle) = self.logs.lock().remove(&(topic.to_string(), partition)) else {
            return Ok(false);
        };
        let Some(log) = handle.take_blocking() else {
            return Ok(false);
        };
        let dir = log.dir().to_path_buf();
        let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let doomed = parent.join(format!("{topic}-{partition}.{}{DELETE_SUFFIX}", now_ms()));
        drop(log);
        fs::rename(&dir, &doomed).map_err(io_err("rename log for deletion", &dir))?;
        sync_dir(&parent)?;
        fs::remove_dir_all(&doomed).map_err(io_err("delete log dir", &doomed))?;
        self.checkpoint_log_start_offsets()?;
        tracing::info!(topic, partition, "log deleted");
        Ok(true)
    }

    /// Flushes and closes every log (clean shutdown).
    pub fn shutdown(&self) -> Result<()> {
        self.checkpoint_log_start_offsets()?;
        let handles: Vec<LogHandle> = std::mem::take(&mut *self.logs.lock())
            .into_values()
            .collect();
        let now = now_ms();
        // fsyncs of different files proceed in parallel on the device, so a few threads
        // close the logs; every log is closed even if another one fails.
        let workers = SHUTDOWN_FLUSH_THREADS.min(handles.len()).max(1);
        let queue = Mutex::new(handles.into_iter());
        let next = || queue.lock().next();
        let failures: Vec<StorageError> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut failed = Vec::new();
                        while let Some(handle) = next() {
                            if let Some(log) = handle.take_blocking() {
                                if let Err(e) = log.close(now) {
                                    failed.push(e);
                                }
                            }
                        }
                        failed
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap_or_default())
                .collect()
        });
        failures.into_iter().next().map_or(Ok(()), Err)
    }

    /// The log directory holding the fewest partitions (Kafka's placement rule).
    fn least_loaded_dir(&self, logs: &BTreeMap<(String, i32), LogHandle>) -> Result<PathBuf> {
        let mut counts: Vec<(usize, &PathBuf)> = self.log_dirs.iter().map(|d| (0, d)).collect();
        for handle in logs.values() {
            let parent = handle.dir().parent();
            if let Some(c) = counts.iter_mut().find(|(_, d)| Some(d.as_path()) == parent) {
                c.0 += 1;
            }
        }
        counts
            .into_iter()
            .min_by_key(|(count, _)| *count)
            .map(|(_, d)| d.clone())
            .ok_or_else(|| StorageError::Io {
                context: "no log directory configured",
                path: PathBuf::new(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })
    }
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
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic("a.b_c-D9").is_ok());
        assert!(validate_topic("").is_err());
        assert!(validate_topic("..").is_err());
        assert!(validate_topic("a/b").is_err());
        assert!(validate_topic(&"x".repeat(250)).is_err());
    }
}
