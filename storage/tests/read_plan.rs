//! Reads planned under the partition lock and run without it (`log/read.rs`): what a
//! concurrent retention pass, truncation or compaction does to a read in flight.

mod common;

use brook_storage::{Log, LogManager, MinOneBatch};
use common::{filled, headers, small_config};

#[test]
fn a_planned_read_spans_segments_in_one_buffer_and_honours_its_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let batches = filled(&mut log);
    assert!(log.segment_count() > 3);
    // From inside batch 3 (offset 7), across every later segment.
    let plan = log.plan_read(7, usize::MAX, i64::MAX).expect("plan");
    let read = plan
        .execute(usize::MAX, MinOneBatch::No)
        .expect("read")
        .expect("no truncation raced it");
    assert_eq!(read.records.to_vec(), batches[3..].concat());
    // A byte limit that ends inside the third batch returns the first two whole.
    let limit = batches[3].len() + batches[4].len() + 10;
    let read = plan
        .execute(limit, MinOneBatch::No)
        .expect("read")
        .expect("fresh");
    assert_eq!(headers(&read.records), vec![(6, 7), (8, 9)]);
    // A limit below one batch: nothing, unless the first batch may exceed it.
    let none = plan
        .execute(10, MinOneBatch::No)
        .expect("read")
        .expect("fresh");
    assert!(none.records.is_empty());
    let one = plan
        .execute(10, MinOneBatch::Yes)
        .expect("read")
        .expect("fresh");
    assert_eq!(one.records.to_vec(), batches[3]);
    // Never more than planned, and never past the offset bound.
    let small = log.plan_read(0, batches[0].len(), i64::MAX).expect("plan");
    let read = small
        .execute(usize::MAX, MinOneBatch::No)
        .expect("read")
        .expect("fresh");
    assert_eq!(read.records.to_vec(), batches[0]);
    let bounded = log.plan_read(0, usize::MAX, 9).expect("plan");
    let read = bounded
        .execute(usize::MAX, MinOneBatch::Yes)
        .expect("read")
        .expect("fresh");
    assert_eq!(headers(&read.records), vec![(0, 1), (2, 3), (4, 5), (6, 7)]);
}

#[test]
fn a_planned_read_still_returns_its_batches_after_retention_deleted_their_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let batches = filled(&mut log);
    let plan = log.plan_read(0, usize::MAX, i64::MAX).expect("plan");
    // DeleteRecords past most of the log: its old segments are renamed `.deleted`, then
    // a retention pass after the delay unlinks them.
    log.increment_log_start_offset(30, 0)
        .expect("delete records");
    log.enforce_retention(i64::MAX / 2).expect("retention");
    assert!(log.log_start_offset() >= 30);
    let read = plan
        .execute(usize::MAX, MinOneBatch::No)
        .expect("the open files are still readable")
        .expect("retention is no truncation");
    assert_eq!(read.records.to_vec(), batches.concat());
}

#[test]
fn a_read_raced_by_a_truncation_is_redone_under_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let batches = filled(&mut log);
    let plan = log.plan_read(30, usize::MAX, i64::MAX).expect("plan");
    log.truncate_to(34).expect("truncate");
    // The active segment was cut in place: the plan knows its bytes may be stale.
    assert!(plan
        .execute(usize::MAX, MinOneBatch::No)
        .expect("read")
        .is_none());
    let again = plan
        .read_locked(&log, usize::MAX, MinOneBatch::No)
        .expect("read under the lock");
    assert_eq!(again.records.to_vec(), batches[15..17].concat());
    // A no-op truncation (at the log end) leaves plans valid.
    let plan = log.plan_read(30, usize::MAX, i64::MAX).expect("plan");
    log.truncate_to(log.log_end_offset()).expect("no-op");
    assert!(plan
        .execute(usize::MAX, MinOneBatch::No)
        .expect("read")
        .is_some());
}

#[tokio::test]
async fn the_handle_falls_back_to_a_locked_read_after_a_truncation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = LogManager::open(&[dir.path().to_path_buf()], small_config()).expect("open");
    let log = manager
        .get_or_create("t", 0, small_config())
        .expect("create");
    let batches = log.with_log_blocking(|l| Ok(filled(l))).expect("fill");
    let planned = log.plan_read(30, usize::MAX, i64::MAX).await.expect("plan");
    log.truncate_to(34).await.expect("truncate");
    let read = tokio::task::spawn_blocking(move || planned.execute(usize::MAX, MinOneBatch::No))
        .await
        .expect("join")
        .expect("read");
    assert_eq!(read.records.to_vec(), batches[15..17].concat());
    assert_eq!(read.log_end_offset, 34);
    manager.shutdown().expect("shutdown");
}
