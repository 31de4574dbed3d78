//! DescribeTopicPartitions (KIP-966): what `kafka-topics --describe` asks first, with a
//! partition limit and a cursor for paging. An empty topic list means every topic. Each
//! partition carries its eligible leader replicas and last known ELR from the metadata
//! image (empty when `eligible.leader.replicas.version` is 0), which `kafka-topics`
//! prints as `Elr:` and `LastKnownElr:`.
//!
//! Authorization (Kafka's `DescribeTopicPartitionsRequestHandler`), as Metadata: DESCRIBE on
//! each topic. Listing every topic leaves out the others; a named one is
//! `TOPIC_AUTHORIZATION_FAILED` (zero topic id) whether it exists or not. Each described
//! topic carries the session's authorized operations on it (KIP-430).

use brook_protocol::kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use brook_protocol::kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::{AclOperation, ResourceType};
use crate::auth::authorized::TOPIC_OPERATIONS;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{Denied, PartitionError};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeTopicPartitionsRequest,
    _version: i16,
) -> DescribeTopicPartitionsResponse {
    let image = broker.image();
    let access = Access::new(broker, session);
    let every_topic = req.topics.is_empty();
    let mut names: Vec<String> = if req.topics.is_empty() {
        image.topics.keys().cloned().collect()
    } else {
        req.topics.iter().map(|t| t.name.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (start_topic, start_partition) = match &req.cursor {
        Some(c) => (Some(c.topic_name.to_string()), c.partition_index),
        None => (None, 0),
    };
    let mut budget = req.response_partition_limit.max(1) as usize;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names {
        if let Some(start) = &start_topic {
            if &name < start {
                continue;
            }
        }
        let name_field = Some(TopicName(StrBytes::from_string(name.clone())));
        if !access.topic(AclOperation::Describe, &name) {
            if !every_topic {
                topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(name_field)
                        .with_error_code(Denied::Topic.code().code()),
                );
            }
            continue;
        }
        let Some(topic) = image.topic(&name) else {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(name_field)
                    .with_error_code(PartitionError::UnknownTopicOrPartition.code().code()),
            );
            continue;
        };
        if budget == 0 {
            next_cursor =
                Some(Cursor::default().with_topic_name(TopicName(StrBytes::from_string(name))));
            break;
        }
        let first = if start_topic.as_deref() == Some(name.as_str()) {
            start_partition
        } else {
            0
        };
        let mut partitions = Vec::new();
        for p in topic.partitions.values().filter(|p| p.partition >= first) {
            if budget == 0 {
                next_cursor = Some(
                    Cursor::default()
                        .with_topic_name(TopicName(StrBytes::from_string(name.clone())))
                        .with_partition_index(p.partition),
                );
                break;
            }
            budget -= 1;
            partitions.push(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(p.partition)
                    .with_leader_id(BrokerId(p.leader))
                    .with_leader_epoch(p.leader_epoch)
                    .with_replica_nodes(p.replicas.iter().copied().map(BrokerId).collect())
                    .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())
                    .with_offline_replicas(super::leader_hint::offline_replicas(
                        &image,
                        &topic.topic_id,
                        p,
                    ))
                    .with_error_code(if p.has_leader() {
                        0
                    } else {
                        PartitionError::LeaderNotAvailable.code().code()
                    })
                    .with_eligible_leader_replicas(Some(
                        p.elr.iter().copied().map(BrokerId).collect(),
                    ))
                    .with_last_known_elr(Some(
                        p.last_known_elr.iter().copied().map(BrokerId).collect(),
                    )),
            );
        }
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(name_field)
                .with_topic_id(topic.topic_id)
                .with_is_internal(name.starts_with("__"))
                .with_topic_authorized_operations(access.authorized_operations(
                    ResourceType::Topic,
                    &name,
                    TOPIC_OPERATIONS,
                ))
                .with_partitions(partitions),
        );
        if next_cursor.is_some() {
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}
