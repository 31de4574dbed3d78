//! `PartitionWriter`: the one door through which coordinators write their partitions
//! (`__consumer_offsets`, `__transaction_state`, and the transaction markers of any
//! partition), as coordinator-common's `PartitionWriter` is in Kafka: append a batch the
//! coordinator built as the partition's leader, optionally at an expected leader epoch
//! (the coordinator epoch), and wait until the high watermark passes it.
//!
//! One lookup per write: [`PartitionWriter::append`] finds the partition and its leader
//! state once and hands back an [`Appended`] ticket holding both, and
//! [`PartitionWriter::wait_committed`] waits on that same leader state, so a write that
//! straddles a leader change is never acknowledged by the new leadership.
//!
//! Errors are data ([`WriteError`]); each coordinator maps them once to the codes Kafka
//! answers its clients with (the group coordinator: Kafka's `offsets.commit` mapping in
//! `group::offsets_log`; the transaction coordinator: `appendTransactionToLog`'s in
//! `txn::log`; markers: WriteTxnMarkers' in `txn::markers`).
//!
//! Cheap to clone; holds no lock across `.await`.

use std::sync::Arc;
use std::time::Duration;

use brook_storage::LogHandle;
use bytes::BytesMut;
use tokio_util::sync::CancellationToken;

use crate::error::BrokerError;
use crate::partition::{Partition, ReplicaManager};
use crate::replication::acks::{self, NotReplicated};
use crate::replication::leader::LeaderPartition;

/// Whether an append is fsynced before it counts as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flushed to disk before the high watermark may pass it: a coordinator's own state
    /// (offset commits, transaction states), which a single node with no follower to rely
    /// on must not lose once answered (a kill -9 right after is replayed from the log).
    Fsync,
    /// Replicated only, as any acks=all produce (transaction markers: the transaction's
    /// Complete* record is written only after them, and is itself fsynced).
    Replicated,
}

/// Why a coordinator write did not happen or was not committed.
#[derive(Debug)]
pub enum WriteError {
    /// The partition lookup or the append failed: not the leader
    /// (`NotLeaderOrFollower`), unknown partition, offline log, storage refusal.
    Partition(BrokerError),
    /// This broker leads, but at another epoch than the coordinator's.
    EpochChanged { expected: i32, current: i32 },
    /// Appended, but not committed: the leadership moved, the ISR shrank below
    /// `min.insync.replicas`, or the wait timed out (or the broker is stopping).
    NotCommitted(NotReplicated),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Partition(e) => write!(f, "{e}"),
            WriteError::EpochChanged { expected, current } => {
                write!(
                    f,
                    "leader epoch is {current}, not the coordinator's {expected}"
                )
            }
            WriteError::NotCommitted(e) => write!(f, "not committed: {e:?}"),
        }
    }
}

impl From<BrokerError> for WriteError {
    fn from(e: BrokerError) -> Self {
        WriteError::Partition(e)
    }
}

/// What [`PartitionWriter::append`] wrote, and the leadership that wrote it.
pub struct Appended {
    pub base_offset: i64,
    pub last_offset: i64,
    partition: Arc<Partition>,
    leader: Arc<LeaderPartition>,
}

impl Appended {
    /// The leader epoch the batch was written at.
    pub fn leader_epoch(&self) -> i32 {
        self.leader.leader_epoch
    }
}

/// See the module comment.
#[derive(Clone)]
pub struct PartitionWriter {
    replicas: ReplicaManager,
}

impl PartitionWriter {
    pub fn new(replicas: ReplicaManager) -> Self {
        PartitionWriter { replicas }
    }

    /// Appends `batch` (one uncompressed v2 batch, base offset 0: the log stamps it) to
    /// `topic`-`partition` as its leader, at `expected_leader_epoch` when given, then
    /// advances the high watermark.
    pub async fn append(
        &self,
        topic: &str,
        partition: i32,
        expected_leader_epoch: Option<i32>,
        batch: BytesMut,
        durability: Durability,
    ) -> Result<Appended, WriteError> {
        let replica = self
            .replicas
            .leader_partition(topic, partition, None)
            .await?;
        let leader = replica.leader(None)?;
        if let Some(expected) = expected_leader_epoch {
            if leader.leader_epoch != expected {
                return Err(WriteError::EpochChanged {
                    expected,
                    current: leader.leader_epoch,
                });
            }
        }
        let now_ms = brook_storage::log_manager::now_ms();
        let log = replica.log();
        let info = log
            .append(batch, leader.leader_epoch, now_ms)
            .await
            .map_err(BrokerError::from)?;
        if durability == Durability::Fsync {
            log.flush(now_ms).await.map_err(BrokerError::from)?;
        }
        leader.maybe_advance_high_watermark();
        Ok(Appended {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            partition: replica,
            leader,
        })
    }

    /// Waits until the high watermark passes `appended` while the leadership that wrote
    /// it lasts, for at most `timeout` or until `stopping`.
    pub async fn wait_committed(
        &self,
        appended: &Appended,
        timeout: Duration,
        stopping: &CancellationToken,
    ) -> Result<(), WriteError> {
        acks::wait_for_high_watermark(
            &appended.partition,
            &appended.leader,
            appended.last_offset + 1,
            timeout,
            stopping,
        )
        .await
        .map_err(WriteError::NotCommitted)
    }

    /// [`PartitionWriter::append`], then [`PartitionWriter::wait_committed`].
    #[allow(clippy::too_many_arguments)]
    pub async fn write(
        &self,
        topic: &str,
        partition: i32,
        expected_leader_epoch: Option<i32>,
        batch: BytesMut,
        durability: Durability,
        timeout: Duration,
        stopping: &CancellationToken,
    ) -> Result<Appended, WriteError> {
        let appended = self
            .append(topic, partition, expected_leader_epoch, batch, durability)
            .await?;
        self.wait_committed(&appended, timeout, stopping).await?;
        Ok(appended)
    }

    /// The log of `topic`-`partition` when this broker leads it, for loading a
    /// coordinator's state from it (`log_reader::LogCursor`).
    pub async fn led_log(&self, topic: &str, partition: i32) -> Result<LogHandle, WriteError> {
        let replica = self
            .replicas
            .leader_partition(topic, partition, None)
            .await?;
        Ok(replica.log().clone())
    }

    /// Every log of `topic` on this broker's disks, led or not (the group coordinator's
    /// offset store is a cache of all of them).
    pub fn logs_on_disk(&self, topic: &str) -> Vec<LogHandle> {
        self.replicas
            .logs()
            .into_iter()
            .filter(|log| log.topic() == topic)
            .collect()
    }

    /// The replica manager, for tests and for the coordinators' metrics.
    pub fn replicas(&self) -> &ReplicaManager {
        &self.replicas
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
pub(crate) mod tests;
