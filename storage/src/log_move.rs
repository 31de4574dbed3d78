//! Moving a partition log to another log directory of this broker (Kafka's
//! AlterReplicaLogDirs and its future replica, `ReplicaAlterLogDirsThread`).
//!
//! Kafka creates a "future" log in the target directory, fills it by fetching from the
//! current log like a follower, and swaps the two under the partition lock once it has
//! caught up. Both directories are on this host, so Brook copies the files instead:
//! 1. without the lock, every file of the partition directory (but `.deleted` ones) is
//!    copied into `<target>/<topic>-<partition>.future` while the log serves, then again
//!    whatever changed meanwhile (a second pass, so the locked one has little to do);
//! 2. under the log's lock (appends wait, planned reads redo): the log is flushed and its
//!    producer state snapshotted as for a clean shutdown; files changed since their copy are
//!    copied again (appended `.log` tails only, when nothing was rewritten in place), files
//!    gone are removed; everything is fsynced and the future directory renamed to
//!    `<target>/<topic>-<partition>` and opened, trusting all of it (its recovery point is
//!    its end); the handle serves it from then on (`LogHandle::replace_log_blocking`);
//! 3. the old directory is deleted as a deleted log's is, and the checkpoints rewritten.
//!
//! A failed copy leaves the log where it was; the error takes the directory it came from
//! offline if it is an I/O error that fails one (`log_dir_failure`). A crash during the copy
//! leaves a `.future` directory the broker does not open (the next move of the partition
//! replaces it); a crash between the rename and the deletion leaves two complete, identical
//! copies, and the broker then refuses to start naming both (`DuplicateLog`).
//! Differences from Kafka: no `replica.alter.log.dirs.io.max.bytes.per.second` throttle; a
//! move cannot be redirected to a third directory while it runs; the future replica is not
//! resumed after a restart.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{io_err, Result, StorageError};
use crate::handle::LogHandle;
use crate::log::Log;
use crate::log_manager::{now_ms, LogManager};
use crate::recovery::sync_dir;

/// The suffix of a partition directory being filled by a move.
const FUTURE_SUFFIX: &str = ".future";

/// A copied file's length and modification time when it was copied.
type Copied = BTreeMap<String, (u64, Option<SystemTime>)>;

impl LogManager {
    /// Moves the log of `topic`-`partition` into `target` (one of `log.dirs`, online),
    /// blocking until it serves from there (see the module docs). Returns false when the
    /// log is already there or already moving.
    pub fn move_log(&self, topic: &str, partition: i32, target: &Path) -> Result<bool> {
        let Some(handle) = self.get(topic, partition) else {
            return Err(StorageError::LogDeleted {
                dir: target.join(format!("{topic}-{partition}")),
            });
        };
        let source = handle.dir();
        if source.parent() == Some(target) {
            return Ok(false);
        }
        let key = (topic.to_string(), partition);
        {
            let mut moves = self.moves.lock();
            if moves.contains_key(&key) {
                return Ok(false);
            }
            moves.insert(key.clone(), target.to_path_buf());
        }
        let future = target.join(format!("{topic}-{partition}{FUTURE_SUFFIX}"));
        let result = move_into(&handle, &source, &future);
        self.moves.lock().remove(&key);
        if let Err(e) = &result {
            let _ = fs::remove_dir_all(&future);
            let failed_in = if error_path(e).is_some_and(|p| p.starts_with(target)) {
                target.to_path_buf()
            } else {
                source.parent().map(Path::to_path_buf).unwrap_or_default()
            };
            self.failures.fail_on(&failed_in, e);
            tracing::error!(topic, partition, from = %source.display(), to = %target.display(), error = %e, "moving the log to another log directory failed; it stays where it was");
            return result.map(|()| false);
        }
        tracing::info!(topic, partition, from = %source.display(), to = %target.display(), "log moved to another log directory");
        if let Err(e) = remove_old(&source) {
            tracing::warn!(topic, partition, dir = %source.display(), error = %e, "the moved log's old directory could not be deleted");
        }
        self.checkpoint_log_start_offsets()?;
        self.checkpoint_high_watermarks()?;
        self.checkpoint_recovery_points()?;
        Ok(true)
    }

    /// The log directory `topic`-`partition` is being moved into, if it is.
    pub fn future_dir(&self, topic: &str, partition: i32) -> Option<PathBuf> {
        self.moves
            .lock()
            .get(&(topic.to_string(), partition))
            .cloned()
    }
}

/// Steps 1 and 2 of the module docs.
fn move_into(handle: &LogHandle, source: &Path, future: &Path) -> Result<()> {
    if future.exists() {
        fs::remove_dir_all(future).map_err(io_err("remove an old future log", future))?;
    }
    fs::create_dir_all(future).map_err(io_err("create future log", future))?;
    let generation = handle.with_log_blocking(|log| Ok(log.rewrite_generation()))?;
    let mut copied = Copied::new();
    for _ in 0..2 {
        copy_changed(source, future, &mut copied, CopyMode::Whole)?;
    }
    handle.replace_log_blocking(|old| {
        let now = now_ms();
        let recovery_point = old.flush_for_shutdown(now)?;
        let mode = if old.rewrite_generation() == generation {
            CopyMode::AppendedTails
        } else {
            CopyMode::Whole
        };
        copy_changed(source, future, &mut copied, mode)?;
        for name in copied.keys() {
            let path = future.join(name);
            fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(io_err("fsync moved file", &path))?;
        }
        sync_dir(future)?;
        let name = source.file_name().ok_or_else(|| StorageError::LogDeleted {
            dir: source.to_path_buf(),
        })?;
        let target = future.parent().unwrap_or(future).to_path_buf();
        let destination = target.join(name);
        fs::rename(future, &destination).map_err(io_err("rename future log", future))?;
        sync_dir(&target)?;
        let mut new =
            Log::open_with_recovery_point(&destination, old.config().clone(), now, recovery_point)?;
        new.restore_log_start_offset(old.log_start_offset());
        new.take_place_of(old);
        Ok(new)
    })
}

/// How a file already copied but changed since is copied again.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CopyMode {
    Whole,
    /// Nothing was rewritten in place since the first copy: a longer `.log` file only had
    /// batches appended, so only its new bytes are copied.
    AppendedTails,
}

/// Copies into `to` every file of `from` not yet in `copied` or changed since (length or
/// modification time), and removes from `to` those no longer in `from`.
fn copy_changed(from: &Path, to: &Path, copied: &mut Copied, mode: CopyMode) -> Result<()> {
    let mut present = Vec::new();
    for entry in fs::read_dir(from).map_err(io_err("list log", from))? {
        let entry = entry.map_err(io_err("list log", from))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.ends_with(".deleted") || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            // Deleted (retention, a roll's cleanup) since it was listed.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err("stat log file", &path)(e)),
        };
        present.push(name.clone());
        let now = (meta.len(), meta.modified().ok());
        let before = copied.get(&name).copied();
        if before == Some(now) {
            continue;
        }
        let dest = to.join(&name);
        let appended = matches!(before, Some((len, _)) if mode == CopyMode::AppendedTails
            && name.ends_with(".log") && now.0 > len);
        let done = if appended {
            copy_tail(&path, &dest, before.map_or(0, |(len, _)| len))
        } else {
            fs::copy(&path, &dest).map(|_| ())
        };
        match done {
            Ok(()) => {
                copied.insert(name, now);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dest.exists() => continue,
            Err(e) => return Err(io_err("copy log file", &dest)(e)),
        }
    }
    let gone: Vec<String> = copied
        .keys()
        .filter(|n| !present.contains(n))
        .cloned()
        .collect();
    for name in gone {
        copied.remove(&name);
        let path = to.join(&name);
        fs::remove_file(&path).map_err(io_err("remove moved file", &path))?;
    }
    Ok(())
}

/// Appends `from`'s bytes past `offset` to `to` (which holds its first `offset` bytes).
fn copy_tail(from: &Path, to: &Path, offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut src = fs::File::open(from)?;
    src.seek(SeekFrom::Start(offset))?;
    let mut dst = fs::OpenOptions::new().write(true).open(to)?;
    dst.set_len(offset)?;
    dst.seek(SeekFrom::Start(offset))?;
    std::io::copy(&mut src, &mut dst)?;
    Ok(())
}

/// Deletes the moved log's old directory as a deleted log's (renamed first, so a crash
/// never leaves a partial copy that looks like a log).
fn remove_old(dir: &Path) -> Result<()> {
    let parent = dir.parent().unwrap_or(dir);
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("log");
    let doomed = parent.join(format!("{name}.{}-delete", now_ms()));
    fs::rename(dir, &doomed).map_err(io_err("rename moved log for deletion", dir))?;
    sync_dir(parent)?;
    fs::remove_dir_all(&doomed).map_err(io_err("delete moved log", &doomed))
}

/// The file an I/O error is about.
fn error_path(e: &StorageError) -> Option<&Path> {
    match e {
        StorageError::Io { path, .. } => Some(path),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::LogConfig;
    use crate::handle::LogHandle;
    use crate::log::MinOneBatch;
    use crate::log_manager::LogManager;
    use crate::testing::{encode_batch, TestBatch};

    fn append(handle: &LogHandle, n: usize) {
        for _ in 0..n {
            let mut batch = encode_batch(&TestBatch::sized(1_000, 3, 100));
            handle
                .with_log_blocking(|log| log.append(&mut batch, 0, 1_000))
                .expect("append");
        }
    }

    fn everything(handle: &LogHandle) -> bytes::Bytes {
        handle
            .with_log_blocking(|log| log.read(0, 1 << 20, i64::MAX, MinOneBatch::Yes))
            .expect("read")
            .records
    }

    #[test]
    fn a_moved_log_serves_the_same_records_from_the_other_directory_and_after_a_restart() {
        let root = tempfile::tempdir().expect("tempdir");
        let dirs: Vec<PathBuf> = vec![root.path().join("a"), root.path().join("b")];
        let config = LogConfig {
            segment_bytes: 2_000,
            ..LogConfig::default()
        };
        let manager = LogManager::open(&dirs, config.clone()).expect("open");
        let handle = manager.get_or_create("t", 0, config.clone()).expect("t-0");
        assert_eq!(handle.dir(), dirs[0].join("t-0"));
        append(&handle, 20);
        let before = everything(&handle);

        assert!(manager.move_log("t", 0, &dirs[1]).expect("moved"));
        assert_eq!(handle.dir(), dirs[1].join("t-0"));
        assert!(!dirs[0].join("t-0").exists() && !dirs[1].join("t-0.future").exists());
        assert_eq!(everything(&handle), before, "the same bytes");
        assert_eq!(handle.log_end_offset(), 60);
        assert!(!manager.move_log("t", 0, &dirs[1]).expect("already there"));
        append(&handle, 1);
        assert_eq!(handle.log_end_offset(), 63);
        let after = everything(&handle);

        manager.shutdown().expect("shutdown");
        let manager = LogManager::open(&dirs, config).expect("reopen");
        let handle = manager.get("t", 0).expect("t-0 reopened");
        assert_eq!(handle.dir(), dirs[1].join("t-0"));
        assert_eq!(everything(&handle), after);
    }
}
