//! The heartbeat flow on one group, driven as the Java client drives it: join, hand a
//! partition over only after its owner revoked it, fence wrong epochs, static members.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use brook_protocol::kafka_protocol::ResponseError;
use uuid::Uuid;

use super::assignor::TopicMeta;
use super::group::{ConsumerGroup, ConsumerGroupState};
use super::heartbeat::{validate, HeartbeatReply, HeartbeatRequest};
use super::member::Assignment;
use super::ConsumerGroupConfig;
use crate::error::GroupError;

const TOPIC: Uuid = Uuid::from_u128(42);

fn topics() -> BTreeMap<String, TopicMeta> {
    BTreeMap::from([(
        "t".to_string(),
        TopicMeta {
            topic_id: TOPIC,
            partitions: 4,
        },
    )])
}

fn parts(a: &Assignment) -> BTreeSet<i32> {
    a.get(&TOPIC).cloned().unwrap_or_default()
}

fn owned(ps: &BTreeSet<i32>) -> Assignment {
    let mut a = Assignment::new();
    if !ps.is_empty() {
        a.insert(TOPIC, ps.clone());
    }
    a
}

fn join(member_id: &str, instance_id: Option<&str>) -> HeartbeatRequest {
    HeartbeatRequest {
        member_id: member_id.into(),
        member_epoch: 0,
        instance_id: instance_id.map(str::to_owned),
        rack_id: None,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        subscribed_topic_regex: None,
        server_assignor: None,
        owned: Some(Assignment::new()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
    }
}

fn beat(member_id: &str, epoch: i32, ps: &BTreeSet<i32>) -> HeartbeatRequest {
    HeartbeatRequest {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        owned: Some(owned(ps)),
        ..join(member_id, None)
    }
}

struct Client {
    id: String,
    epoch: i32,
    owns: BTreeSet<i32>,
}

impl Client {
    /// Applies a reply as the Java client does: a new assignment replaces what it owns.
    fn apply(&mut self, r: HeartbeatReply) {
        self.epoch = r.member_epoch;
        if let Some(a) = r.assignment {
            self.owns = parts(&a);
        }
    }

    fn beat(&mut self, g: &mut ConsumerGroup, now: Instant) {
        let req = beat(&self.id, self.epoch, &self.owns);
        let r = g
            .heartbeat(&req, &topics(), &ConsumerGroupConfig::default(), now)
            .expect("heartbeat");
        self.apply(r);
    }
}

fn joined(g: &mut ConsumerGroup, id: &str, now: Instant) -> Client {
    let r = g
        .heartbeat(
            &join(id, None),
            &topics(),
            &ConsumerGroupConfig::default(),
            now,
        )
        .expect("join");
    let mut c = Client {
        id: id.into(),
        epoch: 0,
        owns: BTreeSet::new(),
    };
    c.apply(r);
    c
}

#[test]
fn a_partition_moves_to_a_newcomer_only_after_its_owner_revoked_it() {
    let now = Instant::now();
    let mut g = ConsumerGroup::new("g");
    let mut a = joined(&mut g, "a", now);
    assert_eq!(a.owns, (0..4).collect());
    assert_eq!(g.state(), ConsumerGroupState::Stable);

    let mut b = joined(&mut g, "b", now);
    assert!(b.owns.is_empty(), "a still holds everything: {:?}", b.owns);
    assert_eq!(g.state(), ConsumerGroupState::Reconciling);

    let epoch_before = a.epoch;
    a.beat(&mut g, now); // told to revoke two partitions, same epoch
    assert_eq!(a.owns.len(), 2);
    assert_eq!(a.epoch, epoch_before);
    b.beat(&mut g, now); // a reported nothing yet, so b still waits
    assert!(b.owns.is_empty());
    a.beat(&mut g, now); // a reports the revocation: the assignment epoch
    assert_eq!(a.epoch, g.assignment_epoch);
    assert!(a.epoch > epoch_before);
    b.beat(&mut g, now);
    assert_eq!(b.owns.len(), 2);
    assert!(a.owns.is_disjoint(&b.owns));
    assert_eq!(g.state(), ConsumerGroupState::Stable);
}

#[test]
fn a_wrong_epoch_is_fenced_and_an_unknown_member_refused() {
    let now = Instant::now();
    let mut g = ConsumerGroup::new("g");
    let a = joined(&mut g, "a", now);
    let cfg = ConsumerGroupConfig::default();
    let ahead = g.heartbeat(&beat("a", a.epoch + 1, &a.owns), &topics(), &cfg, now);
    assert!(
        matches!(ahead, Err(GroupError::FencedMemberEpoch { .. })),
        "{ahead:?}"
    );
    let unknown = g.heartbeat(&beat("x", 1, &BTreeSet::new()), &topics(), &cfg, now);
    assert_eq!(
        unknown,
        Err(GroupError::UnknownMember(
            "Member x is not a member of group g.".into()
        ))
    );
}

#[test]
fn a_static_member_keeps_its_partitions_over_a_temporary_leave_and_blocks_a_second_instance() {
    let now = Instant::now();
    let cfg = ConsumerGroupConfig::default();
    let mut g = ConsumerGroup::new("g");
    let first = g
        .heartbeat(&join("m1", Some("i")), &topics(), &cfg, now)
        .expect("join");
    let held = parts(first.assignment.as_ref().expect("assignment"));
    let twin = g.heartbeat(&join("m2", Some("i")), &topics(), &cfg, now);
    assert!(
        matches!(twin, Err(GroupError::UnreleasedInstanceId { .. })),
        "{twin:?}"
    );

    let leave = HeartbeatRequest {
        member_epoch: -2,
        instance_id: Some("i".into()),
        ..beat("m1", first.member_epoch, &held)
    };
    assert_eq!(validate(&leave, 1), Ok(()));
    assert_eq!(
        g.heartbeat(&leave, &topics(), &cfg, now)
            .map(|r| r.member_epoch),
        Ok(-2)
    );
    let epoch_before = g.group_epoch;
    let back = g
        .heartbeat(&join("m2", Some("i")), &topics(), &cfg, now)
        .expect("rejoin");
    assert_eq!(parts(back.assignment.as_ref().expect("assignment")), held);
    assert_eq!(
        g.group_epoch, epoch_before,
        "no rebalance for a returning static member"
    );
    // Kafka's messages for the predecessor's id and for an instance id nobody holds.
    let predecessor = HeartbeatRequest {
        instance_id: Some("i".into()),
        ..beat("m1", first.member_epoch, &held)
    };
    assert_eq!(
        g.heartbeat(&predecessor, &topics(), &cfg, now)
            .map_err(|e| (e.code(), e.to_string())),
        Err((
            ResponseError::FencedInstanceId,
            "Static member m1 with instance id i was fenced by member m2.".into()
        ))
    );
    let stranger = HeartbeatRequest {
        instance_id: Some("j".into()),
        ..beat("m3", 1, &held)
    };
    assert_eq!(
        g.heartbeat(&stranger, &topics(), &cfg, now)
            .map_err(|e| (e.code(), e.to_string())),
        Err((
            ResponseError::UnknownMemberId,
            "Instance id j is unknown.".into()
        ))
    );
}

#[test]
fn a_silent_member_is_fenced_after_the_session_timeout() {
    let now = Instant::now();
    let mut g = ConsumerGroup::new("g");
    let _a = joined(&mut g, "a", now);
    assert!(g.expire(now + Duration::from_secs(44)).is_empty());
    assert_eq!(
        g.expire(now + Duration::from_secs(46)),
        vec!["a".to_string()]
    );
    assert_eq!(g.state(), ConsumerGroupState::Empty);
}

#[test]
fn a_groups_own_session_timeout_and_heartbeat_interval_replace_the_brokers() {
    use crate::config::group::ConsumerGroupOverrides;
    let broker = ConsumerGroupConfig::default();
    let cfg = broker.clone().with_overrides(ConsumerGroupOverrides {
        session_timeout_ms: Some(50_000),
        heartbeat_interval_ms: None,
    });
    assert_eq!(
        (cfg.session_timeout_ms, cfg.heartbeat_interval_ms),
        (50_000, 5_000)
    );
    let now = Instant::now();
    let mut g = ConsumerGroup::new("g");
    g.heartbeat(&join("a", None), &topics(), &cfg, now)
        .expect("join");
    assert!(
        g.expire(now + Duration::from_secs(46)).is_empty(),
        "the group's 50 s, not the broker's 45 s"
    );
    assert_eq!(
        g.expire(now + Duration::from_secs(51)),
        vec!["a".to_string()]
    );
    let unset = broker.with_overrides(ConsumerGroupOverrides::default());
    assert_eq!(
        (unset.session_timeout_ms, unset.heartbeat_interval_ms),
        (45_000, 5_000)
    );
}

#[test]
fn the_first_heartbeat_must_carry_what_kafka_requires() {
    let mut no_subscription = join("a", None);
    no_subscription.subscribed_topic_names = None;
    assert_eq!(
        validate(&no_subscription, 1),
        Err(GroupError::InvalidRequest(
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                .into()
        ))
    );
    // Kafka 4.4 takes an empty list (a member subscribing by pattern alone).
    no_subscription.subscribed_topic_names = Some(vec![]);
    assert_eq!(validate(&no_subscription, 1), Ok(()));
    assert!(matches!(
        validate(&join("", None), 1),
        Err(GroupError::InvalidRequest(_))
    ));
    let mut odd = join("a", None);
    odd.server_assignor = Some("sticky".into());
    assert_eq!(
        validate(&odd, 1),
        Err(GroupError::UnsupportedAssignor("sticky".into()))
    );
    let mut empty_regex = join("a", None);
    empty_regex.subscribed_topic_regex = Some(String::new());
    assert_eq!(validate(&empty_regex, 1), Ok(()));
}
