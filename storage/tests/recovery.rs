//! Crash/restart tests: the log on disk after drops, torn tails, corruption and lost
//! indexes.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use brook_storage::batch::BatchIter;
use brook_storage::segment::file_name;
use brook_storage::{Log, MinOneBatch};
use common::{batch, files, read_all, small_config};

fn write_batches(log: &mut Log, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut b = batch(1_000 + i as i64, 3, 40);
            log.append(&mut b, 5, 0).expect("append");
            b
        })
        .collect()
}

#[test]
fn a_log_dropped_without_flush_reopens_with_every_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let written = write_batches(&mut log, 20);
    assert!(log.segment_count() > 1, "small segments must have rolled");
    drop(log);
    let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    assert_eq!(log.log_end_offset(), 60);
    assert_eq!(read_all(&log), written.concat());
}

#[test]
fn a_corrupt_byte_in_the_tail_truncates_to_the_last_valid_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = brook_storage::LogConfig {
        segment_bytes: 1 << 20,
        ..small_config()
    };
    let mut log = Log::open(dir.path(), config.clone(), 0).expect("open");
    let written = write_batches(&mut log, 5);
    drop(log);
    let path = dir.path().join(file_name(0, "log"));
    let file = OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open log file");
    let fourth_batch_start: usize = written[..3].iter().map(Vec::len).sum();
    file.write_all_at(&[0xAB], (fourth_batch_start + 70) as u64)
        .expect("corrupt a record byte of batch 3");
    drop(file);
    let log = Log::open(dir.path(), config, 0).expect("reopen");
    assert_eq!(log.log_end_offset(), 9);
    assert_eq!(read_all(&log), written[..3].concat());
    let size = std::fs::metadata(&path).expect("stat").len();
    assert_eq!(size as usize, fourth_batch_start);
}

#[test]
fn corruption_in_an_old_segment_drops_every_later_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let written = write_batches(&mut log, 20);
    drop(log);
    let path = dir.path().join(file_name(0, "log"));
    let file = OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open log file");
    file.write_all_at(&[0xFF], written[0].len() as u64 + 16)
        .expect("break the magic of batch 2");
    drop(file);
    let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(read_all(&log), written[0]);
    assert_eq!(
        files(dir.path()),
        vec![
            file_name(0, "index"),
            file_name(0, "log"),
            file_name(0, "timeindex"),
            "leader-epoch-checkpoint".to_string()
        ]
    );
}

#[test]
fn deleted_index_files_are_rebuilt_identically() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    write_batches(&mut log, 20);
    drop(log);
    let index_files: Vec<String> = files(dir.path())
        .into_iter()
        .filter(|f| f.ends_with(".index") || f.ends_with(".timeindex"))
        .collect();
    let before: Vec<Vec<u8>> = index_files
        .iter()
        .map(|f| std::fs::read(dir.path().join(f)).expect("read index"))
        .collect();
    assert!(
        before.iter().any(|b| !b.is_empty()),
        "some index entries were written"
    );
    for f in &index_files {
        std::fs::remove_file(dir.path().join(f)).expect("delete index");
    }
    let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    let after: Vec<Vec<u8>> = index_files
        .iter()
        .map(|f| std::fs::read(dir.path().join(f)).expect("index rebuilt"))
        .collect();
    assert_eq!(after, before);
    // Reads from every offset still find the batch containing it.
    for offset in 0..log.log_end_offset() {
        let read = log
            .read(offset, 1, i64::MAX, MinOneBatch::Yes)
            .expect("read");
        let (_, header) = BatchIter::new(&read.records)
            .next()
            .expect("one batch")
            .expect("valid batch");
        assert!(header.base_offset <= offset && offset <= header.last_offset());
    }
}

#[test]
fn garbage_index_files_are_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let written = write_batches(&mut log, 4);
    drop(log);
    std::fs::write(dir.path().join(file_name(0, "index")), [0xFFu8; 13]).expect("garbage");
    let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    let index = std::fs::read(dir.path().join(file_name(0, "index"))).expect("index");
    assert_eq!(index.len() % 8, 0);
    assert_eq!(
        log.read(4, 1, i64::MAX, MinOneBatch::Yes)
            .expect("read")
            .records
            .to_vec(),
        written[1]
    );
}

#[test]
fn producer_state_is_rebuilt_so_retries_stay_duplicates() {
    use brook_storage::testing::{encode_batch, TestBatch};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let idempotent = encode_batch(&TestBatch::sized(1, 2, 10).with_producer(9, 1, 0));
    let first = log.append(&mut idempotent.clone(), 0, 0).expect("append");
    drop(log);
    let mut log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    let retry = log.append(&mut idempotent.clone(), 0, 0).expect("retry");
    assert!(retry.duplicate);
    assert_eq!(
        (retry.base_offset, retry.last_offset),
        (first.base_offset, first.last_offset)
    );
    assert_eq!(log.log_end_offset(), 2);
    let gap = encode_batch(&TestBatch::sized(1, 1, 10).with_producer(9, 1, 5));
    assert!(matches!(
        log.append(&mut gap.clone(), 0, 0),
        Err(brook_storage::StorageError::OutOfOrderSequence { .. })
    ));
}
