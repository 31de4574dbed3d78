//! Behaviour of `Log` and `LogHandle` through the public API.

mod common;

use brook_storage::batch::{validate_batch, BatchError};
use brook_storage::testing::{encode_batch, TestBatch};
use brook_storage::{
    Log, LogConfig, LogManager, MinOneBatch, StorageError, TimestampOffset, TimestampType,
};
use bytes::BytesMut;
use common::{batch, headers, small_config};

#[test]
fn appends_get_consecutive_offsets_and_the_leader_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let mut two = batch(10, 2, 5);
    two.extend_from_slice(&batch(11, 3, 5));
    let info = log.append(&mut two, 7, 0).expect("append");
    assert_eq!(
        (info.base_offset, info.last_offset, info.duplicate),
        (0, 4, false)
    );
    assert_eq!(info.log_append_time, None);
    let info = log.append(&mut batch(12, 1, 5), 7, 0).expect("append");
    assert_eq!((info.base_offset, info.last_offset), (5, 5));
    let read = log
        .read(0, usize::MAX, i64::MAX, MinOneBatch::No)
        .expect("read");
    assert_eq!(headers(&read.records), vec![(0, 1), (2, 4), (5, 5)]);
    let first = validate_batch(&read.records).expect("crc still valid after stamping");
    assert_eq!(first.partition_leader_epoch, 7);
    assert_eq!((read.log_start_offset, read.log_end_offset), (0, 6));
}

#[test]
fn an_invalid_batch_anywhere_rejects_the_whole_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let mut records = batch(10, 2, 5);
    let mut bad = batch(10, 2, 5);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    records.extend_from_slice(&bad);
    let err = log.append(&mut records, 0, 0).err();
    assert!(matches!(
        err,
        Some(StorageError::CorruptBatch {
            batch_index: 1,
            reason: BatchError::CrcMismatch { .. }
        })
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert!(log
        .read(0, usize::MAX, i64::MAX, MinOneBatch::Yes)
        .expect("read")
        .records
        .is_empty());
    assert!(matches!(
        log.append(&mut [], 0, 0),
        Err(StorageError::EmptyAppend)
    ));
}

#[test]
fn batches_over_max_message_bytes_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        max_message_bytes: 100,
        ..small_config()
    };
    let mut log = Log::open(dir.path(), config, 0).expect("open");
    let mut big = batch(1, 1, 200);
    let size = big.len() as u64;
    assert!(matches!(
        log.append(&mut big, 0, 0),
        Err(StorageError::RecordTooLarge { size: s, max: 100 }) if s == size
    ));
}

#[test]
fn reads_honour_range_high_watermark_and_max_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let batches: Vec<Vec<u8>> = (0..10)
        .map(|i| {
            let mut b = batch(i, 2, 50);
            log.append(&mut b, 0, 0).expect("append");
            b
        })
        .collect();
    assert!(matches!(
        log.read(21, 100, i64::MAX, MinOneBatch::Yes),
        Err(StorageError::OffsetOutOfRange {
            requested: 21,
            log_start: 0,
            log_end: 20
        })
    ));
    assert!(log
        .read(20, 100, i64::MAX, MinOneBatch::Yes)
        .expect("read at LEO")
        .records
        .is_empty());
    // Starting inside a batch returns that whole batch.
    let read = log
        .read(3, batches[1].len(), i64::MAX, MinOneBatch::No)
        .expect("read");
    assert_eq!(read.records.to_vec(), batches[1]);
    // The high watermark excludes batches reaching it.
    let read = log.read(0, usize::MAX, 6, MinOneBatch::No).expect("read");
    assert_eq!(headers(&read.records), vec![(0, 1), (2, 3), (4, 5)]);
    assert!(log
        .read(6, usize::MAX, 6, MinOneBatch::Yes)
        .expect("read")
        .records
        .is_empty());
    // max_bytes smaller than one batch: nothing, unless min_one_batch.
    assert!(log
        .read(0, 10, i64::MAX, MinOneBatch::No)
        .expect("read")
        .records
        .is_empty());
    assert_eq!(
        log.read(0, 10, i64::MAX, MinOneBatch::Yes)
            .expect("read")
            .records
            .to_vec(),
        batches[0]
    );
    // Reads cross segment boundaries.
    assert!(log.segment_count() > 1);
    let all = log
        .read(0, usize::MAX, i64::MAX, MinOneBatch::No)
        .expect("read");
    assert_eq!(all.records.to_vec(), batches.concat());
}

#[test]
fn timestamp_lookups_find_the_first_batch_reaching_the_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    assert_eq!(log.offset_for_timestamp(0).expect("lookup"), None);
    assert_eq!(log.max_timestamp_offset().expect("lookup"), None);
    for ts in [100, 300, 200, 500, 400] {
        log.append(&mut batch(ts, 2, 60), 0, 0).expect("append");
    }
    // Each batch holds records at ts and ts + 1; answers name the exact record.
    let at = |offset, timestamp| Some(TimestampOffset { offset, timestamp });
    assert_eq!(log.offset_for_timestamp(0).expect("lookup"), at(0, 100));
    assert_eq!(log.offset_for_timestamp(250).expect("lookup"), at(2, 300));
    assert_eq!(log.offset_for_timestamp(301).expect("lookup"), at(3, 301));
    assert_eq!(log.offset_for_timestamp(302).expect("lookup"), at(6, 500));
    assert_eq!(log.offset_for_timestamp(502).expect("lookup"), None);
    assert_eq!(log.max_timestamp_offset().expect("lookup"), at(7, 501));
}

#[test]
fn log_append_time_topics_stamp_the_broker_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..small_config()
    };
    let mut log = Log::open(dir.path(), config, 0).expect("open");
    let info = log.append(&mut batch(5, 2, 5), 0, 777).expect("append");
    assert_eq!(info.log_append_time, Some(777));
    let read = log
        .read(0, usize::MAX, i64::MAX, MinOneBatch::Yes)
        .expect("read");
    let header = validate_batch(&read.records).expect("crc recomputed");
    assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(header.max_timestamp, 777);
}

#[test]
fn idempotent_retries_and_fencing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let b0 = encode_batch(&TestBatch::sized(1, 2, 10).with_producer(3, 0, 0));
    let b1 = encode_batch(&TestBatch::sized(1, 2, 10).with_producer(3, 0, 2));
    log.append(&mut b0.clone(), 0, 0).expect("append");
    log.append(&mut b1.clone(), 0, 0).expect("append");
    let dup = log.append(&mut b0.clone(), 0, 0).expect("retry");
    assert!(dup.duplicate);
    assert_eq!((dup.base_offset, dup.last_offset), (0, 1));
    assert_eq!(log.log_end_offset(), 4);
    let bumped = encode_batch(&TestBatch::sized(1, 1, 10).with_producer(3, 1, 0));
    log.append(&mut bumped.clone(), 0, 0)
        .expect("new epoch from 0");
    let zombie = encode_batch(&TestBatch::sized(1, 1, 10).with_producer(3, 0, 4));
    assert!(matches!(
        log.append(&mut zombie.clone(), 0, 0),
        Err(StorageError::InvalidProducerEpoch { .. })
    ));
    assert_eq!(log.log_end_offset(), 5);
}

#[test]
fn flush_messages_one_is_accepted_and_data_persists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        flush_messages: Some(1),
        ..small_config()
    };
    let mut log = Log::open(dir.path(), config.clone(), 0).expect("open");
    let mut b = batch(1, 1, 10);
    log.append(&mut b, 0, 0).expect("append");
    log.close(0).expect("close");
    let log = Log::open(dir.path(), config, 0).expect("reopen");
    assert_eq!(common::read_all(&log), b);
}

#[tokio::test]
async fn the_handle_appends_reads_and_notifies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = LogManager::open(&[dir.path().to_path_buf()], small_config()).expect("open");
    let log = manager
        .get_or_create("my-topic", 3, small_config())
        .expect("create");
    let mut appends = log.subscribe_appends();
    let info = log
        .append(BytesMut::from(&batch(1, 4, 8)[..]), 0, 0)
        .await
        .expect("append");
    assert_eq!((info.base_offset, info.last_offset), (0, 3));
    assert_eq!(log.log_end_offset(), 4);
    assert!(appends.has_changed().expect("sender alive"));
    assert_eq!(*appends.borrow_and_update(), 4);
    let read = log
        .read(0, 1 << 20, 4, MinOneBatch::Yes)
        .await
        .expect("read");
    assert_eq!(headers(&read.records), vec![(0, 3)]);
    assert_eq!(
        log.max_timestamp_offset()
            .await
            .expect("lookup")
            .map(|t| t.offset),
        Some(3)
    );
    log.flush(0).await.expect("flush");
    manager.shutdown().expect("shutdown");

    let manager = LogManager::open(&[dir.path().to_path_buf()], small_config()).expect("reopen");
    let log = manager.get("my-topic", 3).expect("recovered");
    assert_eq!(log.log_end_offset(), 4);
    assert!(manager.delete_log("my-topic", 3).expect("delete"));
    assert!(matches!(
        log.read(0, 10, 4, MinOneBatch::Yes).await,
        Err(StorageError::LogDeleted { .. })
    ));
    // Only the (empty) high watermark checkpoint remains: its presence marks the
    // directory as written by a replication-aware broker.
    assert_eq!(
        common::files(dir.path()),
        vec![brook_storage::checkpoint::REPLICATION_FILE_NAME.to_string()]
    );
    assert!(manager
        .get_or_create("bad/name", 0, small_config())
        .is_err());
}

#[test]
fn a_partition_in_two_log_dirs_refuses_to_open() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    for dir in [&a, &b] {
        Log::open(&dir.path().join("t-0"), small_config(), 0).expect("create");
    }
    let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
    assert!(matches!(
        LogManager::open(&dirs, small_config()),
        Err(StorageError::DuplicateLog { partition: 0, .. })
    ));
}
