//! Which log directories have failed (Kafka's `LogDirFailureChannel`).
//!
//! An I/O error from a write, an fsync or a checkpoint of a log directory means the disk
//! under it can no longer be trusted: after a failed fsync the kernel may have dropped
//! the dirty pages and a retried fsync would "succeed" with the data gone. So, as Kafka
//! does, the first such error takes the whole directory offline for the life of the
//! process: every log in it answers `LogOffline` (KAFKA_STORAGE_ERROR) from then on,
//! nothing more is appended or acknowledged from it, and the broker (which watches
//! `subscribe`) reports its partitions offline or stops when no usable directory is left.
//!
//! A full disk (ENOSPC, EDQUOT) is not a failure here: a failed write was never
//! acknowledged and `Segment::append` undoes it, so the log serves again once space is
//! freed (`test_disk_full.py`). Brook does better than Kafka there, which fails the
//! directory on any `IOException`. Nor is running out of file descriptors (EMFILE,
//! ENFILE): that is the process's limit, not the disk's, and an open that failed wrote
//! nothing; the log that could not open a file answers KAFKA_STORAGE_ERROR for that request
//! and the file pool (`brook.log.open.files.max`) makes room (`test_scale_file_limits.py`).
//!
//! Thread-safe; a failure is recorded once (the first reason is kept) and never cleared.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use crate::error::StorageError;

/// ENOSPC and EDQUOT (out of space), EMFILE and ENFILE (out of file descriptors): limits
/// that lift, not a broken disk.
const NOT_A_DISK_FAILURE: [i32; 4] = [28, 122, 24, 23];

/// Whether `error` fails the log directory it came from: an I/O error other than running
/// out of space or out of file descriptors.
pub fn fails_log_dir(error: &StorageError) -> bool {
    match error {
        StorageError::Io { source, .. } => {
            source.kind() != std::io::ErrorKind::StorageFull
                && source
                    .raw_os_error()
                    .is_none_or(|code| !NOT_A_DISK_FAILURE.contains(&code))
        }
        _ => false,
    }
}

#[derive(Debug)]
struct Dir {
    path: PathBuf,
    /// Why it failed; unset while it is online.
    failure: OnceLock<String>,
}

/// The failure state of every log directory of a broker, shared by its `LogManager` and
/// every `LogHandle`.
#[derive(Debug)]
pub struct LogDirFailures {
    dirs: Vec<Dir>,
    /// Whether any directory failed: appends check it without walking `dirs`.
    any: AtomicBool,
    /// How many directories are offline, for the broker to react to.
    offline_count: watch::Sender<usize>,
}

impl LogDirFailures {
    pub fn new(log_dirs: &[PathBuf]) -> Arc<Self> {
        Arc::new(LogDirFailures {
            dirs: log_dirs
                .iter()
                .map(|path| Dir {
                    path: path.clone(),
                    failure: OnceLock::new(),
                })
                .collect(),
            any: AtomicBool::new(false),
            offline_count: watch::channel(0).0,
        })
    }

    /// Takes `log_dir` offline because of `error` if that error fails a directory (see
    /// `fails_log_dir`). Returns whether the directory is now offline. The first failure
    /// of a directory is logged once, at ERROR.
    pub fn fail_on(&self, log_dir: &Path, error: &StorageError) -> bool {
        if !fails_log_dir(error) {
            return false;
        }
        let Some(dir) = self.dirs.iter().find(|d| d.path == log_dir) else {
            return false;
        };
        let reason = error.to_string();
        if dir.failure.set(reason.clone()).is_ok() {
            self.any.store(true, Ordering::Release);
            tracing::error!(dir = %log_dir.display(), error = %reason, "log directory failed: its partitions are offline until the broker restarts");
            self.offline_count.send_replace(self.offline_dirs().len());
        }
        true
    }

    /// Why `log_dir` failed, if it did. No lock, and no walk while none failed.
    pub fn failure(&self, log_dir: &Path) -> Option<&str> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.dirs
            .iter()
            .find(|d| d.path == log_dir)
            .and_then(|d| d.failure.get())
            .map(String::as_str)
    }

    /// Whether any directory has failed. No lock.
    pub fn any_failed(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// The failed directories, with why, in `log.dirs` order.
    pub fn offline_dirs(&self) -> Vec<(PathBuf, String)> {
        self.dirs
            .iter()
            .filter_map(|d| d.failure.get().map(|r| (d.path.clone(), r.clone())))
            .collect()
    }

    /// Whether every directory has failed (Kafka then halts the broker).
    pub fn all_offline(&self) -> bool {
        self.dirs.iter().all(|d| d.failure.get().is_some())
    }

    /// A receiver of the number of failed directories, notified on each new failure.
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.offline_count.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: std::io::ErrorKind) -> StorageError {
        StorageError::Io {
            context: "write",
            path: PathBuf::from("/d/t-0/x.log"),
            source: std::io::Error::from(kind),
        }
    }

    #[test]
    fn an_io_error_fails_its_directory_but_a_full_disk_or_a_file_limit_does_not() {
        let failures = LogDirFailures::new(&[PathBuf::from("/a"), PathBuf::from("/b")]);
        let mut count = failures.subscribe();
        for (context, errno) in [("write", 28), ("open segment", 24), ("open segment", 23)] {
            let limit = StorageError::Io {
                context,
                path: PathBuf::new(),
                source: std::io::Error::from_raw_os_error(errno),
            };
            assert!(!failures.fail_on(Path::new("/a"), &limit), "errno {errno}");
        }
        assert!(!failures.fail_on(Path::new("/a"), &io(std::io::ErrorKind::StorageFull)));
        assert!(!failures.fail_on(Path::new("/a"), &StorageError::EmptyAppend));
        assert_eq!(failures.failure(Path::new("/a")), None);

        let eio = StorageError::Io {
            context: "fsync",
            path: PathBuf::from("/a/t-0/0.log"),
            source: std::io::Error::from_raw_os_error(5),
        };
        assert!(failures.fail_on(Path::new("/a"), &eio));
        // The first reason is kept.
        assert!(failures.fail_on(Path::new("/a"), &io(std::io::ErrorKind::Other)));
        assert!(failures
            .failure(Path::new("/a"))
            .is_some_and(|r| r.contains("fsync")));
        assert_eq!(failures.failure(Path::new("/b")), None);
        assert!(count.has_changed().unwrap_or(false));
        assert_eq!(*count.borrow_and_update(), 1);
        assert!(!failures.all_offline());
        assert!(failures.fail_on(Path::new("/b"), &io(std::io::ErrorKind::Other)));
        assert!(failures.all_offline());
        assert_eq!(failures.offline_dirs().len(), 2);
    }
}

#[cfg(test)]
#[path = "log_dir_failure_tests.rs"]
mod manager_tests;
