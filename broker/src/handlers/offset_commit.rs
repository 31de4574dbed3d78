//! OffsetCommit (v2-9): the committer is checked against the group (generation, member,
//! static instance), each partition against the metadata (`UNKNOWN_TOPIC_OR_PARTITION`)
//! and the metadata size limit; the valid ones are stored in one synced batch before
//! the response. A group-level failure is reported on every partition, as Kafka does.
//! `retention_time_ms` (v2-4) is ignored: Kafka 4 ignores it too (KIP-211).

use std::time::{SystemTime, UNIX_EPOCH};

use brook_protocol::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use brook_protocol::kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::offsets::CommittedOffset;

use crate::broker::Broker;
use crate::coordinator::group::{Committer, GroupError};

pub async fn handle(
    broker: &Broker,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
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
    let committer = Committer {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id_or_member_epoch,
        missing_group_error: if version >= 9 {
            GroupError::GroupIdNotFound
        } else {
            GroupError::IllegalGeneration {
                given: req.generation_id_or_member_epoch,
                current: -1,
            }
        },
    };
    let group_error = match broker
        .groups
        .commit_offsets(&req.group_id, committer, entries)
        .await
    {
        Ok(()) => None,
        Err(e) => Some(e.code()),
    };
    let mut topics: Vec<OffsetCommitResponseTopic> = Vec::new();
    for (topic, partition, result) in checked {
        let code = match (&result, group_error) {
            (_, Some(e)) => e.code(),
            (Err(e), None) => e.code(),
            (Ok(_), None) => 0,
        };
        let entry = OffsetCommitResponsePartition::default()
            .with_partition_index(partition)
            .with_error_code(code);
        match topics.last_mut() {
            Some(t) if *t.name == *topic => t.partitions.push(entry),
            _ => topics.push(
                OffsetCommitResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(vec![entry]),
            ),
        }
    }
    OffsetCommitResponse::default().with_topics(topics)
}
