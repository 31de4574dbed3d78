//! TxnOffsetCommit (v0-5): a transactional producer commits a consumer group's offsets
//! as part of its transaction (`sendOffsetsToTransaction`). The group checks are
//! OffsetCommit's, transactional flavour: v3+ carry the consumer's generation, member id
//! and instance id (KIP-447), which fence zombies; generation -1 with no member id skips
//! them. Each partition is checked against the metadata (`UNKNOWN_TOPIC_OR_PARTITION`)
//! and `offset.metadata.max.bytes`; the valid ones are appended to the group's
//! `__consumer_offsets` partition as one transactional batch, durably, before the
//! response, and stay pending until the transaction's marker. A group-level failure is
//! reported on every partition, as Kafka does.
//!
//! v5 (Transactions V2) is answered like v4: clients send it only when the broker
//! advertises `transaction.version` 2, which Brook does not yet.

use std::time::{SystemTime, UNIX_EPOCH};

use brook_protocol::kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use brook_protocol::kafka_protocol::messages::{
    TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::offsets::CommittedOffset;

use crate::broker::Broker;
use crate::coordinator::group::{TxnCommitter, TxnProducer};

pub async fn handle(
    broker: &Broker,
    req: TxnOffsetCommitRequest,
    _version: i16,
) -> TxnOffsetCommitResponse {
    let image = broker.image();
    let max_metadata = broker.groups.config().offset_metadata_max_bytes;
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    // Per partition: Ok(entry to store) or the error it gets regardless.
    let mut checked: Vec<(String, i32, Result<CommittedOffset, ResponseError>)> = Vec::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
            let result = if image.partition(&topic.name, p.partition_index).is_none() {
                Err(ResponseError::UnknownTopicOrPartition)
            } else if metadata.as_ref().is_some_and(|m| m.len() > max_metadata) {
                Err(ResponseError::OffsetMetadataTooLarge)
            } else {
                Ok(CommittedOffset {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: metadata.unwrap_or_default(),
                    commit_timestamp_ms: now_ms,
                })
            };
            checked.push((topic.name.to_string(), p.partition_index, result));
        }
    }
    let entries: Vec<(String, i32, CommittedOffset)> = checked
        .iter()
        .filter_map(|(t, p, r)| r.as_ref().ok().map(|c| (t.clone(), *p, c.clone())))
        .collect();
    let committer = TxnCommitter {
        producer: TxnProducer {
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
        },
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id,
    };
    let group_error = match broker
        .groups
        .commit_transactional_offsets(&req.group_id, committer, entries)
        .await
    {
        Ok(()) => None,
        Err(e) => Some(e.code()),
    };
    let mut topics: Vec<TxnOffsetCommitResponseTopic> = Vec::new();
    for (topic, partition, result) in checked {
        let code = match (&result, group_error) {
            (_, Some(e)) => e.code(),
            (Err(e), None) => e.code(),
            (Ok(_), None) => 0,
        };
        let entry = TxnOffsetCommitResponsePartition::default()
            .with_partition_index(partition)
            .with_error_code(code);
        match topics.last_mut() {
            Some(t) if *t.name == *topic => t.partitions.push(entry),
            _ => topics.push(
                TxnOffsetCommitResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(vec![entry]),
            ),
        }
    }
    TxnOffsetCommitResponse::default().with_topics(topics)
}
