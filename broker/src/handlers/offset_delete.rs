//! OffsetDelete (v0, KIP-496): removes a group's committed offsets for some partitions.
//! An Empty group may lose any; an active consumer group keeps the offsets of topics
//! its members subscribe to (`GROUP_SUBSCRIBED_TO_TOPIC`); an active group of another
//! protocol type is refused as `NON_EMPTY_GROUP`.
//!
//! Authorization (Kafka's `handleOffsetDeleteRequest`): DELETE on the group, else the whole
//! request is `GROUP_AUTHORIZATION_FAILED`; then READ on each topic, a refused topic's
//! partitions `TOPIC_AUTHORIZATION_FAILED` (checked before whether it exists) and their
//! offsets kept.

use brook_protocol::kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use brook_protocol::kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{group_code, Denied, PartitionError};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: OffsetDeleteRequest,
    _version: i16,
) -> OffsetDeleteResponse {
    let access = Access::new(broker, session);
    if !access.group(AclOperation::Delete, &req.group_id) {
        return OffsetDeleteResponse::default().with_error_code(Denied::Group.code().code());
    }
    let image = broker.image();
    let readable: Vec<bool> = req
        .topics
        .iter()
        .map(|t| access.topic(AclOperation::Read, &t.name))
        .collect();
    // Refused and unknown partitions are answered without touching the group, as Kafka does.
    let mut known = Vec::new();
    for (t, readable) in req.topics.iter().zip(&readable) {
        for p in t.partitions.iter().filter(|_| *readable) {
            if image.partition(&t.name, p.partition_index).is_some() {
                known.push((t.name.to_string(), p.partition_index));
            }
        }
    }
    let results = match broker
        .groups
        .delete_offsets(&req.group_id, known.clone())
        .await
    {
        Ok(results) => results,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code().code()),
    };
    let topics = req
        .topics
        .into_iter()
        .zip(readable)
        .map(|(t, readable)| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let key = (t.name.to_string(), p.partition_index);
                    let code = if !readable {
                        Denied::Topic.code().code()
                    } else {
                        match known.iter().position(|k| *k == key) {
                            None => PartitionError::UnknownTopicOrPartition.code().code(),
                            Some(i) => match results.get(i) {
                                Some(Err(e)) => group_code(e).code(),
                                _ => 0,
                            },
                        }
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
