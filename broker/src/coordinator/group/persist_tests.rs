//! Persistence: offsets retention with a chosen clock, the `__consumer_offsets` batch
//! and replay into a store, and group metadata in Kafka's `GroupMetadataValue` layout.

use std::time::{Duration, Instant};

use brook_storage::offsets::{CommittedOffset, OffsetRecord, OffsetStore};
use brook_storage::{LogConfig, LogManager};

use super::offsets_log::encode_batch;
use super::records::OFFSETS_TOPIC;
use super::replay::replay;
use super::state::Group;
use super::types::{GroupError, GroupState};
use super::{snapshot, Committer, GroupConfig, GroupCoordinator};

const RETENTION_MS: i64 = 60_000;

fn config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay: Duration::ZERO,
        min_session_timeout_ms: 1,
        max_session_timeout_ms: 100_000,
        offset_metadata_max_bytes: 4096,
        offsets_retention_ms: RETENTION_MS,
        offsets_retention_check_interval: Duration::from_secs(3600),
    }
}

/// `open` retried until it succeeds: a dropped coordinator's tasks release its database
/// once they see the cancellation, sooner or later on a loaded machine.
pub(super) async fn once_released<T, E: std::fmt::Display, F>(mut open: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match open().await {
            Ok(opened) => return opened,
            Err(e) if Instant::now() > deadline => panic!("still not released: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

fn standalone() -> Committer {
    Committer {
        member_id: String::new(),
        group_instance_id: None,
        generation_id: -1,
        missing_group_error: GroupError::UnknownMemberId,
    }
}

fn offset(offset: i64, commit_timestamp_ms: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms,
    }
}

#[tokio::test]
async fn standalone_commits_expire_retention_after_their_commit_and_the_group_goes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = GroupCoordinator::start(dir.path().join("store"), config(), None)
        .await
        .expect("start");
    let entries = vec![
        ("t".to_string(), 0, offset(5, 1_000)),
        ("t".to_string(), 1, offset(9, 2_000)),
    ];
    coordinator
        .commit_offsets("g", standalone(), entries)
        .await
        .expect("commit");

    assert_eq!(
        coordinator
            .expire_offsets_at(1_000 + RETENTION_MS - 1)
            .await,
        0
    );
    assert_eq!(coordinator.expire_offsets_at(1_000 + RETENTION_MS).await, 1);
    let left = coordinator.fetch_offsets("g");
    assert_eq!(left.len(), 1);
    assert_eq!(left.get(&("t".to_string(), 1)).map(|c| c.offset), Some(9));

    assert_eq!(coordinator.expire_offsets_at(2_000 + RETENTION_MS).await, 1);
    assert!(coordinator.fetch_offsets("g").is_empty());
    assert!(coordinator.list().iter().all(|(id, _, _)| id != "g"));
    drop(coordinator);

    // The expiry reached the store: a restart does not bring the offsets back.
    let path = dir.path().join("store");
    let store = once_released(|| async { OffsetStore::open(&path) }).await;
    assert!(store.fetch("g").expect("fetch").is_empty());
}

#[tokio::test]
async fn a_consumer_groups_offsets_expire_retention_after_it_became_empty_not_after_the_commit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = GroupCoordinator::start(dir.path().join("store"), config(), None)
        .await
        .expect("start");
    coordinator
        .commit_offsets("g", standalone(), vec![("t".into(), 0, offset(5, 1_000))])
        .await
        .expect("commit");
    // The group had members (generation 1, consumer protocol) and is Empty again now.
    coordinator.with_group("g", |g| {
        let g = g.expect("the commit created the group");
        g.generation_id = 1;
        g.protocol_type = Some("consumer".into());
        g.state = GroupState::PreparingRebalance;
    });
    coordinator.with_group("g", |g| {
        if let Some(g) = g {
            g.state = GroupState::Empty;
        }
    });
    let empty_since = coordinator
        .with_group("g", |g| g.and_then(|g| g.empty_since_ms))
        .expect("the coordinator stamped when the group became empty");
    assert!(empty_since > 1_000 + RETENTION_MS);

    assert_eq!(
        coordinator
            .expire_offsets_at(empty_since + RETENTION_MS - 1)
            .await,
        0
    );
    // A group with members never loses offsets, however old.
    coordinator.with_group("g", |g| {
        if let Some(g) = g {
            g.state = GroupState::Stable;
        }
    });
    assert_eq!(coordinator.expire_offsets_at(i64::MAX).await, 0);
    coordinator.with_group("g", |g| {
        if let Some(g) = g {
            g.state = GroupState::Empty;
        }
    });
    let empty_since = coordinator
        .with_group("g", |g| g.and_then(|g| g.empty_since_ms))
        .expect("stamped again");
    assert_eq!(
        coordinator
            .expire_offsets_at(empty_since + RETENTION_MS)
            .await,
        1
    );
    assert!(coordinator.fetch_offsets("g").is_empty());
}

#[tokio::test]
async fn replaying_the_log_rebuilds_the_store_from_any_applied_position() {
    let dir = tempfile::tempdir().expect("temp dir");
    let logs = LogManager::open(&[dir.path().join("logs")], LogConfig::default()).expect("logs");
    let log = logs
        .get_or_create(OFFSETS_TOPIC, 3, LogConfig::default())
        .expect("log");
    let batches = [
        vec![
            OffsetRecord::Commit {
                group: "g".into(),
                topic: "t".into(),
                partition: 0,
                offset: offset(5, 1),
            },
            OffsetRecord::PutGroup {
                group: "g".into(),
                metadata: vec![0, 3],
            },
        ],
        vec![
            OffsetRecord::Commit {
                group: "g".into(),
                topic: "t".into(),
                partition: 0,
                offset: offset(8, 2),
            },
            OffsetRecord::Commit {
                group: "h".into(),
                topic: "u".into(),
                partition: 2,
                offset: offset(1, 3),
            },
        ],
        vec![OffsetRecord::DeleteOffset {
            group: "h".into(),
            topic: "u".into(),
            partition: 2,
        }],
    ];
    for batch in &batches {
        let bytes = encode_batch(batch, 10, None).expect("encode");
        log.append(bytes, 0, 10).await.expect("append");
    }
    let store = OffsetStore::open(&dir.path().join("store")).expect("store");
    assert_eq!(replay(&store, &log).await.expect("replay").applied, 5);
    let state = |store: &OffsetStore| {
        (
            store.fetch("g").expect("fetch"),
            store.fetch("h").expect("fetch"),
            store.get_group("g").expect("group"),
            store.applied_position_of(3).expect("position"),
        )
    };
    let expected = state(&store);
    assert_eq!(expected.0.len(), 1);
    assert_eq!(expected.0[0].2.offset, 8);
    assert!(expected.1.is_empty());
    assert_eq!(expected.2, Some(vec![0, 3]));
    assert_eq!(expected.3, Some(4));

    // Nothing new: replay applies nothing. Position dropped back: the same state again.
    assert_eq!(replay(&store, &log).await.expect("replay").applied, 0);
    store.apply(3, &[], 1).expect("move the position back");
    assert_eq!(replay(&store, &log).await.expect("replay").applied, 3);
    drop(store);
    let reopened = OffsetStore::open(&dir.path().join("store")).expect("reopen");
    assert_eq!(state(&reopened), expected);
}

#[test]
fn an_empty_groups_state_timestamp_survives_the_kafka_metadata_layout() {
    let mut g = Group::new("g");
    g.generation_id = 4;
    g.protocol_type = Some("consumer".into());
    g.empty_since_ms = Some(1_234);
    let bytes = snapshot::encode(&g).expect("encodes");
    assert_eq!(&bytes[..2], &[0, 3], "GroupMetadataValue version 3");
    let back = snapshot::decode("g", &bytes, Instant::now()).expect("decodes");
    assert_eq!(back.state, GroupState::Empty);
    assert_eq!(back.generation_id, 4);
    assert_eq!(back.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(back.empty_since_ms, Some(1_234));
    for cut in 0..bytes.len() {
        assert!(snapshot::decode("g", &bytes[..cut], Instant::now()).is_err());
    }
}

mod consumer_groups {
    //! KIP-848 groups written as Kafka's records and rebuilt by a restarted coordinator.

    use std::collections::{BTreeMap, BTreeSet};

    use uuid::Uuid;

    use super::super::txn_tests::{member, offsets_image_led_by, Node};
    use super::super::GroupCoordinator;
    use super::{config, offset, standalone};
    use crate::coordinator::consumer_group::assignor::TopicMeta;
    use crate::coordinator::consumer_group::member::Assignment;
    use crate::coordinator::consumer_group::{Caller, TopicsView};
    use crate::coordinator::consumer_group::{ConsumerGroupConfig, HeartbeatRequest};
    use crate::error::GroupError;
    use brook_protocol::kafka_protocol::ResponseError;

    const TOPIC: Uuid = Uuid::from_u128(7);

    fn topics() -> BTreeMap<String, TopicMeta> {
        BTreeMap::from([(
            "t".to_string(),
            TopicMeta {
                topic_id: TOPIC,
                partitions: 4,
            },
        )])
    }

    fn request(member: &str, epoch: i32, owned: Option<Assignment>) -> HeartbeatRequest {
        HeartbeatRequest {
            member_id: member.into(),
            member_epoch: epoch,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: if epoch == 0 { 30_000 } else { -1 },
            subscribed_topic_names: (epoch == 0).then(|| vec!["t".into()]),
            subscribed_topic_regex: None,
            server_assignor: None,
            owned,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    async fn start(dir: &std::path::Path) -> GroupCoordinator {
        GroupCoordinator::start(dir.join("store"), config(), None)
            .await
            .expect("start")
    }

    async fn beat(
        c: &GroupCoordinator,
        member: &str,
        epoch: i32,
        owned: Option<Assignment>,
    ) -> crate::coordinator::consumer_group::HeartbeatReply {
        send(c, &request(member, epoch, owned))
            .await
            .expect("heartbeat")
    }

    /// `req` to group "g", answered or refused.
    async fn send(
        c: &GroupCoordinator,
        req: &HeartbeatRequest,
    ) -> Result<crate::coordinator::consumer_group::HeartbeatReply, GroupError> {
        let topics = topics();
        c.consumer_heartbeat(
            "g",
            req,
            &Caller::anonymous(),
            &TopicsView::unrestricted(&topics, 1),
            &ConsumerGroupConfig::default(),
        )
        .await
    }

    type GroupSnapshot = (
        i32,
        i32,
        BTreeMap<String, crate::coordinator::consumer_group::member::ConsumerMember>,
        BTreeMap<String, Assignment>,
    );

    /// Group "g"'s epochs, members and target assignment.
    fn snapshot(c: &GroupCoordinator) -> Option<GroupSnapshot> {
        c.consumer_groups().with_group("g", |g| {
            (
                g.group_epoch,
                g.assignment_epoch,
                g.members.clone(),
                g.target.clone(),
            )
        })
    }

    async fn restart(c: GroupCoordinator, dir: &std::path::Path) -> GroupCoordinator {
        drop(c);
        super::once_released(|| GroupCoordinator::start(dir.join("store"), config(), None)).await
    }

    #[tokio::test]
    async fn members_keep_their_epochs_and_partitions_across_a_coordinator_restart() {
        let dir = tempfile::tempdir().expect("temp dir");
        let c = start(dir.path()).await;
        // Both join, then heartbeat as the Java client does (owning what it was last
        // given) until each has settled at the group's epoch.
        let mut state: BTreeMap<&str, (i32, Assignment)> = BTreeMap::new();
        for id in ["a", "b"] {
            let r = beat(&c, id, 0, Some(Assignment::new())).await;
            state.insert(id, (r.member_epoch, r.assignment.unwrap_or_default()));
        }
        for _ in 0..4 {
            for id in ["a", "b"] {
                let (epoch, owned) = state[id].clone();
                let r = beat(&c, id, epoch, Some(owned.clone())).await;
                state.insert(id, (r.member_epoch, r.assignment.unwrap_or(owned)));
            }
        }
        let before = snapshot(&c).expect("group");
        assert_eq!(before.2.len(), 2);

        let c = restart(c, dir.path()).await;
        let after = snapshot(&c).expect("the group is back");
        assert_eq!((after.0, after.1), (before.0, before.1));
        assert_eq!(after.3, before.3);
        for (id, m) in &before.2 {
            let back = &after.2[id];
            assert_eq!(
                (back.member_epoch, back.previous_member_epoch, back.state),
                (m.member_epoch, m.previous_member_epoch, m.state),
                "member {id}"
            );
            assert_eq!(
                (&back.assigned, &back.pending_revocation),
                (&m.assigned, &m.pending_revocation)
            );
            assert_eq!(back.subscribed_topic_names, m.subscribed_topic_names);
        }
        // Not fenced: the members carry on with their epochs, and nothing moves.
        for id in ["a", "b"] {
            let (epoch, owned) = state[id].clone();
            let r = beat(&c, id, epoch, Some(owned)).await;
            assert_eq!(r.member_epoch, epoch, "member {id} keeps its epoch");
        }
        let epoch = c.consumer_groups().with_group("g", |g| g.group_epoch);
        assert_eq!(epoch, Some(before.0), "the group epoch did not move");
        let all: BTreeSet<i32> = after
            .2
            .values()
            .flat_map(|m| m.assigned.get(&TOPIC).cloned().unwrap_or_default())
            .collect();
        assert_eq!(all, BTreeSet::from([0, 1, 2, 3]));
    }

    #[tokio::test]
    async fn a_member_that_left_and_a_deleted_group_stay_gone_after_a_restart() {
        let dir = tempfile::tempdir().expect("temp dir");
        let c = start(dir.path()).await;
        beat(&c, "a", 0, Some(Assignment::new())).await;
        beat(&c, "b", 0, Some(Assignment::new())).await;
        beat(&c, "b", -1, None).await;
        let c = restart(c, dir.path()).await;
        let members = c
            .consumer_groups()
            .with_group("g", |g| g.members.keys().cloned().collect::<Vec<_>>());
        assert_eq!(members, Some(vec!["a".to_string()]));

        beat(&c, "a", -1, None).await;
        c.delete_group("g").await.expect("delete");
        let c = restart(c, dir.path()).await;
        assert!(!c.consumer_groups().exists("g"));
        assert!(c.list().iter().all(|(id, _, _)| id != "g"));
    }

    #[tokio::test]
    async fn a_heartbeat_to_a_group_there_is_none_of_is_group_id_not_found_as_kafka_words_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let c = start(dir.path()).await;
        let refused = send(&c, &request("a", 3, None)).await;
        assert_eq!(
            refused,
            Err(GroupError::GroupNotFound(
                "Consumer group g not found.".into()
            ))
        );
        let mut static_leave = request("a", -2, None);
        static_leave.instance_id = Some("i".into());
        for leave in [request("a", -1, None), static_leave] {
            let refused = send(&c, &leave).await.expect_err("no such group");
            assert_eq!(
                refused,
                GroupError::GroupNotFound("Group g not found.".into())
            );
            assert_eq!(refused.code(), ResponseError::GroupIdNotFound);
        }
        assert!(!c.consumer_groups().exists("g"), "no group was created");
        // A join creates it; then an unknown member is told so, not that the group is missing.
        beat(&c, "a", 0, Some(Assignment::new())).await;
        let refused = send(&c, &request("b", 1, None)).await.expect_err("unknown");
        assert_eq!(
            (refused.code(), refused.to_string()),
            (
                ResponseError::UnknownMemberId,
                "Member b is not a member of group g.".into()
            )
        );
    }

    #[tokio::test]
    async fn only_a_join_takes_over_a_classic_groups_id() {
        let dir = tempfile::tempdir().expect("temp dir");
        let c = start(dir.path()).await;
        // Committed offsets only: an empty classic group, as Kafka has it.
        c.commit_offsets("g", standalone(), vec![("t".into(), 0, offset(5, 1_000))])
            .await
            .expect("commit");
        for req in [request("a", 3, None), request("a", -1, None)] {
            let refused = send(&c, &req).await.expect_err("a classic group");
            assert_eq!(
                refused,
                GroupError::WrongGroupType("Group g is not a consumer group.".into())
            );
            assert_eq!(refused.code(), ResponseError::GroupIdNotFound);
        }
        assert!(
            c.list().iter().any(|(id, _, _)| id == "g"),
            "the classic group is still there"
        );
        let committed = c.fetch_offsets("g");
        assert_eq!(
            committed.get(&("t".to_string(), 0)).map(|o| o.offset),
            Some(5)
        );
        beat(&c, "a", 0, Some(Assignment::new())).await;
        assert!(c.consumer_groups().exists("g"), "a join replaces it");
    }

    /// Member "a" joins group "g" (its partition loaded here), then another node leads the
    /// partition: the group leaves memory, its records stay. The member's assignment and
    /// epoch.
    async fn join_then_lead_elsewhere(node: &Node) -> (Assignment, i32) {
        let c = &node.coordinator;
        let joined = send(c, &request("a", 0, Some(Assignment::new())))
            .await
            .expect("joins once loaded");
        let owned = joined
            .assignment
            .clone()
            .expect("a join is told its assignment");
        node.publish(offsets_image_led_by(2));
        c.follow(&offsets_image_led_by(2)).await;
        (owned, joined.member_epoch)
    }

    #[tokio::test]
    async fn a_group_not_read_back_yet_is_loading_and_one_never_stored_is_not_found() {
        let dir = tempfile::tempdir().expect("temp dir");
        let node = Node::start(&dir).await;
        let c = &node.coordinator;
        let join = request("a", 0, Some(Assignment::new()));
        // Partition 0 is led here but not loaded yet: the group may be stored.
        assert_eq!(
            send(c, &join).await,
            Err(GroupError::CoordinatorLoadInProgress)
        );
        c.follow(&offsets_image_led_by(1)).await;
        assert_eq!(
            send(c, &request("a", 3, None)).await,
            Err(GroupError::GroupNotFound(
                "Consumer group g not found.".into()
            ))
        );
        let (owned, epoch) = join_then_lead_elsewhere(&node).await;
        assert!(!c.consumer_groups().exists("g"));
        // Led here again (a failover back): loading until the group is read back, then
        // the member carries on at its epoch.
        node.publish(offsets_image_led_by(1));
        let refused = send(c, &request("a", epoch, Some(owned.clone())))
            .await
            .expect_err("still loading");
        assert_eq!(refused, GroupError::CoordinatorLoadInProgress);
        assert_eq!(refused.code(), ResponseError::CoordinatorLoadInProgress);
        assert_eq!(
            refused.to_string(),
            "The coordinator is loading and hence can't process requests."
        );
        c.follow(&offsets_image_led_by(1)).await;
        let back = send(c, &request("a", epoch, Some(owned)))
            .await
            .expect("served once read back");
        assert_eq!(back.member_epoch, epoch);
        node.stop().await;
    }

    #[tokio::test]
    async fn a_failed_read_back_is_loading_until_a_retry_reads_the_group_in() {
        let dir = tempfile::tempdir().expect("temp dir");
        let node = Node::start(&dir).await;
        let c = &node.coordinator;
        assert!(
            !c.follow(&offsets_image_led_by(1)).await,
            "a load that succeeds wants no retry"
        );
        let (owned, epoch) = join_then_lead_elsewhere(&node).await;
        // Led here again, and reading its groups back fails once.
        c.shared
            .failing_reads
            .store(1, std::sync::atomic::Ordering::Release);
        node.publish(offsets_image_led_by(1));
        assert!(
            c.follow(&offsets_image_led_by(1)).await,
            "a failed read-back wants a retry"
        );
        // Not "group not found", which the Java consumer takes as fatal.
        assert_eq!(
            send(c, &request("a", epoch, Some(owned.clone()))).await,
            Err(GroupError::CoordinatorLoadInProgress)
        );
        // The retry comes with no new image.
        assert!(!c.follow(&offsets_image_led_by(1)).await);
        let back = send(c, &request("a", epoch, Some(owned)))
            .await
            .expect("served once read back");
        assert_eq!(back.member_epoch, epoch);
        node.stop().await;
    }

    #[tokio::test]
    async fn a_consumer_groups_transactional_offsets_make_no_classic_group_beside_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let node = Node::start(&dir).await;
        node.coordinator.follow(&offsets_image_led_by(1)).await;
        let joined = beat(&node.coordinator, "a", 0, Some(Assignment::new())).await;
        let (epoch, owned) = (joined.member_epoch, joined.assignment.unwrap_or_default());
        // The member's producer commits in a transaction (franz-go's and Java's EOS
        // consumers do), and the broker restarts before the marker: the start-up and
        // the partition's load both find the pending offsets.
        node.coordinator
            .commit_transactional_offsets(
                "g",
                member(7, "a", epoch),
                vec![("t".into(), 0, offset(5, 1_000))],
            )
            .await
            .expect("txn commit");
        node.stop().await;
        let node = Node::start(&dir).await;
        let c = &node.coordinator;
        let no_classic_group = |c: &GroupCoordinator, when: &str| {
            assert!(c.describe("g").is_none(), "no classic group {when}");
            assert!(
                c.list().iter().all(|(id, _, _)| id != "g"),
                "none listed {when}"
            );
            assert!(c.consumer_groups().exists("g"), "the consumer group {when}");
        };
        no_classic_group(c, "after the start-up");
        c.follow(&offsets_image_led_by(1)).await;
        no_classic_group(c, "after the load");
        let r = beat(c, "a", epoch, Some(owned.clone())).await;
        assert_eq!(r.member_epoch, epoch, "the member carries on");

        // The COMMIT marker applies the offsets to the consumer group.
        node.end_transaction(7, true).await;
        no_classic_group(c, "after the marker");
        let committed = c.fetch_offsets("g");
        assert_eq!(
            committed.get(&("t".to_string(), 0)).map(|o| o.offset),
            Some(5)
        );
        let r = beat(c, "a", epoch, Some(owned)).await;
        assert_eq!(r.member_epoch, epoch, "still answered after the marker");
        node.stop().await;
    }
}
