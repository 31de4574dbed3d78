//! State-machine sequences: join/sync/heartbeat/leave/expiry, KIP-394 member ids,
//! static membership, generation checks, and the metadata snapshot round trip.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::lifecycle::SyncRequest;
use super::snapshot;
use super::state::Group;
use super::types::*;

const NO_DELAY: Duration = Duration::ZERO;

fn join_req(member_id: &str, instance: Option<&str>, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.into(),
        group_instance_id: instance.map(Into::into),
        client_id: "client".into(),
        client_host: String::new(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        require_known_member_id: true,
        supports_skip_assignment: false,
        topics: None,
    }
}

fn ready<T>(rx: &mut oneshot::Receiver<Result<T, GroupError>>) -> Result<T, GroupError> {
    rx.try_recv().expect("the parked request was answered")
}

/// KIP-394 round trip, then the join; returns the member id and the parked receiver.
fn join_new(
    g: &mut Group,
    now: Instant,
) -> (String, oneshot::Receiver<Result<JoinResult, GroupError>>) {
    let JoinReply::MemberIdRequired(id) = g.join(join_req("", None, &["range"]), now, NO_DELAY)
    else {
        panic!("a v4+ join without a member id must get MEMBER_ID_REQUIRED");
    };
    let JoinReply::Wait(rx) = g.join(join_req(&id, None, &["range"]), now, NO_DELAY) else {
        panic!("the join with the issued id parks");
    };
    (id, rx)
}

fn sync(g: &mut Group, id: &str, generation: i32, assignments: &[(&str, &str)]) -> SyncReply {
    g.sync(
        SyncRequest {
            member_id: id.into(),
            group_instance_id: None,
            generation_id: generation,
            protocol_type: None,
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
                .collect(),
        },
        Instant::now(),
    )
}

#[test]
fn a_single_member_joins_syncs_and_becomes_stable() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (id, mut rx) = join_new(&mut g, now);
    let joined = ready(&mut rx).expect("joined");
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, id);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(joined.members.len(), 1, "the leader gets the member list");
    assert_eq!(g.state, GroupState::CompletingRebalance);
    let SyncReply::Wait(mut srx) = sync(&mut g, &id, 1, &[(&id, "A")]) else {
        panic!("a sync during CompletingRebalance is answered through the waiter");
    };
    assert_eq!(
        ready(&mut srx).expect("synced").assignment,
        Bytes::from("A")
    );
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(g.heartbeat(&id, None, 1, now), Ok(()));
}

#[test]
fn a_second_member_triggers_a_rebalance_and_followers_wait_for_the_leader() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (a, mut rx) = join_new(&mut g, now);
    ready(&mut rx).expect("a joined");
    let SyncReply::Wait(mut s) = sync(&mut g, &a, 1, &[(&a, "all")]) else {
        panic!()
    };
    ready(&mut s).expect("a synced");

    let (b, mut b_rx) = join_new(&mut g, now);
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&a, None, 1, now),
        Err(GroupError::RebalanceInProgress)
    );
    let JoinReply::Wait(mut a_rx) = g.join(join_req(&a, None, &["range"]), now, NO_DELAY) else {
        panic!("a rejoins");
    };
    let a_join = ready(&mut a_rx).expect("a joined gen 2");
    let b_join = ready(&mut b_rx).expect("b joined gen 2");
    assert_eq!((a_join.generation_id, b_join.generation_id), (2, 2));
    assert_eq!(a_join.leader, a, "the leader keeps its seat");
    assert!(b_join.members.is_empty(), "followers get no member list");

    let SyncReply::Wait(mut b_sync) = sync(&mut g, &b, 2, &[]) else {
        panic!()
    };
    assert!(
        b_sync.try_recv().is_err(),
        "the follower waits for the leader"
    );
    let SyncReply::Wait(mut a_sync) = sync(&mut g, &a, 2, &[(&a, "p0"), (&b, "p1")]) else {
        panic!()
    };
    assert_eq!(ready(&mut b_sync).expect("b").assignment, Bytes::from("p1"));
    assert_eq!(ready(&mut a_sync).expect("a").assignment, Bytes::from("p0"));
    assert_eq!(
        g.heartbeat(&b, None, 1, now),
        Err(GroupError::IllegalGeneration {
            given: 1,
            current: 2
        })
    );
}

#[test]
fn leaving_rebalances_the_rest_and_the_last_leave_empties_the_group() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (a, mut a_rx) = join_new(&mut g, now);
    ready(&mut a_rx).expect("a");
    let (b, _b_rx) = join_new(&mut g, now);
    let JoinReply::Wait(mut a_rx) = g.join(join_req(&a, None, &["range"]), now, NO_DELAY) else {
        panic!()
    };
    ready(&mut a_rx).expect("gen 2");
    assert_eq!(g.leave(&b, None, now), Ok(()));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(g.leave(&b, None, now), Err(GroupError::UnknownMemberId));
    assert_eq!(g.leave(&a, None, now), Ok(()));
    assert_eq!(g.state, GroupState::Empty);
    assert!(g.members.is_empty());
}

#[test]
fn a_silent_member_expires_after_its_session_timeout() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (a, mut rx) = join_new(&mut g, now);
    ready(&mut rx).expect("a");
    let SyncReply::Wait(mut s) = sync(&mut g, &a, 1, &[(&a, "x")]) else {
        panic!()
    };
    ready(&mut s).expect("synced");
    g.tick(now + Duration::from_millis(9_000));
    assert!(g.members.contains_key(&a), "still within the session");
    g.tick(now + Duration::from_millis(20_000));
    assert!(g.members.is_empty());
    assert_eq!(g.state, GroupState::Empty);
    assert_eq!(
        g.generation_id, 2,
        "emptying the group starts a new generation"
    );
}

#[test]
fn a_member_that_does_not_rejoin_in_time_is_dropped_from_the_generation() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (a, mut rx) = join_new(&mut g, now);
    ready(&mut rx).expect("a");
    let (_b, mut b_rx) = join_new(&mut g, now);
    assert!(b_rx.try_recv().is_err(), "waits for a to rejoin");
    g.tick(now + Duration::from_millis(30_001));
    let b_join = ready(&mut b_rx).expect("completed at the rebalance timeout");
    assert_eq!(b_join.generation_id, 2);
    assert!(!g.members.contains_key(&a));
}

#[test]
fn the_initial_delay_holds_the_first_join_until_it_passes() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let delay = Duration::from_millis(3_000);
    let JoinReply::MemberIdRequired(id) = g.join(join_req("", None, &["range"]), now, delay) else {
        panic!()
    };
    let JoinReply::Wait(mut rx) = g.join(join_req(&id, None, &["range"]), now, delay) else {
        panic!()
    };
    assert!(
        rx.try_recv().is_err(),
        "held by group.initial.rebalance.delay.ms"
    );
    g.tick(now + delay);
    assert_eq!(ready(&mut rx).expect("joined").generation_id, 1);
}

#[test]
fn unknown_ids_and_inconsistent_protocols_are_refused() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (_a, mut rx) = join_new(&mut g, now);
    ready(&mut rx).expect("a");
    let JoinReply::Done(unknown) = g.join(join_req("nobody", None, &["range"]), now, NO_DELAY)
    else {
        panic!()
    };
    assert_eq!(unknown, Err(GroupError::UnknownMemberId));
    let JoinReply::Done(bad) = g.join(join_req("", None, &["roundrobin"]), now, NO_DELAY) else {
        panic!()
    };
    assert_eq!(bad, Err(GroupError::InconsistentGroupProtocol));
}

#[test]
fn a_static_member_rejoining_replaces_its_old_id_without_a_rebalance() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (_leader, follower, gen) = stable_static_pair(&mut g, now, &["range"]);

    // The follower restarts: a new id at the same generation, no rebalance.
    let JoinReply::Done(Ok(again)) = g.join(join_req("", Some("i2"), &["range"]), now, NO_DELAY)
    else {
        panic!("an unchanged static follower is answered at once")
    };
    assert_ne!(again.member_id, follower);
    assert_eq!(again.generation_id, gen);
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(
        g.heartbeat(&follower, Some("i2"), gen, now),
        Err(GroupError::FencedInstanceId {
            instance_id: "i2".into()
        })
    );
    assert_eq!(g.heartbeat(&again.member_id, Some("i2"), gen, now), Ok(()));
    let SyncReply::Done(Ok(kept)) = sync(&mut g, &again.member_id, gen, &[]) else {
        panic!("a Stable group answers sync at once")
    };
    assert_eq!(
        kept.assignment,
        Bytes::from("b"),
        "the assignment carries over"
    );
}

/// A Stable group of two static members, "i1" leading: (leader id, follower id, generation).
fn stable_static_pair(g: &mut Group, now: Instant, protocols: &[&str]) -> (String, String, i32) {
    let JoinReply::Wait(mut rx1) = g.join(join_req("", Some("i1"), protocols), now, NO_DELAY)
    else {
        panic!("static members skip MEMBER_ID_REQUIRED")
    };
    let leader = ready(&mut rx1).expect("i1 joined").member_id;
    let JoinReply::Wait(mut rx2) = g.join(join_req("", Some("i2"), protocols), now, NO_DELAY)
    else {
        panic!()
    };
    let JoinReply::Wait(mut rx1) = g.join(join_req(&leader, Some("i1"), protocols), now, NO_DELAY)
    else {
        panic!()
    };
    let gen = ready(&mut rx1).expect("i1 gen 2").generation_id;
    let follower = ready(&mut rx2).expect("i2 gen 2").member_id;
    let _ = sync(g, &leader, gen, &[(&leader, "a"), (&follower, "b")]);
    assert_eq!(g.state, GroupState::Stable);
    (leader, follower, gen)
}

#[test]
fn a_static_rejoin_with_new_subscription_bytes_keeps_the_generation_as_kafka_does() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (leader, _follower, gen) = stable_static_pair(&mut g, now, &["range"]);

    // A restarted consumer's subscription no longer lists the partitions it owned: the
    // bytes differ, the protocol does not; Kafka answers at once and so must we.
    let mut changed = join_req("", Some("i2"), &["range"]);
    changed.protocols = vec![("range".into(), Bytes::from_static(b"other-bytes"))];
    let JoinReply::Done(Ok(again)) = g.join(changed, now, NO_DELAY) else {
        panic!("a static follower with the same protocol is answered at once")
    };
    assert_eq!(again.generation_id, gen);
    assert_eq!(g.state, GroupState::Stable);

    // The leader restarts with a pre-v9 JoinGroup: the old leader id comes back, so it
    // computes no assignment, and the group stays Stable at the same generation.
    let JoinReply::Done(Ok(new_leader)) =
        g.join(join_req("", Some("i1"), &["range"]), now, NO_DELAY)
    else {
        panic!("a static leader with the same protocol is answered at once")
    };
    assert_eq!(new_leader.generation_id, gen);
    assert_eq!(new_leader.leader, leader, "pre-v9: the previous leader id");
    assert!(!new_leader.skip_assignment && new_leader.members.is_empty());
    assert_eq!(g.state, GroupState::Stable);

    // With v9 (KIP-814) the rejoined leader gets the members and is told to skip assigning.
    let mut v9 = join_req("", Some("i1"), &["range"]);
    v9.supports_skip_assignment = true;
    let JoinReply::Done(Ok(v9_leader)) = g.join(v9, now, NO_DELAY) else {
        panic!("a v9 static leader is answered at once")
    };
    assert!(v9_leader.skip_assignment);
    assert_eq!(v9_leader.leader, v9_leader.member_id);
    assert_eq!(v9_leader.members.len(), 2);
    assert_eq!(g.state, GroupState::Stable);
}

#[test]
fn a_static_rejoin_that_changes_the_selected_protocol_rebalances() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (_leader, _follower, _gen) = stable_static_pair(&mut g, now, &["range", "roundrobin"]);
    // Only "roundrobin" now: the group could no longer select "range".
    let reply = g.join(join_req("", Some("i2"), &["roundrobin"]), now, NO_DELAY);
    assert!(
        matches!(reply, JoinReply::Wait(_)),
        "a protocol change parks the join"
    );
    assert_eq!(g.state, GroupState::PreparingRebalance);
}

#[test]
fn offset_commits_are_checked_against_generation_and_member() {
    let now = Instant::now();
    let mut g = Group::new("g");
    assert_eq!(
        g.validate_offset_commit("", None, -1),
        Ok(()),
        "standalone on Empty"
    );
    let (a, mut rx) = join_new(&mut g, now);
    ready(&mut rx).expect("a");
    assert_eq!(
        g.validate_offset_commit(&a, None, 1),
        Err(GroupError::RebalanceInProgress),
        "no commits while the assignment is being decided"
    );
    let SyncReply::Wait(mut s) = sync(&mut g, &a, 1, &[(&a, "x")]) else {
        panic!()
    };
    ready(&mut s).expect("synced");
    assert_eq!(g.validate_offset_commit(&a, None, 1), Ok(()));
    assert_eq!(
        g.validate_offset_commit(&a, None, 0),
        Err(GroupError::IllegalGeneration {
            given: 0,
            current: 1
        })
    );
    assert_eq!(
        g.validate_offset_commit("x", None, 1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        g.validate_offset_commit("", None, -1),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn group_metadata_survives_a_snapshot_round_trip() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let (a, mut rx) = join_new(&mut g, now);
    ready(&mut rx).expect("a");
    let SyncReply::Wait(mut s) = sync(&mut g, &a, 1, &[(&a, "assigned")]) else {
        panic!()
    };
    ready(&mut s).expect("synced");
    let bytes = snapshot::encode(&g).expect("encodes");
    let back = snapshot::decode("g", &bytes, now).expect("decodes");
    assert_eq!(back.state, GroupState::Stable);
    assert_eq!(back.generation_id, 1);
    assert_eq!(back.leader.as_deref(), Some(a.as_str()));
    let member = back.members.get(&a).expect("member restored");
    assert_eq!(member.assignment, Bytes::from("assigned"));
    assert_eq!(member.metadata("range"), Bytes::from("meta-range"));
    assert!(snapshot::decode("g", b"{not json", now).is_err());
}

#[test]
fn an_unused_member_id_expires_and_cannot_join_later() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let JoinReply::MemberIdRequired(id) = g.join(join_req("", None, &["range"]), now, NO_DELAY)
    else {
        panic!()
    };
    g.tick(now + Duration::from_millis(10_001));
    let JoinReply::Done(late) = g.join(join_req(&id, None, &["range"]), now, NO_DELAY) else {
        panic!()
    };
    assert_eq!(late, Err(GroupError::UnknownMemberId));
    assert_eq!(
        g.heartbeat(&id, None, 0, now),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn consumer_subscriptions_are_read_from_member_metadata() {
    // ConsumerProtocolSubscription v0: version, [topics], user data.
    let mut bytes = vec![0, 0, 0, 0, 0, 2];
    for topic in ["orders", "payments"] {
        bytes.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        bytes.extend_from_slice(topic.as_bytes());
    }
    bytes.extend_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(
        super::offsets::parse_subscription(&bytes),
        Some(vec!["orders".to_string(), "payments".to_string()])
    );
    assert_eq!(super::offsets::parse_subscription(&bytes[..7]), None);
}
