//! Retention, DeleteRecords and the log start offset checkpoint through the public API:
//! old segments go whole, their files linger as `.deleted` for `file.delete.delay.ms`,
//! and a restart keeps the log start offset.

mod common;

use brook_storage::{Log, LogConfig, LogManager, MinOneBatch, StorageError};
use common::{batch, files, small_config};

/// Appends `n` batches of ~400 bytes (two per 1 000-byte segment) with timestamps
/// 1_000, 2_000, …; returns the segment count.
fn fill(log: &mut Log, n: i64) -> usize {
    for i in 0..n {
        log.append(&mut batch((i + 1) * 1_000, 4, 80), 0, 0)
            .expect("append");
    }
    log.segment_count()
}

fn config(retention_ms: Option<i64>, retention_bytes: Option<u64>) -> LogConfig {
    LogConfig {
        retention_ms,
        retention_bytes,
        file_delete_delay_ms: 60_000,
        ..small_config()
    }
}

fn deleted_files(dir: &std::path::Path) -> Vec<String> {
    files(dir)
        .into_iter()
        .filter(|f| f.ends_with(".deleted"))
        .collect()
}

#[test]
fn time_retention_deletes_expired_segments_and_moves_the_log_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(Some(10_000), None), 0).expect("open");
    let segments = fill(&mut log, 8);
    assert_eq!(segments, 4);
    // At 14_500 the batches stamped 1_000..4_000 are older than 10 s: segments 1 and 2.
    let outcome = log.enforce_retention(14_500).expect("retention");
    assert_eq!(outcome.segments_deleted, 2);
    assert_eq!(outcome.log_start_offset, 16);
    assert_eq!(log.log_start_offset(), 16);
    assert_eq!(log.segment_count(), 2);
    assert!(matches!(
        log.read(0, 1 << 20, i64::MAX, MinOneBatch::Yes),
        Err(StorageError::OffsetOutOfRange { log_start: 16, .. })
    ));
    let first = log
        .read(16, 1 << 20, i64::MAX, MinOneBatch::Yes)
        .expect("read from the new start");
    assert!(!first.records.is_empty());
    // The files stay renamed until the delay is over, then are unlinked.
    assert_eq!(deleted_files(dir.path()).len(), 6);
    assert_eq!(log.purge_deleted_files(14_500 + 59_999).expect("purge"), 0);
    assert_eq!(log.purge_deleted_files(14_500 + 60_000).expect("purge"), 6);
    assert!(deleted_files(dir.path()).is_empty());
    // The active segment stays even once everything expired.
    let outcome = log.enforce_retention(1_000_000).expect("retention");
    assert_eq!(outcome.segments_deleted, 1);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), 24);
    assert_eq!(log.log_end_offset(), 32);
}

#[test]
fn size_retention_keeps_the_log_near_its_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(None, Some(1_500)), 0).expect("open");
    fill(&mut log, 10);
    let before = log.size_bytes();
    let outcome = log.enforce_retention(0).expect("retention");
    assert!(outcome.segments_deleted >= 1, "{outcome:?}");
    let after = log.size_bytes();
    assert!(after >= 1_500, "kept {after} of {before}");
    // One more segment would have fit under the bound: Kafka keeps at least the bound.
    let oldest = log.segment_stats()[0].size;
    assert!(after - oldest < 1_500);
}

#[test]
fn compact_only_logs_keep_expired_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compact = LogConfig {
        cleanup_delete: false,
        ..config(Some(1), Some(0))
    };
    let mut log = Log::open(dir.path(), compact, 0).expect("open");
    fill(&mut log, 6);
    let outcome = log.enforce_retention(1_000_000).expect("retention");
    assert_eq!(outcome.segments_deleted, 0);
    assert_eq!(log.log_start_offset(), 0);
}

#[test]
fn delete_records_moves_the_start_and_drops_whole_segments_below_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(None, None), 0).expect("open");
    fill(&mut log, 6); // segments at 0, 8, 16
    assert_eq!(log.increment_log_start_offset(10, 0).expect("delete"), 10);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.log_start_offset(), 10);
    // Never backwards; above the log end is out of range.
    assert_eq!(log.increment_log_start_offset(3, 0).expect("delete"), 10);
    assert!(matches!(
        log.increment_log_start_offset(25, 0),
        Err(StorageError::OffsetOutOfRange { requested: 25, .. })
    ));
    assert!(log.read(9, 1 << 20, i64::MAX, MinOneBatch::Yes).is_err());
    // Up to the log end: everything but the active segment goes.
    assert_eq!(log.increment_log_start_offset(24, 0).expect("delete"), 24);
    assert_eq!(log.segment_count(), 1);
}

#[test]
fn a_restart_keeps_the_log_start_offset_and_removes_deleted_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dirs = vec![dir.path().to_path_buf()];
    let manager = LogManager::open(&dirs, config(None, None)).expect("open");
    let handle = manager
        .get_or_create("t", 0, config(None, None))
        .expect("create");
    handle
        .with_log_blocking(|log| {
            fill(log, 6);
            log.increment_log_start_offset(10, 0)
        })
        .expect("delete records");
    manager.checkpoint_log_start_offsets().expect("checkpoint");
    let partition_dir = handle.dir();
    assert_eq!(deleted_files(&partition_dir).len(), 3);
    manager.shutdown().expect("shutdown");
    drop(manager);

    let manager = LogManager::open(&dirs, config(None, None)).expect("reopen");
    let handle = manager.get("t", 0).expect("recovered");
    assert_eq!(handle.log_start_offset(), 10);
    assert_eq!(handle.log_end_offset(), 24);
    assert!(deleted_files(&partition_dir).is_empty());
    let text = std::fs::read_to_string(dir.path().join("log-start-offset-checkpoint"))
        .expect("checkpoint file");
    assert_eq!(text, "0\n1\nt 0 10\n");

    // Deleting the topic forgets its entry, so a re-created one starts at 0.
    manager.delete_log("t", 0).expect("delete");
    assert!(!dir.path().join("log-start-offset-checkpoint").exists());
}

/// Through the handle, retention and DeleteRecords unlink the `.deleted` files that are
/// due after releasing the partition lock: with no delay, this pass's own files; with a
/// delay, the earlier pass's files once it is over.
#[tokio::test]
async fn the_handle_unlinks_due_deleted_files_after_retention_and_delete_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dirs = vec![dir.path().to_path_buf()];
    let no_delay = LogConfig {
        file_delete_delay_ms: 0,
        ..config(Some(10_000), None)
    };
    let manager = LogManager::open(&dirs, no_delay.clone()).expect("open");
    let handle = manager.get_or_create("t", 0, no_delay).expect("create");
    handle
        .with_log_blocking(|log| Ok(fill(log, 8)))
        .expect("fill");
    let partition_dir = handle.dir();
    let outcome = handle.enforce_retention(14_500).await.expect("retention");
    assert_eq!((outcome.segments_deleted, outcome.files_unlinked), (2, 6));
    assert_eq!(handle.log_start_offset(), 16);
    assert!(deleted_files(&partition_dir).is_empty());
    assert_eq!(
        handle
            .increment_log_start_offset(26, 0)
            .await
            .expect("delete records"),
        26
    );
    assert!(deleted_files(&partition_dir).is_empty());
    assert_eq!(
        files(&partition_dir)
            .iter()
            .filter(|f| f.ends_with(".log"))
            .count(),
        1
    );

    // With file.delete.delay.ms: the files wait, and a later pass unlinks them.
    handle
        .set_config(config(Some(10_000), None))
        .await
        .expect("config");
    handle
        .with_log_blocking(|log| Ok(fill(log, 4)))
        .expect("fill more");
    let start = handle.log_start_offset();
    let end = handle.log_end_offset();
    handle
        .increment_log_start_offset(end, 0)
        .await
        .expect("delete records");
    let waiting = deleted_files(&partition_dir).len();
    assert!(waiting > 0 && start < end, "{waiting} files waiting");
    let outcome = handle.enforce_retention(60_000).await.expect("retention");
    assert_eq!(outcome.files_unlinked, waiting);
    assert!(deleted_files(&partition_dir).is_empty());
    manager.shutdown().expect("shutdown");
}
