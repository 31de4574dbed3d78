//! A failing disk under a running `LogManager` (EIO injected with `write_fault`): the
//! first failed write or fsync takes the whole log directory offline, its logs refuse
//! every later operation (so a failed fsync is never retried as if the data were safe),
//! the other directory keeps serving and gets the new logs, and a full disk is not a
//! failure.

use std::path::PathBuf;

use crate::config::LogConfig;
use crate::error::StorageError;
use crate::handle::LogHandle;
use crate::log_manager::LogManager;
use crate::testing::{encode_batch, TestBatch};
use crate::write_fault::{disk_fails_with, disk_full_after};

const EIO: i32 = 5;

fn append(handle: &LogHandle) -> crate::error::Result<i64> {
    let mut batch = encode_batch(&TestBatch::sized(1_000, 3, 100));
    handle.with_log_blocking(|log| log.append(&mut batch, 0, 1_000).map(|a| a.base_offset))
}

fn assert_offline(result: crate::error::Result<impl std::fmt::Debug>, dir: &std::path::Path) {
    match result {
        Err(StorageError::LogOffline { reason, .. }) => {
            assert!(reason.contains(&dir.display().to_string()), "{reason}")
        }
        other => panic!("expected LogOffline, got {other:?}"),
    }
}

fn two_dirs() -> (tempfile::TempDir, Vec<PathBuf>) {
    let root = tempfile::tempdir().expect("tempdir");
    let dirs = vec![root.path().join("a"), root.path().join("b")];
    (root, dirs)
}

#[test]
fn a_failed_write_takes_its_directory_offline_and_the_other_keeps_serving() {
    let (_root, dirs) = two_dirs();
    let manager = LogManager::open(&dirs, LogConfig::default()).expect("open");
    let in_a = manager
        .get_or_create("t", 0, LogConfig::default())
        .expect("t-0");
    let in_b = manager
        .get_or_create("t", 1, LogConfig::default())
        .expect("t-1");
    assert_eq!(in_a.dir().parent(), Some(dirs[0].as_path()));
    assert_eq!(append(&in_a).expect("append"), 0);

    // A full disk is not a failure: the append fails, the directory stays online.
    disk_full_after(Some(0));
    assert!(matches!(append(&in_a), Err(StorageError::Io { .. })));
    disk_full_after(None);
    assert!(!manager.log_dir_failures().any_failed());

    disk_fails_with(Some(EIO));
    assert!(matches!(append(&in_a), Err(StorageError::Io { .. })));
    disk_fails_with(None);
    // The disk "works" again, but the directory stays offline: nothing more from it.
    assert_offline(append(&in_a), &dirs[0]);
    assert!(in_a.log_dir_failed());
    assert!(manager.is_offline("t", 0) && !manager.is_offline("t", 1));
    assert_eq!(manager.offline_logs().len(), 1);
    assert_eq!(
        manager.log_dir_failures().offline_dirs()[0].0,
        dirs[0],
        "the failed directory is named"
    );
    assert!(!manager.log_dir_failures().all_offline());

    assert_eq!(append(&in_b).expect("the other directory serves"), 0);
    // New logs go to the directory still online; checkpoints skip the failed one.
    let new = manager
        .get_or_create("u", 0, LogConfig::default())
        .expect("u-0");
    assert_eq!(new.dir().parent(), Some(dirs[1].as_path()));
    manager.checkpoint_high_watermarks().expect("checkpoints");
    manager.checkpoint_recovery_points().expect("checkpoints");
}

#[test]
fn a_failed_fsync_is_never_retried_and_the_last_directory_failing_leaves_none() {
    let (_root, dirs) = two_dirs();
    let dirs = &dirs[..1];
    let manager = LogManager::open(dirs, LogConfig::default()).expect("open");
    let log = manager
        .get_or_create("t", 0, LogConfig::default())
        .expect("t-0");
    append(&log).expect("append");
    let failed = manager.log_dir_failures().subscribe();

    disk_fails_with(Some(EIO));
    let flushed = log.with_log_blocking(|log| log.flush(2_000));
    disk_fails_with(None);
    assert!(
        matches!(flushed, Err(StorageError::Io { .. })),
        "{flushed:?}"
    );
    // A second flush would find the disk "healthy" and report success for pages the
    // kernel may have dropped: it is refused instead.
    assert_offline(log.with_log_blocking(|log| log.flush(3_000)), &dirs[0]);
    assert!(failed.has_changed().expect("sender alive"));
    assert!(manager.log_dir_failures().all_offline());
    assert!(matches!(
        manager.get_or_create("t", 1, LogConfig::default()),
        Err(StorageError::LogOffline { .. })
    ));
}
