//! Shared helpers for the storage integration tests.
#![allow(dead_code)]

use std::path::Path;

pub mod keyed;

use brook_storage::batch::BatchIter;
use brook_storage::testing::{encode_batch, TestBatch};
use brook_storage::{Log, LogConfig, MinOneBatch};

/// A config with tiny segments and indexes so that tests roll and index often.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1_000,
        index_interval_bytes: 100,
        segment_index_bytes: 64,
        segment_ms: None,
        ..LogConfig::default()
    }
}

/// A batch of `count` records of `len` bytes.
pub fn batch(timestamp: i64, count: usize, len: usize) -> Vec<u8> {
    encode_batch(&TestBatch::sized(timestamp, count, len))
}

/// 20 batches of 2 records over several segments (with `small_config`); returns each
/// batch's bytes.
pub fn filled(log: &mut Log) -> Vec<Vec<u8>> {
    (0..20)
        .map(|i| {
            let mut b = batch(i, 2, 50);
            log.append(&mut b, 0, 0).expect("append");
            b
        })
        .collect()
}

/// Everything readable from the log start, as raw bytes.
pub fn read_all(log: &Log) -> Vec<u8> {
    log.read(
        log.log_start_offset(),
        usize::MAX,
        i64::MAX,
        MinOneBatch::Yes,
    )
    .expect("read whole log")
    .records
    .to_vec()
}

/// Each batch's (base offset, last offset) in a read's bytes.
pub fn headers(bytes: &[u8]) -> Vec<(i64, i64)> {
    BatchIter::new(bytes)
        .map(|r| {
            r.map(|(_, h)| (h.base_offset, h.last_offset()))
                .expect("valid batch")
        })
        .collect()
}

/// Sorted file names of a directory.
pub fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list dir")
        .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    names
}
