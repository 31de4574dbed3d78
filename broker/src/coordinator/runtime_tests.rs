//! The coordinator runtime hosting the transaction coordinator's shards, in-process over a
//! replica manager on real logs: a partition this broker starts leading is loaded by
//! replaying what was written through the partition writer, and unloaded when the
//! leadership moves; a load overtaken by a leadership change is dropped.

use std::collections::BTreeSet;

use tokio_util::sync::CancellationToken;

use super::{Load, OnNewEpoch};
use crate::config::BrokerConfig;
use crate::coordinator::txn::log::{self as txn_log, PartitionLocks};
use crate::coordinator::txn::records::TxnLogValue;
use crate::coordinator::txn::state::TxnState;
use crate::coordinator::txn::{TxnConfig, TxnCoordinator};
use crate::coordinator::writer::tests::{image, Node};

fn coordinator() -> TxnCoordinator {
    let config = BrokerConfig::load(None, Vec::new(), &[])
        .expect("default config")
        .0;
    TxnCoordinator::new(TxnConfig::from_broker(&config), 1)
}

fn ongoing(producer_id: i64) -> TxnLogValue {
    TxnLogValue {
        producer_id,
        producer_epoch: 0,
        timeout_ms: 60_000,
        state: TxnState::Ongoing,
        partitions: BTreeSet::from([("t".to_string(), 0)]),
        last_update_timestamp_ms: 1_000,
        start_timestamp_ms: 1_000,
        previous_producer_id: -1,
        next_producer_id: -1,
        client_version: 0,
    }
}

/// The ids the coordinator serves, sorted.
fn ids(txn: &TxnCoordinator) -> Vec<String> {
    txn.list()
        .expect("nothing loading")
        .into_iter()
        .map(|v| v.transactional_id)
        .collect()
}

#[tokio::test]
async fn a_newly_led_partition_is_loaded_from_its_log_and_unloaded_when_the_leadership_moves() {
    let node = Node::new(image(1, 4, &[1, 2], &[1])).await;
    let locks = PartitionLocks::default();
    let stopping = CancellationToken::new();
    for (id, value) in [
        ("a", Some(ongoing(10))),
        ("b", Some(ongoing(11))),
        ("a", None),
        ("c", Some(ongoing(12))),
    ] {
        txn_log::write(&node.writer, &stopping, &locks, 0, 4, id, value.as_ref())
            .await
            .expect("written");
    }
    let txn = coordinator();
    let runtime = txn.runtime();
    assert_eq!(runtime.status(0), None);

    let followed = runtime.follow(&image(1, 4, &[1, 2], &[1]), &txn);
    assert_eq!(followed.to_load, [(0, 4)].into());
    assert_eq!(runtime.status(0), Some(Load::Loading { epoch: 4 }));
    assert!(
        txn.list().is_err(),
        "COORDINATOR_LOAD_IN_PROGRESS while loading"
    );
    let log = node
        .writer
        .led_log(crate::coordinator::txn::records::TXN_STATE_TOPIC, 0)
        .await
        .expect("led");
    runtime
        .load(&txn, &log, 0, 4, followed.count)
        .await
        .expect("loads");
    assert_eq!(runtime.status(0), Some(Load::Loaded { epoch: 4 }));
    // The tombstone of "a" replayed after its record.
    assert_eq!(ids(&txn), ["b", "c"]);
    // The same image again changes nothing.
    let again = runtime.follow(&image(1, 4, &[1, 2], &[1]), &txn);
    assert!(again.to_load.is_empty() && again.unloaded.is_empty());

    node.apply(image(2, 5, &[1, 2], &[2])).await;
    let moved = runtime.follow(&image(2, 5, &[1, 2], &[2]), &txn);
    assert_eq!(moved.unloaded, BTreeSet::from([0]));
    assert!(moved.to_load.is_empty());
    assert_eq!(runtime.status(0), None);
    assert!(ids(&txn).is_empty());
    node.stop().await;
}

#[tokio::test]
async fn a_load_overtaken_by_a_leadership_change_is_dropped_and_a_new_epoch_reloads() {
    let node = Node::new(image(1, 0, &[1], &[1])).await;
    let locks = PartitionLocks::default();
    txn_log::write(
        &node.writer,
        &CancellationToken::new(),
        &locks,
        0,
        0,
        "a",
        Some(&ongoing(1)),
    )
    .await
    .expect("written");
    let txn = coordinator();
    let runtime = txn.runtime();
    let log = node
        .writer
        .led_log(crate::coordinator::txn::records::TXN_STATE_TOPIC, 0)
        .await
        .expect("led");

    // Loading at epoch 0 when epoch 1 (still this broker: a reload) arrives.
    runtime.follow(&image(1, 0, &[1], &[1]), &txn);
    let reloaded = runtime.follow(&image(1, 1, &[1], &[1]), &txn);
    assert_eq!(reloaded.unloaded, BTreeSet::from([0]));
    assert_eq!(reloaded.to_load, [(0, 1)].into());
    runtime.load(&txn, &log, 0, 0, 1).await.expect("no error");
    assert_eq!(
        runtime.status(0),
        Some(Load::Loading { epoch: 1 }),
        "the epoch-0 load was dropped"
    );
    runtime.load(&txn, &log, 0, 1, 1).await.expect("loads");
    assert_eq!(runtime.status(0), Some(Load::Loaded { epoch: 1 }));
    assert_eq!(ids(&txn), ["a"]);

    // Groups keep their state across a new epoch: loaded again, nothing unloaded.
    let groups = super::CoordinatorRuntime::new(
        crate::coordinator::txn::records::TXN_STATE_TOPIC,
        1,
        OnNewEpoch::Refresh,
    );
    groups.follow(&image(1, 1, &[1], &[1]), &txn);
    let refreshed = groups.follow(&image(1, 2, &[1], &[1]), &txn);
    assert!(refreshed.unloaded.is_empty());
    assert_eq!(refreshed.to_load, [(0, 2)].into());
    assert_eq!(ids(&txn), ["a"]);
    node.stop().await;
}

#[test]
fn the_first_follow_unloads_what_a_coordinator_started_with_for_partitions_led_elsewhere() {
    let txn = coordinator();
    let runtime = txn.runtime();
    let first = runtime.follow(&image(2, 5, &[1, 2], &[2]), &txn);
    assert_eq!(
        first.unloaded,
        BTreeSet::from([0]),
        "state read at start for a partition another broker leads must not be kept"
    );
    assert!(first.to_load.is_empty());
    let again = runtime.follow(&image(2, 5, &[1, 2], &[2]), &txn);
    assert!(again.unloaded.is_empty() && again.to_load.is_empty());
}
