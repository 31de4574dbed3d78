//! The replica manager driven by metadata images, on real logs in a temporary directory.

use std::sync::Arc;

use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::{MetadataImage, PartitionImage, TopicImage};
use brook_storage::{LogConfig, LogManager};
use tokio::sync::watch;

use super::ReplicaManager;
use crate::config::BrokerConfig;
use crate::error::BrokerError;

/// (partition, leader, leader epoch, replicas, isr)
type Part<'a> = (i32, i32, i32, &'a [i32], &'a [i32]);

fn image(topic_id: u128, parts: &[Part<'_>]) -> Arc<MetadataImage> {
    let mut image = MetadataImage::default();
    let partitions = parts
        .iter()
        .map(|&(partition, leader, leader_epoch, replicas, isr)| {
            (
                partition,
                PartitionImage {
                    partition,
                    leader,
                    leader_epoch,
                    replicas: replicas.to_vec(),
                    isr: isr.to_vec(),
                    partition_epoch: 0,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                    leader_recovery_state: brook_raft::LeaderRecoveryState::Recovered,
                },
            )
        })
        .collect();
    let topic_id = uuid::Uuid::from_u128(topic_id);
    image.topics.insert(
        "t".into(),
        TopicImage {
            name: "t".into(),
            topic_id,
            partitions,
            configs: Default::default(),
        },
    );
    image.topic_names_by_id.insert(topic_id, "t".into());
    Arc::new(image)
}

struct Node {
    replicas: ReplicaManager,
    images: watch::Sender<Arc<MetadataImage>>,
    config: BrokerConfig,
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs =
            LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).expect("logs");
        let (images, rx) = watch::channel(Arc::new(MetadataImage::default()));
        let config = BrokerConfig::load(None, Vec::new(), &[])
            .expect("default config")
            .0;
        Node {
            replicas: ReplicaManager::new(logs, 1, rx),
            images,
            config,
            dir,
        }
    }

    /// Publishes `image` and applies it, as `Broker::follow_metadata` does.
    async fn apply(&self, image: Arc<MetadataImage>) {
        self.images.send_replace(image.clone());
        self.replicas.apply(image, &self.config).await;
    }

    async fn leader(&self, partition: i32, epoch: Option<i32>) -> Result<i32, BrokerError> {
        self.replicas
            .leader_partition("t", partition, epoch)
            .await
            .map(|p| p.index())
    }
}

#[tokio::test]
async fn an_image_makes_this_broker_leader_or_follower_of_its_replicas_without_a_request() {
    let node = Node::new();
    node.apply(image(
        1,
        &[
            (0, 1, 0, &[1, 2], &[1, 2]),
            (1, 2, 0, &[2, 1], &[2, 1]),
            (2, 3, 0, &[3], &[3]),
        ],
    ))
    .await;
    assert_eq!(node.leader(0, None).await.ok(), Some(0));
    assert!(matches!(
        node.leader(1, None).await,
        Err(BrokerError::NotLeaderOrFollower { leader: 2, .. })
    ));
    assert!(
        node.replicas.get("t", 1).is_some(),
        "a follower's replica is held"
    );
    assert!(matches!(
        node.leader(2, None).await,
        Err(BrokerError::NotLeaderOrFollower { leader: 3, .. })
    ));
    assert!(node.replicas.get("t", 2).is_none(), "not a replica here");
    assert!(matches!(
        node.replicas.leader_partition("u", 0, None).await,
        Err(BrokerError::UnknownTopicOrPartition { .. })
    ));
    assert_eq!(node.replicas.logs().len(), 2);
}

#[tokio::test]
async fn a_new_leader_epoch_fences_requests_of_the_older_one() {
    let node = Node::new();
    node.apply(image(1, &[(0, 1, 0, &[1, 2], &[1, 2])])).await;
    let before = node.replicas.get("t", 0).expect("held").expect("online");
    node.apply(image(1, &[(0, 1, 1, &[1, 2], &[1, 2])])).await;
    let code = |r: Result<i32, BrokerError>| r.map_err(|e| e.code()).err();
    assert_eq!(
        code(node.leader(0, Some(0)).await),
        Some(ResponseError::FencedLeaderEpoch)
    );
    assert_eq!(
        code(node.leader(0, Some(2)).await),
        Some(ResponseError::UnknownLeaderEpoch)
    );
    assert_eq!(node.leader(0, Some(1)).await.ok(), Some(0));
    let after = node.replicas.get("t", 0).expect("held").expect("online");
    assert!(Arc::ptr_eq(&before, &after), "the same replica, a new role");
    assert_eq!(after.leader_state().map(|s| s.leader_epoch), Some(1));
}

#[tokio::test]
async fn a_committed_isr_change_reaches_the_leader_state() {
    let node = Node::new();
    node.apply(image(1, &[(0, 1, 0, &[1, 2], &[1, 2])])).await;
    node.apply(image(1, &[(0, 1, 0, &[1, 2], &[1])])).await;
    let state = node
        .replicas
        .get("t", 0)
        .expect("held")
        .expect("online")
        .leader_state()
        .expect("leads");
    assert_eq!(state.assignment().isr, vec![1]);
}

#[tokio::test]
async fn leaving_the_assignment_drops_the_replica_and_deletes_its_log() {
    let node = Node::new();
    node.apply(image(1, &[(0, 1, 0, &[1, 2], &[1, 2])])).await;
    let held = node.replicas.get("t", 0).expect("held").expect("online");
    node.apply(image(1, &[(0, 2, 1, &[2, 3], &[2, 3])])).await;
    assert!(node.replicas.get("t", 0).is_none());
    assert!(node.replicas.existing("t", 0).is_none(), "log deleted");
    assert!(
        matches!(
            held.leader(None),
            Err(BrokerError::NotLeaderOrFollower {
                leader: 2,
                leader_epoch: 1,
                ..
            })
        ),
        "a request still holding it answers with the new leader"
    );
}

#[tokio::test]
async fn a_topic_created_again_under_its_name_gets_a_new_replica() {
    let node = Node::new();
    node.apply(image(1, &[(0, 1, 0, &[1], &[1])])).await;
    let old = node.replicas.get("t", 0).expect("held").expect("online");
    node.apply(image(2, &[(0, 1, 0, &[1], &[1])])).await;
    let new = node.replicas.get("t", 0).expect("held").expect("online");
    assert!(!Arc::ptr_eq(&old, &new));
    assert_eq!(new.topic_id(), uuid::Uuid::from_u128(2));
}

#[tokio::test]
async fn a_request_for_a_partition_led_in_an_image_not_yet_applied_waits_for_the_apply() {
    let node = Arc::new(Node::new());
    let led = image(1, &[(0, 1, 0, &[1], &[1])]);
    node.images.send_replace(led.clone());
    let waiting = {
        let node = Arc::clone(&node);
        tokio::spawn(async move { node.leader(0, None).await.ok() })
    };
    tokio::task::yield_now().await;
    node.replicas.apply(led, &node.config).await;
    assert_eq!(waiting.await.expect("task"), Some(0));
}

#[tokio::test]
async fn a_log_that_cannot_be_opened_leaves_its_partition_offline() {
    let node = Node::new();
    // A file where the partition's directory should be.
    std::fs::write(node.dir.path().join("t-0"), b"not a directory").expect("write");
    node.apply(image(1, &[(0, 1, 0, &[1], &[1])])).await;
    // The apply registers the log; its creation, in the background, fails.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !node.replicas.is_offline("t", 0) {
        assert!(tokio::time::Instant::now() < deadline, "never offline");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let answer = node.leader(0, None).await.map_err(|e| e.code());
    assert_eq!(answer, Err(ResponseError::KafkaStorageError));
    assert!(node.replicas.leaders().is_empty(), "never served as led");
}

#[tokio::test(start_paused = true)]
async fn a_lookup_waits_once_for_an_image_whose_apply_is_slow_then_no_lookup_waits_for_it() {
    let node = Node::new();
    // Published and not applied, as while a slow apply creates thousands of logs: one
    // request naming many of its partitions must not wait APPLY_WAIT for each in turn.
    node.images
        .send_replace(image(1, &[(0, 1, 0, &[1], &[1]), (1, 1, 0, &[1], &[1])]));
    let not_led_yet = |r: Result<i32, BrokerError>| {
        matches!(r, Err(BrokerError::NotLeaderOrFollower { leader: -1, .. }))
    };
    let started = tokio::time::Instant::now();
    assert!(not_led_yet(node.leader(0, None).await));
    assert_eq!(started.elapsed(), super::APPLY_WAIT);
    let started = tokio::time::Instant::now();
    assert!(not_led_yet(node.leader(1, None).await));
    assert!(not_led_yet(node.leader(0, None).await));
    assert_eq!(started.elapsed(), std::time::Duration::ZERO);

    // A newer image is waited for again, and its apply answers the waiting lookup.
    let newer = image(1, &[(0, 1, 1, &[1], &[1]), (1, 1, 1, &[1], &[1])]);
    node.images.send_replace(newer.clone());
    let replicas = node.replicas.clone();
    let config = node.config.clone();
    let apply = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        replicas.apply(newer, &config).await;
    });
    let started = tokio::time::Instant::now();
    assert_eq!(node.leader(1, None).await.ok(), Some(1));
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    apply.await.expect("apply");
    assert_eq!(node.leader(0, Some(1)).await.ok(), Some(0));
}
