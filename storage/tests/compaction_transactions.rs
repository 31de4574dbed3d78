//! Compaction of transactional data (Kafka's cleaner with `CleanedTransactionMetadata`):
//! records of aborted transactions go whatever their keys and never shadow an older
//! committed value; nothing at or past an open transaction is cleaned; a marker stays
//! while data of its transaction remains, then gets a delete horizon and goes in a
//! later pass; a reopen of the cleaned log (from its files or a full scan) rebuilds the
//! same transaction state.

mod common;

use std::path::Path;

use brook_storage::batch::{BatchHeader, BatchIter};
use brook_storage::testing::{encode_batch, TestBatch, TestRecord};
use brook_storage::{AbortedTxn, ControlType, Log, LogConfig};
use common::read_all;

const ABORT: ControlType = ControlType::Abort;
const COMMIT: ControlType = ControlType::Commit;
/// The horizon bit of a batch's attributes (KIP-534).
const DELETE_HORIZON: i16 = 0x40;

fn config() -> LogConfig {
    LogConfig {
        delete_retention_ms: 100,
        ..common::keyed::compact_config()
    }
}

/// Appends one transactional record `key=value` of producer `pid`; returns its offset.
fn put(log: &mut Log, pid: i64, seq: i32, key: &str, value: &str, now: i64) -> i64 {
    let mut batch = TestBatch::values(now, &[]).transactional(pid, 0, seq);
    batch.records = vec![TestRecord {
        key: Some(key.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        timestamp_delta: 0,
    }];
    log.append(&mut encode_batch(&batch), 0, now)
        .expect("append")
        .base_offset
}

fn end(log: &mut Log, pid: i64, kind: ControlType, now: i64) -> i64 {
    let mut batch = TestBatch::marker(pid, 0, kind, 0);
    batch.base_timestamp = now;
    log.append(&mut encode_batch(&batch), 0, now)
        .expect("append marker")
        .base_offset
}

/// Appends plain records of key `z` until everything before them is in closed segments.
fn roll(log: &mut Log, now: i64) {
    let target = log.log_end_offset();
    while log.segment_infos().last().map(|s| s.base_offset) < Some(target) {
        let mut batch = TestBatch::values(now, &[]);
        batch.records = vec![TestRecord {
            key: Some(b"z".to_vec()),
            value: Some(vec![b'f'; 40]),
            timestamp_delta: 0,
        }];
        log.append(&mut encode_batch(&batch), 0, now)
            .expect("append filler");
    }
}

/// (offset, key, value) of every readable data record but the `z` filler, as a
/// read_uncommitted consumer sees them.
fn records(log: &Log) -> Vec<(i64, String, String)> {
    common::keyed::readable(log)
        .into_iter()
        .map(|(o, k, v)| {
            let text =
                |b: Option<Vec<u8>>| String::from_utf8_lossy(&b.unwrap_or_default()).into_owned();
            (o, text(k), text(v))
        })
        .filter(|(_, k, _)| k != "z")
        .collect()
}

/// Every control batch: (offset, producer id, records, has a delete horizon).
fn control_batches(log: &Log) -> Vec<(i64, i64, i32, bool)> {
    let bytes = read_all(log);
    BatchIter::new(&bytes)
        .map(|r| r.expect("valid batch").1)
        .filter(BatchHeader::is_control)
        .map(|h| {
            (
                h.base_offset,
                h.producer_id,
                h.records_count,
                h.attributes & DELETE_HORIZON != 0,
            )
        })
        .collect()
}

/// The live (non-empty) marker at `offset`: `Some(has a horizon)`, `None` if gone.
fn marker_at(log: &Log, offset: i64) -> Option<bool> {
    control_batches(log)
        .into_iter()
        .find(|(o, _, n, _)| *o == offset && *n > 0)
        .map(|(_, _, _, horizon)| horizon)
}

/// What a reopen must rebuild.
#[derive(Debug, PartialEq, Eq)]
struct TxnState {
    aborted: Vec<AbortedTxn>,
    first_unstable: Option<i64>,
    ongoing: Vec<(i64, i64)>,
    records: Vec<(i64, String, String)>,
    log_end: i64,
}

fn state(log: &Log) -> TxnState {
    TxnState {
        aborted: log.aborted_transactions(0, i64::MAX),
        first_unstable: log.first_unstable_offset(),
        ongoing: log
            .ongoing_transactions()
            .iter()
            .map(|t| (t.producer_id, t.first_offset))
            .collect(),
        records: records(log),
        log_end: log.log_end_offset(),
    }
}

/// Shuts `log` down and reopens it from its files, then with a full scan: both must
/// rebuild the state it had. Returns the reopened log.
fn reopen_agrees(dir: &Path, mut log: Log, now: i64) -> Log {
    let before = state(&log);
    let point = log.flush_for_shutdown(now).expect("shutdown");
    drop(log);
    let log = Log::open_with_recovery_point(dir, config(), now, point).expect("reopen");
    assert_eq!(state(&log), before, "reopened from the files");
    drop(log);
    let log = Log::open(dir, config(), now).expect("reopen with a full scan");
    assert_eq!(state(&log), before, "reopened with a full scan");
    log
}

#[test]
fn aborted_records_go_and_never_shadow_a_committed_value_and_their_marker_goes_later() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    let a1 = put(&mut log, 1, 0, "a", "committed-a", 0);
    let b1 = put(&mut log, 1, 1, "b", "committed-b", 0);
    let commit1 = end(&mut log, 1, COMMIT, 0);
    // Producer 2 overwrites `a` and writes a new key, then aborts.
    put(&mut log, 2, 0, "a", "aborted-a", 0);
    put(&mut log, 2, 1, "c", "aborted-c", 0);
    let abort2 = end(&mut log, 2, ABORT, 0);
    // Both producers go on, so the aborted batches are not their last ones.
    let d1 = put(&mut log, 1, 2, "d", "committed-d", 0);
    end(&mut log, 1, COMMIT, 0);
    let e2 = put(&mut log, 2, 2, "e", "committed-e", 0);
    end(&mut log, 2, COMMIT, 0);
    roll(&mut log, 0);
    assert_eq!(log.aborted_transactions(0, i64::MAX).len(), 1);

    let outcome = log.clean(1_000, 1 << 20).expect("first pass");
    assert!(outcome.cleaned);
    let committed = vec![
        (a1, "a".to_string(), "committed-a".to_string()),
        (b1, "b".into(), "committed-b".into()),
        (d1, "d".into(), "committed-d".into()),
        (e2, "e".into(), "committed-e".into()),
    ];
    // Same offsets, the committed `a` kept: the aborted one never entered the key map.
    assert_eq!(records(&log), committed);
    // The abort marker stays (this pass still read its data), without a horizon; the
    // aborted entry goes with the data.
    assert_eq!(marker_at(&log, abort2), Some(false));
    assert_eq!(marker_at(&log, commit1), Some(false));
    assert!(
        log.aborted_transactions(0, i64::MAX).is_empty(),
        "{:?} {:?}",
        log.aborted_transactions(0, i64::MAX),
        log.segment_infos()
    );
    let mut log = reopen_agrees(dir.path(), log, 1_000);

    // A second pass (new dirty data): the abort marker's transaction has no data left,
    // it gets a horizon; the commit markers keep their transactions' data, and stay.
    roll(&mut log, 2_000);
    assert!(log.clean(2_000, 1 << 20).expect("second pass").cleaned);
    assert_eq!(marker_at(&log, abort2), Some(true));
    assert_eq!(marker_at(&log, commit1), Some(false));
    assert_eq!(records(&log), committed);
    // Not due before the horizon (2_000 + delete.retention.ms), due at it.
    assert_eq!(log.cleaning_priority(2_099), None);
    assert!(log.cleaning_priority(2_100).is_some());
    assert!(log.clean(2_100, 1 << 20).expect("third pass").cleaned);
    assert_eq!(marker_at(&log, abort2), None, "the marker is gone");
    assert_eq!(marker_at(&log, commit1), Some(false));
    assert_eq!(records(&log), committed);
    let log = reopen_agrees(dir.path(), log, 2_100);
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(
        log.producer_state()
            .entry(2)
            .map(|e| e.current_txn_first_offset),
        Some(None),
        "no transaction reopened"
    );
}

#[test]
fn a_commit_marker_goes_once_its_data_is_compacted_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    put(&mut log, 1, 0, "a", "old", 0);
    let commit = end(&mut log, 1, COMMIT, 0);
    // Producer 1 writes again (its last batch), and `a` is overwritten by a plain record.
    put(&mut log, 1, 1, "b", "b", 0);
    end(&mut log, 1, COMMIT, 0);
    let mut plain = TestBatch::values(0, &[]);
    plain.records = vec![TestRecord {
        key: Some(b"a".to_vec()),
        value: Some(b"new".to_vec()),
        timestamp_delta: 0,
    }];
    log.append(&mut encode_batch(&plain), 0, 0).expect("append");
    roll(&mut log, 0);
    assert!(log.clean(1_000, 1 << 20).expect("first pass").cleaned);
    // The superseded record went in this pass: its marker stays one more pass.
    assert_eq!(marker_at(&log, commit), Some(false));
    roll(&mut log, 1_000);
    assert!(log.clean(1_000, 1 << 20).expect("second pass").cleaned);
    assert_eq!(marker_at(&log, commit), Some(true));
    assert!(log.clean(1_100, 1 << 20).expect("third pass").cleaned);
    assert_eq!(marker_at(&log, commit), None);
    let values: Vec<String> = records(&log).into_iter().map(|(_, _, v)| v).collect();
    assert_eq!(values, vec!["b", "new"]);
    reopen_agrees(dir.path(), log, 1_100);
}

#[test]
fn an_open_transaction_is_never_cleaned_past_until_it_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    let committed = put(&mut log, 1, 0, "a", "committed", 0);
    end(&mut log, 1, COMMIT, 0);
    // Producer 3 opens a transaction; plain records overwrite its key after it.
    let open = put(&mut log, 3, 0, "a", "open", 0);
    let mut later = Vec::new();
    for (i, value) in ["plain-1", "plain-2"].into_iter().enumerate() {
        let mut plain = TestBatch::values(0, &[]);
        plain.records = vec![TestRecord {
            key: Some(b"a".to_vec()),
            value: Some(value.as_bytes().to_vec()),
            timestamp_delta: i as i64,
        }];
        later.push(
            log.append(&mut encode_batch(&plain), 0, 0)
                .expect("append")
                .base_offset,
        );
    }
    roll(&mut log, 0);
    let before = records(&log);
    assert_eq!(log.first_unstable_offset(), Some(open));
    let outcome = log.clean(1_000, 1 << 20).expect("clean");
    assert_eq!(
        outcome.first_dirty_offset, open,
        "cleaned up to the open transaction"
    );
    // Below it `a=committed` is the latest: everything stays.
    assert_eq!(records(&log), before);
    assert!(records(&log).iter().any(|(o, _, _)| *o == committed));
    // Nothing more is due while it stays open, however much is written after it.
    roll(&mut log, 1_000);
    assert_eq!(log.cleaning_priority(1_000), None);
    let mut log = reopen_agrees(dir.path(), log, 1_000);
    assert_eq!(log.first_unstable_offset(), Some(open));

    end(&mut log, 3, ABORT, 1_000);
    roll(&mut log, 1_000);
    assert!(log.clean(2_000, 1 << 20).expect("clean").cleaned);
    // The aborted record is the producer's last batch: kept empty; the rest by key.
    let values: Vec<String> = records(&log).into_iter().map(|(_, _, v)| v).collect();
    assert_eq!(values, vec!["plain-2"]);
    assert_eq!(
        log.aborted_transactions(0, i64::MAX)
            .iter()
            .map(|e| (e.producer_id, e.first_offset))
            .collect::<Vec<_>>(),
        vec![(3, open)],
        "indexed from the batch kept empty, as a replay rebuilds it"
    );
    let log = reopen_agrees(dir.path(), log, 2_000);
    assert_eq!(log.first_unstable_offset(), None);
    assert!(later.iter().all(|o| *o > open));
}

fn snapshots(dir: &Path) -> Vec<String> {
    common::files(dir)
        .into_iter()
        .filter(|f| f.ends_with(".snapshot"))
        .collect()
}

#[test]
fn a_marker_stays_while_a_snapshot_taken_inside_its_transaction_may_be_replayed_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    // A tombstone: its delete horizon makes a second pass due without a roll (a roll
    // writes a producer snapshot, and only two are kept).
    let mut tombstone = TestBatch::values(0, &[]);
    tombstone.records = vec![TestRecord {
        key: Some(b"t".to_vec()),
        value: None,
        timestamp_delta: 0,
    }];
    log.append(&mut encode_batch(&tombstone), 0, 0)
        .expect("append");
    put(&mut log, 2, 0, "a", "aborted-a", 0);
    // A producer snapshot while producer 2's transaction is open (the periodic
    // checkpoint writes one whenever the log is flushed to its end).
    let inside = log.flush_for_shutdown(0).expect("snapshot");
    // Aborted with a bumped epoch (as after a fencing InitProducerId), and the producer's
    // last word here: no batch of it stays, and no later marker would close a
    // transaction a replay reopened.
    let mut marker = TestBatch::marker(2, 1, ABORT, 0);
    marker.base_timestamp = 0;
    let abort = log
        .append(&mut encode_batch(&marker), 0, 0)
        .expect("append marker")
        .base_offset;
    assert_eq!(inside, abort);
    roll(&mut log, 0);
    let snapshots_inside = snapshots(dir.path());
    assert_eq!(snapshots_inside.len(), 2, "the one inside and the roll's");
    assert!(log.clean(1_000, 1 << 20).expect("first pass").cleaned);
    assert!(!records(&log).iter().any(|(_, _, v)| v == "aborted-a"));
    assert_eq!(marker_at(&log, abort), Some(false));
    // The tombstone's horizon passed: a second pass, which reads no data of the
    // transaction; its marker still stays, the snapshot inside could be loaded.
    assert!(log.clean(1_100, 1 << 20).expect("second pass").cleaned);
    assert_eq!(snapshots(dir.path()), snapshots_inside);
    assert_eq!(marker_at(&log, abort), Some(false));
    // A crash, and a recovery from that snapshot: its replay meets the marker, nothing
    // stays open.
    drop(log);
    let mut log =
        Log::open_with_recovery_point(dir.path(), config(), 1_100, inside).expect("recover");
    assert_eq!(log.first_unstable_offset(), None);
    // Once newer snapshots replaced it, the marker gets its horizon and goes.
    roll(&mut log, 2_000);
    roll(&mut log, 2_000);
    assert!(!snapshots(dir.path()).contains(&snapshots_inside[0]));
    assert!(log.clean(2_000, 1 << 20).expect("clean").cleaned);
    assert_eq!(marker_at(&log, abort), Some(true));
    assert!(log.clean(2_100, 1 << 20).expect("clean").cleaned);
    assert_eq!(marker_at(&log, abort), None);
    reopen_agrees(dir.path(), log, 2_100);
}
