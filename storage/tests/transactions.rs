//! Transactions (KIP-98, Transactions V1) in the partition log: transactional batches
//! and markers drive the producer state, the last stable offset, the aborted transaction
//! list and the `.txnindex` files, through appends, reopen (snapshot and full scan),
//! torn tails, truncation, retention, compaction and follower appends.

mod common;

use std::fs;
use std::path::Path;

use brook_storage::testing::{encode_batch, TestBatch, TestRecord};
use brook_storage::txn_index::{self, ENTRY_SIZE};
use brook_storage::{
    AbortedTxn, ControlType, Log, LogConfig, LogManager, OngoingTxn, StorageError,
};
use bytes::{Bytes, BytesMut};
use common::{read_all, small_config};

const ABORT: ControlType = ControlType::Abort;
const COMMIT: ControlType = ControlType::Commit;

/// A transactional batch of `count` keyed records from `pid` (epoch 0).
fn txn(pid: i64, seq: i32, count: usize) -> Vec<u8> {
    let mut batch = TestBatch::sized(1_000, count, 30).transactional(pid, 0, seq);
    for (i, r) in batch.records.iter_mut().enumerate() {
        r.key = Some(format!("k{pid}-{}", (seq as usize + i) % 3).into_bytes());
    }
    encode_batch(&batch)
}

fn marker(pid: i64, kind: ControlType) -> Vec<u8> {
    encode_batch(&TestBatch::marker(pid, 0, kind, 0))
}

fn append(log: &mut Log, mut bytes: Vec<u8>) -> i64 {
    log.append(&mut bytes, 0, 0).expect("append").base_offset
}

fn aborted(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id: pid,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

fn open_firsts(log: &Log) -> Vec<(i64, i64)> {
    log.ongoing_transactions()
        .iter()
        .map(|t: &OngoingTxn| (t.producer_id, t.first_offset))
        .collect()
}

/// Every aborted entry of the log, from its `.txnindex` files, in segment order.
fn txn_index_files(dir: &Path) -> Vec<AbortedTxn> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".txnindex"))
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|n| {
            let bytes = fs::read(dir.join(n)).expect("read txnindex");
            assert_eq!(bytes.len() % ENTRY_SIZE, 0, "{n} holds whole entries");
            txn_index::decode_valid(&bytes, 0, i64::MAX)
        })
        .collect()
}

/// p1 [0,1] p2 [2,3] p1 [4,5] ABORT p1 @6, COMMIT p2 @7, p3 [8,9], ABORT p3 @10,
/// p4 [11,12] (still open), p5 ABORT @13 without a transaction.
fn scenario(log: &mut Log) {
    assert_eq!(append(log, txn(1, 0, 2)), 0);
    assert_eq!(append(log, txn(2, 0, 2)), 2);
    assert_eq!(append(log, txn(1, 2, 2)), 4);
    assert_eq!(log.first_unstable_offset(), Some(0));
    assert_eq!(append(log, marker(1, ABORT)), 6);
    assert_eq!(log.first_unstable_offset(), Some(2));
    assert_eq!(append(log, marker(2, COMMIT)), 7);
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(append(log, txn(3, 0, 2)), 8);
    assert_eq!(append(log, marker(3, ABORT)), 10);
    assert_eq!(append(log, txn(4, 0, 2)), 11);
    assert_eq!(append(log, marker(5, ABORT)), 13);
}

fn scenario_aborted() -> Vec<AbortedTxn> {
    // p1's abort: p2's transaction (from 2) was still open.
    vec![aborted(1, 0, 6, 2), aborted(3, 8, 10, 11)]
}

fn assert_scenario_state(log: &Log) {
    assert_eq!(log.aborted_transactions(0, i64::MAX), scenario_aborted());
    assert_eq!(log.first_unstable_offset(), Some(11));
    assert_eq!(open_firsts(log), vec![(4, 11)]);
    assert_eq!(log.log_end_offset(), 14);
}

#[test]
fn commits_and_aborts_across_producers_keep_the_aborted_list_and_the_open_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).expect("open");
    scenario(&mut log);
    assert_scenario_state(&log);
    assert_eq!(txn_index_files(dir.path()), scenario_aborted());
    // The last stable offset: bounded by the open transaction and the high watermark.
    assert_eq!(log.last_stable_offset(14), 11);
    assert_eq!(log.last_stable_offset(9), 9);
    // A marker without a transaction moved only producer 5's epoch.
    assert_eq!(
        log.producer_state().entry(5).map(|e| e.producer_epoch),
        Some(0)
    );
}

#[test]
fn aborted_transactions_are_those_overlapping_the_fetch_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).expect("open");
    scenario(&mut log);
    let [p1, p3] = [scenario_aborted()[0], scenario_aborted()[1]];
    assert_eq!(log.aborted_transactions(0, 1), vec![p1]);
    assert_eq!(log.aborted_transactions(6, 7), vec![p1]);
    assert_eq!(log.aborted_transactions(7, 8), vec![]);
    assert_eq!(log.aborted_transactions(7, 9), vec![p3]);
    assert_eq!(log.aborted_transactions(3, 11), vec![p1, p3]);
    assert_eq!(log.aborted_transactions(11, 14), vec![]);
}

#[test]
fn a_marker_from_an_older_epoch_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).expect("open");
    let mut data = encode_batch(&TestBatch::sized(0, 1, 5).transactional(7, 3, 0));
    log.append(&mut data, 0, 0).expect("append");
    let mut fenced = encode_batch(&TestBatch::marker(7, 2, ABORT, 0));
    assert!(matches!(
        log.append(&mut fenced, 0, 0),
        Err(StorageError::InvalidProducerEpoch {
            current_epoch: 3,
            received_epoch: 2,
            ..
        })
    ));
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.first_unstable_offset(), Some(0));
    // The coordinator bumps the epoch to abort (InitProducerId fencing the old one).
    let mut bumped = encode_batch(&TestBatch::marker(7, 4, ABORT, 0));
    log.append(&mut bumped, 0, 0).expect("newer epoch");
    assert_eq!(log.aborted_transactions(0, 2), vec![aborted(7, 0, 1, 2)]);
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn a_malformed_marker_is_a_corrupt_batch_and_a_plain_batch_inside_a_transaction_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).expect("open");
    let mut bad = TestBatch::marker(7, 0, COMMIT, 0);
    bad.records = vec![TestRecord {
        key: Some(vec![0, 0, 0, 9]),
        value: Some(vec![0; 6]),
        timestamp_delta: 0,
    }];
    assert!(matches!(
        log.append(&mut encode_batch(&bad), 0, 0),
        Err(StorageError::CorruptBatch { .. })
    ));
    append(&mut log, txn(7, 0, 1));
    let mut plain = encode_batch(&TestBatch::sized(0, 1, 5).with_producer(7, 0, 1));
    assert!(matches!(
        log.append(&mut plain, 0, 0),
        Err(StorageError::InvalidTxnState { producer_id: 7, .. })
    ));
    assert_eq!(log.log_end_offset(), 1);
}

/// The scenario over several segments, with a clean shutdown's snapshot at the end.
fn rolled_scenario(dir: &Path) -> Log {
    let config = LogConfig {
        segment_bytes: 300,
        ..small_config()
    };
    let mut log = Log::open(dir, config, 0).expect("open");
    scenario(&mut log);
    assert!(log.segment_count() > 3, "the scenario spans segments");
    log
}

#[test]
fn a_reopen_from_the_snapshot_or_a_full_scan_restores_every_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = rolled_scenario(dir.path());
    let config = log.config().clone();
    let point = log.flush_for_shutdown(0).expect("shutdown");
    assert_eq!(point, 14);
    log.close(0).expect("close");
    let files = txn_index_files(dir.path());
    assert_eq!(files, scenario_aborted());

    // Trusted: nothing scanned, the state comes from the snapshot and the .txnindex files.
    let log = Log::open_with_recovery_point(dir.path(), config.clone(), 0, point).expect("reopen");
    assert_eq!(log.load_stats().scanned_segments, 0);
    assert_scenario_state(&log);
    drop(log);

    // Full scan: no snapshot, recovery point 0, the files rebuilt from the markers.
    for entry in fs::read_dir(dir.path()).expect("list") {
        let path = entry.expect("entry").path();
        let ext = path.extension().and_then(|e| e.to_str());
        if matches!(ext, Some("snapshot") | Some("txnindex")) {
            fs::remove_file(&path).expect("remove");
        }
    }
    let log = Log::open(dir.path(), config, 0).expect("reopen fully");
    assert_scenario_state(&log);
    assert_eq!(txn_index_files(dir.path()), scenario_aborted());
}

#[test]
fn a_crash_after_the_snapshot_replays_the_markers_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig::default();
    let mut log = Log::open(dir.path(), config.clone(), 0).expect("open");
    append(&mut log, txn(1, 0, 2));
    append(&mut log, txn(2, 0, 2));
    let point = log.flush_for_shutdown(0).expect("snapshot at 4");
    assert_eq!(point, 4);
    append(&mut log, marker(1, ABORT));
    append(&mut log, txn(3, 0, 1));
    append(&mut log, marker(2, ABORT));
    let expected = vec![aborted(1, 0, 4, 2), aborted(2, 2, 6, 5)];
    assert_eq!(log.aborted_transactions(0, 10), expected);
    drop(log); // a crash: no flush, no snapshot
    let log = Log::open_with_recovery_point(dir.path(), config, 0, point).expect("reopen");
    assert_eq!(log.aborted_transactions(0, 10), expected);
    assert_eq!(open_firsts(&log), vec![(3, 5)]);
    assert_eq!(txn_index_files(dir.path()), expected);
}

#[test]
fn a_torn_tail_keeps_an_abort_before_it_and_drops_one_it_cuts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig::default();
    let mut log = Log::open(dir.path(), config.clone(), 0).expect("open");
    append(&mut log, txn(1, 0, 2));
    append(&mut log, marker(1, ABORT));
    append(&mut log, txn(2, 0, 2));
    append(&mut log, marker(2, ABORT));
    drop(log);
    let segment = dir.path().join("00000000000000000000.log");
    let len = fs::metadata(&segment).expect("stat").len();
    // Garbage after the last marker: both aborts survive.
    let mut bytes = fs::read(&segment).expect("read");
    bytes.extend_from_slice(&[0xab; 40]);
    fs::write(&segment, &bytes).expect("write");
    let log = Log::open(dir.path(), config.clone(), 0).expect("reopen");
    assert_eq!(
        log.aborted_transactions(0, 10),
        vec![aborted(1, 0, 2, 3), aborted(2, 3, 5, 6)]
    );
    drop(log);
    // A tear inside the last marker: its abort goes and producer 2's transaction is open.
    let file = fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .expect("open segment");
    file.set_len(len - 5).expect("tear");
    drop(file);
    let log = Log::open(dir.path(), config, 0).expect("reopen");
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.aborted_transactions(0, 10), vec![aborted(1, 0, 2, 3)]);
    assert_eq!(log.first_unstable_offset(), Some(3));
    assert_eq!(txn_index_files(dir.path()), vec![aborted(1, 0, 2, 3)]);
}

#[test]
fn a_truncation_removes_the_aborts_it_cuts_and_reopens_their_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = rolled_scenario(dir.path());
    let config = log.config().clone();
    // Cut p3's abort marker (offset 10): its transaction is open again.
    assert_eq!(log.truncate_to(10).expect("truncate"), 10);
    assert_eq!(
        log.aborted_transactions(0, i64::MAX),
        vec![aborted(1, 0, 6, 2)]
    );
    assert_eq!(log.first_unstable_offset(), Some(8));
    assert_eq!(open_firsts(&log), vec![(3, 8)]);
    assert_eq!(txn_index_files(dir.path()), vec![aborted(1, 0, 6, 2)]);
    // The follower then appends the new leader's commit for it.
    append(&mut log, marker(3, COMMIT));
    assert_eq!(log.first_unstable_offset(), None);
    drop(log);
    let log = Log::open(dir.path(), config, 0).expect("reopen");
    assert_eq!(
        log.aborted_transactions(0, i64::MAX),
        vec![aborted(1, 0, 6, 2)]
    );
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn deleting_old_segments_deletes_their_aborted_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = rolled_scenario(dir.path());
    let mut config = log.config().clone();
    config.file_delete_delay_ms = 0;
    log.set_config(config.clone());
    // DeleteRecords past p1's abort (6) and into p3's transaction.
    let start = log
        .increment_log_start_offset(9, 0)
        .expect("delete records");
    assert_eq!(start, 9);
    let first_base = log.segment_stats()[0].base_offset;
    assert!(first_base > 6, "the segment with p1's abort went");
    assert_eq!(
        log.aborted_transactions(0, i64::MAX),
        vec![aborted(3, 8, 10, 11)]
    );
    assert_eq!(txn_index_files(dir.path()), vec![aborted(3, 8, 10, 11)]);
    drop(log);
    let log = Log::open(dir.path(), config, 0).expect("reopen");
    assert_eq!(
        log.aborted_transactions(0, i64::MAX),
        vec![aborted(3, 8, 10, 11)]
    );
}

/// A compacting log with the scenario then committed transactions of producer 9, all
/// closed in small segments.
fn compacting_scenario(dir: &Path) -> (Log, LogConfig) {
    let config = LogConfig {
        file_delete_delay_ms: 0,
        ..common::keyed::compact_config()
    };
    let mut log = Log::open(dir, config.clone(), 0).expect("open");
    scenario(&mut log);
    for seq in 0..6 {
        append(&mut log, txn(9, seq * 2, 2));
        append(&mut log, marker(9, COMMIT));
    }
    // Larger segments from now on: a clean merges the small closed ones into one group.
    let config = LogConfig {
        segment_bytes: 100_000,
        ..config
    };
    log.set_config(config.clone());
    (log, config)
}

/// The scenario's aborted entries once cleaned: the data of both aborted transactions
/// is gone, except each producer's last batch, kept empty for its sequence state (p1's
/// [4,5], p3's [8,9]); an entry stays for those, from the batch kept.
fn cleaned_aborted() -> Vec<AbortedTxn> {
    vec![aborted(1, 4, 6, 2), aborted(3, 8, 10, 11)]
}

#[test]
fn compaction_drops_aborted_records_and_indexes_what_a_replay_rebuilds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, config) = compacting_scenario(dir.path());
    assert_eq!(log.aborted_transactions(0, i64::MAX), scenario_aborted());
    let segments_before = log.segment_count();
    let outcome = log.clean(100_000, 1 << 20).expect("clean");
    assert!(outcome.cleaned);
    // Nothing at or past p4's open transaction (from 11) is cleaned.
    assert_eq!(outcome.first_dirty_offset, 11);
    assert!(
        log.segment_count() < segments_before,
        "segments were merged"
    );
    assert_eq!(log.aborted_transactions(0, i64::MAX), cleaned_aborted());
    let first = fs::read(dir.path().join("00000000000000000000.txnindex")).expect("read");
    assert_eq!(
        txn_index::decode_valid(&first, 0, i64::MAX),
        cleaned_aborted()
    );
    assert_eq!(txn_index_files(dir.path()), cleaned_aborted());
    let keys = |log: &Log| -> Vec<String> {
        common::keyed::readable(log)
            .into_iter()
            .map(|(_, k, _)| String::from_utf8_lossy(&k.unwrap_or_default()).into_owned())
            .collect()
    };
    let kept = keys(&log);
    assert!(
        kept.iter().any(|k| k.starts_with("k2-")),
        "committed data stays"
    );
    assert!(
        !kept
            .iter()
            .any(|k| k.starts_with("k1-") || k.starts_with("k3-")),
        "aborted data is gone: {kept:?}"
    );
    assert_eq!(log.first_unstable_offset(), Some(11));
    let point = log.flush_for_shutdown(100_000).expect("shutdown");
    drop(log);
    // From the files (trusted segments) and from a full scan: the same state.
    let log = Log::open_with_recovery_point(dir.path(), config.clone(), 0, point).expect("reopen");
    assert_eq!(log.load_stats().scanned_segments, 0);
    assert_eq!(log.aborted_transactions(0, i64::MAX), cleaned_aborted());
    assert_eq!(keys(&log), kept);
    drop(log);
    let log = Log::open(dir.path(), config, 0).expect("reopen fully");
    assert_eq!(log.aborted_transactions(0, i64::MAX), cleaned_aborted());
    assert_eq!(txn_index_files(dir.path()), cleaned_aborted());
    assert_eq!(log.first_unstable_offset(), Some(11));
    assert_eq!(open_firsts(&log), vec![(4, 11)]);
    assert_eq!(keys(&log), kept);
}

/// `b` holds the uncleaned log, cleanly shut down; `a`'s cleaned group is put into it
/// as swap files: `b` crashed right after the clean's commit point. Returns the recovery
/// point of `b` and the aborted list.
fn crashed_after_commit(a: &Path, b: &Path) -> (i64, Vec<AbortedTxn>) {
    let (mut cleaned, _) = compacting_scenario(a);
    let (mut uncleaned, _) = compacting_scenario(b);
    assert!(cleaned.clean(100_000, 1 << 20).expect("clean").cleaned);
    let aborted = cleaned.aborted_transactions(0, i64::MAX);
    cleaned.close(100_000).expect("close");
    let point = uncleaned.flush_for_shutdown(100_000).expect("shutdown");
    drop(uncleaned);
    assert!(
        txn_index_files(b).len() == 2,
        "two segments held the aborts"
    );
    for entry in fs::read_dir(a).expect("list") {
        let name = entry.expect("entry").file_name();
        let name = name.to_string_lossy();
        let bytes = fs::read(a.join(&*name)).expect("read");
        let differs = fs::read(b.join(&*name)).ok().as_ref() != Some(&bytes);
        if (name.ends_with(".log") || name.ends_with(".txnindex")) && differs {
            fs::write(b.join(format!("{name}.swap")), bytes).expect("write swap");
        }
    }
    assert!(b.join("00000000000000000000.txnindex.swap").exists());
    (point, aborted)
}

#[test]
fn a_clean_interrupted_after_its_commit_point_installs_the_merged_txn_index() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let (point, aborted) = crashed_after_commit(a.path(), b.path());
    let config = LogConfig {
        segment_bytes: 100_000,
        ..common::keyed::compact_config()
    };
    // With the snapshot at the end, nothing is replayed: the entries come from the file.
    let log = Log::open_with_recovery_point(b.path(), config, 0, point).expect("recover");
    assert_eq!(log.aborted_transactions(0, i64::MAX), aborted);
    assert_eq!(txn_index_files(b.path()), aborted);
    assert!(!b.path().join("00000000000000000000.txnindex.swap").exists());
}

#[test]
fn a_txn_index_swap_without_its_log_swap_is_dropped() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let (point, aborted) = crashed_after_commit(a.path(), b.path());
    for entry in fs::read_dir(b.path()).expect("list") {
        let path = entry.expect("entry").path();
        if path.to_string_lossy().ends_with(".log.swap") {
            fs::remove_file(path).expect("remove");
        }
    }
    let config = LogConfig {
        segment_bytes: 100_000,
        ..common::keyed::compact_config()
    };
    let log = Log::open_with_recovery_point(b.path(), config, 0, point).expect("recover");
    // The uncleaned segments, with their own entries.
    assert_ne!(aborted, scenario_aborted());
    assert_eq!(log.aborted_transactions(0, i64::MAX), scenario_aborted());
    assert!(!b.path().join("00000000000000000000.txnindex.swap").exists());
    assert_eq!(
        log.load_stats().scanned_segments,
        0,
        "the old segments stay trusted"
    );
}

#[test]
fn a_follower_builds_the_same_transaction_state_as_its_leader() {
    let (a, b) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut leader = rolled_scenario(a.path());
    let mut follower = Log::open(b.path(), leader.config().clone(), 0).expect("open");
    // Fetched in two chunks, the first ending inside the scenario.
    let all = read_all(&leader);
    let mut at = 0;
    for chunk_end in [all.len() / 2, all.len()] {
        let appended = follower
            .append_as_follower(&all[at..chunk_end], 0)
            .expect("follower append");
        let consumed = brook_storage::batch::BatchIter::new(&all[at..chunk_end])
            .filter_map(|r| r.ok())
            .last()
            .map_or(0, |(pos, h)| pos + h.size());
        assert!(appended.appended_batches > 0);
        at += consumed;
    }
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_scenario_state(&follower);
    assert_eq!(txn_index_files(b.path()), scenario_aborted());
    // A marker the leader appends later reaches the follower through the inline path.
    let end = leader.log_end_offset();
    append(&mut leader, marker(4, ABORT));
    let tail = leader
        .read(end, 1 << 20, i64::MAX, brook_storage::MinOneBatch::Yes)
        .expect("read tail");
    follower
        .append_as_follower(&tail.records, 0)
        .expect("follower append");
    assert_eq!(
        follower.aborted_transactions(11, 15),
        leader.aborted_transactions(11, 15)
    );
    assert_eq!(follower.first_unstable_offset(), None);
}

#[tokio::test]
async fn the_handle_publishes_the_last_stable_offset_and_the_aborted_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = LogManager::open(&[dir.path().to_path_buf()], small_config()).expect("open");
    let log = manager
        .get_or_create("txns", 0, small_config())
        .expect("create");
    let put = |bytes: Vec<u8>| BytesMut::from(&bytes[..]);
    log.append(put(encode_batch(&TestBatch::sized(0, 2, 5))), 0, 0)
        .await
        .expect("plain");
    log.append(put(txn(1, 0, 2)), 0, 0).await.expect("txn");
    log.set_high_watermark(4);
    assert_eq!(log.last_stable_offset(), 2);
    assert_eq!(log.first_unstable_offset(), Some(2));
    assert_eq!(
        log.ongoing_transactions()
            .iter()
            .map(|t| (t.producer_id, t.producer_epoch, t.first_offset))
            .collect::<Vec<_>>(),
        vec![(1, 0, 2)]
    );
    log.append(put(marker(1, ABORT)), 0, 0)
        .await
        .expect("abort");
    assert!(log.ongoing_transactions().is_empty());
    assert_eq!(log.aborted_transactions(0, 5), vec![aborted(1, 2, 4, 5)]);
    // The marker (offset 4) is not below the high watermark yet: still unstable.
    assert_eq!(log.last_stable_offset(), 2);
    log.set_high_watermark(5);
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), 5);
    // A follower's path too.
    let follower = manager
        .get_or_create("txns", 1, small_config())
        .expect("create");
    let fetched = log
        .read(0, 1 << 20, 5, brook_storage::MinOneBatch::Yes)
        .await
        .expect("read");
    follower
        .append_as_follower(Bytes::from(fetched.records.to_vec()), 0)
        .await
        .expect("follower append");
    assert_eq!(
        follower.aborted_transactions(0, 5),
        vec![aborted(1, 2, 4, 5)]
    );
    // DeleteRecords into an open transaction: the LSO never goes below the log start.
    log.append(put(txn(2, 0, 2)), 0, 0).await.expect("txn");
    log.set_high_watermark(7);
    assert_eq!(log.last_stable_offset(), 5);
    log.increment_log_start_offset(6, 0)
        .await
        .expect("delete records");
    assert_eq!(log.first_unstable_offset(), Some(6));
    assert_eq!(log.last_stable_offset(), 6);
    manager.shutdown().expect("shutdown");
}
