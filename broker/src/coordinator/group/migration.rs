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
//!   classic group at the group epoch, each member holding its target partitions. When a
//!   member left (or its target is stale) a rebalance starts at once so the members
//!   rejoin and the leader assigns; when a classic static member replaced the last
//!   consumer-protocol member and the assignment is current, the group stays Stable and
//!   the newcomer takes its predecessor's partitions (Kafka 4.4's
//!   `classicGroupJoinToConsumerGroup`).
//! - Sizes: a classic group larger than `group.consumer.max.size` is not upgraded, a
//!   consumer group larger than `group.max.size` not downgraded (`take_for_downgrade`).
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

/// Whether a downgraded group rebalances at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDowngrade {
    /// A member left, or the target assignment is older than the group epoch: the
    /// members rejoin (Kafka: "Downgrade group %s from consumer to classic for member
    /// leaving." / "... with stale assignment.").
    Rebalance,
    /// A static member was replaced while the assignment was current: the group stays
    /// Stable and every member keeps its partitions.
    KeepAssignment,
}

/// The consumer group `classic` becomes (see the module comment), or Kafka's refusal.
/// `consumer_max_size` is `group.consumer.max.size`.
pub fn upgrade(
    classic: &Group,
    topics: &BTreeMap<String, TopicMeta>,
    consumer_max_size: usize,
    now: Instant,
) -> Result<ConsumerGroup, GroupError> {
    let id = classic.group_id.as_str();
    if classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
        return Err(refused(
            id,
            "the group does not use the consumer embedded protocol",
        ));
    }
    // Kafka's validateOnlineUpgrade checks the size before the members' protocols.
    if classic.members.len() > consumer_max_size {
        return Err(refused(
            id,
            "the group size exceeds the consumer group maximum size",
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

/// The classic group `consumer` (classic members only) becomes; see [`AfterDowngrade`].
pub fn downgrade(consumer: &ConsumerGroup, after: AfterDowngrade, now: Instant) -> Group {
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
            // Kafka serializes each member's target (a replacing static member's is its
            // predecessor's, which it took over on joining).
            assignment: encode_assignment(
                consumer.target.get(&m.member_id).unwrap_or(&m.assigned),
                &consumer.subscribed_metadata,
                version,
            ),
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
    if after == AfterDowngrade::Rebalance {
        // The members learn it from their next heartbeat and rejoin.
        group.prepare_rebalance(now, Duration::ZERO);
    }
    group
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use brook_protocol::kafka_protocol::messages::ConsumerProtocolSubscription;
    use brook_protocol::kafka_protocol::protocol::{Encodable, StrBytes};
    use bytes::{Bytes, BytesMut};
    use uuid::Uuid;

    use super::*;
    use crate::coordinator::consumer_group::classic_member::ClassicJoin;
    use crate::coordinator::consumer_group::member::Assignment;

    const TOPIC: Uuid = Uuid::from_u128(9);
    const MAX: usize = crate::coordinator::consumer_group::MAX_SIZE_DEFAULT;

    fn topics() -> BTreeMap<String, TopicMeta> {
        BTreeMap::from([(
            "t".to_owned(),
            TopicMeta {
                topic_id: TOPIC,
                partitions: 4,
            },
        )])
    }

    fn subscription() -> Bytes {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&1i16.to_be_bytes());
        ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("t")])
            .encode(&mut buf, 1)
            .expect("encode");
        buf.freeze()
    }

    fn parts(ps: &[i32]) -> Assignment {
        Assignment::from([(TOPIC, ps.iter().copied().collect())])
    }

    fn member(id: &str, assigned: &[i32], now: Instant) -> Member {
        Member {
            member_id: id.to_owned(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), subscription())],
            assignment: encode_assignment(&parts(assigned), &topics(), 1),
            last_heartbeat: now,
            join_waiter: None,
            sync_waiter: None,
        }
    }

    /// A Stable classic group at generation 4: a holds 0 and 1, b holds 2 and 3.
    fn classic_group(now: Instant) -> Group {
        let mut g = Group::new("g");
        g.generation_id = 4;
        g.protocol_type = Some("consumer".into());
        g.protocol_name = Some("range".into());
        g.state = GroupState::Stable;
        g.leader = Some("a".into());
        g.members.insert("a".into(), member("a", &[0, 1], now));
        g.members.insert("b".into(), member("b", &[2, 3], now));
        g
    }

    #[test]
    fn an_upgraded_group_keeps_the_generation_and_every_members_partitions() {
        let now = Instant::now();
        let cg = upgrade(&classic_group(now), &topics(), MAX, now).expect("upgrade");
        assert_eq!((cg.group_epoch, cg.assignment_epoch), (4, 4));
        let a = &cg.members["a"];
        assert_eq!((a.member_epoch, a.previous_member_epoch), (4, 4));
        assert_eq!(a.assigned, parts(&[0, 1]));
        assert_eq!(cg.target["b"], parts(&[2, 3]));
        assert_eq!(a.subscribed_topic_names, vec!["t".to_owned()]);
        assert_eq!(
            a.classic.as_ref().map(|c| c.session_timeout_ms),
            Some(10_000)
        );
        assert_eq!(cg.subscribed_metadata, topics());
    }

    #[test]
    fn a_group_of_another_protocol_type_is_not_upgraded() {
        let now = Instant::now();
        let mut g = classic_group(now);
        g.protocol_type = Some("connect".into());
        let err = upgrade(&g, &topics(), MAX, now).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "Cannot upgrade classic group g to consumer group because the group does not use the consumer embedded protocol."
        );
    }

    #[test]
    fn a_classic_member_is_told_to_rejoin_and_then_synced_its_new_target() {
        let now = Instant::now();
        let mut cg = upgrade(&classic_group(now), &topics(), MAX, now).expect("upgrade");
        // A third (classic) member joins: the group epoch moves, a and b must rejoin.
        let join = |id: &str| ClassicJoin {
            member_id: id.to_owned(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), subscription())],
        };
        let joined = cg
            .classic_join(&join("c"), &topics(), "uniform", now)
            .expect("join");
        assert_eq!(
            (joined.generation_id, joined.protocol_name.as_str()),
            (5, "range")
        );
        assert!(matches!(
            cg.classic_heartbeat("a", None, 4, "uniform", now),
            Err(GroupError::RebalanceInProgress)
        ));
        // a rejoins owning nothing (eager): it reaches epoch 5 with its share of the target.
        let rejoined = cg
            .classic_join(&join("a"), &topics(), "uniform", now)
            .expect("rejoin");
        assert_eq!(rejoined.generation_id, 5);
        let bytes = cg
            .classic_sync("a", None, 5, (Some("consumer"), Some("range")), now)
            .expect("sync");
        let (named, _) = decode_assignment(&bytes).expect("assignment");
        assert_eq!(by_topic_id(&named, &topics()), cg.members["a"].assigned);
        assert!(matches!(
            cg.classic_sync("a", None, 4, (None, None), now),
            Err(GroupError::IllegalGeneration {
                given: 4,
                current: 5
            })
        ));
    }

    #[test]
    fn only_a_policy_that_allows_it_takes_a_group_for_a_downgrade() {
        use crate::coordinator::consumer_group::{
            ConsumerGroupConfig, ConsumerGroups, MigrationPolicy,
        };
        assert_eq!(
            MigrationPolicy::parse("Upgrade"),
            Some(MigrationPolicy::Upgrade)
        );
        assert_eq!(MigrationPolicy::parse("sideways"), None);
        let now = Instant::now();
        let groups = ConsumerGroups::default();
        for (policy, taken) in [
            (MigrationPolicy::Disabled, false),
            (MigrationPolicy::Upgrade, false),
            (MigrationPolicy::Downgrade, true),
            (MigrationPolicy::Bidirectional, true),
        ] {
            groups.set_config(ConsumerGroupConfig {
                migration_policy: policy,
                ..ConsumerGroupConfig::default()
            });
            groups.insert_converted(
                upgrade(&classic_group(now), &topics(), MAX, now).expect("upgrade"),
            );
            assert_eq!(
                groups.take_for_downgrade("g").is_some(),
                taken,
                "{policy:?}"
            );
        }
    }

    #[test]
    fn a_group_of_classic_members_only_downgrades_to_a_rebalancing_classic_group() {
        let now = Instant::now();
        let mut cg = upgrade(&classic_group(now), &topics(), MAX, now).expect("upgrade");
        cg.group_epoch = 7;
        assert!(cg.only_classic_members_but(&[]));
        let g = downgrade(&cg, AfterDowngrade::Rebalance, now);
        assert_eq!(g.generation_id, 7);
        assert_eq!(g.state, GroupState::PreparingRebalance);
        assert_eq!(g.protocol_name.as_deref(), Some("range"));
        assert_eq!(g.leader.as_deref(), Some("a"));
        let (named, _) = decode_assignment(&g.members["b"].assignment).expect("assignment");
        assert_eq!(by_topic_id(&named, &topics()), parts(&[2, 3]));
    }

    fn classic_join(id: &str, instance: Option<&str>) -> ClassicJoin {
        ClassicJoin {
            member_id: id.to_owned(),
            instance_id: instance.map(str::to_owned),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), subscription())],
        }
    }

    /// The upgraded group of `classic_group` in which `a` is a static consumer-protocol
    /// member (instance "i") and `b` a classic one.
    fn mixed_group(now: Instant) -> ConsumerGroup {
        let mut cg = upgrade(&classic_group(now), &topics(), MAX, now).expect("upgrade");
        let a = cg.members.get_mut("a").expect("a");
        a.classic = None;
        a.instance_id = Some("i".into());
        cg
    }

    fn groups_with(classic_max_size: usize) -> crate::coordinator::consumer_group::ConsumerGroups {
        use crate::coordinator::consumer_group::{ConsumerGroupConfig, ConsumerGroups};
        let groups = ConsumerGroups::default();
        groups.set_config(ConsumerGroupConfig {
            classic_max_size,
            ..ConsumerGroupConfig::default()
        });
        groups
    }

    #[test]
    fn a_classic_group_larger_than_the_consumer_max_size_is_not_upgraded() {
        let now = Instant::now();
        let g = classic_group(now);
        assert!(upgrade(&g, &topics(), 2, now).is_ok());
        let err = upgrade(&g, &topics(), 1, now).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "Cannot upgrade classic group g to consumer group because the group size exceeds the consumer group maximum size."
        );
    }

    #[test]
    fn only_a_classic_static_member_taking_the_last_consumer_members_seat_replaces_it() {
        let now = Instant::now();
        let cg = mixed_group(now);
        assert!(cg.replaces_last_consumer_member(&classic_join("a2", Some("i"))));
        // Not static, another instance, or the seat's own member id: no replacement.
        assert!(!cg.replaces_last_consumer_member(&classic_join("a2", None)));
        assert!(!cg.replaces_last_consumer_member(&classic_join("a2", Some("j"))));
        assert!(!cg.replaces_last_consumer_member(&classic_join("a", Some("i"))));
        // Another consumer-protocol member stays: the group keeps a consumer member.
        let mut two = mixed_group(now);
        two.members.get_mut("b").expect("b").classic = None;
        assert!(!two.replaces_last_consumer_member(&classic_join("a2", Some("i"))));
        // The seat held by a classic member: nothing to downgrade from.
        let mut classic_seat = mixed_group(now);
        let a = classic_seat.members.get_mut("a").expect("a");
        a.classic = cg.members["b"].classic.clone();
        assert!(!classic_seat.replaces_last_consumer_member(&classic_join("a2", Some("i"))));
    }

    #[test]
    fn a_static_replacement_with_a_current_assignment_downgrades_to_a_stable_group() {
        let now = Instant::now();
        let mut cg = mixed_group(now);
        let joined = cg
            .classic_join(&classic_join("a2", Some("i")), &topics(), "uniform", now)
            .expect("join");
        // Same subscription, same metadata: the epoch stays, the assignment is current.
        assert_eq!((joined.generation_id, cg.group_epoch), (4, 4));
        let groups = groups_with(2);
        groups.insert_converted(cg);
        let taken = groups.take_for_downgrade("g").expect("downgraded");
        let g = downgrade(&taken, AfterDowngrade::KeepAssignment, now);
        assert_eq!((g.state, g.generation_id), (GroupState::Stable, 4));
        assert_eq!(g.static_members.get("i").map(String::as_str), Some("a2"));
        assert!(!g.members.contains_key("a"));
        // The newcomer holds its predecessor's partitions; SyncGroup at generation 4 gets them.
        let (named, _) = decode_assignment(&g.members["a2"].assignment).expect("assignment");
        assert_eq!(by_topic_id(&named, &topics()), parts(&[0, 1]));
    }

    #[test]
    fn a_consumer_group_larger_than_the_classic_max_size_is_not_downgraded() {
        let now = Instant::now();
        let mut cg = mixed_group(now);
        cg.classic_join(&classic_join("a2", Some("i")), &topics(), "uniform", now)
            .expect("join");
        let groups = groups_with(1);
        groups.insert_converted(cg);
        assert!(groups.take_for_downgrade("g").is_none());
        // Still there, still a consumer group of two classic members.
        assert_eq!(groups.with_group("g", |g| g.members.len()), Some(2));
    }
}
