//! Keyed records for the compaction tests: a compacting config with tiny segments, a
//! model of what was appended, and the invariants every clean keeps.

use std::collections::BTreeMap;

use brook_storage::cleaner::{decode_records, DecodedRecord};
use brook_storage::testing::{encode_batch, TestBatch, TestRecord};
use brook_storage::{Log, LogConfig, MinOneBatch};

/// Offset → (key, value) of every record appended.
pub type Model = BTreeMap<i64, (Vec<u8>, Option<Vec<u8>>)>;

/// Compaction only, 400-byte segments, everything cleanable at once.
pub fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        segment_ms: None,
        cleanup_compact: true,
        cleanup_delete: false,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 100,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// Appends one record of key `k<key>` (value `value` + 20 bytes, or a tombstone).
pub fn append(log: &mut Log, model: &mut Model, key: u8, value: Option<u8>, now: i64) {
    let mut batch = TestBatch::values(now, &[]);
    let key = vec![b'k', key];
    let value = value.map(|v| vec![b'v'; 20 + v as usize]);
    batch.records = vec![TestRecord {
        key: Some(key.clone()),
        value: value.clone(),
        timestamp_delta: 0,
    }];
    let info = log
        .append(&mut encode_batch(&batch), 0, now)
        .expect("append");
    model.insert(info.base_offset, (key, value));
}

/// Every record readable from the log start.
pub fn readable(log: &Log) -> Vec<DecodedRecord> {
    let read = log
        .read(
            log.log_start_offset(),
            usize::MAX / 2,
            i64::MAX,
            MinOneBatch::Yes,
        )
        .expect("read");
    decode_records(&read.records).expect("decodes")
}

/// The invariants that hold after any step: every readable record is an appended one,
/// in offset order; the latest value of every key from the log start is readable; every
/// offset at or above `untouched_from` is readable.
pub fn check(log: &Log, model: &Model, untouched_from: i64) {
    let start = log.log_start_offset();
    let records = readable(log);
    let mut last = i64::MIN;
    for (offset, key, value) in &records {
        assert!(
            *offset > last && *offset >= start,
            "offsets increase from the start"
        );
        last = *offset;
        let (k, v) = model.get(offset).expect("an appended offset");
        assert_eq!((Some(k), v), (key.as_ref(), value), "content at {offset}");
    }
    let present: BTreeMap<i64, ()> = records.iter().map(|(o, _, _)| (*o, ())).collect();
    let mut latest: BTreeMap<&Vec<u8>, (i64, bool)> = BTreeMap::new();
    for (offset, (key, value)) in model.range(start..) {
        latest.insert(key, (*offset, value.is_some()));
        if *offset >= untouched_from {
            assert!(
                present.contains_key(offset),
                "untouched offset {offset} present"
            );
        }
    }
    for (offset, live) in latest.values() {
        if *live {
            assert!(
                present.contains_key(offset),
                "latest value at {offset} present"
            );
        }
    }
}
