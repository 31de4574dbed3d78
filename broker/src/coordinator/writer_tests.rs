//! The partition writer and the transaction log's writes on it, in-process over a replica
//! manager driven by metadata images on real logs in a temporary directory: committed
//! writes, epoch fencing, resignation before and during a write, shutdown.

use std::sync::Arc;
use std::time::Duration;

use brook_raft::{MetadataImage, PartitionImage, TopicImage};
use brook_storage::{LogConfig, LogManager};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Durability, PartitionWriter, WriteError};
use crate::config::BrokerConfig;
use crate::coordinator::txn::log::{self as txn_log, PartitionLocks};
use crate::coordinator::txn::records::TXN_STATE_TOPIC;
use crate::coordinator::txn::TxnError;
use crate::error::BrokerError;
use crate::partition::ReplicaManager;
use crate::replication::acks::NotReplicated;

/// `__transaction_state`-0 led by `leader` at `leader_epoch` with these replicas and ISR.
pub(crate) fn image(
    leader: i32,
    leader_epoch: i32,
    replicas: &[i32],
    isr: &[i32],
) -> Arc<MetadataImage> {
    let mut image = MetadataImage::default();
    let topic_id = uuid::Uuid::from_u128(9);
    let partition = PartitionImage {
        partition: 0,
        leader,
        leader_epoch,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        partition_epoch: leader_epoch,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
        elr: Vec::new(),
        last_known_elr: Vec::new(),
        leader_recovery_state: brook_raft::LeaderRecoveryState::Recovered,
    };
    image.topics.insert(
        TXN_STATE_TOPIC.into(),
        TopicImage {
            name: TXN_STATE_TOPIC.into(),
            topic_id,
            partitions: [(0, partition)].into(),
            configs: Default::default(),
        },
    );
    image
        .topic_names_by_id
        .insert(topic_id, TXN_STATE_TOPIC.into());
    Arc::new(image)
}

/// Broker 1 with its replicas, following the images sent on `images`.
pub(crate) struct Node {
    pub replicas: ReplicaManager,
    pub writer: PartitionWriter,
    images: watch::Sender<Arc<MetadataImage>>,
    config: BrokerConfig,
    _dir: tempfile::TempDir,
}

impl Node {
    pub async fn new(first: Arc<MetadataImage>) -> Node {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs =
            LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).expect("logs");
        let (images, rx) = watch::channel(first.clone());
        let replicas = ReplicaManager::new(logs, 1, rx);
        let config = BrokerConfig::load(None, Vec::new(), &[])
            .expect("default config")
            .0;
        replicas.apply(first, &config).await;
        Node {
            writer: PartitionWriter::new(replicas.clone()),
            replicas,
            images,
            config,
            _dir: dir,
        }
    }

    /// The quorum publishes `image` and this broker applies it.
    pub async fn apply(&self, image: Arc<MetadataImage>) {
        self.images.send_replace(image.clone());
        self.replicas.apply(image, &self.config).await;
    }

    fn log_end(&self) -> i64 {
        self.replicas
            .logs()
            .into_iter()
            .find(|l| l.topic() == TXN_STATE_TOPIC)
            .map_or(-1, |l| l.log_end_offset())
    }

    pub async fn stop(self) {
        self.replicas.shutdown().await;
    }
}

fn batch() -> bytes::BytesMut {
    txn_log::encode_batch("tx", None, 1_000).expect("encodes")
}

#[tokio::test]
async fn a_write_is_committed_at_the_leaders_epoch_and_offsets_follow_each_other() {
    let node = Node::new(image(1, 3, &[1], &[1])).await;
    let stopping = CancellationToken::new();
    let write = || {
        node.writer.write(
            TXN_STATE_TOPIC,
            0,
            Some(3),
            batch(),
            Durability::Fsync,
            Duration::from_secs(5),
            &stopping,
        )
    };
    let first = write().await.expect("committed");
    let second = write().await.expect("committed");
    assert_eq!((first.base_offset, first.last_offset), (0, 0));
    assert_eq!((second.base_offset, second.last_offset), (1, 1));
    assert_eq!(second.leader_epoch(), 3);
    let log = node.writer.led_log(TXN_STATE_TOPIC, 0).await.expect("led");
    assert_eq!(log.high_watermark(), 2);
    assert_eq!(log.latest_epoch(), Some(3));
    node.stop().await;
}

#[tokio::test]
async fn a_write_for_another_coordinator_epoch_is_refused_before_anything_is_appended() {
    let node = Node::new(image(1, 3, &[1], &[1])).await;
    let refused = node
        .writer
        .append(TXN_STATE_TOPIC, 0, Some(2), batch(), Durability::Fsync)
        .await;
    assert!(matches!(
        refused,
        Err(WriteError::EpochChanged {
            expected: 2,
            current: 3
        })
    ));
    assert_eq!(node.log_end(), 0);
    // The transaction log answers NOT_COORDINATOR: another coordinator epoch decided it.
    let locks = PartitionLocks::default();
    let answer = txn_log::write(
        &node.writer,
        &CancellationToken::new(),
        &locks,
        0,
        2,
        "tx",
        None,
    )
    .await;
    assert_eq!(answer, Err(TxnError::NotCoordinator));
    assert_eq!(node.log_end(), 0);
    node.stop().await;
}

#[tokio::test]
async fn after_resigning_a_coordinator_write_is_not_the_leaders_and_answers_not_coordinator() {
    let node = Node::new(image(1, 0, &[1, 2], &[1, 2])).await;
    node.apply(image(2, 1, &[1, 2], &[1, 2])).await;
    let refused = node
        .writer
        .append(TXN_STATE_TOPIC, 0, None, batch(), Durability::Fsync)
        .await;
    assert!(matches!(
        refused,
        Err(WriteError::Partition(BrokerError::NotLeaderOrFollower {
            leader: 2,
            leader_epoch: 1,
            ..
        }))
    ));
    let locks = PartitionLocks::default();
    let answer = txn_log::write(
        &node.writer,
        &CancellationToken::new(),
        &locks,
        0,
        0,
        "tx",
        None,
    )
    .await;
    assert_eq!(answer, Err(TxnError::NotCoordinator));
    assert_eq!(node.log_end(), 0);
    node.stop().await;
}

#[tokio::test]
async fn a_write_waiting_for_its_followers_ends_not_coordinator_when_the_leadership_moves() {
    let node = Arc::new(Node::new(image(1, 0, &[1, 2], &[1, 2])).await);
    let locks = Arc::new(PartitionLocks::default());
    let waiting = {
        let (node, locks) = (node.clone(), locks.clone());
        tokio::spawn(async move {
            txn_log::write(
                &node.writer,
                &CancellationToken::new(),
                &locks,
                0,
                0,
                "tx",
                None,
            )
            .await
        })
    };
    // Appended, and waiting for broker 2 (in the ISR) to fetch it.
    let mut appends = node
        .replicas
        .logs()
        .into_iter()
        .find(|l| l.topic() == TXN_STATE_TOPIC)
        .expect("the log exists")
        .subscribe_appends();
    tokio::time::timeout(Duration::from_secs(5), appends.wait_for(|&end| end >= 1))
        .await
        .expect("appended")
        .expect("log open");
    assert!(!waiting.is_finished(), "committed without its follower");
    node.apply(image(2, 1, &[1, 2], &[1, 2])).await;
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("ends at the resignation, not at its timeout")
        .expect("joins");
    assert_eq!(answer, Err(TxnError::NotCoordinator));
    Arc::into_inner(node).expect("one owner").stop().await;
}

#[tokio::test]
async fn a_write_waiting_at_shutdown_ends_and_the_wait_says_why() {
    let node = Node::new(image(1, 0, &[1, 2], &[1, 2])).await;
    let appended = node
        .writer
        .append(TXN_STATE_TOPIC, 0, Some(0), batch(), Durability::Replicated)
        .await
        .expect("appended");
    let stopping = CancellationToken::new();
    stopping.cancel();
    let waited = node
        .writer
        .wait_committed(&appended, Duration::from_secs(5), &stopping)
        .await;
    assert!(matches!(
        waited,
        Err(WriteError::NotCommitted(NotReplicated::TimedOut))
    ));
    node.stop().await;
}
