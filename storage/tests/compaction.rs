//! Compaction against a model, and crash recovery of interrupted cleans.
//!
//! The property test drives a compacted log with random keyed appends (with
//! tombstones), cleans, DeleteRecords and reopens, and checks after every step that the
//! readable records are exactly appended records (same offset, key and value), that
//! the latest live value of every key is readable, that nothing at or above the
//! cleaner's first dirty offset was touched, and, after a final pair of cleans past the
//! delete horizon, that each key appears at most once in the clean section and no
//! tombstone remains there.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use brook_storage::cleaner::{decode_records, DecodedRecord};
use brook_storage::segment::Segment;
use brook_storage::{Log, LogConfig, MinOneBatch};
use common::keyed::{append, check, compact_config, readable, Model};
use proptest::prelude::*;

const BUDGET: usize = 1 << 20;

#[derive(Debug, Clone)]
enum Op {
    Append { key: u8, value: Option<u8> },
    Clean,
    DeleteRecords { fraction: u8 },
    Reopen,
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0u8..6, prop::option::weighted(0.8, 0u8..40)).prop_map(|(key, value)| Op::Append { key, value }),
        3 => Just(Op::Clean),
        1 => (0u8..100).prop_map(|fraction| Op::DeleteRecords { fraction }),
        1 => Just(Op::Reopen),
        2 => Just(Op::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn compaction_keeps_the_latest_value_per_key(ops in prop::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut now = 1_000_000i64;
        let mut log = Log::open(dir.path(), compact_config(), now).expect("open");
        let mut model = Model::new();
        let mut untouched_from = 0i64;
        for op in ops {
            match op {
                Op::Append { key, value } => append(&mut log, &mut model, key, value, now),
                Op::Clean => {
                    let outcome = log.clean(now, BUDGET).expect("clean");
                    if outcome.cleaned {
                        untouched_from = outcome.first_dirty_offset;
                    }
                }
                Op::DeleteRecords { fraction } => {
                    let target = log.log_end_offset() * i64::from(fraction) / 100;
                    log.increment_log_start_offset(target.max(log.log_start_offset()), now)
                        .expect("delete records");
                }
                Op::Reopen => {
                    let start = log.log_start_offset();
                    log.close(now).expect("close");
                    log = Log::open(dir.path(), compact_config(), now).expect("reopen");
                    log.restore_log_start_offset(start);
                }
                Op::Tick => now += 60,
            }
            check(&log, &model, untouched_from);
        }
        // Final: clean, pass the horizon, clean again: the clean section is compact.
        now += 10;
        let first = log.clean(now, BUDGET).expect("clean");
        now += 1_000;
        let second = log.clean(now, BUDGET).expect("clean");
        let clean_end = if second.cleaned { second.first_dirty_offset } else { first.first_dirty_offset };
        check(&log, &model, if first.cleaned || second.cleaned { clean_end } else { untouched_from });
        if first.cleaned || second.cleaned {
            let mut seen = BTreeMap::new();
            for (offset, key, value) in readable(&log).into_iter().filter(|(o, _, _)| *o < clean_end) {
                prop_assert!(value.is_some(), "tombstone at {} survived its horizon", offset);
                prop_assert!(seen.insert(key, offset).is_none(), "duplicate key at {}", offset);
            }
        }
    }
}

/// A log of three keys over several segments; returns its dir's cleaned twin.
fn build(dir: &Path) -> Log {
    let mut log = Log::open(dir, compact_config(), 1_000).expect("open");
    let mut model = Model::new();
    for i in 0..30u8 {
        append(
            &mut log,
            &mut model,
            i % 3,
            (i % 7 != 0).then_some(i),
            1_000,
        );
    }
    log
}

fn log_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            name.ends_with(".log")
                .then(|| (name, fs::read(e.path()).unwrap_or_default()))
        })
        .collect()
}

/// Builds the same log in `a` (cleaned) and `b` (not), and puts `a`'s new segments
/// into `b` as `.swap` files: `b` is now `a` crashed right after step 2.
fn crashed_after_swap(a: &Path, b: &Path) -> (Vec<DecodedRecord>, Vec<String>) {
    let mut cleaned = build(a);
    let before = build(b);
    assert!(cleaned.clean(2_000, BUDGET).expect("clean").cleaned);
    let expected = readable(&cleaned);
    cleaned.close(2_000).expect("close");
    before.close(2_000).expect("close");
    let old = log_files(b);
    let mut swapped = Vec::new();
    for (name, bytes) in log_files(a) {
        if old.get(&name) != Some(&bytes) {
            fs::write(b.join(format!("{name}.swap")), bytes).expect("write swap");
            swapped.push(name);
        }
    }
    assert!(!swapped.is_empty());
    (expected, swapped)
}

#[test]
fn a_leftover_cleaned_file_is_discarded_and_the_old_segments_stay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = build(dir.path());
    let expected = readable(&log);
    log.close(2_000).expect("close");
    let leftovers = ["log", "index", "timeindex"].map(|ext| {
        dir.path()
            .join(format!("00000000000000000000.{ext}.cleaned"))
    });
    for leftover in &leftovers {
        fs::write(leftover, b"half written").expect("write");
    }
    let log = Log::open(dir.path(), compact_config(), 2_000).expect("reopen");
    assert!(leftovers.iter().all(|f| !f.exists()));
    assert_eq!(readable(&log), expected);
}

#[test]
fn a_swap_with_the_old_segments_present_completes_the_clean() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let (expected, _) = crashed_after_swap(a.path(), b.path());
    let log = Log::open(b.path(), compact_config(), 3_000).expect("recover");
    assert_eq!(readable(&log), expected);
    assert!(fs::read_dir(b.path()).expect("list").all(|e| !e
        .map(|e| e.file_name().to_string_lossy().ends_with(".swap"))
        .unwrap_or(false)));
}

#[test]
fn a_swap_with_the_old_segments_already_deleted_completes_the_clean() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let (expected, swapped) = crashed_after_swap(a.path(), b.path());
    // Step 3 done too: every replaced segment below the last swap's end is `.deleted`.
    let after = log_files(a.path());
    let last_new = after.keys().max().cloned().unwrap_or_default();
    for name in log_files(b.path()).keys() {
        let is_replaced = !after.contains_key(name) || swapped.contains(name);
        if is_replaced && name < &last_new || swapped.contains(name) {
            fs::rename(
                b.path().join(name),
                b.path().join(format!("{name}.deleted")),
            )
            .expect("rename");
        }
    }
    let log = Log::open(b.path(), compact_config(), 3_000).expect("recover");
    assert_eq!(readable(&log), expected);
}

#[test]
fn the_checkpoint_survives_a_restart_so_a_clean_log_is_not_cleaned_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = build(dir.path());
    let outcome = log.clean(2_000, BUDGET).expect("clean");
    assert!(outcome.cleaned && outcome.records_removed > 0);
    log.close(2_000).expect("close");
    let mut log = Log::open(dir.path(), compact_config(), 2_000).expect("reopen");
    assert_eq!(
        log.clean_plan(2_000).first_dirty_offset,
        outcome.first_dirty_offset
    );
    assert!(!log.clean(2_000, BUDGET).expect("clean").cleaned);
}

/// The indexes a full scan of `dir`'s segment at `base` writes, as (offset, time) bytes.
fn rebuilt_indexes(dir: &Path, base: i64, config: &LogConfig) -> (Vec<u8>, Vec<u8>) {
    let scratch = tempfile::tempdir().expect("scratch");
    let name = |ext: &str| format!("{base:020}.{ext}");
    fs::copy(dir.join(name("log")), scratch.path().join(name("log"))).expect("copy log");
    let mut segment = Segment::open(scratch.path(), base, config, 0).expect("open copy");
    segment
        .recover(config, &mut |_, _| {})
        .expect("recover copy");
    drop(segment);
    let read = |ext: &str| fs::read(scratch.path().join(name(ext))).expect("read index");
    (read("index"), read("timeindex"))
}

#[test]
fn a_cleaned_segment_opens_with_the_indexes_a_full_scan_would_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Small index intervals, so that each cleaned segment carries several entries.
    let config = LogConfig {
        segment_bytes: 4_000,
        index_interval_bytes: 100,
        ..compact_config()
    };
    let mut log = Log::open(dir.path(), config.clone(), 1_000).expect("open");
    let mut model = Model::new();
    for i in 0..400u32 {
        let key = (i % 40) as u8;
        append(
            &mut log,
            &mut model,
            key,
            Some((i % 9) as u8),
            1_000 + i64::from(i),
        );
    }
    let outcome = log.clean(2_000, BUDGET).expect("clean");
    assert!(outcome.cleaned && outcome.records_removed > 0);
    let mut indexed_entries = 0;
    for name in log_files(dir.path()).keys() {
        let base: i64 = name.trim_end_matches(".log").parse().expect("base offset");
        let index =
            |ext: &str| fs::read(dir.path().join(format!("{base:020}.{ext}"))).expect("index");
        let (offsets, times) = rebuilt_indexes(dir.path(), base, &config);
        assert_eq!(index("index"), offsets, "offset index of {name}");
        assert_eq!(index("timeindex"), times, "time index of {name}");
        indexed_entries += offsets.len() / 8;
    }
    assert!(
        indexed_entries >= 10,
        "only {indexed_entries} offset index entries"
    );
    let leftovers: Vec<String> = fs::read_dir(dir.path())
        .expect("list")
        .filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_string()))
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect();
    assert!(leftovers.is_empty(), "left over: {leftovers:?}");
    check(&log, &model, outcome.first_dirty_offset);
    // Lookups through those indexes: by offset and by timestamp (record i was appended
    // at offset i with timestamp 1,000 + i), each kept record is found where it is.
    let kept = readable(&log);
    for (offset, _, _) in &kept {
        let read = log
            .read(*offset, 1, i64::MAX, MinOneBatch::Yes)
            .expect("read");
        let first = decode_records(&read.records).expect("decodes");
        assert_eq!(
            first.first().map(|r| r.0),
            Some(*offset),
            "read at {offset}"
        );
        let by_time = log.offset_for_timestamp(1_000 + offset).expect("by time");
        assert_eq!(
            by_time.map(|t| t.offset),
            Some(*offset),
            "timestamp of {offset}"
        );
    }
    let expected = readable(&log);
    log.close(3_000).expect("close");
    let log = Log::open(dir.path(), config, 3_000).expect("reopen");
    assert_eq!(readable(&log), expected);
}
