//! Transactional offset commits: pending until the marker, applied on COMMIT, dropped on
//! ABORT; the group checks of TxnOffsetCommit (KIP-447); retention and deletion with
//! pending offsets; the start-up replay of transactional batches and markers from a
//! real `__consumer_offsets` log, across restarts; and what each group request answers
//! while the group's partition is loading (ListGroups: while any partition led here is).

use std::time::Duration;

use brook_protocol::kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use brook_storage::offsets::{CommittedOffset, OffsetRecord, OffsetStore};
use brook_storage::{LogConfig, LogHandle, LogManager};
use bytes::{Bytes, BytesMut};

use super::offsets_log::{encode_batch, TxnProducer};
use super::persist_tests::once_released;
use super::records::OFFSETS_TOPIC;
use super::replay::{marker_is_commit, replay};
use super::types::{GroupError, GroupState, JoinRequest};
use super::{GroupConfig, GroupCoordinator, JoinOutcome, SyncRequest, TxnCommitter};
use crate::error::BrokerError;

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

fn offset(offset: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 1_000,
    }
}

/// A producer outside the group (TxnOffsetCommit v0-2, or generation -1).
fn outsider(producer_id: i64) -> TxnCommitter {
    TxnCommitter {
        producer: TxnProducer {
            producer_id,
            producer_epoch: 0,
        },
        member_id: String::new(),
        group_instance_id: None,
        generation_id: -1,
    }
}

pub(super) fn member(producer_id: i64, member_id: &str, generation_id: i32) -> TxnCommitter {
    TxnCommitter {
        member_id: member_id.into(),
        generation_id,
        ..outsider(producer_id)
    }
}

async fn started(dir: &tempfile::TempDir) -> GroupCoordinator {
    GroupCoordinator::start(dir.path().join("store"), config(), None)
        .await
        .expect("start")
}

fn committed(coordinator: &GroupCoordinator, group: &str, partition: i32) -> Option<i64> {
    coordinator
        .fetch_offsets(group)
        .get(&("t".to_string(), partition))
        .map(|c| c.offset)
}

#[tokio::test]
async fn transactional_offsets_stay_pending_until_a_commit_marker_applies_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = started(&dir).await;
    coordinator
        .commit_offsets(
            "g",
            super::Committer {
                member_id: String::new(),
                group_instance_id: None,
                generation_id: -1,
                missing_group_error: GroupError::UnknownMemberId,
            },
            vec![("t".into(), 0, offset(3))],
        )
        .await
        .expect("plain commit");
    coordinator
        .commit_transactional_offsets(
            "g",
            outsider(7),
            vec![("t".into(), 0, offset(10)), ("t".into(), 1, offset(11))],
        )
        .await
        .expect("txn commit");

    assert_eq!(
        committed(&coordinator, "g", 0),
        Some(3),
        "the last stable one"
    );
    assert_eq!(committed(&coordinator, "g", 1), None);
    assert_eq!(
        coordinator.pending_transactional_offsets("g"),
        [("t".to_string(), 0), ("t".to_string(), 1)].into()
    );

    // A marker of another producer changes nothing.
    coordinator
        .complete_transaction(0, 8, true)
        .await
        .expect("marker");
    assert_eq!(committed(&coordinator, "g", 0), Some(3));

    coordinator
        .complete_transaction(0, 7, true)
        .await
        .expect("marker");
    assert_eq!(committed(&coordinator, "g", 0), Some(10));
    assert_eq!(committed(&coordinator, "g", 1), Some(11));
    assert!(coordinator.pending_transactional_offsets("g").is_empty());
    drop(coordinator);

    // Applied to the store, so a restart keeps them.
    let path = dir.path().join("store");
    let store = once_released(|| async { OffsetStore::open(&path) }).await;
    let mut stored: Vec<(i32, i64)> = store
        .fetch("g")
        .expect("fetch")
        .into_iter()
        .map(|(_, p, c)| (p, c.offset))
        .collect();
    stored.sort_unstable();
    assert_eq!(stored, vec![(0, 10), (1, 11)]);
}

#[tokio::test]
async fn an_abort_marker_drops_the_pending_offsets_and_keeps_the_old_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = started(&dir).await;
    coordinator
        .commit_transactional_offsets("g", outsider(7), vec![("t".into(), 0, offset(10))])
        .await
        .expect("txn commit");
    coordinator
        .complete_transaction(0, 7, true)
        .await
        .expect("commit");
    coordinator
        .commit_transactional_offsets("g", outsider(7), vec![("t".into(), 0, offset(20))])
        .await
        .expect("txn commit");
    coordinator
        .complete_transaction(0, 7, false)
        .await
        .expect("abort");
    assert_eq!(committed(&coordinator, "g", 0), Some(10));
    assert!(coordinator.pending_transactional_offsets("g").is_empty());
    // A retried marker finds nothing to apply.
    coordinator
        .complete_transaction(0, 7, true)
        .await
        .expect("again");
    assert_eq!(committed(&coordinator, "g", 0), Some(10));
}

#[tokio::test]
async fn a_plain_commit_after_the_transactional_one_wins_at_the_marker() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = started(&dir).await;
    coordinator
        .commit_transactional_offsets("g", outsider(7), vec![("t".into(), 0, offset(10))])
        .await
        .expect("txn commit");
    coordinator
        .commit_offsets(
            "g",
            super::Committer {
                member_id: String::new(),
                group_instance_id: None,
                generation_id: -1,
                missing_group_error: GroupError::UnknownMemberId,
            },
            vec![("t".into(), 0, offset(50))],
        )
        .await
        .expect("plain commit");
    coordinator
        .complete_transaction(0, 7, true)
        .await
        .expect("commit");
    assert_eq!(committed(&coordinator, "g", 0), Some(50));
}

/// A JoinGroup of the static member "instance-1" (range, 10 s timeouts) as `member_id`.
fn static_join(member_id: String) -> JoinRequest {
    JoinRequest {
        member_id,
        group_instance_id: Some("instance-1".into()),
        client_id: "client".into(),
        client_host: String::new(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: false,
        supports_skip_assignment: false,
        topics: None,
    }
}

async fn stable_member(coordinator: &GroupCoordinator, group: &str) -> (String, i32) {
    let req = static_join(String::new());
    let JoinOutcome::Joined(joined) = coordinator.join(group, req).await.expect("join") else {
        panic!("a static member joins without a member id round trip");
    };
    coordinator
        .sync(
            group,
            SyncRequest {
                member_id: joined.member_id.clone(),
                group_instance_id: Some("instance-1".into()),
                generation_id: joined.generation_id,
                protocol_type: None,
                protocol_name: None,
                assignments: vec![(joined.member_id.clone(), Bytes::new())],
            },
        )
        .await
        .expect("sync");
    (joined.member_id, joined.generation_id)
}

fn group_error(result: Result<(), BrokerError>) -> Option<GroupError> {
    match result {
        Ok(()) => None,
        Err(BrokerError::Group(e)) => Some(e),
        Err(e) => panic!("not a group error: {e}"),
    }
}

#[tokio::test]
async fn txn_offset_commits_are_checked_against_the_groups_generation_and_members() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = started(&dir).await;
    let (member_id, generation) = stable_member(&coordinator, "g").await;
    let entries = || vec![("t".to_string(), 0, offset(1))];
    let c = &coordinator;
    let commit = |committer: TxnCommitter| async move {
        c.commit_transactional_offsets("g", committer, vec![("t".to_string(), 0, offset(1))])
            .await
    };

    assert_eq!(
        group_error(commit(member(1, &member_id, generation)).await),
        None
    );
    assert!(matches!(
        group_error(commit(member(1, &member_id, generation - 1)).await),
        Some(GroupError::IllegalGeneration { .. })
    ));
    assert_eq!(
        group_error(commit(member(1, "someone-else", generation)).await),
        Some(GroupError::UnknownMemberId)
    );
    let fenced = TxnCommitter {
        group_instance_id: Some("instance-1".into()),
        ..member(1, "an-old-member-id", generation)
    };
    assert!(matches!(
        group_error(commit(fenced).await),
        Some(GroupError::FencedInstanceId { .. })
    ));
    // v0-2 (no member, generation -1): accepted even while the group has members,
    // unlike OffsetCommit (older transactional clients send no group identity).
    assert_eq!(group_error(commit(outsider(2)).await), None);
    // An unknown group with a generation: ILLEGAL_GENERATION (every version).
    assert!(matches!(
        group_error(
            coordinator
                .commit_transactional_offsets("nobody", member(1, "m", 3), entries())
                .await
        ),
        Some(GroupError::IllegalGeneration { .. })
    ));
    // Without one, the group is created, Empty, as for a standalone OffsetCommit.
    coordinator
        .commit_transactional_offsets("standalone", outsider(3), entries())
        .await
        .expect("creates the group");
    assert!(coordinator
        .list()
        .iter()
        .any(|(id, _, state)| id == "standalone" && *state == GroupState::Empty));
}

#[tokio::test]
async fn pending_offsets_neither_expire_nor_let_their_group_go_and_deletion_drops_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = started(&dir).await;
    coordinator
        .commit_transactional_offsets("g", outsider(7), vec![("t".into(), 0, offset(10))])
        .await
        .expect("txn commit");
    // Stamp when the group became empty, so retention would remove it if it could.
    coordinator.with_group("g", |_| ());
    assert!(coordinator
        .with_group("g", |g| g.and_then(|g| g.empty_since_ms))
        .is_some());
    assert_eq!(coordinator.expire_offsets_at(i64::MAX).await, 0);
    assert!(
        coordinator.list().iter().any(|(id, _, _)| id == "g"),
        "a group with an open transaction stays"
    );

    coordinator
        .complete_transaction(0, 7, true)
        .await
        .expect("commit");
    coordinator
        .commit_transactional_offsets("g", outsider(7), vec![("t".into(), 0, offset(20))])
        .await
        .expect("txn commit");
    assert_eq!(
        coordinator.expire_offsets_at(i64::MAX).await,
        0,
        "the committed offset waits for the pending one"
    );
    assert_eq!(committed(&coordinator, "g", 0), Some(10));

    coordinator.delete_group("g").await.expect("delete");
    assert!(coordinator.pending_transactional_offsets("g").is_empty());
    coordinator
        .complete_transaction(0, 7, true)
        .await
        .expect("late commit marker");
    assert_eq!(
        committed(&coordinator, "g", 0),
        None,
        "a deleted group's pending offsets do not come back"
    );
}

// --- replay from a real log -------------------------------------------------------

const PARTITION: i32 = 3;

fn open_log(dir: &tempfile::TempDir) -> (LogManager, LogHandle) {
    let logs = LogManager::open(&[dir.path().join("logs")], LogConfig::default()).expect("logs");
    let log = logs
        .get_or_create(OFFSETS_TOPIC, PARTITION, LogConfig::default())
        .expect("log");
    (logs, log)
}

fn commit(group: &str, partition: i32, value: i64) -> OffsetRecord {
    OffsetRecord::Commit {
        group: group.into(),
        topic: "t".into(),
        partition,
        offset: offset(value),
    }
}

async fn append_plain(log: &LogHandle, records: &[OffsetRecord]) {
    let batch = encode_batch(records, 10, None).expect("encode");
    log.append(batch, 0, 10).await.expect("append");
}

async fn append_txn(log: &LogHandle, producer_id: i64, records: &[OffsetRecord]) -> i64 {
    let producer = TxnProducer {
        producer_id,
        producer_epoch: 0,
    };
    let batch = encode_batch(records, 10, Some(producer)).expect("encode");
    log.append(batch, 0, 10).await.expect("append").base_offset
}

/// A COMMIT or ABORT marker, as the transaction coordinator writes it.
async fn append_marker(log: &LogHandle, producer_id: i64, commit: bool) {
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 10,
        key: Some(Bytes::from(vec![0, 0, 0, u8::from(commit)])),
        value: Some(Bytes::from(vec![0, 0, 0, 0, 0, 0])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, std::slice::from_ref(&record), &options)
        .expect("encode marker");
    log.append(buf, 0, 10).await.expect("append marker");
}

fn stored(store: &OffsetStore, group: &str) -> Vec<(i32, i64)> {
    let mut out: Vec<(i32, i64)> = store
        .fetch(group)
        .expect("fetch")
        .into_iter()
        .map(|(_, p, c)| (p, c.offset))
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn control_record_keys_name_commit_and_abort() {
    assert_eq!(marker_is_commit(Some(&[0, 0, 0, 1])), Some(true));
    assert_eq!(marker_is_commit(Some(&[0, 0, 0, 0])), Some(false));
    assert_eq!(marker_is_commit(Some(&[0, 0, 0, 5])), None);
    assert_eq!(marker_is_commit(Some(&[0, 0])), None);
    assert_eq!(marker_is_commit(None), None);
}

#[tokio::test]
async fn replay_applies_committed_drops_aborted_and_reopens_open_transactions_across_restarts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_logs, log) = open_log(&dir);
    append_plain(&log, &[commit("g", 0, 1), commit("g", 1, 1)]).await; // 0, 1
    append_txn(&log, 7, &[commit("g", 0, 70)]).await; // 2: committed below
    append_txn(&log, 8, &[commit("g", 1, 80)]).await; // 3: aborted below
    let open_first = append_txn(&log, 9, &[commit("g", 2, 90)]).await; // 4: stays open
    append_marker(&log, 7, true).await; // 5
    append_marker(&log, 8, false).await; // 6
    append_plain(&log, &[commit("h", 0, 5)]).await; // 7

    let store = OffsetStore::open(&dir.path().join("store")).expect("store");
    let replayed = replay(&store, &log).await.expect("replay");
    assert_eq!(stored(&store, "g"), vec![(0, 70), (1, 1)]);
    assert_eq!(stored(&store, "h"), vec![(0, 5)]);
    assert_eq!(replayed.processed, Some(7));
    assert_eq!(replayed.open.keys().copied().collect::<Vec<_>>(), vec![9]);
    assert_eq!(replayed.open[&9].first_offset, open_first);
    // The store's position stays below the open transaction, so the next start sees it.
    assert_eq!(
        store.applied_position_of(PARTITION).expect("position"),
        Some(open_first - 1)
    );

    // "Restart" with the transaction still open: it is found again.
    let again = replay(&store, &log).await.expect("replay");
    assert_eq!(again.open.keys().copied().collect::<Vec<_>>(), vec![9]);
    assert_eq!(stored(&store, "g"), vec![(0, 70), (1, 1)]);

    // Its COMMIT marker arrives while down; the next start applies it.
    append_marker(&log, 9, true).await; // 8
    drop(store);
    let store = OffsetStore::open(&dir.path().join("store")).expect("reopen");
    let last = replay(&store, &log).await.expect("replay");
    assert!(last.open.is_empty());
    assert_eq!(stored(&store, "g"), vec![(0, 70), (1, 1), (2, 90)]);
    assert_eq!(
        store.applied_position_of(PARTITION).expect("position"),
        Some(8)
    );
}

#[tokio::test]
async fn replay_keeps_a_plain_commit_newer_than_the_transactional_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_logs, log) = open_log(&dir);
    append_txn(&log, 7, &[commit("g", 0, 70), commit("g", 1, 71)]).await;
    append_plain(&log, &[commit("g", 0, 5)]).await;
    append_plain(
        &log,
        &[OffsetRecord::DeleteOffset {
            group: "g".into(),
            topic: "t".into(),
            partition: 1,
        }],
    )
    .await;
    append_marker(&log, 7, true).await;
    let store = OffsetStore::open(&dir.path().join("store")).expect("store");
    replay(&store, &log).await.expect("replay");
    assert_eq!(
        stored(&store, "g"),
        vec![(0, 5)],
        "the later plain commit wins; the tombstone removed the pending offset"
    );
}

// --- the coordinator on a real `__consumer_offsets` log, across restarts -------------

/// A one-partition `__consumer_offsets` led by node 1.
fn offsets_image() -> std::sync::Arc<brook_raft::MetadataImage> {
    offsets_image_led_by(1)
}

/// `offsets_image` with its partition at `leader_epoch` (led here still).
fn offsets_image_at_leader_epoch(leader_epoch: i32) -> std::sync::Arc<brook_raft::MetadataImage> {
    let mut image = (*offsets_image()).clone();
    if let Some(p) = image
        .topics
        .get_mut(OFFSETS_TOPIC)
        .and_then(|t| t.partitions.get_mut(&0))
    {
        p.leader_epoch = leader_epoch;
    }
    std::sync::Arc::new(image)
}

/// A one-partition `__consumer_offsets` led by `leader` (the coordinators' node is 1).
pub(super) fn offsets_image_led_by(leader: i32) -> std::sync::Arc<brook_raft::MetadataImage> {
    let mut image = brook_raft::MetadataImage::default();
    let partition = brook_raft::PartitionImage {
        partition: 0,
        leader,
        leader_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
        partition_epoch: 0,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
        elr: Vec::new(),
        last_known_elr: Vec::new(),
        leader_recovery_state: brook_raft::LeaderRecoveryState::Recovered,
    };
    image.topics.insert(
        OFFSETS_TOPIC.into(),
        brook_raft::TopicImage {
            name: OFFSETS_TOPIC.into(),
            topic_id: uuid::Uuid::from_u128(7),
            partitions: [(0, partition)].into(),
            configs: Default::default(),
        },
    );
    std::sync::Arc::new(image)
}

/// A coordinator writing through `__consumer_offsets` in `dir`, with the sender of its
/// metadata (kept alive) and the replicas (to reach the log as the marker writer does).
pub(super) struct Node {
    pub(super) coordinator: GroupCoordinator,
    replicas: crate::partition::ReplicaManager,
    images: tokio::sync::watch::Sender<std::sync::Arc<brook_raft::MetadataImage>>,
}

impl Node {
    pub(super) async fn start(dir: &tempfile::TempDir) -> Node {
        let logs =
            LogManager::open(&[dir.path().join("logs")], LogConfig::default()).expect("logs");
        let (images, rx) = tokio::sync::watch::channel(offsets_image());
        let replicas = crate::partition::ReplicaManager::new(logs, 1, rx.clone());
        let broker_config = crate::config::BrokerConfig::load(None, Vec::new(), &[])
            .expect("default config")
            .0;
        let image = rx.borrow().clone();
        replicas.apply(image, &broker_config).await;
        // A stopped node's coordinator tasks may still hold the database a moment.
        let coordinator = once_released(|| {
            let log = super::offsets_log::OffsetsLog::new(
                crate::coordinator::writer::PartitionWriter::new(replicas.clone()),
                rx.clone(),
                1,
            );
            GroupCoordinator::start(dir.path().join("store"), config(), Some(log))
        })
        .await;
        Node {
            coordinator,
            replicas,
            images,
        }
    }

    /// `image` becomes the coordinator's metadata (whom it coordinates for); the replicas
    /// keep the first image (they lead partition 0 throughout).
    pub(super) fn publish(&self, image: std::sync::Arc<brook_raft::MetadataImage>) {
        self.images.send_replace(image);
    }

    /// The marker writer's part: the marker into the log, then the hook.
    pub(super) async fn end_transaction(&self, producer_id: i64, commit: bool) {
        let log = self
            .replicas
            .logs()
            .into_iter()
            .find(|l| l.topic() == OFFSETS_TOPIC)
            .expect("the offsets log exists");
        append_marker(&log, producer_id, commit).await;
        self.coordinator
            .complete_transaction(0, producer_id, commit)
            .await
            .expect("complete");
    }

    /// Stops: the coordinator's tasks end, the logs are closed.
    pub(super) async fn stop(self) {
        drop(self.coordinator);
        self.replicas.shutdown().await;
    }
}

#[tokio::test]
async fn pending_offsets_survive_restarts_until_their_marker_on_a_real_offsets_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let node = Node::start(&dir).await;
    let standalone = || super::Committer {
        member_id: String::new(),
        group_instance_id: None,
        generation_id: -1,
        missing_group_error: GroupError::UnknownMemberId,
    };
    let c = &node.coordinator;
    // Requests are served once the partition is loaded (COORDINATOR_LOAD_IN_PROGRESS
    // before).
    c.follow(&offsets_image()).await;
    c.commit_offsets("g", standalone(), vec![("t".into(), 0, offset(1))])
        .await
        .expect("plain commit");
    c.commit_transactional_offsets(
        "g",
        outsider(7),
        vec![("t".into(), 0, offset(70)), ("t".into(), 1, offset(71))],
    )
    .await
    .expect("txn commit");
    c.commit_offsets("h", standalone(), vec![("t".into(), 0, offset(5))])
        .await
        .expect("a later plain commit of another group");
    assert_eq!(committed(c, "g", 0), Some(1));
    // In the log: Kafka's OffsetCommit records in a transactional batch of producer 7.
    let log = node
        .replicas
        .logs()
        .into_iter()
        .find(|l| l.topic() == OFFSETS_TOPIC)
        .expect("the offsets log exists");
    let read = log
        .read(
            1,
            1 << 20,
            log.log_end_offset(),
            brook_storage::log::MinOneBatch::Yes,
        )
        .await
        .expect("read");
    let mut bytes = read.records;
    let sets = brook_protocol::kafka_protocol::records::RecordBatchDecoder::decode_all(&mut bytes)
        .expect("decodes");
    let first = &sets[0].records[0];
    assert_eq!((first.offset, first.producer_id), (1, 7));
    assert!(first.transactional && !first.control);
    node.stop().await;
    // The store's applied position stopped below the open transaction (offset 1), though
    // the plain commit at offset 3 was applied.
    {
        let store = OffsetStore::open(&dir.path().join("store")).expect("store");
        assert_eq!(store.applied_position_of(0).expect("position"), Some(0));
        assert_eq!(stored(&store, "h"), vec![(0, 5)]);
    }

    // Restarted before the marker: still pending, the rest as it was.
    let node = Node::start(&dir).await;
    let c = &node.coordinator;
    assert_eq!(committed(c, "g", 0), Some(1));
    assert_eq!(committed(c, "h", 0), Some(5));
    assert_eq!(
        c.pending_transactional_offsets("g"),
        [("t".to_string(), 0), ("t".to_string(), 1)].into()
    );
    node.end_transaction(7, true).await;
    let c = &node.coordinator;
    assert_eq!(committed(c, "g", 0), Some(70));
    assert_eq!(committed(c, "g", 1), Some(71));

    // A second transaction, aborted.
    c.follow(&offsets_image()).await;
    c.commit_transactional_offsets("g", outsider(8), vec![("t".into(), 0, offset(80))])
        .await
        .expect("txn commit");
    node.end_transaction(8, false).await;
    node.stop().await;

    let node = Node::start(&dir).await;
    let c = &node.coordinator;
    assert_eq!(committed(c, "g", 0), Some(70));
    assert_eq!(committed(c, "g", 1), Some(71));
    assert_eq!(committed(c, "h", 0), Some(5));
    assert!(c.pending_transactional_offsets("g").is_empty());
    node.stop().await;
}

/// Every group request for a group whose partition is led here but not loaded yet
/// (a failover back to this node) answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka's runtime
/// does, except the classic Heartbeat, which Kafka answers blindly; once loaded, the
/// group is served as stored. A new leader epoch here reloads the partition into the
/// groups kept in memory: those are served meanwhile (Kafka's shard stays active).
#[tokio::test]
async fn group_requests_answer_load_in_progress_while_the_partition_loads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let node = Node::start(&dir).await;
    let c = &node.coordinator;
    c.follow(&offsets_image()).await;
    let (member_id, generation) = stable_member(c, "g").await;
    let committer = || super::Committer {
        member_id: member_id.clone(),
        group_instance_id: Some("instance-1".into()),
        generation_id: generation,
        missing_group_error: GroupError::UnknownMemberId,
    };
    c.commit_offsets("g", committer(), vec![("t".into(), 0, offset(4))])
        .await
        .expect("commit");
    // Another node leads the partition, then this one again: loading until followed.
    node.publish(offsets_image_led_by(2));
    c.follow(&offsets_image_led_by(2)).await;
    node.publish(offsets_image());
    let loading = Some(GroupError::CoordinatorLoadInProgress);
    assert_eq!(c.serves("g"), Err(GroupError::CoordinatorLoadInProgress));
    assert_eq!(
        c.serves("elsewhere-unknown"),
        Err(GroupError::CoordinatorLoadInProgress),
        "DescribeGroups, ConsumerGroupDescribe, OffsetFetch: any group of the partition"
    );

    assert_eq!(
        c.join("g", static_join(member_id.clone())).await.err(),
        loading
    );
    let sync = SyncRequest {
        member_id: member_id.clone(),
        group_instance_id: Some("instance-1".into()),
        generation_id: generation,
        protocol_type: None,
        protocol_name: None,
        assignments: Vec::new(),
    };
    assert_eq!(c.sync("g", sync).await.err(), loading);
    assert_eq!(
        c.heartbeat("g", "not-even-a-member", None, 99),
        Ok(()),
        "Kafka answers a Heartbeat blindly while loading"
    );
    assert_eq!(
        c.leave("g", &[(member_id.clone(), None)]).err(),
        loading,
        "one error for the whole LeaveGroup"
    );
    let entries = || vec![("t".to_string(), 0, offset(9))];
    assert_eq!(
        group_error(c.commit_offsets("g", committer(), entries()).await),
        loading
    );
    assert_eq!(
        group_error(
            c.commit_transactional_offsets("g", member(5, &member_id, generation), entries())
                .await
        ),
        loading
    );
    assert_eq!(
        c.delete_offsets("g", vec![("t".into(), 0)])
            .await
            .err()
            .and_then(|e| group_error(Err(e))),
        loading
    );
    assert_eq!(c.delete_group("g").await.err(), loading);

    // Loaded: served as stored, nothing of the refused requests applied.
    c.follow(&offsets_image()).await;
    assert_eq!(c.serves("g"), Ok(()));
    assert_eq!(committed(c, "g", 0), Some(4));
    assert!(c.pending_transactional_offsets("g").is_empty());
    assert!(c.describe("g").is_some(), "the group is back");
    assert_eq!(
        c.heartbeat("g", "not-even-a-member", None, 99),
        Err(GroupError::UnknownMemberId)
    );

    let bumped = offsets_image_at_leader_epoch(1);
    node.publish(bumped.clone());
    assert_eq!(c.serves("g"), Ok(()), "kept in memory: served");
    assert_eq!(
        c.heartbeat("g", "not-even-a-member", None, 99),
        Err(GroupError::UnknownMemberId),
        "checked, not answered blindly"
    );
    assert_eq!(
        c.serves("elsewhere-unknown"),
        Err(GroupError::CoordinatorLoadInProgress)
    );
    c.follow(&bumped).await;
    assert_eq!(c.serves("elsewhere-unknown"), Ok(()));
    assert_eq!(committed(c, "g", 0), Some(4));
    node.stop().await;
}

/// ListGroups answers COORDINATOR_LOAD_IN_PROGRESS for the whole request while a
/// `__consumer_offsets` partition led here is loading, as Kafka's
/// `GroupCoordinatorService.listGroups` does (one loading shard fails the listing; the
/// groups in memory are not listed meanwhile); a partition led elsewhere is not loading.
#[tokio::test]
async fn list_groups_answers_load_in_progress_while_a_partition_loads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let node = Node::start(&dir).await;
    let c = &node.coordinator;
    let listed = |c: &GroupCoordinator| -> Vec<String> {
        c.list().into_iter().map(|(id, _, _)| id).collect()
    };
    let loading = Err(GroupError::CoordinatorLoadInProgress);
    node.publish(offsets_image());
    assert_eq!(
        c.refuse_listing_while_loading(),
        loading,
        "led here, never loaded"
    );
    c.follow(&offsets_image()).await;
    assert_eq!(c.refuse_listing_while_loading(), Ok(()));
    let (member_id, generation) = stable_member(c, "g").await;
    let committer = super::Committer {
        member_id,
        group_instance_id: Some("instance-1".into()),
        generation_id: generation,
        missing_group_error: GroupError::UnknownMemberId,
    };
    c.commit_offsets("g", committer, vec![("t".into(), 0, offset(4))])
        .await
        .expect("commit");
    assert_eq!(listed(c), ["g"]);

    // Led elsewhere: nothing of it is loading here, its group is not listed here.
    node.publish(offsets_image_led_by(2));
    c.follow(&offsets_image_led_by(2)).await;
    assert_eq!(c.refuse_listing_while_loading(), Ok(()));
    assert!(listed(c).is_empty());

    // Led here again (a failover back): refused until loaded, then the stored group.
    node.publish(offsets_image());
    assert_eq!(c.refuse_listing_while_loading(), loading);
    c.follow(&offsets_image()).await;
    assert_eq!(c.refuse_listing_while_loading(), Ok(()));
    assert_eq!(listed(c), ["g"]);

    // A new leader epoch here: "g" stays in memory, but the reload may bring back groups
    // that are not (per group, `serves` refuses those): the listing waits for it.
    let bumped = offsets_image_at_leader_epoch(1);
    node.publish(bumped.clone());
    assert_eq!(c.refuse_listing_while_loading(), loading);
    c.follow(&bumped).await;
    assert_eq!(c.refuse_listing_while_loading(), Ok(()));
    assert_eq!(listed(c), ["g"]);
    node.stop().await;
}
