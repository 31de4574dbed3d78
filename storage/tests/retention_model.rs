//! Property test: retention and DeleteRecords against a simple model.
//!
//! Random sequences of appends (out-of-order timestamps), forced rolls, time passing,
//! config changes (`retention.ms`, `retention.bytes`, `segment.bytes`), DeleteRecords
//! (`increment_log_start_offset`), retention passes and reopens. The model keeps the
//! batches per segment and applies Kafka's rules itself (a segment goes whole, oldest
//! first, when its largest timestamp is older than `retention.ms`, while the log stays at
//! least `retention.bytes` without it, or when the next segment starts at or below the log
//! start offset; never the active segment). After every step the log's readable bytes
//! (from the log start to the log end) equal the model's, the log start offset is the
//! first readable offset, and the segment layout matches. Public API only.

mod common;

use brook_storage::batch::BatchIter;
use brook_storage::{Log, LogConfig, MinOneBatch};
use common::batch;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Batches of (records, value length, how far before `now` the timestamp is).
    Append(Vec<(usize, usize, i64)>),
    /// The next append rolls (Brook has no roll API: `segment.ms=0` for one append).
    Roll,
    TimePasses(i64),
    RetentionMs(Option<i64>),
    RetentionBytes(Option<u64>),
    SegmentBytes(u64),
    DeleteRecords(u64),
    Retention,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let batch = (1usize..4, 0usize..150, 0i64..4_000);
    prop_oneof![
        8 => prop::collection::vec(batch, 1..3).prop_map(Op::Append),
        1 => Just(Op::Roll),
        3 => (0i64..3_000).prop_map(Op::TimePasses),
        1 => prop::option::of(0i64..5_000).prop_map(Op::RetentionMs),
        1 => prop::option::of(0u64..4_000).prop_map(Op::RetentionBytes),
        // An append is at most ~1.1 KB, so every segment.bytes here accepts it.
        1 => (1_200u64..3_000).prop_map(Op::SegmentBytes),
        2 => any::<u64>().prop_map(Op::DeleteRecords),
        3 => Just(Op::Retention),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Debug, Clone)]
struct ModelBatch {
    last_offset: i64,
    max_timestamp: i64,
    bytes: Vec<u8>,
}

#[derive(Debug, Clone)]
struct ModelSegment {
    base_offset: i64,
    batches: Vec<ModelBatch>,
}

impl ModelSegment {
    fn size(&self) -> u64 {
        self.batches.iter().map(|b| b.bytes.len() as u64).sum()
    }

    fn max_timestamp(&self) -> Option<i64> {
        self.batches.iter().map(|b| b.max_timestamp).max()
    }
}

#[derive(Debug)]
struct Model {
    segments: Vec<ModelSegment>,
    log_start_offset: i64,
    log_end_offset: i64,
}

impl Model {
    fn active(&self) -> &ModelSegment {
        self.segments
            .last()
            .expect("the model always has a segment")
    }

    /// Kafka's roll rule as configured here: size, or age when `segment.ms` is set (the
    /// segment's first batch timestamp to the incoming max timestamp). Never when empty.
    fn rolls(&self, config: &LogConfig, size: u64, max_timestamp: i64) -> bool {
        let active = self.active();
        let Some(first) = active.batches.first() else {
            return false;
        };
        active.size() + size > config.segment_bytes
            || config
                .segment_ms
                .is_some_and(|ms| max_timestamp - first.max_timestamp > ms)
    }

    /// How many of the oldest segments retention deletes (the longest breached prefix).
    fn to_delete(&self, config: &LogConfig, now_ms: i64, only_start: bool) -> usize {
        let closed = &self.segments[..self.segments.len() - 1];
        let by_start = self
            .segments
            .windows(2)
            .take_while(|w| w[1].base_offset <= self.log_start_offset)
            .count();
        if only_start || !config.cleanup_delete {
            return by_start;
        }
        let by_time = config.retention_ms.map_or(0, |ms| {
            closed
                .iter()
                .take_while(|s| s.max_timestamp().is_some_and(|ts| now_ms - ts > ms))
                .count()
        });
        let by_size = config.retention_bytes.map_or(0, |bound| {
            let total: u64 = self.segments.iter().map(ModelSegment::size).sum();
            let mut excess = total.saturating_sub(bound);
            if total < bound {
                return 0;
            }
            closed
                .iter()
                .take_while(|s| match excess.checked_sub(s.size()) {
                    Some(rest) => {
                        excess = rest;
                        true
                    }
                    None => false,
                })
                .count()
        });
        by_start.max(by_time).max(by_size)
    }

    fn delete(&mut self, count: usize) {
        self.segments.drain(..count);
        self.log_start_offset = self.log_start_offset.max(self.segments[0].base_offset);
    }

    /// What a read from the log start returns: every batch holding an offset at or
    /// after the log start (the first one may start below it).
    fn readable(&self) -> Vec<u8> {
        self.segments
            .iter()
            .flat_map(|s| &s.batches)
            .filter(|b| b.last_offset >= self.log_start_offset)
            .flat_map(|b| b.bytes.clone())
            .collect()
    }
}

fn check(log: &Log, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(log.log_start_offset(), model.log_start_offset);
    prop_assert_eq!(log.log_end_offset(), model.log_end_offset);
    let bases: Vec<i64> = log.segment_stats().iter().map(|s| s.base_offset).collect();
    let model_bases: Vec<i64> = model.segments.iter().map(|s| s.base_offset).collect();
    prop_assert_eq!(bases, model_bases);
    let read = log
        .read(
            log.log_start_offset(),
            usize::MAX,
            i64::MAX,
            MinOneBatch::Yes,
        )
        .expect("read from the log start")
        .records
        .to_vec();
    prop_assert_eq!(&read, &model.readable());
    // The log start offset is the first readable offset: it lies in the first batch read.
    match BatchIter::new(&read).next() {
        Some(first) => {
            let (_, header) = first.expect("a valid batch");
            prop_assert!(header.base_offset <= model.log_start_offset);
            prop_assert!(model.log_start_offset <= header.last_offset());
        }
        None => prop_assert_eq!(model.log_start_offset, model.log_end_offset),
    }
    if model.log_start_offset > 0 {
        prop_assert!(log
            .read(model.log_start_offset - 1, 1, i64::MAX, MinOneBatch::Yes)
            .is_err());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn retention_and_delete_records_keep_the_log_equal_to_the_model(
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = LogConfig {
            segment_bytes: 1_500,
            segment_ms: None,
            index_interval_bytes: 128,
            retention_ms: Some(3_000),
            retention_bytes: None,
            file_delete_delay_ms: 1_000,
            ..LogConfig::default()
        };
        let mut now = 10_000i64;
        let mut log = Log::open(dir.path(), config.clone(), now).expect("open");
        let mut model = Model {
            segments: vec![ModelSegment { base_offset: 0, batches: Vec::new() }],
            log_start_offset: 0,
            log_end_offset: 0,
        };
        let mut roll_next = false;
        for op in ops {
            let active_before = model.active().base_offset;
            match op {
                Op::Append(batches) => {
                    let mut records: Vec<u8> = batches
                        .iter()
                        .flat_map(|(n, len, back)| batch(now - back, *n, *len))
                        .collect();
                    let append_config = LogConfig {
                        segment_ms: roll_next.then_some(0),
                        ..config.clone()
                    };
                    if roll_next {
                        log.set_config(append_config.clone());
                    }
                    let max_ts = batches.iter().map(|(n, _, back)| now - back + *n as i64 - 1).max().unwrap_or(-1);
                    let rolls = model.rolls(&append_config, records.len() as u64, max_ts);
                    let info = log.append(&mut records, 0, now).expect("append");
                    if roll_next {
                        log.set_config(config.clone());
                        roll_next = false;
                    }
                    prop_assert_eq!(info.base_offset, model.log_end_offset);
                    if rolls {
                        model.segments.push(ModelSegment { base_offset: info.base_offset, batches: Vec::new() });
                    }
                    let segment = model.segments.last_mut().expect("a segment");
                    for item in BatchIter::new(&records) {
                        let (at, h) = item.expect("stamped batch valid");
                        segment.batches.push(ModelBatch {
                            last_offset: h.last_offset(),
                            max_timestamp: h.max_timestamp,
                            bytes: records[at..at + h.size()].to_vec(),
                        });
                    }
                    model.log_end_offset = info.last_offset + 1;
                }
                Op::Roll => roll_next = true,
                Op::TimePasses(ms) => now += ms,
                Op::RetentionMs(ms) => {
                    config.retention_ms = ms;
                    log.set_config(config.clone());
                }
                Op::RetentionBytes(bytes) => {
                    config.retention_bytes = bytes;
                    log.set_config(config.clone());
                }
                Op::SegmentBytes(bytes) => {
                    config.segment_bytes = bytes;
                    log.set_config(config.clone());
                }
                Op::DeleteRecords(pick) => {
                    let offset = (pick % (model.log_end_offset as u64 + 1)) as i64;
                    let start = log.increment_log_start_offset(offset, now).expect("delete records");
                    model.log_start_offset = model.log_start_offset.max(offset);
                    let count = model.to_delete(&config, now, true);
                    model.delete(count);
                    prop_assert_eq!(start, model.log_start_offset);
                }
                Op::Retention => {
                    let outcome = log.enforce_retention(now).expect("retention");
                    let count = model.to_delete(&config, now, false);
                    prop_assert_eq!(outcome.segments_deleted, count);
                    model.delete(count);
                    prop_assert_eq!(outcome.log_start_offset, model.log_start_offset);
                }
                Op::Reopen => {
                    drop(log);
                    log = Log::open(dir.path(), config.clone(), now).expect("reopen");
                    // The LogManager's checkpoint carries a start moved inside a segment.
                    log.restore_log_start_offset(model.log_start_offset);
                }
            }
            // The active segment is never deleted: it is still there, still the last.
            prop_assert!(model.segments.iter().any(|s| s.base_offset == active_before));
            check(&log, &model)?;
        }
        drop(log);
        let mut log = Log::open(dir.path(), config.clone(), now).expect("final reopen");
        log.restore_log_start_offset(model.log_start_offset);
        check(&log, &model)?;
    }
}
