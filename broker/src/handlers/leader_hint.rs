//! KIP-951: a partition error that says "not here" (NOT_LEADER_OR_FOLLOWER,
//! FENCED_LEADER_EPOCH) carries the leader this broker knows, and the response lists those
//! leaders' endpoints, so a client moves to the new leader without a Metadata round trip.
//! Produce v10+ and Fetch v12+ (`current_leader`) / v16+ (`node_endpoints`).

use std::collections::BTreeSet;

use brook_protocol::kafka_protocol::messages::BrokerId;
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::{BrokerRegistration, MetadataImage, PartitionImage};
use uuid::Uuid;

use crate::error::BrokerError;

/// The leader a client should go to instead: `(leader_id, leader_epoch)`.
pub fn from_error(e: &BrokerError, node_id: i32) -> Option<(i32, i32)> {
    match e {
        BrokerError::NotLeaderOrFollower {
            leader,
            leader_epoch,
            ..
        } => Some((*leader, *leader_epoch)),
        // Only the leader checks epochs: it is the leader to go to, at its epoch.
        BrokerError::FencedLeaderEpoch { current, .. } => Some((node_id, *current)),
        _ => None,
    }
}

/// The registrations of the hinted leaders that are active (a client cannot use others).
pub fn endpoints(
    image: &MetadataImage,
    leaders: BTreeSet<i32>,
) -> impl Iterator<Item = &BrokerRegistration> + '_ {
    image
        .active_brokers()
        .filter(move |b| leaders.contains(&b.broker_id))
}

/// A registration as the wire's endpoint fields: node id, host, port, rack.
pub fn endpoint_fields(b: &BrokerRegistration) -> (BrokerId, StrBytes, i32, Option<StrBytes>) {
    (
        BrokerId(b.broker_id),
        StrBytes::from_string(b.host.clone()),
        i32::from(b.port),
        b.rack.clone().map(StrBytes::from_string),
    )
}

/// Replicas on brokers that are fenced, stopping or unregistered, and replicas their broker
/// reported offline because their log directory failed (Metadata v5+,
/// DescribeTopicPartitions; Kafka's `KRaftMetadataCache.getOfflineReplicas`).
pub fn offline_replicas(
    image: &MetadataImage,
    topic_id: &Uuid,
    p: &PartitionImage,
) -> Vec<BrokerId> {
    p.replicas
        .iter()
        .copied()
        .filter(|&r| !image.is_active(r) || image.is_replica_offline(r, topic_id, p.partition))
        .map(BrokerId)
        .collect()
}
