//! A full disk under an append (ENOSPC from the segment or index write, injected with
//! `write_fault`): the append fails with a `StorageFull` I/O error and leaves the log as
//! it was — log end offset, readable bytes, file lengths — so the next append after space
//! is freed writes in its place, and a reopen (trusted or fully recovered) finds exactly
//! the appends that succeeded.

use std::io::ErrorKind;
use std::path::Path;

use crate::batch::BatchIter;
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::log::{Log, MinOneBatch};
use crate::testing::{encode_batch, TestBatch};
use crate::write_fault::disk_full_after;

fn batch(timestamp: i64) -> Vec<u8> {
    encode_batch(&TestBatch::sized(timestamp, 3, 200))
}

fn config() -> LogConfig {
    LogConfig {
        // Every batch after the first is indexed, so each append writes both indexes.
        index_interval_bytes: 1,
        ..LogConfig::default()
    }
}

fn read_all(log: &Log) -> Vec<u8> {
    log.read(0, usize::MAX, i64::MAX, MinOneBatch::Yes)
        .expect("read")
        .records
        .to_vec()
}

fn offsets(bytes: &[u8]) -> Vec<(i64, i64)> {
    BatchIter::new(bytes)
        .map(|r| {
            r.map(|(_, h)| (h.base_offset, h.last_offset()))
                .expect("valid batch")
        })
        .collect()
}

fn file_len(dir: &Path, extension: &str) -> u64 {
    std::fs::metadata(dir.join(format!("{:020}.{extension}", 0)))
        .expect("segment file")
        .len()
}

fn file_lens(dir: &Path) -> [u64; 3] {
    ["log", "index", "timeindex"].map(|e| file_len(dir, e))
}

fn assert_disk_full(result: crate::error::Result<crate::log::AppendInfo>) {
    match result {
        Err(StorageError::Io { source, .. }) => assert_eq!(source.kind(), ErrorKind::StorageFull),
        other => panic!("expected a StorageFull I/O error, got {other:?}"),
    }
}

/// Appends two batches, then one that hits a full disk after `room` bytes; checks nothing
/// changed, frees the space, appends again and reopens both ways.
fn full_disk_after(room: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    log.append(&mut batch(1), 0, 0).expect("first");
    log.append(&mut batch(2), 0, 0).expect("second");
    let before_bytes = read_all(&log);
    let before_files = file_lens(dir.path());

    disk_full_after(Some(room));
    assert_disk_full(log.append(&mut batch(3), 0, 0));
    disk_full_after(None);

    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(
        read_all(&log),
        before_bytes,
        "nothing of the failed append is served"
    );
    assert_eq!(
        file_lens(dir.path()),
        before_files,
        "the files are back to their length"
    );

    // Space freed: the next append takes the failed one's offsets and position.
    let info = log
        .append(&mut batch(4), 0, 0)
        .expect("after space is freed");
    assert_eq!((info.base_offset, info.last_offset), (6, 8));
    let expected = vec![(0, 2), (3, 5), (6, 8)];
    assert_eq!(offsets(&read_all(&log)), expected);
    let after = read_all(&log);
    log.close(0).expect("close");

    for recovery_point in [9, 0] {
        let reopened =
            Log::open_with_recovery_point(dir.path(), config(), 0, recovery_point).expect("reopen");
        assert_eq!(
            reopened.log_end_offset(),
            9,
            "recovery point {recovery_point}"
        );
        assert_eq!(
            read_all(&reopened),
            after,
            "recovery point {recovery_point}"
        );
        reopened.close(0).expect("close");
    }
}

#[test]
fn a_segment_write_that_finds_the_disk_full_part_way_changes_nothing() {
    full_disk_after(100);
}

#[test]
fn a_segment_write_that_finds_the_disk_full_at_once_changes_nothing() {
    full_disk_after(0);
}

#[test]
fn an_index_write_that_finds_the_disk_full_undoes_the_segment_write_too() {
    // The batch fits; its offset index entry does not.
    full_disk_after(batch(3).len() as u64);
}

#[test]
fn a_time_index_write_that_finds_the_disk_full_undoes_the_offset_index_entry_too() {
    // The batch and its offset index entry (8 bytes) fit; the time index entry does not.
    full_disk_after(batch(3).len() as u64 + 8 + 4);
}

#[test]
fn an_abort_whose_txn_index_write_finds_the_disk_full_stands_and_its_entry_survives_a_restart() {
    use crate::control::ControlType;

    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).expect("open");
    let mut data = encode_batch(&TestBatch::sized(1_000, 3, 30).transactional(7, 0, 0));
    log.append(&mut data, 0, 0).expect("transactional batch");
    let mut abort = encode_batch(&TestBatch::marker(7, 0, ControlType::Abort, 0));

    // The marker fits; its `.txnindex` entry does not. The marker is in the log and applied,
    // so the append stands (failing it would have the coordinator write it again).
    disk_full_after(Some(abort.len() as u64));
    let info = log.append(&mut abort, 0, 0);
    disk_full_after(None);
    assert_eq!(info.expect("the marker is appended").base_offset, 3);
    let aborted = log.aborted_transactions(0, 4);
    assert_eq!(
        aborted
            .iter()
            .map(|a| (a.producer_id, a.first_offset, a.last_offset))
            .collect::<Vec<_>>(),
        vec![(7, 0, 3)],
        "read_committed fetches see the abort while the file lacks it"
    );

    // A clean shutdown (flush, snapshot at the end) writes the entry before the recovery
    // point passes the marker, so a restart that trusts the `.txnindex` below its snapshot
    // still knows the transaction was aborted.
    let recovery_point = log.flush_for_shutdown(0).expect("flush for shutdown");
    assert_eq!(recovery_point, 4);
    drop(log);
    let reopened =
        Log::open_with_recovery_point(dir.path(), LogConfig::default(), 0, recovery_point)
            .expect("reopen");
    assert_eq!(reopened.aborted_transactions(0, 4), aborted);
}
