//! Online migration between a classic group and a KIP-848 consumer group of the same id
//! (`group.consumer.migration.policy`), after Kafka 4.4's `ConsumerGroup.fromClassicGroup`
//! and `ClassicGroup.fromConsumerGroup`:
//!
//! - **Upgrade**: the first ConsumerGroupHeartbeat for a non-empty classic group using the
//!   embedded consumer protocol turns it into a consumer group whose epoch (and every
//!   member's epoch and the assignment epoch) is the classic generation; each classic
//!   member keeps the partitions its last SyncGroup gave it (its target too) and its
//!   protocols, so it goes on with JoinGroup/SyncGroup/Heartbeat.
//! - **Downgrade**: a consumer group left with classic members only becomes a Stable
//!   classic group at the group epoch, each member holding its partitions, and a
//!   rebalance starts at once so the members rejoin and the leader assigns.
//!
//! Pure: the coordinator swaps the groups and writes their records.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::coordinator::consumer_group::assignor::TopicMeta;
use crate::coordinator::consumer_group::classic_member::CONSUMER_PROTOCOL_TYPE;
use crate::coordinator::consumer_group::consumer_protocol::{
    by_topic_id, decode_assignment, decode_subscription, encode_assignment,
};
use crate::coordinator::consumer_group::member::{ClassicMember, ConsumerMember, MemberState};
use crate::coordinator::consumer_group::ConsumerGroup;

use super::state::Group;
use super::types::{GroupError, GroupState, Member};

/// Kafka 4.4's refusals of an upgrade, each answered as GROUP_ID_NOT_FOUND.
pub fn refused(group_id: &str, why: &str) -> GroupError {
    GroupError::WrongGroupType(format!(
        "Cannot upgrade classic group {group_id} to consumer group because {why}."
    ))
}

/// The consumer group `classic` becomes (see the module comment), or Kafka's refusal.
pub fn upgrade(
    classic: &Group,
    topics: &BTreeMap<String, TopicMeta>,
    now: Instant,
) -> Result<ConsumerGroup, GroupError> {
    let id = classic.group_id.as_str();
    if classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
        return Err(refused(
            id,
            "the group does not use the consumer embedded protocol",
        ));
    }
    let malformed = || refused(id, "the embedded consumer protocol is malformed");
    let protocol = classic.protocol_name.clone().ok_or_else(malformed)?;
    let generation = classic.generation_id;
    let mut group = ConsumerGroup::new(id);
    group.group_epoch = generation;
    group.assignment_epoch = generation;
    let mut subscribed = BTreeSet::new();
    for m in classic.members.values() {
        let subscription = decode_subscription(&m.metadata(&protocol)).ok_or_else(malformed)?;
        let (assigned, user_data) = decode_assignment(&m.assignment).ok_or_else(malformed)?;
        if user_data {
            return Err(refused(
                id,
                "an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade",
            ));
        }
        let mut member = ConsumerMember::new(m.member_id.clone(), now);
        member.member_epoch = generation;
        member.previous_member_epoch = generation;
        member.state = MemberState::Stable;
        member.instance_id = m.group_instance_id.clone();
        member.rack_id = subscription.rack_id.clone();
        member.rebalance_timeout_ms = m.rebalance_timeout_ms;
        member.client_id = m.client_id.clone();
        member.client_host = m.client_host.clone();
        let mut names = subscription.topics.clone();
        names.sort();
        names.dedup();
        subscribed.extend(names.iter().cloned());
        member.subscribed_topic_names = names;
        member.assigned = by_topic_id(&assigned, topics);
        member.carry_assignment_epochs(&BTreeMap::new());
        member.session_deadline = now + millis(m.session_timeout_ms);
        member.classic = Some(ClassicMember {
            session_timeout_ms: m.session_timeout_ms,
            protocols: m.protocols.clone(),
            rebalance_deadline: None,
        });
        group
            .target
            .insert(m.member_id.clone(), member.assigned.clone());
        group.members.insert(m.member_id.clone(), member);
    }
    // The metadata the epoch stands for, so the first heartbeat does not bump it again.
    group.subscribed_metadata = topics
        .iter()
        .filter(|(name, _)| subscribed.contains(*name))
        .map(|(n, m)| (n.clone(), m.clone()))
        .collect();
    Ok(group)
}

/// The classic group `consumer` (classic members only) becomes, rebalancing.
pub fn downgrade(consumer: &ConsumerGroup, now: Instant) -> Group {
    let mut group = Group::new(&consumer.group_id);
    group.generation_id = consumer.group_epoch;
    group.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_owned());
    for m in consumer.members.values() {
        let Some(classic) = &m.classic else {
            continue;
        };
        let version = classic
            .protocols
            .first()
            .and_then(|(_, metadata)| decode_subscription(metadata))
            .map_or(0, |s| s.version);
        let member = Member {
            member_id: m.member_id.clone(),
            group_instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            session_timeout_ms: classic.session_timeout_ms,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            protocol_type: CONSUMER_PROTOCOL_TYPE.to_owned(),
            protocols: classic.protocols.clone(),
            assignment: encode_assignment(&m.assigned, &consumer.subscribed_metadata, version),
            last_heartbeat: now,
            join_waiter: None,
            sync_waiter: None,
        };
        if let Some(instance) = &m.instance_id {
            group
                .static_members
                .insert(instance.clone(), m.member_id.clone());
        }
        if group.leader.is_none() {
            group.leader = Some(m.member_id.clone());
        }
        group.members.insert(m.member_id.clone(), member);
    }
    group.protocol_name = group.select_protocol();
    group.state = GroupState::Stable;
    group.dirty = true;
    // Kafka: "Downgrade group %s from consumer to classic for member leaving." — the
    // members learn it from their next heartbeat and rejoin.
    group.prepare_rebalance(now, Duration::ZERO);
    group
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
