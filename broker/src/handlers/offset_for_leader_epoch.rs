//! OffsetForLeaderEpoch (key 23, KIP-101/KIP-279/KIP-320): the end offset of a leader
//! epoch on this partition's leader, from its leader-epoch cache — the latest epoch ends at
//! the log end offset; an older one at the start of the next epoch this leader knows; an
//! epoch older than every cached one answers (that epoch, the start of the first) and an
//! unknown log (-1, -1). Clients use it to validate their position after a leader change
//! (the Java consumer and librdkafka detect a truncated log this way: KIP-320); a request's
//! `current_leader_epoch` is checked like Fetch's (FENCED / UNKNOWN_LEADER_EPOCH).
//! Followers do not need it: Fetch v12+ answers `diverging_epoch` instead.
//!
//! Authorization (Kafka's `handleOffsetForLeaderEpochRequest`): CLUSTER_ACTION on the
//! cluster (a broker) allows every topic; otherwise DESCRIBE on each topic (KIP-320's
//! consumers), a refused topic's partitions `TOPIC_AUTHORIZATION_FAILED`.

use brook_protocol::kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use brook_protocol::kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: OffsetForLeaderEpochRequest,
    _version: i16,
) -> OffsetForLeaderEpochResponse {
    let access = Access::new(broker, session);
    let cluster_action = access.cluster(AclOperation::ClusterAction);
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.topic.to_string();
        let described = cluster_action || access.topic(AclOperation::Describe, &name);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let base = EpochEndOffset::default()
                .with_partition(p.partition)
                .with_leader_epoch(-1)
                .with_end_offset(-1);
            if !described {
                partitions.push(base.with_error_code(Denied::Topic.code().code()));
                continue;
            }
            let log = broker
                .replicas
                .leader_partition(&name, p.partition, Some(p.current_leader_epoch))
                .await
                .map(|p| p.log().clone());
            let answer = match log {
                Ok(log) => log
                    .end_offset_for_epoch(p.leader_epoch)
                    .await
                    .map_err(BrokerError::from),
                Err(e) => Err(e),
            };
            partitions.push(match answer {
                Ok((epoch, end_offset)) => {
                    base.with_leader_epoch(epoch).with_end_offset(end_offset)
                }
                Err(e) => base.with_error_code(e.code().code()),
            });
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions),
        );
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
