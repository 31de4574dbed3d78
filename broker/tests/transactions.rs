//! The transaction coordinator on the wire, against one real `brook` process on loopback,
//! with the request versions librdkafka sends (v0 of AddPartitionsToTxn, AddOffsetsToTxn
//! and EndTxn) and Java's (FindCoordinator v1, and v4 batches): the lazy `__transaction_state`
//! (COORDINATOR_NOT_AVAILABLE from the FindCoordinator that creates it),
//! InitProducerId's epochs and fencing (the open transaction is aborted first, the old
//! producer gets INVALID_PRODUCER_EPOCH at v0), commit and its retry, the markers taking
//! offsets in the data partitions, and an open transaction surviving a restart; the
//! timeout abort, id expiry, and WriteTxnMarkers sent straight to the leader; and, on
//! three nodes, markers sent to the leaders of partitions the coordinator does not lead;
//! and a transaction found PrepareCommit at load (a crash before its markers) completed.
//! Transactional produce and read_committed are the real-client tests' business
//! (integration-tests/); this checks the coordinator alone.

mod common;

use common::{cluster, free_port, one_record_batch, produce_request, try_call, wait_until, Node};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, InitProducerIdRequest,
    InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

const TOPIC: &str = "txn-data";
const TXN: &str = "txn-coordinator-test";
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

/// One node (id 1) with the transaction settings these tests use, plus `extra`.
fn single(dir: &std::path::Path, extra: &[&str]) -> Node {
    let port = free_port();
    let settings = [
        format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
        format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}"),
        format!("log.dirs={}", dir.display()),
        "node.id=1".to_string(),
        "metrics.listener=".to_string(),
        "transaction.state.log.num.partitions=3".to_string(),
        "transaction.max.timeout.ms=120000".to_string(),
    ]
    .into_iter()
    .chain(extra.iter().map(|s| s.to_string()))
    .collect::<Vec<_>>();
    Node::new(1, port, &settings)
}

/// One request, one response, on a fresh connection; the test fails on an I/O error.
fn call<Req: Encodable + HeaderVersion, Resp: Decodable + HeaderVersion>(
    node: &Node,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    try_call(&node.bootstrap(), api, version, request).expect("request answered")
}

fn txn_id() -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(TXN))
}

fn create_topic(node: &Node) {
    create_topic_with(node, 2);
}

fn create_topic_with(node: &Node, partitions: i32) {
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let created: CreateTopicsResponse = call(node, ApiKey::CreateTopics, 7, &create);
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
}

/// InitProducerId v1 until it stops answering retriable codes; returns (code, pid, epoch).
fn init(node: &Node, timeout_ms: i32) -> (i16, i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id()))
        .with_transaction_timeout_ms(timeout_ms);
    wait_until("InitProducerId", || {
        let r: InitProducerIdResponse = call(node, ApiKey::InitProducerId, 1, &request);
        // NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, LOAD_IN_PROGRESS, CONCURRENT_TXNS.
        (![14, 15, 16, CONCURRENT_TRANSACTIONS].contains(&r.error_code)).then_some((
            r.error_code,
            r.producer_id.0,
            r.producer_epoch,
        ))
    })
}

fn add_partitions(node: &Node, pid: i64, epoch: i16) -> Vec<i16> {
    add_these_partitions(node, pid, epoch, vec![0, 1])
}

fn add_these_partitions(node: &Node, pid: i64, epoch: i16, partitions: Vec<i32>) -> Vec<i16> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id())
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(partitions)]);
    let r: AddPartitionsToTxnResponse = call(node, ApiKey::AddPartitionsToTxn, 0, &request);
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

fn end(node: &Node, pid: i64, epoch: i16, commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let r: EndTxnResponse = call(node, ApiKey::EndTxn, 0, &request);
    r.error_code
}

/// (state, partitions) of the transactional id, once it is not in a Prepare* state.
fn settled_state(node: &Node) -> (String, usize) {
    wait_for_state(node, |state| !state.starts_with("Prepare"))
}

/// (state, partitions) once the state is one `wanted` accepts.
fn wait_for_state(node: &Node, wanted: impl Fn(&str) -> bool) -> (String, usize) {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id()]);
    wait_until("a transaction state", || {
        let r: DescribeTransactionsResponse = call(node, ApiKey::DescribeTransactions, 0, &request);
        let s = r.transaction_states.first()?;
        let state = s.transaction_state.to_string();
        (s.error_code == 0 && wanted(&state))
            .then(|| (state, s.topics.iter().map(|t| t.partitions.len()).sum()))
    })
}

fn log_end(node: &Node, partition: i32) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let r: ListOffsetsResponse = call(node, ApiKey::ListOffsets, 1, &request);
    r.topics[0].partitions[0].offset
}

#[test]
fn transactions_commit_fence_and_survive_a_restart_with_librdkafkas_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = single(dir.path(), &[]);
    node.start();
    create_topic(&node);

    // FindCoordinator creates __transaction_state and, as Kafka's getCoordinator, answers
    // COORDINATOR_NOT_AVAILABLE meanwhile; then v1 (the first with a key type, as
    // librdkafka sends it) and v4 (Java's batch) agree on the leader.
    let v1 = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str(TXN))
        .with_key_type(1);
    let first: FindCoordinatorResponse = call(&node, ApiKey::FindCoordinator, 1, &v1);
    assert_eq!(
        (first.error_code, first.node_id.0),
        (COORDINATOR_NOT_AVAILABLE, -1),
        "the request that creates the topic names no coordinator: {first:?}"
    );
    let coordinator = wait_until("the transaction coordinator", || {
        let r: FindCoordinatorResponse = call(&node, ApiKey::FindCoordinator, 1, &v1);
        (r.error_code == 0).then_some(r.node_id.0)
    });
    assert_eq!(coordinator, 1);
    let v4 = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![StrBytes::from_static_str(TXN)]);
    let r: FindCoordinatorResponse = call(&node, ApiKey::FindCoordinator, 4, &v4);
    assert_eq!(
        (r.coordinators[0].error_code, r.coordinators[0].node_id.0),
        (0, 1)
    );

    assert_eq!(init(&node, 600_000).0, INVALID_TRANSACTION_TIMEOUT);
    let (code, pid, epoch) = init(&node, 60_000);
    assert_eq!((code, epoch), (0, 0));

    // Commit a transaction over two partitions and the group's offsets partition.
    assert_eq!(add_partitions(&node, pid, epoch), vec![0, 0]);
    let offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(StrBytes::from_static_str("txn-group")));
    let r: AddOffsetsToTxnResponse = call(&node, ApiKey::AddOffsetsToTxn, 0, &offsets);
    assert_eq!(r.error_code, 0);
    assert_eq!(settled_state(&node), ("Ongoing".to_string(), 3));
    // The v4 broker form with VerifyOnly: in the transaction or not (KIP-890).
    let verify = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn_id())
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partitions(vec![1, 2])]),
    ]);
    let r: AddPartitionsToTxnResponse = call(&node, ApiKey::AddPartitionsToTxn, 4, &verify);
    let codes: Vec<i16> = r.results_by_transaction[0].topic_results[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(codes, vec![0, INVALID_TXN_STATE]);
    assert_eq!(end(&node, pid, epoch, true), 0);
    assert_eq!(settled_state(&node), ("CompleteCommit".to_string(), 0));
    // The retried commit succeeds; an abort of the committed transaction cannot.
    assert_eq!(end(&node, pid, epoch, true), 0);
    assert_eq!(end(&node, pid, epoch, false), INVALID_TXN_STATE);
    // The COMMIT markers took an offset in each partition.
    assert_eq!((log_end(&node, 0), log_end(&node, 1)), (1, 1));

    // A second producer with the same id fences the first and aborts its transaction.
    assert_eq!(add_partitions(&node, pid, epoch), vec![0, 0]);
    let (code, pid2, epoch2) = init(&node, 60_000);
    assert_eq!((code, pid2), (0, pid));
    assert_eq!(epoch2, 2, "one bump fences, one is the new producer's");
    assert_eq!(end(&node, pid, epoch, true), INVALID_PRODUCER_EPOCH);
    assert_eq!(settled_state(&node), ("Empty".to_string(), 0));
    assert_eq!((log_end(&node, 0), log_end(&node, 1)), (2, 2));

    // An open transaction survives a restart and can still be ended.
    assert_eq!(add_partitions(&node, pid2, epoch2), vec![0, 0]);
    node.stop();
    node.start();
    assert_eq!(settled_state(&node), ("Ongoing".to_string(), 2));
    let code = wait_until("EndTxn after the restart", || {
        let code = end(&node, pid2, epoch2, false);
        (![14, 15, 16].contains(&code)).then_some(code)
    });
    assert_eq!(code, 0);
    assert_eq!(settled_state(&node), ("CompleteAbort".to_string(), 0));
    assert_eq!((log_end(&node, 0), log_end(&node, 1)), (3, 3));
}

#[test]
fn timed_out_transactions_are_aborted_and_idle_ids_expire_and_markers_can_be_written_directly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = single(
        dir.path(),
        &[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
            "transaction.remove.expired.transaction.cleanup.interval.ms=200",
            "transactional.id.expiration.ms=4000",
        ],
    );
    node.start();
    create_topic(&node);
    let (code, pid, epoch) = init(&node, 1_000);
    assert_eq!((code, epoch), (0, 0));
    assert_eq!(add_partitions(&node, pid, epoch), vec![0, 0]);
    // Past its 1 s timeout the coordinator fences the producer and aborts.
    assert_eq!(
        wait_for_state(&node, |s| s == "CompleteAbort"),
        ("CompleteAbort".to_string(), 0)
    );
    assert_eq!(end(&node, pid, epoch, true), INVALID_PRODUCER_EPOCH);
    assert_eq!((log_end(&node, 0), log_end(&node, 1)), (1, 1));

    // WriteTxnMarkers straight to the leader (what `kafka-transactions.sh abort` sends).
    let markers =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch + 1)
            .with_transaction_result(false)
            // At least the coordinator's own epoch, or the leader fences it as a zombie.
            .with_coordinator_epoch(1000)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partition_indexes(vec![1])])]);
    let r: WriteTxnMarkersResponse = call(&node, ApiKey::WriteTxnMarkers, 1, &markers);
    assert_eq!(r.markers[0].topics[0].partitions[0].error_code, 0, "{r:?}");
    assert_eq!(log_end(&node, 1), 2);

    // Idle past transactional.id.expiration.ms: the id is tombstoned and forgotten.
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id()]);
    let code = wait_until("the id to expire", || {
        let r: DescribeTransactionsResponse =
            call(&node, ApiKey::DescribeTransactions, 0, &request);
        let code = r.transaction_states.first()?.error_code;
        (code != 0).then_some(code)
    });
    assert_eq!(code, TRANSACTIONAL_ID_NOT_FOUND);
    // Forgotten also after a restart (the tombstone is in the log).
    node.stop();
    node.start();
    let code = wait_until("the coordinator after the restart", || {
        let r: DescribeTransactionsResponse =
            call(&node, ApiKey::DescribeTransactions, 0, &request);
        let code = r.transaction_states.first()?.error_code;
        (![14, 15, 16].contains(&code)).then_some(code)
    });
    assert_eq!(code, TRANSACTIONAL_ID_NOT_FOUND);
}

/// The leader of each partition of the data topic, once every partition has one.
fn data_leaders(node: &Node, partitions: usize) -> Vec<i32> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))]));
    wait_until("leaders of the data topic", || {
        let r: MetadataResponse = call(node, ApiKey::Metadata, 12, &request);
        let mut leaders: Vec<(i32, i32)> = r
            .topics
            .first()?
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        leaders.sort_unstable();
        (leaders.len() == partitions && leaders.iter().all(|(_, l)| *l > 0))
            .then(|| leaders.into_iter().map(|(_, l)| l).collect())
    })
}

#[test]
fn a_coordinator_writes_markers_to_partitions_other_brokers_lead() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = cluster(dir.path(), 0, &["transaction.state.log.num.partitions=3"]);
    for node in nodes.iter_mut() {
        node.spawn();
    }
    for node in &nodes {
        node.wait_listening();
    }
    create_topic_with(&nodes[0], 6);
    let leaders = data_leaders(&nodes[0], 6);
    let v1 = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str(TXN))
        .with_key_type(1);
    let coordinator = wait_until("the transaction coordinator", || {
        let r: FindCoordinatorResponse = call(&nodes[0], ApiKey::FindCoordinator, 1, &v1);
        (r.error_code == 0).then_some(r.node_id.0)
    });
    let at = &nodes[usize::try_from(coordinator - 1).expect("a node id")];
    assert!(
        leaders.iter().any(|l| *l != coordinator),
        "some data partition is led elsewhere: {leaders:?}, coordinator {coordinator}"
    );
    let (code, pid, epoch) = init(at, 60_000);
    assert_eq!(code, 0);
    assert_eq!(
        add_these_partitions(at, pid, epoch, (0..6).collect()),
        vec![0; 6]
    );
    assert_eq!(end(at, pid, epoch, true), 0);
    assert_eq!(
        wait_for_state(at, |s| s == "CompleteCommit"),
        ("CompleteCommit".to_string(), 0)
    );
    for (partition, leader) in leaders.iter().enumerate() {
        let node = &nodes[usize::try_from(leader - 1).expect("a node id")];
        let partition = i32::try_from(partition).expect("small");
        assert_eq!(
            log_end(node, partition),
            1,
            "the marker in partition {partition}"
        );
    }
}

/// Appends a PrepareCommit record for [`TXN`] to the stopped node's `__transaction_state`
/// log, as if the node had died between EndTxn and the markers.
fn write_prepare_commit(dir: &std::path::Path, pid: i64, epoch: i16) {
    use brook::coordinator::txn::log::encode_batch;
    use brook::coordinator::txn::records::{partition_for, TxnLogValue, TXN_STATE_TOPIC};
    use brook::coordinator::txn::state::TxnState;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let logs = brook_storage::LogManager::open(&[dir.to_path_buf()], Default::default())
        .expect("the node's logs");
    let log = logs
        .get_or_create(TXN_STATE_TOPIC, partition_for(TXN, 3), Default::default())
        .expect("the transaction log partition");
    let value = TxnLogValue {
        producer_id: pid,
        producer_epoch: epoch,
        timeout_ms: 60_000,
        state: TxnState::PrepareCommit,
        partitions: [(TOPIC.to_string(), 0), (TOPIC.to_string(), 1)].into(),
        last_update_timestamp_ms: brook_storage::log_manager::now_ms(),
        start_timestamp_ms: brook_storage::log_manager::now_ms(),
        previous_producer_id: -1,
        next_producer_id: -1,
        client_version: 0,
    };
    let batch = encode_batch(TXN, Some(&value), 0).expect("a record");
    let epoch = log.latest_epoch().unwrap_or(0);
    runtime
        .block_on(log.append(batch, epoch, brook_storage::log_manager::now_ms()))
        .expect("appended");
    logs.shutdown().expect("flushed");
}

#[test]
fn a_transaction_prepared_before_a_crash_is_completed_when_its_partition_is_loaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = single(dir.path(), &[]);
    node.start();
    create_topic(&node);
    let (code, pid, epoch) = init(&node, 60_000);
    assert_eq!(code, 0);
    assert_eq!(add_partitions(&node, pid, epoch), vec![0, 0]);
    node.stop();
    write_prepare_commit(dir.path(), pid, epoch);
    node.start();
    // The load finds PrepareCommit, writes the markers, then CompleteCommit.
    assert_eq!(
        wait_for_state(&node, |s| s == "CompleteCommit"),
        ("CompleteCommit".to_string(), 0)
    );
    assert_eq!((log_end(&node, 0), log_end(&node, 1)), (1, 1));
    assert_eq!(end(&node, pid, epoch, true), 0, "a retried commit succeeds");
}

/// Produce (acks=all) of one transactional record to `partition` at `version`; the
/// partition's error code.
fn produce_txn(node: &Node, version: i16, partition: i32, pid: i64, epoch: i16, seq: i32) -> i16 {
    use kafka_protocol::messages::ProduceResponse;
    let request = produce_request(TOPIC, partition, one_record_batch(Some((pid, epoch, seq))))
        .with_transactional_id(Some(txn_id()));
    let r: ProduceResponse = call(node, ApiKey::Produce, version, &request);
    r.responses[0].partition_responses[0].error_code
}

#[test]
fn leaders_verify_transactional_batches_and_add_partitions_for_transactions_v2() {
    const TRANSACTION_ABORTABLE: i16 = 120;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut node = single(dir.path(), &[]);
    node.start();
    create_topic_with(&node, 3);
    let (code, pid, epoch) = init(&node, 60_000);
    assert_eq!(code, 0);
    assert_eq!(add_these_partitions(&node, pid, epoch, vec![0]), vec![0]);

    // KIP-890 part 1: a batch for a partition outside the transaction is refused, with the
    // code each Produce version knows, and nothing is written.
    assert_eq!(produce_txn(&node, 9, 1, pid, epoch, 0), INVALID_TXN_STATE);
    assert_eq!(
        produce_txn(&node, 11, 1, pid, epoch, 0),
        TRANSACTION_ABORTABLE
    );
    assert_eq!(log_end(&node, 1), 0);
    assert_eq!(produce_txn(&node, 9, 0, pid, epoch, 0), 0);
    // An older epoch is fenced by the coordinator.
    assert_eq!(
        produce_txn(&node, 12, 2, pid, epoch - 1, 0),
        INVALID_PRODUCER_EPOCH
    );
    // Transactions V2: Produce v12 adds the partition itself.
    assert_eq!(produce_txn(&node, 12, 2, pid, epoch, 0), 0);
    assert_eq!(
        wait_for_state(&node, |s| s == "Ongoing"),
        ("Ongoing".to_string(), 2)
    );

    // EndTxn v5 bumps the epoch and answers the next transaction's; a retry with the old
    // epoch is recognised; the markers carry the bumped epoch, so the next transaction
    // starts at sequence 0 of it.
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(true);
    let r: EndTxnResponse = call(&node, ApiKey::EndTxn, 5, &request);
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, pid, epoch + 1)
    );
    assert_eq!(settled_state(&node), ("CompleteCommit".to_string(), 0));
    let retry: EndTxnResponse = call(&node, ApiKey::EndTxn, 5, &request);
    assert_eq!((retry.error_code, retry.producer_epoch), (0, epoch + 1));
    assert_eq!(log_end(&node, 0), 2, "record + marker");
    assert_eq!(produce_txn(&node, 12, 0, pid, epoch + 1, 0), 0);
    assert_eq!(
        produce_txn(&node, 12, 1, pid, epoch, 1),
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        wait_for_state(&node, |s| s == "Ongoing"),
        ("Ongoing".to_string(), 1)
    );
    node.stop();
}
