//! The storage half of replication: follower appends, truncation, the leader epoch
//! cache across reopen, and high watermarks (handle + `replication-offset-checkpoint`).

mod common;

use std::fs;

use brook_storage::batch::{stamp_offset_and_epoch, BatchIter};
use brook_storage::checkpoint::REPLICATION_FILE_NAME;
use brook_storage::log::epoch_cache::EpochEntry;
use brook_storage::testing::{encode_batch, TestBatch};
use brook_storage::{Log, LogConfig, LogManager, MinOneBatch, StorageError};
use bytes::Bytes;
use common::{batch, read_all, small_config};

fn epochs(log: &Log) -> Vec<(i32, i64)> {
    log.leader_epoch_cache()
        .entries()
        .iter()
        .map(|e: &EpochEntry| (e.epoch, e.start_offset))
        .collect()
}

fn idempotent(seq: i32, count: usize) -> Vec<u8> {
    encode_batch(&TestBatch::sized(100, count, 20).with_producer(7, 0, seq))
}

/// A leader log with small segments (it rolls). Batches: [0,1] [2,4] [5,7] [8,9]
/// [10,12] [13,15] [16,17] [18,20] [21,23] [24,25] [26,28] [29,31], every third one
/// idempotent (producer 7); leader epochs (1, 0) (3, 10) (4, 24).
fn leader(dir: &std::path::Path) -> Log {
    let mut log = Log::open(dir, small_config(), 0).expect("open leader");
    for i in 0..12i32 {
        let epoch = if i < 4 {
            1
        } else if i < 9 {
            3
        } else {
            4
        };
        let mut records = if i % 3 == 0 {
            idempotent((i / 3) * 2, 2)
        } else {
            batch(i64::from(i), 3, 40)
        };
        log.append(&mut records, epoch, 0).expect("leader append");
    }
    log
}

/// A batch stored at `base_offset` with leader epoch `epoch` (as a leader would send it).
fn stamped(base_offset: i64, epoch: i32, count: usize) -> Vec<u8> {
    let mut bytes = batch(5, count, 10);
    stamp_offset_and_epoch(&mut bytes, base_offset, epoch);
    bytes
}

#[test]
fn a_follower_stores_the_leaders_batches_byte_for_byte() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let leader = leader(a.path());
    let mut follower = Log::open(b.path(), small_config(), 0).expect("open follower");
    // Fetch like a replica: from the follower's end, a few hundred bytes at a time, with
    // the next batch's first bytes appended as a fetch cut at max_bytes would.
    while follower.log_end_offset() < leader.log_end_offset() {
        let read = leader
            .read(follower.log_end_offset(), 300, i64::MAX, MinOneBatch::Yes)
            .expect("leader read");
        let mut chunk = read.records.to_vec();
        let next_offset = BatchIter::new(&chunk)
            .map(|r| r.map(|(_, h)| h.next_offset()).expect("valid"))
            .last()
            .expect("a batch");
        if next_offset < leader.log_end_offset() {
            let next = leader
                .read(next_offset, 0, i64::MAX, MinOneBatch::Yes)
                .expect("next batch");
            chunk.extend_from_slice(next.records.get(..30).expect("a whole batch"));
        }
        let before = follower.log_end_offset();
        let appended = follower
            .append_as_follower(&chunk, 0)
            .expect("follower append");
        assert!(appended.appended_batches > 0);
        assert_eq!(appended.first_offset, before);
        assert_eq!(appended.log_end_offset, appended.last_offset + 1);
    }
    assert_eq!(read_all(&follower), read_all(&leader));
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(epochs(&follower), epochs(&leader));
    assert_eq!(epochs(&leader), vec![(1, 0), (3, 10), (4, 24)]);
    assert_eq!(
        follower.producer_state().entry(7),
        leader.producer_state().entry(7)
    );
    assert!(follower.segment_count() > 1, "the follower rolled too");
    let end = follower.log_end_offset();
    drop(follower);
    let reopened = Log::open(b.path(), small_config(), 0).expect("reopen");
    assert_eq!(reopened.log_end_offset(), end);
    assert_eq!(epochs(&reopened), vec![(1, 0), (3, 10), (4, 24)]);
}

#[test]
fn the_inline_follower_append_stores_the_same_bytes_and_declines_rolls_and_new_epochs() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let leader = leader(a.path());
    let mut follower = Log::open(b.path(), small_config(), 0).expect("open follower");
    let (mut inline, mut declined) = (0, 0);
    while follower.log_end_offset() < leader.log_end_offset() {
        let read = leader
            .read(follower.log_end_offset(), 150, i64::MAX, MinOneBatch::Yes)
            .expect("leader read");
        let before = (follower.log_end_offset(), epochs(&follower));
        match follower
            .try_append_as_follower_inline(&read.records, 0)
            .expect("inline append")
        {
            Some(appended) => {
                inline += 1;
                assert_eq!(appended.first_offset, before.0);
                assert_eq!(appended.log_end_offset, follower.log_end_offset());
                assert_eq!(epochs(&follower), before.1, "never a new epoch inline");
            }
            None => {
                declined += 1;
                assert_eq!(
                    (follower.log_end_offset(), epochs(&follower)),
                    before,
                    "declined: nothing changed"
                );
                follower
                    .append_as_follower(&read.records, 0)
                    .expect("full append");
            }
        }
    }
    assert!(
        inline > 0 && declined > 0,
        "inline {inline}, declined {declined}"
    );
    assert_eq!(read_all(&follower), read_all(&leader));
    assert_eq!(epochs(&follower), epochs(&leader));
    assert_eq!(
        follower.producer_state().entry(7),
        leader.producer_state().entry(7)
    );
    assert!(follower.segment_count() > 1, "rolls went the full way");
}

#[test]
fn a_follower_append_never_goes_backwards_and_writes_nothing_when_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    log.append_as_follower(&stamped(0, 1, 3), 0)
        .expect("append");
    let again = log.append_as_follower(&stamped(0, 1, 3), 0).err();
    assert!(matches!(
        again,
        Some(StorageError::NonMonotonicFollowerAppend {
            expected_at_least: 3,
            got: 0
        })
    ));
    let mut overlapping = stamped(3, 1, 3);
    overlapping.extend_from_slice(&stamped(5, 1, 1));
    let err = log.append_as_follower(&overlapping, 0).err();
    assert!(matches!(
        err,
        Some(StorageError::NonMonotonicFollowerAppend {
            expected_at_least: 6,
            got: 5
        })
    ));
    let mut corrupt = stamped(3, 1, 3);
    let mut bad = stamped(6, 1, 1);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    corrupt.extend_from_slice(&bad);
    assert!(matches!(
        log.append_as_follower(&corrupt, 0),
        Err(StorageError::CorruptBatch { batch_index: 1, .. })
    ));
    assert_eq!(log.log_end_offset(), 3);
}

#[test]
fn a_trailing_partial_batch_is_ignored_and_an_empty_input_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let empty = log.append_as_follower(&[], 0).expect("empty");
    assert_eq!(
        (
            empty.appended_batches,
            empty.log_end_offset,
            empty.first_offset
        ),
        (0, 0, 0)
    );
    let next = stamped(2, 1, 2);
    let partial = log
        .append_as_follower(next.get(..40).unwrap_or_default(), 0)
        .expect("partial");
    assert_eq!(partial.appended_batches, 0);
    let mut records = stamped(0, 1, 2);
    records.extend_from_slice(next.get(..next.len() - 1).unwrap_or_default());
    let appended = log.append_as_follower(&records, 0).expect("append");
    assert_eq!(
        (
            appended.appended_batches,
            appended.first_offset,
            appended.last_offset
        ),
        (1, 0, 1)
    );
    assert_eq!(log.log_end_offset(), 2);
}

#[test]
fn a_follower_accepts_offset_gaps_of_a_compacted_leader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let mut records = stamped(0, 2, 2);
    records.extend_from_slice(&stamped(10, 2, 2));
    records.extend_from_slice(&stamped(25, 5, 1));
    let appended = log.append_as_follower(&records, 0).expect("append");
    assert_eq!(
        (appended.appended_batches, appended.log_end_offset),
        (3, 26)
    );
    assert_eq!(epochs(&log), vec![(2, 0), (5, 25)]);
    assert_eq!(log.end_offset_for_epoch(2), (2, 25));
    // Beyond an empty segment's u32 range: a new segment at the batch's base offset.
    let far = 26 + i64::from(u32::MAX) + 10;
    log.append_as_follower(&stamped(far, 5, 1), 0)
        .expect("far append");
    assert_eq!(log.log_end_offset(), far + 1);
    drop(log);
    let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    assert_eq!(log.log_end_offset(), far + 1);
    let read = log
        .read(3, usize::MAX, i64::MAX, MinOneBatch::Yes)
        .expect("read");
    let bases: Vec<i64> = BatchIter::new(&read.records)
        .map(|r| r.map(|(_, h)| h.base_offset).expect("valid"))
        .collect();
    assert_eq!(bases, vec![10, 25, far]);
}

#[test]
fn max_message_bytes_is_not_enforced_on_followers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        max_message_bytes: 50,
        ..small_config()
    };
    let mut log = Log::open(dir.path(), config, 0).expect("open");
    let appended = log
        .append_as_follower(&stamped(0, 0, 5), 0)
        .expect("append");
    assert_eq!(appended.log_end_offset, 5);
}

/// Truncates a copy of the leader log at `offset` and checks the result, a re-append
/// and a reopen.
fn check_truncation(offset: i64, expected_end: i64, expected_epochs: &[(i32, i64)]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = leader(dir.path());
    let end = log.truncate_to(offset).expect("truncate");
    assert_eq!(end, expected_end, "truncate_to({offset})");
    assert_eq!(log.log_end_offset(), expected_end);
    assert_eq!(epochs(&log), expected_epochs, "truncate_to({offset})");
    let read = read_all(&log);
    let last = BatchIter::new(&read)
        .map(|r| r.map(|(_, h)| h.next_offset()).expect("valid"))
        .last()
        .unwrap_or(log.log_start_offset());
    assert_eq!(last, expected_end);
    let info = log.append(&mut batch(50, 2, 10), 9, 0).expect("re-append");
    assert_eq!(info.base_offset, expected_end);
    let (end, cache) = (log.log_end_offset(), epochs(&log));
    drop(log);
    let reopened = Log::open(dir.path(), small_config(), 0).expect("reopen");
    assert_eq!(reopened.log_end_offset(), end);
    assert_eq!(epochs(&reopened), cache);
    assert_eq!(cache.last(), Some(&(9, expected_end)));
}

#[test]
fn truncation_at_a_batch_boundary_mid_batch_and_segment_boundaries() {
    // See `leader` for the batches and epochs.
    check_truncation(5, 5, &[(1, 0)]);
    check_truncation(6, 5, &[(1, 0)]);
    check_truncation(10, 10, &[(1, 0)]);
    check_truncation(11, 10, &[(1, 0)]);
    check_truncation(23, 21, &[(1, 0), (3, 10)]);
    check_truncation(24, 24, &[(1, 0), (3, 10)]);
    check_truncation(25, 24, &[(1, 0), (3, 10)]);
    check_truncation(26, 26, &[(1, 0), (3, 10), (4, 24)]);
    check_truncation(100, 32, &[(1, 0), (3, 10), (4, 24)]);
}

#[test]
fn truncation_on_every_segment_boundary_keeps_the_log_consistent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = leader(dir.path());
    let bases: Vec<i64> = log.segment_stats().iter().map(|s| s.base_offset).collect();
    drop(log);
    assert!(bases.len() > 2, "the fixture rolls");
    for base in bases.into_iter().skip(1) {
        let copy = tempfile::tempdir().expect("tempdir");
        let mut log = leader(copy.path());
        let end = log.truncate_to(base).expect("truncate");
        assert_eq!(end, base);
        assert!(log.segment_stats().iter().all(|s| s.base_offset < base));
    }
}

#[test]
fn truncation_below_the_log_start_restarts_the_log_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = leader(dir.path());
    log.increment_log_start_offset(12, 0)
        .expect("delete records");
    assert_eq!(epochs(&log), vec![(3, 12), (4, 24)]);
    let end = log.truncate_to(7).expect("truncate");
    assert_eq!(end, 7);
    assert_eq!((log.log_start_offset(), log.segment_count()), (7, 1));
    assert_eq!(epochs(&log), vec![]);
    assert!(log.producer_state().is_empty());
    log.append_as_follower(&stamped(7, 6, 2), 0)
        .expect("follower append");
    drop(log);
    let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (7, 9));
    assert_eq!(epochs(&log), vec![(6, 7)]);
}

#[test]
fn truncate_fully_restarts_an_empty_log_at_any_offset() {
    for offset in [0, 10, 500] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = leader(dir.path());
        log.truncate_fully_and_start_at(offset)
            .expect("truncate fully");
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (offset, offset)
        );
        assert_eq!((log.segment_count(), log.latest_epoch()), (1, None));
        assert!(read_all(&log).is_empty());
        drop(log);
        let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (offset, offset)
        );
        assert_eq!(log.latest_epoch(), None);
    }
}

#[test]
fn a_batch_truncated_away_is_no_longer_a_duplicate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    log.append(&mut idempotent(0, 3), 1, 0).expect("first");
    log.append(&mut idempotent(3, 2), 1, 0).expect("second");
    let retry = log.append(&mut idempotent(3, 2), 1, 0).expect("retry");
    assert!(retry.duplicate);
    assert_eq!(log.truncate_to(3).expect("truncate"), 3);
    let again = log.append(&mut idempotent(3, 2), 2, 0).expect("re-send");
    assert!(!again.duplicate, "the truncated batch is gone");
    assert_eq!((again.base_offset, again.last_offset), (3, 4));
    let dup_first = log.append(&mut idempotent(0, 3), 2, 0).expect("retry");
    assert!(dup_first.duplicate, "the kept batch still is a duplicate");
}

#[test]
fn a_new_leader_records_its_epoch_at_the_log_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    log.append_as_follower(&stamped(0, 1, 4), 0)
        .expect("append");
    log.assign_epoch_start(3).expect("become leader");
    log.assign_epoch_start(2).expect("stale epoch: nothing");
    assert_eq!(epochs(&log), vec![(1, 0), (3, 4)]);
    assert_eq!(log.end_offset_for_epoch(1), (1, 4));
    assert_eq!(log.end_offset_for_epoch(3), (3, 4));
    drop(log);
    let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    assert_eq!(
        epochs(&log),
        vec![(1, 0)],
        "an epoch past the data is trimmed"
    );
}

#[test]
fn truncating_at_the_log_end_drops_an_epoch_started_without_data() {
    // A broker that became leader (epoch 3 at offset 4) and lost the lead before appending:
    // as a follower it must not keep sending epoch 3 as its last fetched epoch.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    log.append_as_follower(&stamped(0, 1, 4), 0)
        .expect("append");
    log.assign_epoch_start(3).expect("become leader");
    assert_eq!(log.latest_epoch(), Some(3));
    assert_eq!(log.truncate_to(4).expect("truncate"), 4);
    assert_eq!(epochs(&log), vec![(1, 0)]);
    assert_eq!(log.latest_epoch(), Some(1));
}

#[test]
fn a_missing_or_corrupt_epoch_checkpoint_is_rebuilt_from_the_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The file is written by a flush (appends only change the cache in memory).
    let mut log = leader(dir.path());
    log.flush(0).expect("flush");
    drop(log);
    let path = dir.path().join("leader-epoch-checkpoint");
    assert_eq!(
        fs::read_to_string(&path).expect("checkpoint"),
        "0\n3\n1 0\n3 10\n4 24\n"
    );
    fs::remove_file(&path).expect("remove");
    let log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    assert_eq!(epochs(&log), vec![(1, 0), (3, 10), (4, 24)]);
    drop(log);
    fs::write(&path, "0\n7\nnonsense").expect("corrupt");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("reopen");
    assert_eq!(epochs(&log), vec![(1, 0), (3, 10), (4, 24)]);
    // Rewritten by the next flush, not by the open (a start after a crash would
    // otherwise write and fsync one file per partition).
    log.flush(0).expect("flush");
    assert_eq!(
        fs::read_to_string(&path).expect("rewritten"),
        "0\n3\n1 0\n3 10\n4 24\n"
    );
}

#[test]
fn high_watermarks_survive_a_restart_through_the_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dirs = vec![dir.path().to_path_buf()];
    let manager = LogManager::open(&dirs, small_config()).expect("open");
    for partition in [0, 1] {
        let log = manager
            .get_or_create("t", partition, small_config())
            .expect("create");
        assert_eq!(log.high_watermark(), 0);
        log.with_log_blocking(|l| l.append(&mut batch(0, 5, 10), 0, 0))
            .expect("append");
        assert_eq!(log.high_watermark(), 0, "appends do not commit");
    }
    let t1 = manager.get("t", 1).expect("t-1");
    t1.with_log_blocking(|l| l.increment_log_start_offset(2, 0))
        .expect("delete records");
    assert_eq!(t1.high_watermark(), 2, "raised to the log start");
    let log = manager.get("t", 0).expect("t-0");
    assert_eq!(log.set_high_watermark(3), 3);
    assert_eq!(log.set_high_watermark(100), 5, "clamped to the log end");
    assert_eq!(log.set_high_watermark(3), 3);
    manager.shutdown().expect("shutdown");
    assert_eq!(
        fs::read_to_string(dir.path().join(REPLICATION_FILE_NAME)).expect("checkpoint"),
        "0\n2\nt 0 3\nt 1 2\n"
    );
    let manager = LogManager::open(&dirs, small_config()).expect("reopen");
    let hw = |p| manager.get("t", p).map(|l| l.high_watermark());
    assert_eq!((hw(0), hw(1)), (Some(3), Some(2)));
    // A partition missing from an existing file gets its log start offset.
    manager.shutdown().expect("shutdown");
    fs::write(dir.path().join(REPLICATION_FILE_NAME), "0\n1\nt 0 4\n").expect("edit");
    let manager = LogManager::open(&dirs, small_config()).expect("reopen");
    let hw = |p| manager.get("t", p).map(|l| l.high_watermark());
    assert_eq!((hw(0), hw(1)), (Some(4), Some(2)));
    manager.shutdown().expect("shutdown");
}

#[test]
fn without_a_checkpoint_file_the_high_watermark_is_the_log_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dirs = vec![dir.path().to_path_buf()];
    let manager = LogManager::open(&dirs, small_config()).expect("open");
    let log = manager
        .get_or_create("t", 0, small_config())
        .expect("create");
    log.with_log_blocking(|l| l.append(&mut batch(0, 5, 10), 0, 0))
        .expect("append");
    manager.shutdown().expect("shutdown");
    fs::remove_file(dir.path().join(REPLICATION_FILE_NAME)).expect("pre-replication dir");
    let manager = LogManager::open(&dirs, small_config()).expect("reopen");
    let log = manager.get("t", 0).expect("t-0");
    assert_eq!(log.high_watermark(), 5);
    assert!(
        dir.path().join(REPLICATION_FILE_NAME).exists(),
        "written at open"
    );
    manager.shutdown().expect("shutdown");
}

#[tokio::test]
async fn the_handle_wakes_waiters_on_high_watermark_moves_and_clamps_it_on_truncation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dirs = vec![dir.path().to_path_buf()];
    let manager = LogManager::open(&dirs, small_config()).expect("open");
    let log = manager
        .get_or_create("t", 0, small_config())
        .expect("create");
    let mut waiter = log.subscribe_appends();
    let mut records = Vec::new();
    for (base, epoch) in [(0, 1), (3, 1), (6, 2)] {
        records.extend_from_slice(&stamped(base, epoch, 3));
    }
    let appended = log
        .append_as_follower(Bytes::from(records), 0)
        .await
        .expect("append");
    assert_eq!(appended.log_end_offset, 9);
    assert!(waiter.has_changed().expect("open channel"));
    assert_eq!(*waiter.borrow_and_update(), 9);
    assert_eq!(log.latest_epoch(), Some(2));
    assert_eq!(log.set_high_watermark(9), 9);
    assert!(waiter.has_changed().expect("open channel"), "hw moves wake");
    assert_eq!(
        *waiter.borrow_and_update(),
        9,
        "the value stays the log end"
    );
    assert_eq!(log.set_high_watermark(9), 9);
    assert!(
        !waiter.has_changed().expect("open channel"),
        "no move, no wake"
    );
    assert_eq!(log.end_offset_for_epoch(1).await.expect("epoch"), (1, 6));
    assert_eq!(log.truncate_to(4).await.expect("truncate"), 3);
    assert_eq!((log.log_end_offset(), log.high_watermark()), (3, 3));
    assert_eq!(log.latest_epoch(), Some(1));
    log.assign_epoch_start(5).await.expect("lead");
    assert_eq!(log.latest_epoch(), Some(5));
    log.truncate_fully_and_start_at(20).await.expect("restart");
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.high_watermark()
        ),
        (20, 20, 20)
    );
    assert_eq!(log.latest_epoch(), None);
    manager.shutdown().expect("shutdown");
}
