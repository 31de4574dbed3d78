//! The transaction state machine against Kafka's transitions and error choices, and the
//! load of `__transaction_state` records written by the coordinator's own encoder.

use std::collections::{BTreeSet, HashMap};

use brook_storage::{LogConfig, LogManager};

use super::log::encode_batch;
use super::records::TXN_STATE_TOPIC;
use super::shards::load;
use super::state::{EndStep, InitStep, Transit, TxnMetadata, TxnState, NO_PRODUCER_EPOCH};
use super::TxnError;

const PID: i64 = 1000;
const TIMEOUT: i32 = 60_000;
/// Client transaction versions: Transactions V1 (EndTxn ≤ v4) and V2 (EndTxn v5).
const V1: i16 = 0;
const V2: i16 = 2;

fn tps(list: &[(&str, i32)]) -> BTreeSet<(String, i32)> {
    list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

fn written(meta: &mut TxnMetadata, t: Transit) {
    meta.complete(t).expect("a valid transition");
}

/// A new id initialised once: Empty at epoch 0.
fn initialised() -> TxnMetadata {
    let mut meta = TxnMetadata::new("t", PID, TIMEOUT, 1);
    match meta.prepare_init(TIMEOUT, None, None, 2) {
        Ok(InitStep::Write(t)) => written(&mut meta, t),
        other => panic!("unexpected {other:?}"),
    }
    meta
}

fn ongoing() -> TxnMetadata {
    let mut meta = initialised();
    let t = meta
        .prepare_add_partitions(PID, 0, &tps(&[("a", 0), ("b", 1)]), V1, 10)
        .expect("add")
        .expect("a change");
    written(&mut meta, t);
    meta
}

#[test]
fn a_new_transactional_id_starts_empty_at_epoch_zero() {
    let meta = initialised();
    assert_eq!(meta.state, TxnState::Empty);
    assert_eq!((meta.producer_id, meta.producer_epoch), (PID, 0));
    assert!(meta.pending.is_none());
}

#[test]
fn adding_partitions_opens_the_transaction_and_repeats_are_free() {
    let mut meta = ongoing();
    assert_eq!(meta.state, TxnState::Ongoing);
    assert_eq!(meta.start_timestamp_ms, 10);
    assert_eq!(meta.partitions, tps(&[("a", 0), ("b", 1)]));
    let again = meta.prepare_add_partitions(PID, 0, &tps(&[("a", 0)]), V1, 20);
    assert_eq!(again, Ok(None));
    let more = meta
        .prepare_add_partitions(PID, 0, &tps(&[("c", 0)]), V1, 30)
        .expect("add")
        .expect("a change");
    assert_eq!(
        more.start_timestamp_ms, 10,
        "the start stays the first add's"
    );
    assert_eq!(more.partitions.len(), 3);
}

#[test]
fn commit_goes_through_prepare_to_complete_and_a_retry_succeeds() {
    let mut meta = ongoing();
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, 0, true, V1, None, 40) else {
        panic!("expected a prepare");
    };
    assert_eq!(t.state, TxnState::PrepareCommit);
    written(&mut meta, t);
    // While prepared (the markers are out), every end and add waits, as Kafka's pending
    // Complete* state makes them: the same outcome, the other one, a wrong epoch.
    for (epoch, commit) in [(0, true), (0, false), (7, false)] {
        assert_eq!(
            meta.prepare_end(PID, epoch, commit, V1, None, 41),
            Err(TxnError::ConcurrentTransactions)
        );
    }
    assert_eq!(
        meta.prepare_add_partitions(PID, 0, &tps(&[("a", 0)]), V1, 41),
        Err(TxnError::ConcurrentTransactions)
    );
    let done = meta.prepare_complete(50).expect("complete");
    assert!(done.partitions.is_empty());
    written(&mut meta, done);
    assert_eq!(meta.state, TxnState::CompleteCommit);
    assert_eq!(
        meta.prepare_end(PID, 0, true, V1, None, 60),
        Ok(EndStep::AlreadyDone)
    );
    assert_eq!(
        meta.prepare_end(PID, 0, false, V1, None, 60),
        Err(TxnError::InvalidTxnState)
    );
    // The next transaction starts afresh.
    let next = meta
        .prepare_add_partitions(PID, 0, &tps(&[("z", 0)]), V1, 70)
        .expect("add")
        .expect("a change");
    assert_eq!(next.partitions, tps(&[("z", 0)]));
    assert_eq!(next.start_timestamp_ms, 70);
}

#[test]
fn ending_without_a_transaction_is_an_invalid_state() {
    let mut meta = initialised();
    assert_eq!(
        meta.prepare_end(PID, 0, true, V1, None, 5),
        Err(TxnError::InvalidTxnState)
    );
}

#[test]
fn wrong_producer_ids_and_epochs_are_refused_with_kafkas_codes() {
    let mut meta = ongoing();
    assert_eq!(
        meta.prepare_end(PID + 1, 0, true, V1, None, 5),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        meta.prepare_end(PID, 1, true, V1, None, 5),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        meta.prepare_add_partitions(PID, 3, &tps(&[("a", 0)]), V1, 5),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn a_pending_write_makes_every_other_change_wait() {
    let mut meta = ongoing();
    let _t = meta
        .prepare_add_partitions(PID, 0, &tps(&[("c", 0)]), V1, 5)
        .expect("add")
        .expect("a change");
    assert_eq!(
        meta.prepare_end(PID, 0, true, V1, None, 5),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        meta.prepare_init(TIMEOUT, None, None, 5),
        Err(TxnError::ConcurrentTransactions)
    );
    meta.abandon(false);
    assert!(meta.prepare_end(PID, 0, true, V1, None, 5).is_ok());
}

#[test]
fn init_on_an_open_transaction_fences_the_producer_and_aborts_it() {
    let mut meta = ongoing();
    let Ok(InitStep::FenceAndAbort(t)) = meta.prepare_init(TIMEOUT, None, None, 50) else {
        panic!("expected a fence");
    };
    assert_eq!(t.state, TxnState::PrepareAbort);
    assert_eq!(t.producer_epoch, 1);
    assert_eq!(t.partitions, tps(&[("a", 0), ("b", 1)]));
    written(&mut meta, t);
    // While the abort's markers are out, the old producer's end and a retried init wait;
    // once it completed, the old producer is fenced.
    assert_eq!(
        meta.prepare_end(PID, 0, true, V1, None, 51),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        meta.prepare_init(TIMEOUT, None, None, 51),
        Err(TxnError::ConcurrentTransactions)
    );
    let done = meta.prepare_complete(52).expect("complete");
    written(&mut meta, done);
    assert_eq!(meta.state, TxnState::CompleteAbort);
    assert_eq!(
        meta.prepare_end(PID, 0, true, V1, None, 52),
        Err(TxnError::ProducerFenced)
    );
    let Ok(InitStep::Write(t)) = meta.prepare_init(TIMEOUT, None, None, 53) else {
        panic!("expected a new epoch");
    };
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.state),
        (PID, 2, TxnState::Empty)
    );
}

#[test]
fn a_fence_whose_write_failed_does_not_bump_the_epoch_twice() {
    let mut meta = ongoing();
    let t = meta.prepare_fence_abort(100).expect("fence");
    assert_eq!(t.producer_epoch, 1);
    meta.abandon(true);
    assert!(meta.failed_epoch_fence);
    let again = meta.prepare_fence_abort(101).expect("fence");
    assert_eq!(again.producer_epoch, 1);
    written(&mut meta, again);
    let done = meta.prepare_complete(102).expect("complete");
    written(&mut meta, done);
    assert!(!meta.failed_epoch_fence);
}

#[test]
fn an_exhausted_epoch_rotates_to_a_new_producer_id() {
    let mut meta = initialised();
    meta.producer_epoch = i16::MAX - 1;
    assert!(meta.needs_new_producer_id(None));
    assert_eq!(
        meta.prepare_init(TIMEOUT, None, None, 5),
        Err(TxnError::ConcurrentTransactions),
        "no id was allocated for it"
    );
    meta.pending = None;
    let Ok(InitStep::Write(t)) = meta.prepare_init(TIMEOUT, None, Some(PID + 7), 5) else {
        panic!("expected a rotation");
    };
    assert_eq!((t.producer_id, t.producer_epoch), (PID + 7, 0));
    assert_eq!(t.last_producer_id, PID);
    assert_eq!(t.last_producer_epoch, NO_PRODUCER_EPOCH);
}

#[test]
fn a_reinitialising_producer_is_checked_against_the_current_and_last_epochs() {
    let mut meta = initialised();
    // KIP-360: the current producer bumps its own epoch.
    let Ok(InitStep::Write(t)) = meta.prepare_init(TIMEOUT, Some((PID, 0)), None, 5) else {
        panic!("expected a bump");
    };
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (1, 0));
    written(&mut meta, t);
    // A retry of that call (the response was lost) gets the same epoch again.
    let Ok(InitStep::Write(t)) = meta.prepare_init(TIMEOUT, Some((PID, 0)), None, 6) else {
        panic!("expected the same epoch");
    };
    assert_eq!(t.producer_epoch, 1);
    meta.abandon(false);
    // An older epoch, or another producer id, is fenced.
    meta.last_producer_epoch = NO_PRODUCER_EPOCH;
    assert_eq!(
        meta.prepare_init(TIMEOUT, Some((PID, 0)), None, 7),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        meta.prepare_init(TIMEOUT, Some((PID + 1, 1)), None, 7),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn timeouts_and_expiry_follow_the_configured_durations() {
    let meta = ongoing();
    assert!(!meta.timed_out(10 + i64::from(TIMEOUT)));
    assert!(meta.timed_out(11 + i64::from(TIMEOUT)));
    assert!(
        !meta.expired(i64::MAX / 2, 1),
        "an open transaction never expires"
    );
    let mut idle = initialised();
    assert!(!idle.expired(2 + 999, 1000));
    assert!(idle.expired(2 + 1000, 1000));
    let dead = idle.prepare_dead().expect("dead");
    written(&mut idle, dead);
    assert_eq!(idle.state, TxnState::Dead);
}

#[test]
fn transitions_kafka_forbids_are_refused_when_applied() {
    let mut meta = initialised();
    let mut bogus = meta.prepare_complete(5);
    assert_eq!(bogus, Err(TxnError::InvalidTxnState));
    meta.pending = Some(TxnState::CompleteCommit);
    bogus = Ok(Transit {
        producer_id: PID,
        last_producer_id: -1,
        producer_epoch: 0,
        last_producer_epoch: -1,
        timeout_ms: TIMEOUT,
        state: TxnState::CompleteCommit,
        partitions: BTreeSet::new(),
        start_timestamp_ms: -1,
        last_update_timestamp_ms: 5,
        next_producer_id: -1,
        client_version: V1,
    });
    assert_eq!(
        meta.complete(bogus.expect("built")),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(meta.state, TxnState::Empty);
}

#[test]
fn state_ids_and_names_are_kafkas() {
    for state in TxnState::ALL {
        assert_eq!(TxnState::from_id(state.id()), Some(state));
        assert_eq!(TxnState::from_name(state.name()), Some(state));
    }
    assert_eq!(TxnState::PrepareEpochFence.id(), 7);
    assert_eq!(TxnState::CompleteAbort.name(), "CompleteAbort");
}

#[tokio::test]
async fn loading_a_partition_keeps_each_ids_latest_record_and_drops_tombstones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let logs = LogManager::open(&[dir.path().join("logs")], LogConfig::default()).expect("logs");
    let log = logs
        .get_or_create(TXN_STATE_TOPIC, 7, LogConfig::default())
        .expect("log");
    let mut a = ongoing();
    a.transactional_id = "a".into();
    let mut prepared = a.clone();
    let Ok(EndStep::Write(t)) = prepared.prepare_end(PID, 0, false, V1, None, 40) else {
        panic!("expected a prepare");
    };
    let mut b = initialised();
    b.transactional_id = "b".into();
    let value_of = |m: &TxnMetadata| super::records::TxnLogValue {
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        timeout_ms: m.timeout_ms,
        state: m.state,
        partitions: m.partitions.clone(),
        last_update_timestamp_ms: m.last_update_timestamp_ms,
        start_timestamp_ms: m.start_timestamp_ms,
        previous_producer_id: -1,
        next_producer_id: -1,
        client_version: 0,
    };
    let a_ongoing = value_of(&a);
    let b_empty = value_of(&b);
    let records: Vec<(&str, Option<super::records::TxnLogValue>)> = vec![
        ("a", Some(a_ongoing)),
        ("b", Some(b_empty)),
        ("a", Some(t.log_value())),
        ("b", None),
    ];
    for (id, value) in &records {
        let batch = encode_batch(id, value.as_ref(), 5).expect("encode");
        log.append(batch, 0, 5).await.expect("append");
    }
    let loaded: HashMap<String, TxnMetadata> = load(&log).await.expect("load");
    assert_eq!(loaded.len(), 1, "b was tombstoned");
    let a = &loaded["a"];
    assert_eq!(a.state, TxnState::PrepareAbort);
    assert_eq!(a.partitions, tps(&[("a", 0), ("b", 1)]));
    assert_eq!(a.start_timestamp_ms, 10);
    assert!(a.pending.is_none());
}

/// A Transactions V2 transaction: the leader adds the partition, EndTxn bumps the epoch.
fn ongoing_v2(epoch: i16) -> TxnMetadata {
    let mut meta = initialised();
    meta.producer_epoch = epoch;
    let t = meta
        .prepare_add_partitions(PID, epoch, &tps(&[("a", 0)]), V2, 10)
        .expect("add")
        .expect("a change");
    written(&mut meta, t);
    assert!(meta.is_v2());
    meta
}

#[test]
fn a_transactions_v2_end_bumps_the_epoch_and_a_retry_names_the_epoch_before_it() {
    let mut meta = ongoing_v2(0);
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, 0, true, V2, None, 20) else {
        panic!("expected a prepare");
    };
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (1, 0));
    written(&mut meta, t);
    // While the markers are written the retry waits; the old epoch is not fenced.
    assert_eq!(
        meta.prepare_end(PID, 0, true, V2, None, 21),
        Err(TxnError::ConcurrentTransactions)
    );
    let t = meta.prepare_complete(30).expect("complete");
    written(&mut meta, t);
    assert_eq!(meta.next_transaction_producer(), (PID, 1));
    assert_eq!(
        meta.prepare_end(PID, 0, true, V2, None, 31),
        Ok(EndStep::AlreadyDone)
    );
    assert_eq!(
        meta.prepare_end(PID, 0, false, V2, None, 31),
        Err(TxnError::InvalidTxnState)
    );
    // The next transaction runs at epoch 1; epoch 0 can no longer add partitions.
    assert_eq!(
        meta.prepare_add_partitions(PID, 0, &tps(&[("a", 0)]), V2, 32),
        Err(TxnError::ProducerFenced)
    );
    let t = meta
        .prepare_add_partitions(PID, 1, &tps(&[("b", 0)]), V2, 33)
        .expect("add")
        .expect("a change");
    written(&mut meta, t);
    assert_eq!(meta.partitions, tps(&[("b", 0)]));
    assert_eq!(
        meta.prepare_end(PID, 0, true, V2, None, 34),
        Err(TxnError::ProducerFenced)
    );
}

/// franz-go's `GroupTransactSession` across brokers (issue #29): a commit answered at
/// PrepareCommit hands out epoch 1; the producer begins its next transaction, its first
/// produce fails (a rebalance), and it aborts at epoch 1 while the commit's markers are
/// still out. Kafka answers CONCURRENT_TRANSACTIONS until they are written, then takes
/// the abort; answering PRODUCER_FENCED killed the producer.
#[test]
fn a_transactions_v2_abort_sent_while_the_commits_markers_are_out_waits_for_them() {
    let mut meta = ongoing_v2(0);
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, 0, true, V2, None, 20) else {
        panic!("expected a prepare");
    };
    written(&mut meta, t);
    assert_eq!(meta.next_transaction_producer(), (PID, 1));
    assert_eq!(
        meta.prepare_end(PID, 1, false, V2, None, 21),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        meta.prepare_add_partitions(PID, 1, &tps(&[("b", 0)]), V2, 21),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        meta.verify_partitions(PID, 1),
        Err(TxnError::ConcurrentTransactions)
    );
    let t = meta.prepare_complete(30).expect("complete");
    written(&mut meta, t);
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, 1, false, V2, None, 31) else {
        panic!("expected the abort to be written once the commit completed");
    };
    assert_eq!(
        (t.state, t.producer_epoch, t.partitions.len()),
        (TxnState::PrepareAbort, 2, 0)
    );
}

#[test]
fn a_transactions_v2_abort_is_accepted_without_a_transaction_and_commit_is_not() {
    let mut meta = ongoing_v2(3);
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, 3, true, V2, None, 20) else {
        panic!("expected a prepare");
    };
    written(&mut meta, t);
    let t = meta.prepare_complete(30).expect("complete");
    written(&mut meta, t);
    // Epoch 4 is the next transaction's, which never produced: abort is written anyway.
    assert_eq!(
        meta.prepare_end(PID, 4, true, V2, None, 40),
        Err(TxnError::InvalidTxnState)
    );
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, 4, false, V2, None, 41) else {
        panic!("expected an abort");
    };
    assert_eq!(t.state, TxnState::PrepareAbort);
    assert!(t.partitions.is_empty());
    assert_eq!(t.producer_epoch, 5);
    written(&mut meta, t);
}

#[test]
fn a_transactions_v2_end_with_an_exhausted_epoch_hands_over_to_a_new_producer_id() {
    let mut meta = ongoing_v2(i16::MAX - 2);
    assert!(!meta.end_needs_new_producer_id(V2));
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, i16::MAX - 2, true, V2, None, 20) else {
        panic!("expected a prepare");
    };
    written(&mut meta, t);
    let t = meta.prepare_complete(21).expect("complete");
    written(&mut meta, t);
    let t = meta
        .prepare_add_partitions(PID, i16::MAX - 1, &tps(&[("a", 0)]), V2, 22)
        .expect("add")
        .expect("a change");
    written(&mut meta, t);
    assert!(meta.end_needs_new_producer_id(V2));
    assert_eq!(
        meta.prepare_end(PID, i16::MAX - 1, true, V2, None, 23),
        Err(TxnError::ConcurrentTransactions),
        "the caller must allocate the new id first"
    );
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, i16::MAX - 1, true, V2, Some(PID + 7), 24)
    else {
        panic!("expected a prepare");
    };
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.next_producer_id),
        (PID, i16::MAX, PID + 7)
    );
    written(&mut meta, t);
    assert_eq!(meta.next_transaction_producer(), (PID + 7, 0));
    let t = meta.prepare_complete(25).expect("complete");
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.last_producer_id),
        (PID + 7, 0, PID)
    );
    written(&mut meta, t);
    // The old id's retry is recognised.
    assert_eq!(
        meta.prepare_end(PID, i16::MAX - 1, true, V2, None, 26),
        Ok(EndStep::AlreadyDone)
    );
}

#[test]
fn a_timed_out_transactions_v2_producers_late_commit_is_an_invalid_state_and_its_abort_succeeds() {
    let mut meta = ongoing_v2(2);
    let t = meta.prepare_fence_abort(50).expect("fence");
    assert_eq!(t.producer_epoch, 3);
    written(&mut meta, t);
    let t = meta.prepare_complete(51).expect("complete");
    written(&mut meta, t);
    assert_eq!(
        meta.prepare_end(PID, 2, true, V2, None, 52),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(
        meta.prepare_end(PID, 2, false, V2, None, 52),
        Ok(EndStep::AlreadyDone)
    );
    assert_eq!(
        meta.prepare_end(PID, 1, false, V2, None, 52),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn verification_lists_the_ongoing_transactions_partitions_and_none_outside_one() {
    let mut meta = ongoing_v2(0);
    assert_eq!(meta.verify_partitions(PID, 0), Ok(tps(&[("a", 0)])));
    assert_eq!(
        meta.verify_partitions(PID, 1),
        Err(TxnError::ProducerFenced)
    );
    let Ok(EndStep::Write(t)) = meta.prepare_end(PID, 0, true, V2, None, 20) else {
        panic!("expected a prepare");
    };
    written(&mut meta, t);
    let t = meta.prepare_complete(30).expect("complete");
    written(&mut meta, t);
    assert_eq!(meta.verify_partitions(PID, 1), Ok(BTreeSet::new()));
}
