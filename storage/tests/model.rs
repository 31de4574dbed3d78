//! Property tests: the log against a `Vec` model, and recovery after truncating the last
//! segment at a random byte.

mod common;

use brook_storage::batch::BatchIter;
use brook_storage::segment::file_name;
use brook_storage::{Log, LogConfig, MinOneBatch};
use common::batch;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append { batches: Vec<(usize, usize)> },
    Reopen,
    Read { offset_pick: u64, max_bytes: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::collection::vec((1usize..5, 0usize..120), 1..4).prop_map(|batches| Op::Append { batches }),
        1 => Just(Op::Reopen),
        3 => (any::<u64>(), 0usize..800).prop_map(|(offset_pick, max_bytes)| Op::Read { offset_pick, max_bytes }),
    ]
}

fn config(segment_bytes: u64, index_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 64,
        segment_index_bytes: index_bytes,
        segment_ms: None,
        ..LogConfig::default()
    }
}

/// The model: each appended batch's (base offset, last offset, stamped bytes).
type Model = Vec<(i64, i64, Vec<u8>)>;

fn expected_read(model: &Model, offset: i64, max_bytes: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for (_, _, bytes) in model.iter().filter(|(_, last, _)| *last >= offset) {
        // The first batch is always returned (min one batch); later ones must fit.
        if !out.is_empty() && out.len() + bytes.len() > max_bytes {
            break;
        }
        out.extend_from_slice(bytes);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_log_reads_back_like_a_vec_model(
        ops in prop::collection::vec(op(), 1..30),
        segment_bytes in 2_000u64..5_000,
        index_bytes in 16u64..80,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = config(segment_bytes, index_bytes);
        let mut log = Log::open(dir.path(), cfg.clone(), 0).expect("open");
        let mut model: Model = Vec::new();
        for op in ops {
            match op {
                Op::Append { batches } => {
                    let mut records: Vec<u8> = batches.iter().enumerate()
                        .flat_map(|(i, (n, len))| batch(i as i64, *n, *len)).collect();
                    let info = log.append(&mut records, 1, 0).expect("append");
                    prop_assert_eq!(info.base_offset, model.last().map_or(0, |m| m.1 + 1));
                    for item in BatchIter::new(&records) {
                        let (at, h) = item.expect("stamped batch valid");
                        model.push((h.base_offset, h.last_offset(), records[at..at + h.size()].to_vec()));
                    }
                    prop_assert_eq!(info.last_offset, model.last().map_or(-1, |m| m.1));
                }
                Op::Reopen => {
                    drop(log);
                    log = Log::open(dir.path(), cfg.clone(), 0).expect("reopen");
                }
                Op::Read { offset_pick, max_bytes } => {
                    let leo = model.last().map_or(0, |m| m.1 + 1);
                    let offset = (offset_pick % (leo as u64 + 1)) as i64;
                    let read = log.read(offset, max_bytes, i64::MAX, MinOneBatch::Yes).expect("read");
                    prop_assert_eq!(read.records.to_vec(), expected_read(&model, offset, max_bytes));
                    prop_assert_eq!(read.log_end_offset, leo);
                }
            }
        }
        let all: Vec<u8> = model.iter().flat_map(|m| m.2.clone()).collect();
        prop_assert_eq!(common::read_all(&log), all);
    }

    #[test]
    fn recovery_after_a_random_truncation_keeps_a_prefix_of_whole_batches(
        sizes in prop::collection::vec((1usize..4, 0usize..100), 1..25),
        cut_pick in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = config(1_500, 80);
        let mut log = Log::open(dir.path(), cfg.clone(), 0).expect("open");
        let mut model: Vec<Vec<u8>> = Vec::new();
        for (n, len) in sizes {
            let mut b = batch(7, n, len);
            log.append(&mut b, 0, 0).expect("append");
            model.push(b);
        }
        drop(log);
        let last_base = common::files(dir.path()).iter()
            .filter_map(|f| f.strip_suffix(".log")?.parse::<i64>().ok()).max().expect("a segment");
        let path = dir.path().join(file_name(last_base, "log"));
        let len = std::fs::metadata(&path).expect("stat").len();
        let cut = cut_pick % (len + 1);
        std::fs::OpenOptions::new().write(true).open(&path).expect("open")
            .set_len(cut).expect("truncate");
        let log = Log::open(dir.path(), cfg, 0).expect("reopen");
        let recovered = common::read_all(&log);
        // The recovered bytes are exactly the first k batches for some k.
        let mut prefix = Vec::new();
        let mut matched = recovered.is_empty();
        for b in &model {
            prefix.extend_from_slice(b);
            if prefix == recovered { matched = true; break; }
            if prefix.len() > recovered.len() { break; }
        }
        prop_assert!(matched, "recovered {} bytes is not a batch prefix", recovered.len());
        let k = BatchIter::new(&recovered).count();
        let expected_leo: i64 = model[..k].iter()
            .map(|b| i64::from(validate(b))).sum();
        prop_assert_eq!(log.log_end_offset(), expected_leo);
    }
}

fn validate(b: &[u8]) -> i32 {
    brook_storage::batch::validate_batch(b)
        .expect("valid")
        .records_count
}
