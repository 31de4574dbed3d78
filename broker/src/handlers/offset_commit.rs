//! OffsetCommit (v2-9): the committer is checked against the group (generation, member,
//! static instance), each partition against the metadata (`UNKNOWN_TOPIC_OR_PARTITION`)
//! and the metadata size limit; the valid ones are stored in one synced batch before
//! the response. A group-level failure is reported on every partition, as Kafka does.
//! `retention_time_ms` (v2-4) is ignored: Kafka 4 ignores it too (KIP-211).

use brook_protocol::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use brook_protocol::kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use super::offset_entries::{accepted, check, Requested};
use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::group::{Committer, GroupError};
use crate::error::Denied;
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    // Kafka's handleOffsetCommitRequest: READ on the group (every partition refused
    // without it), then READ on each topic (its partitions refused, not committed).
    let access = Access::new(broker, session);
    let group_denied = !access.group(AclOperation::Read, &req.group_id);
    let requested = req.topics.iter().flat_map(|topic| {
        topic.partitions.iter().map(move |p| Requested {
            topic: topic.name.as_str(),
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: p.committed_leader_epoch,
            metadata: p.committed_metadata.as_ref(),
        })
    });
    let mut checked = check(broker, requested);
    for (topic, _, result) in &mut checked {
        if group_denied {
            *result = Err(Denied::Group.code());
        } else if !access.topic(AclOperation::Read, topic) {
            *result = Err(Denied::Topic.code());
        }
    }
    let entries = accepted(&checked);
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
    // A consumer-protocol member must commit with v9+ (member epochs), as Kafka requires.
    let old_version_member = version < 9
        && broker
            .groups
            .consumer_groups()
            .is_member(&req.group_id, &req.member_id);
    let group_error = if group_denied {
        None
    } else if old_version_member {
        Some(GroupError::UnsupportedVersion(version).code())
    } else {
        match broker
            .groups
            .commit_offsets(&req.group_id, committer, entries)
            .await
        {
            Ok(()) => None,
            Err(e) => Some(e.code()),
        }
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
