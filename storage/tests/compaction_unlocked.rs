//! Compaction built without the partition lock (`cleaner/job.rs`): appends and reads
//! that run while a pass is being built, truncations, retention and DeleteRecords that
//! race it, and reads of a partition being compacted. The phases are run explicitly
//! (`prepare_clean` under the log's borrow, `CleanJob::build` owning everything it
//! reads, `commit_clean` under the borrow again), so whatever a test does between them
//! is what a concurrent produce, fetch or retention pass could do.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use brook_storage::cleaner::decode_records;
use brook_storage::testing::{encode_batch, TestBatch, TestRecord};
use brook_storage::{Log, LogConfig, LogManager, MinOneBatch};
use common::files;
use common::keyed::{append, check, compact_config, readable, Model};
use proptest::prelude::*;

const BUDGET: usize = 1 << 20;
const NOW: i64 = 1_000_000;

/// `count` live records over 6 keys, from `from` on (values differ per call).
fn fill(log: &mut Log, model: &mut Model, from: u8, count: u8) {
    for i in from..from + count {
        append(log, model, i % 6, Some(i), NOW);
    }
}

/// The model restricted to what a truncation kept.
fn truncate_model(model: &mut Model, log_end_offset: i64) {
    model.retain(|offset, _| *offset < log_end_offset);
}

/// No `.cleaned` or `.swap` file left in the log's directory.
fn no_swap_files(dir: &Path) {
    let left: Vec<String> = files(dir)
        .into_iter()
        .filter(|f| f.ends_with(".cleaned") || f.ends_with(".swap"))
        .collect();
    assert!(left.is_empty(), "left over: {left:?}");
}

/// Keys appear at most once below `end` (what a committed pass guarantees).
fn compact_below(log: &Log, end: i64) {
    let mut seen = BTreeMap::new();
    for (offset, key, _) in readable(log).into_iter().filter(|(o, _, _)| *o < end) {
        assert!(
            seen.insert(key, offset).is_none(),
            "duplicate key at {offset}"
        );
    }
}

#[test]
fn appends_and_reads_go_on_while_a_clean_is_built_and_survive_its_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compact_config(), NOW).expect("open");
    let mut model = Model::new();
    fill(&mut log, &mut model, 0, 60);
    let job = log.prepare_clean(NOW, BUDGET).expect("the log is due");
    // A second pass cannot start while this one is in flight.
    assert!(log.prepare_clean(NOW, BUDGET).is_none());
    let before = readable(&log);
    // The build owns everything it reads: the log is free for appends and reads
    // (mutable borrows) while it runs on another thread.
    let build = std::thread::spawn(move || job.build());
    let mut during = 0u8;
    loop {
        let finished = build.is_finished();
        append(&mut log, &mut model, during % 6, Some(100 + during), NOW);
        during += 1;
        let read = readable(&log);
        assert_eq!(read[..before.len()], before[..], "old data unchanged");
        if finished && during >= 20 {
            break;
        }
    }
    let built = build.join().expect("build thread").expect("build");
    let end = built.end_offset();
    let outcome = log.commit_clean(built).expect("commit");
    assert!(outcome.cleaned && !outcome.abandoned);
    assert!(outcome.records_removed > 0 && outcome.bytes_after < outcome.bytes_before);
    assert_eq!(outcome.first_dirty_offset, end);
    check(&log, &model, end);
    compact_below(&log, end);
    no_swap_files(dir.path());
    // Appends still land after the commit, and the whole thing survives a reopen.
    append(&mut log, &mut model, 1, Some(250), NOW);
    let expected = readable(&log);
    log.close(NOW).expect("close");
    let log = Log::open(dir.path(), compact_config(), NOW).expect("reopen");
    assert_eq!(readable(&log), expected);
    assert_eq!(log.clean_plan(NOW).first_dirty_offset, end);
}

#[test]
fn a_truncation_during_the_build_abandons_the_pass_and_leaves_the_log_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compact_config(), NOW).expect("open");
    let mut model = Model::new();
    fill(&mut log, &mut model, 0, 40);
    let job = log.prepare_clean(NOW, BUDGET).expect("due");
    let built = job.build().expect("build");
    // A follower truncating its diverged tail, below part of what was cleaned.
    let end = log.truncate_to(25).expect("truncate");
    truncate_model(&mut model, end);
    let truncated = readable(&log);
    let outcome = log.commit_clean(built).expect("commit");
    assert!(outcome.abandoned && !outcome.cleaned);
    assert_eq!(readable(&log), truncated);
    no_swap_files(dir.path());
    assert_eq!(
        log.clean_plan(NOW).first_dirty_offset,
        0,
        "checkpoint untouched"
    );
    // The next pass redoes the work on what is left.
    fill(&mut log, &mut model, 40, 20);
    let outcome = log.clean(NOW, BUDGET).expect("clean");
    assert!(outcome.cleaned && outcome.records_removed > 0);
    check(&log, &model, outcome.first_dirty_offset);
}

#[test]
fn a_truncation_cutting_a_segment_under_the_build_abandons_the_pass_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compact_config(), NOW).expect("open");
    let mut model = Model::new();
    fill(&mut log, &mut model, 0, 40);
    let job = log.prepare_clean(NOW, BUDGET).expect("due");
    let generation = job.generation();
    // Offset 5 lies inside the second segment: it is cut in place (`set_len`), under
    // the file the job captured.
    let end = log.truncate_to(5).expect("truncate");
    truncate_model(&mut model, end);
    let error = job
        .build()
        .expect_err("the captured segment is shorter now");
    let outcome = log.clean_failed(generation, error).expect("not an error");
    assert!(outcome.abandoned);
    no_swap_files(dir.path());
    check(&log, &model, 0);
}

#[test]
fn retention_deleting_whole_groups_during_the_build_drops_them_and_installs_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compact_config(), NOW).expect("open");
    let mut model = Model::new();
    fill(&mut log, &mut model, 0, 60);
    // Segments near 400 bytes: no two fit one group, so each is its own group.
    let infos = log.segment_infos();
    assert!(infos.len() > 4);
    let job = log.prepare_clean(NOW, BUDGET).expect("due");
    let built = job.build().expect("build");
    let end = built.end_offset();
    let new_start = infos[2].base_offset;
    log.increment_log_start_offset(new_start, NOW)
        .expect("delete records");
    assert_eq!(log.segment_infos()[0].base_offset, new_start);
    let outcome = log.commit_clean(built).expect("commit");
    assert!(outcome.cleaned && !outcome.abandoned);
    assert_eq!(outcome.first_dirty_offset, end);
    assert_eq!(log.log_start_offset(), new_start);
    assert!(readable(&log).iter().all(|(o, _, _)| *o >= new_start));
    check(&log, &model, end);
    compact_below(&log, end);
    no_swap_files(dir.path());
}

#[test]
fn retention_deleting_part_of_a_group_during_the_build_abandons_the_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compact_config(), NOW).expect("open");
    let mut model = Model::new();
    fill(&mut log, &mut model, 0, 60);
    // Larger groups from now on: the first cleaned group spans several segments.
    log.set_config(LogConfig {
        segment_bytes: 4_000,
        ..compact_config()
    });
    let second = log.segment_infos()[1].base_offset;
    let job = log.prepare_clean(NOW, BUDGET).expect("due");
    let built = job.build().expect("build");
    log.increment_log_start_offset(second, NOW)
        .expect("delete records");
    let after_delete = readable(&log);
    let outcome = log.commit_clean(built).expect("commit");
    assert!(outcome.abandoned && !outcome.cleaned);
    assert_eq!(
        readable(&log),
        after_delete,
        "the log is as retention left it"
    );
    no_swap_files(dir.path());
    // The next pass (no race) cleans.
    let outcome = log.clean(NOW, BUDGET).expect("clean");
    assert!(outcome.cleaned && outcome.records_removed > 0);
    check(&log, &model, outcome.first_dirty_offset);
    compact_below(&log, outcome.first_dirty_offset);
}

#[test]
fn a_dropped_build_removes_its_files_and_frees_the_log_for_the_next_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compact_config(), NOW).expect("open");
    let mut model = Model::new();
    fill(&mut log, &mut model, 0, 30);
    let built = log
        .prepare_clean(NOW, BUDGET)
        .expect("due")
        .build()
        .expect("build");
    assert!(files(dir.path()).iter().any(|f| f.ends_with(".cleaned")));
    drop(built); // e.g. the log was deleted or closed before the commit
    no_swap_files(dir.path());
    assert!(log.clean(NOW, BUDGET).expect("clean").cleaned);
}

#[test]
fn a_pass_unlinks_the_deleted_files_its_commit_would_replace_during_its_build() {
    let dir = tempfile::tempdir().expect("tempdir");
    let delayed = LogConfig {
        file_delete_delay_ms: 60_000,
        ..compact_config()
    };
    let mut log = Log::open(dir.path(), delayed.clone(), NOW).expect("open");
    let mut model = Model::new();
    fill(&mut log, &mut model, 0, 40);
    assert!(log.clean(NOW, BUDGET).expect("first pass").cleaned);
    // The first pass's replaced segments wait as `.deleted`, named after the bases of
    // the segments it installed, which the next pass replaces in turn.
    let deleted = |dir: &Path| -> Vec<String> {
        files(dir)
            .into_iter()
            .filter(|f| f.ends_with(".log.deleted"))
            .collect()
    };
    let waiting = deleted(dir.path());
    assert!(!waiting.is_empty());
    fill(&mut log, &mut model, 40, 20);
    let built = log
        .prepare_clean(NOW, BUDGET)
        .expect("due")
        .build()
        .expect("build");
    let left = deleted(dir.path());
    assert!(
        waiting.iter().any(|f| !left.contains(f)),
        "the build unlinked the superseded files: {waiting:?} -> {left:?}"
    );
    let outcome = log.commit_clean(built).expect("commit");
    assert!(outcome.cleaned);
    // Nothing was due: the files renamed by this commit wait for their delay.
    assert_eq!(log.take_due_deletions(NOW).unlink().expect("unlink"), 0);
    assert!(!deleted(dir.path()).is_empty());
    check(&log, &model, outcome.first_dirty_offset);
    // After the delay every `.deleted` file goes (missing ones are skipped).
    log.take_due_deletions(NOW + 60_000)
        .unlink()
        .expect("unlink");
    assert!(deleted(dir.path()).is_empty());
}

#[test]
fn a_read_planned_before_the_commit_returns_the_old_batches_whole_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compact_config(), NOW).expect("open");
    let mut model = Model::new();
    fill(&mut log, &mut model, 0, 60);
    let old = log
        .read(0, usize::MAX / 2, i64::MAX, MinOneBatch::Yes)
        .expect("read");
    let plan = log.plan_read(0, usize::MAX / 2, i64::MAX).expect("plan");
    let built = log
        .prepare_clean(NOW, BUDGET)
        .expect("due")
        .build()
        .expect("build");
    let during = plan
        .execute(usize::MAX / 2, MinOneBatch::Yes)
        .expect("read");
    assert_eq!(during.map(|r| r.records), Some(old.records.clone()));
    let outcome = log.commit_clean(built).expect("commit");
    assert!(outcome.cleaned);
    // The old files are renamed and, their delay being 0, unlinked: the plan holds them.
    assert!(log.take_due_deletions(NOW).unlink().expect("unlink") > 0);
    let after = plan
        .execute(usize::MAX / 2, MinOneBatch::Yes)
        .expect("read")
        .expect("a clean is no truncation");
    assert_eq!(after.records, old.records);
    // A read planned now sees the compacted log, in whole batches.
    let new = log
        .read(0, usize::MAX / 2, i64::MAX, MinOneBatch::Yes)
        .expect("read");
    assert!(new.records.len() < old.records.len());
    assert!(decode_records(&new.records).is_some());
    check(&log, &model, outcome.first_dirty_offset);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_and_produces_during_a_handle_clean_see_whole_correct_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_bytes: 16 * 1024,
        ..compact_config()
    };
    let manager = LogManager::open(&[dir.path().to_path_buf()], config.clone()).expect("open");
    let log = manager.get_or_create("c", 0, config).expect("create");
    let mut model = log
        .with_log_blocking(|l| {
            let mut model = Model::new();
            for round in 0..20u8 {
                fill(l, &mut model, round, 100);
            }
            Ok(model)
        })
        .expect("fill");
    let cleaner = {
        let log = log.clone();
        tokio::spawn(async move { log.clean(NOW, BUDGET).await })
    };
    let mut reads = 0;
    let mut i = 0u8;
    loop {
        let done = cleaner.is_finished();
        // A produce.
        let mut batch = TestBatch::values(NOW, &[]);
        batch.records = vec![TestRecord {
            key: Some(vec![b'k', i % 6]),
            value: Some(vec![b'n'; 30]),
            timestamp_delta: 0,
        }];
        let info = log
            .append(bytes::BytesMut::from(&encode_batch(&batch)[..]), 0, NOW)
            .await
            .expect("append");
        model.insert(info.base_offset, (vec![b'k', i % 6], Some(vec![b'n'; 30])));
        i = i.wrapping_add(1);
        // A fetch from somewhere in the log, a few KiB.
        let from = i64::from(i) * 17 % log.log_end_offset().max(1);
        let read = log
            .read(
                from.max(log.log_start_offset()),
                8 * 1024,
                i64::MAX,
                MinOneBatch::Yes,
            )
            .await
            .expect("read");
        let records = decode_records(&read.records).expect("whole, valid batches");
        for (offset, key, value) in &records {
            let (k, v) = model.get(offset).expect("an appended offset");
            assert_eq!((Some(k), v), (key.as_ref(), value), "content at {offset}");
        }
        reads += 1;
        if done {
            break;
        }
    }
    let outcome = cleaner.await.expect("task").expect("clean");
    assert!(
        outcome.cleaned && outcome.records_removed > 0,
        "{outcome:?}"
    );
    assert!(reads > 0);
    log.with_log_blocking(|l| {
        check(l, &model, outcome.first_dirty_offset);
        Ok(())
    })
    .expect("check");
    no_swap_files(&log.dir());
}

/// What may happen to a log while a pass is built without its lock.
#[derive(Debug, Clone)]
enum Race {
    Append { key: u8, value: Option<u8> },
    DeleteRecords { fraction: u8 },
    Truncate { fraction: u8 },
    Retention,
}

fn race() -> impl Strategy<Value = Race> {
    prop_oneof![
        16 => (0u8..6, prop::option::weighted(0.8, 0u8..40)).prop_map(|(key, value)| Race::Append { key, value }),
        1 => (0u8..100).prop_map(|fraction| Race::DeleteRecords { fraction }),
        1 => (0u8..100).prop_map(|fraction| Race::Truncate { fraction }),
        1 => Just(Race::Retention),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Whatever ran during a pass's build or between it and the commit, the log holds
    /// only appended records, every key's latest value, and everything the pass did
    /// not cover; no swap file is left; and it reopens to the same content.
    #[test]
    fn whatever_races_a_build_the_commit_keeps_the_log_correct(
        before in prop::collection::vec((0u8..6, prop::option::weighted(0.8, 0u8..40)), 5..60),
        races in prop::collection::vec(race(), 0..20),
        races_first in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), compact_config(), NOW).expect("open");
        let mut model = Model::new();
        for (key, value) in before {
            append(&mut log, &mut model, key, value, NOW);
        }
        let untouched_before = log.clean_plan(NOW).first_dirty_offset;
        let Some(job) = log.prepare_clean(NOW, BUDGET) else {
            return Ok(());
        };
        let generation = job.generation();
        // Before the build reads the segments (a truncation may cut one under it), or
        // after (between build and commit).
        let mut pending = Some(job);
        let mut built = None;
        if !races_first {
            built = pending.take().map(|job| job.build());
        }
        for race in races {
            match race {
                Race::Append { key, value } => append(&mut log, &mut model, key, value, NOW),
                Race::DeleteRecords { fraction } => {
                    let target = log.log_end_offset() * i64::from(fraction) / 100;
                    log.increment_log_start_offset(target.max(log.log_start_offset()), NOW)
                        .expect("delete records");
                }
                Race::Truncate { fraction } => {
                    let target = log.log_end_offset() * i64::from(fraction) / 100;
                    let end = log.truncate_to(target).expect("truncate");
                    truncate_model(&mut model, end);
                }
                Race::Retention => {
                    // A size-based retention pass (compact,delete) keeping ~3 segments.
                    log.set_config(LogConfig { cleanup_delete: true, retention_bytes: Some(1_200), ..compact_config() });
                    log.enforce_retention(NOW).expect("retention");
                    log.set_config(compact_config());
                }
            }
        }
        let built = built.or_else(|| pending.map(|job| job.build())).expect("built");
        let outcome = match built {
            Ok(built) => log.commit_clean(built).expect("commit"),
            Err(e) => log.clean_failed(generation, e).expect("only a truncation fails a build"),
        };
        prop_assert!(outcome.cleaned != outcome.abandoned);
        let untouched = if outcome.cleaned { outcome.first_dirty_offset } else { untouched_before };
        check(&log, &model, untouched.min(log.log_end_offset()));
        if outcome.cleaned {
            compact_below(&log, outcome.first_dirty_offset);
        }
        no_swap_files(dir.path());
        let expected = readable(&log);
        let start = log.log_start_offset();
        log.close(NOW).expect("close");
        let mut log = Log::open(dir.path(), compact_config(), NOW).expect("reopen");
        log.restore_log_start_offset(start);
        prop_assert_eq!(readable(&log), expected);
    }
}
