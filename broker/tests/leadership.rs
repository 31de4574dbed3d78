//! Leadership on the wire, against three real `brook` processes on loopback: a broker that
//! does not lead a partition answers Produce v11 with NOT_LEADER_OR_FOLLOWER plus the
//! leader's id, epoch and endpoint (KIP-951), and the leader checks the
//! `current_leader_epoch` of Fetch and ListOffsets (KIP-320): older → FENCED_LEADER_EPOCH,
//! newer → UNKNOWN_LEADER_EPOCH. Brook-only in detail (it inspects tagged fields no client
//! exposes), so it lives with the crate, encoding requests with kafka-protocol.

mod common;

use std::net::TcpStream;
use std::path::Path;

use common::{cluster, one_record_batch, produce_request, try_call as call, wait_until, Node};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;
const TOPIC: &str = "leadership";

/// (leader, leader epoch) per partition, as `bootstrap` sees them.
fn leaders(bootstrap: &str) -> Option<Vec<(i32, i32)>> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))]));
    let response: MetadataResponse = call(bootstrap, ApiKey::Metadata, 12, &request).ok()?;
    let topic = response.topics.first()?;
    let mut out: Vec<(i32, i32, i32)> = topic
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0, p.leader_epoch))
        .collect();
    out.sort_unstable();
    Some(out.into_iter().map(|(_, l, e)| (l, e)).collect())
}

/// An acks=all Produce of one record to `partition` of the test topic.
fn produce_one(partition: i32) -> ProduceRequest {
    produce_request(TOPIC, partition, one_record_batch(None))
}

fn fetch_error(bootstrap: &str, partition: i32, current_leader_epoch: i32) -> (i16, i32) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(current_leader_epoch)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse =
        call(bootstrap, ApiKey::Fetch, 12, &request).expect("fetch answered");
    let p = &response.responses[0].partitions[0];
    (p.error_code, p.current_leader.leader_epoch)
}

fn list_offsets_error(bootstrap: &str, partition: i32, current_leader_epoch: i32) -> i16 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(current_leader_epoch)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse =
        call(bootstrap, ApiKey::ListOffsets, 7, &request).expect("list offsets answered");
    response.topics[0].partitions[0].error_code
}

fn started(dir: &Path, broker_only: i32) -> Vec<Node> {
    let mut nodes = cluster(dir, broker_only, &[]);
    for node in nodes.iter_mut() {
        node.spawn();
    }
    for node in &nodes {
        wait_until("the client listeners", || {
            TcpStream::connect(node.bootstrap()).ok()
        });
    }
    nodes
}

fn create_topic(via: &Node, partitions: i32) {
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let created: CreateTopicsResponse =
        call(&via.bootstrap(), ApiKey::CreateTopics, 7, &create).expect("create answered");
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
}

#[test]
fn a_broker_only_node_follows_the_quorum_as_a_learner_and_serves_what_it_leads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = started(dir.path(), 1);
    let learner = &nodes[3];
    // Created through the learner: forwarded to the quorum leader, visible to it at once.
    create_topic(learner, 8);
    let led = leaders(&learner.bootstrap()).expect("metadata from the learner");
    let mut by_broker: Vec<i32> = led.iter().map(|(b, _)| *b).collect();
    by_broker.sort_unstable();
    by_broker.dedup();
    assert_eq!(
        by_broker,
        vec![1, 2, 3, 4],
        "8 partitions over 4 active brokers: {led:?}"
    );
    let metadata: MetadataResponse = call(
        &nodes[0].bootstrap(),
        ApiKey::Metadata,
        12,
        &MetadataRequest::default(),
    )
    .expect("metadata answered");
    let mut brokers: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
    brokers.sort_unstable();
    assert_eq!(brokers, vec![1, 2, 3, 4]);
    assert!(
        (1..=3).contains(&metadata.controller_id.0),
        "the controller is a voter"
    );
    let own = led
        .iter()
        .position(|(b, _)| *b == 4)
        .expect("a partition led by node 4");
    let produce = produce_one(i32::try_from(own).expect("partition index"));
    let stored: ProduceResponse =
        call(&learner.bootstrap(), ApiKey::Produce, 11, &produce).expect("produce answered");
    let p = &stored.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0), "{stored:?}");
}

#[test]
fn a_non_leader_points_to_the_leader_and_the_leader_fences_stale_epochs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = started(dir.path(), 0);
    create_topic(&nodes[1], 3);
    let first = wait_until("every partition led", || {
        leaders(&nodes[0].bootstrap()).filter(|l| l.len() == 3 && l.iter().all(|(b, _)| *b > 0))
    });

    // KIP-951: produce to a broker that does not lead partition 0.
    let (leader, epoch) = first[0];
    let elsewhere = nodes.iter().find(|n| n.id != leader).expect("a non-leader");
    let produce = produce_one(0);
    let moved: ProduceResponse =
        call(&elsewhere.bootstrap(), ApiKey::Produce, 11, &produce).expect("produce answered");
    let p = &moved.responses[0].partition_responses[0];
    assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER, "{moved:?}");
    assert_eq!(
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        (leader, epoch)
    );
    let leader_node = nodes.iter().find(|n| n.id == leader).expect("the leader");
    let endpoint = moved.node_endpoints.iter().find(|e| e.node_id.0 == leader);
    assert_eq!(
        endpoint.map(|e| (e.host.to_string(), e.port)),
        Some(("127.0.0.1".to_string(), i32::from(leader_node.port))),
        "{moved:?}"
    );
    let stored: ProduceResponse =
        call(&leader_node.bootstrap(), ApiKey::Produce, 11, &produce).expect("produce answered");
    assert_eq!(stored.responses[0].partition_responses[0].error_code, 0);

    // A controlled shutdown and restart of the leader moves partition 0's epoch on twice
    // (leaderless, then led again): requests with the first epoch are now fenced.
    let index = nodes
        .iter()
        .position(|n| n.id == leader)
        .expect("leader index");
    nodes[index].stop();
    nodes[index].spawn();
    let bootstrap = nodes[index].bootstrap();
    let now = wait_until("partition 0 led again with a newer epoch", || {
        leaders(&bootstrap)
            .map(|l| l[0])
            .filter(|&(l, e)| l == leader && e > epoch)
    });
    assert_eq!(
        fetch_error(&bootstrap, 0, epoch),
        (FENCED_LEADER_EPOCH, now.1)
    );
    assert_eq!(
        fetch_error(&bootstrap, 0, now.1 + 1).0,
        UNKNOWN_LEADER_EPOCH
    );
    assert_eq!(fetch_error(&bootstrap, 0, now.1).0, 0);
    assert_eq!(
        list_offsets_error(&bootstrap, 0, epoch),
        FENCED_LEADER_EPOCH
    );
    assert_eq!(
        list_offsets_error(&bootstrap, 0, now.1 + 1),
        UNKNOWN_LEADER_EPOCH
    );
    assert_eq!(list_offsets_error(&bootstrap, 0, now.1), 0);
}
