//! The group coordinator's persistence through `__consumer_offsets`: append, fsync,
//! apply to the offset store; and the start-up replay of what the store missed.
//!
//! A write for a group goes to its partition (`records::partition_for`): the records are
//! encoded in Kafka's format into one uncompressed v2 batch, appended with the partition's
//! leader epoch from the metadata image and flushed — the durability point, after which
//! the caller may acknowledge — then applied to RocksDB without sync with the offset of
//! the batch's last record as the partition's applied position. A tokio mutex per
//! partition keeps appends and applies in the same order (two commits of one partition
//! must not reach the store in the reverse order of the log), and is the only lock held
//! across `.await`.
//! The start-up replay of what the store missed is in `replay`.
//!
//! Transactional offset commits (TxnOffsetCommit) are appended as a transactional batch
//! (the producer's id and epoch, no sequence) and not applied: they wait in
//! `TxnOffsets` for the transaction's marker. The applied position stored with each
//! apply never passes the first record of a transaction still open (see `txn_offsets`),
//! so the replay sees every record of the open ones.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::slice;
use std::sync::Arc;

use brook_protocol::kafka_protocol::records::{Record, TimestampType};
use brook_raft::MetadataImage;
use brook_storage::offsets::{OffsetRecord, OffsetStore};
use brook_storage::LogHandle;
use bytes::{Bytes, BytesMut};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::records::{self, OFFSETS_TOPIC};
use super::txn_offsets::TxnOffsets;
use super::Shared;
use crate::coordinator::runtime::{CoordinatorRuntime, Load, OnNewEpoch};
use crate::coordinator::writer::{Durability, PartitionWriter, WriteError};
use crate::error::BrokerError;
use crate::replication::acks::NotReplicated;

/// How long a coordinator write waits for the ISR (Kafka's `offsets.commit.timeout.ms`).
const COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The producer of a transactional offset commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Writes the coordinator's records to `__consumer_offsets` and applies them.
pub struct OffsetsLog {
    writer: PartitionWriter,
    images: watch::Receiver<Arc<MetadataImage>>,
    node_id: i32,
    locks: parking_lot::Mutex<HashMap<i32, Arc<tokio::sync::Mutex<()>>>>,
    /// Which partitions this broker serves, and their loads (`loading`).
    pub(super) runtime: CoordinatorRuntime,
    /// Partitions the runtime has loaded (replayed into the store) whose groups are not
    /// read into memory yet: still loading for a request that does not find its group.
    pub(super) unread: parking_lot::Mutex<BTreeSet<i32>>,
}

impl OffsetsLog {
    pub fn new(
        writer: PartitionWriter,
        images: watch::Receiver<Arc<MetadataImage>>,
        node_id: i32,
    ) -> Self {
        OffsetsLog {
            writer,
            images,
            node_id,
            locks: parking_lot::Mutex::new(HashMap::new()),
            // A new epoch keeps the groups in memory: their members stay joined.
            runtime: CoordinatorRuntime::new(OFFSETS_TOPIC, node_id, OnNewEpoch::Refresh),
            unread: parking_lot::Mutex::new(BTreeSet::new()),
        }
    }

    /// Whether `group_id`'s partition is led here but its groups may not all be in memory
    /// yet: not loaded at its current leader epoch, or loaded and not read back (Kafka
    /// answers COORDINATOR_LOAD_IN_PROGRESS until its shard is active). The runtime's
    /// state is read before `unread`: a partition enters `unread` before it is marked
    /// loaded and leaves it only once its groups are in memory.
    pub fn loading(&self, group_id: &str) -> bool {
        let image = self.images.borrow().clone();
        records::group_partition(&image, group_id).is_some_and(|p| self.partition_loading(p))
    }

    /// Whether some `__consumer_offsets` partition led here is loading (`loading` for its
    /// groups): ListGroups answers COORDINATOR_LOAD_IN_PROGRESS then, as Kafka's does.
    pub fn any_loading(&self) -> bool {
        let image = self.images.borrow().clone();
        image
            .topic(OFFSETS_TOPIC)
            .is_some_and(|topic| topic.partitions.values().any(|p| self.partition_loading(p)))
    }

    /// See `loading`.
    fn partition_loading(&self, p: &brook_raft::PartitionImage) -> bool {
        if p.leader != self.node_id {
            return false;
        }
        let loaded = self.runtime.status(p.partition)
            == Some(Load::Loaded {
                epoch: p.leader_epoch,
            });
        !loaded || self.unread.lock().contains(&p.partition)
    }

    /// The `__consumer_offsets` partition logs that were on disk at start-up.
    pub fn logs_on_disk(&self) -> Vec<LogHandle> {
        self.writer.logs_on_disk(OFFSETS_TOPIC)
    }

    /// The partition count of `__consumer_offsets`, if the topic exists.
    pub fn partitions(&self) -> Option<i32> {
        let image = self.images.borrow().clone();
        let topic = image.topic(OFFSETS_TOPIC)?;
        i32::try_from(topic.partitions.len())
            .ok()
            .filter(|n| *n > 0)
    }

    /// The log of `partition`, which this broker leads (NOT_LEADER_OR_FOLLOWER otherwise).
    pub(super) async fn led_log(&self, partition: i32) -> Result<LogHandle, BrokerError> {
        self.writer
            .led_log(OFFSETS_TOPIC, partition)
            .await
            .map_err(commit_error)
    }

    /// Whether this broker coordinates `group_id`: it leads the group's partition of
    /// `__consumer_offsets`. Before the topic exists (a single node's first groups) it
    /// does.
    pub fn coordinates(&self, group_id: &str) -> Result<(), super::GroupError> {
        let image = self.images.borrow().clone();
        if image.topic(OFFSETS_TOPIC).is_none() {
            return Ok(());
        }
        match records::group_partition(&image, group_id) {
            Some(p) if p.leader == self.node_id => Ok(()),
            Some(p) if !p.has_leader() => Err(super::GroupError::CoordinatorNotAvailable),
            _ => Err(super::GroupError::NotCoordinator),
        }
    }

    /// Holds `partition`'s write order: appends and applies of the partition, and the
    /// completion of transactions on it, happen one at a time and in log order.
    pub async fn lock_partition(&self, partition: i32) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = Arc::clone(self.locks.lock().entry(partition).or_default());
        lock.lock_owned().await
    }

    /// Appends `records` (all of groups mapping to `partition`) durably, then applies
    /// them to `store`. Returns once the log is fsynced and the store updated. With a
    /// `producer` the batch is transactional and its commits are not applied but become
    /// pending in `txns` until the transaction's marker.
    pub async fn write(
        &self,
        store: &OffsetStore,
        txns: &parking_lot::Mutex<TxnOffsets>,
        partition: i32,
        records: Vec<OffsetRecord>,
        producer: Option<TxnProducer>,
    ) -> Result<(), BrokerError> {
        if records.is_empty() {
            return Ok(());
        }
        let _ordered = self.lock_partition(partition).await;
        self.write_in_order(store, txns, partition, records, producer)
            .await
    }

    /// [`OffsetsLog::write`] for a caller already holding `partition`'s write order
    /// ([`OffsetsLog::lock_partition`]).
    pub async fn write_in_order(
        &self,
        store: &OffsetStore,
        txns: &parking_lot::Mutex<TxnOffsets>,
        partition: i32,
        records: Vec<OffsetRecord>,
        producer: Option<TxnProducer>,
    ) -> Result<(), BrokerError> {
        if records.is_empty() {
            return Ok(());
        }
        let now_ms = brook_storage::log_manager::now_ms();
        let batch = encode_batch(&records, now_ms, producer)?;
        // The durability point: Kafka acknowledges a commit once every in-sync replica
        // holds it (the coordinator writes with acks=all); the log is also fsynced, so a
        // single node, with no follower to rely on, loses nothing acknowledged either.
        // The wait is not cut short by shutdown: a commit in flight finishes.
        let appended = self
            .writer
            .write(
                OFFSETS_TOPIC,
                partition,
                None,
                batch,
                Durability::Fsync,
                COMMIT_TIMEOUT,
                &CancellationToken::new(),
            )
            .await
            .map_err(commit_error)?;
        let position = {
            let mut txns = txns.lock();
            match producer {
                Some(p) => txns.add(
                    partition,
                    p.producer_id,
                    p.producer_epoch,
                    appended.base_offset,
                    &records,
                ),
                None => txns.observe_plain(partition, &records, appended.base_offset),
            }
            txns.processed(partition, appended.last_offset);
            txns.position(partition).unwrap_or(appended.last_offset)
        };
        if producer.is_some() {
            // Pending until the marker: nothing to apply, and the applied position
            // cannot pass this batch anyway.
            return Ok(());
        }
        store
            .run_blocking(move |s| s.apply(partition, &records, position))
            .await?;
        Ok(())
    }
}

/// Kafka's `offsets.commit` error mapping of a coordinator write: the partition's own
/// errors (not the leader, unknown, storage) as they are, the group API's handlers
/// translating them; a write the leadership lost NOT_COORDINATOR.
fn commit_error(e: WriteError) -> BrokerError {
    match e {
        WriteError::Partition(e) => e,
        WriteError::EpochChanged { .. } | WriteError::NotCommitted(NotReplicated::Moved { .. }) => {
            BrokerError::Group(super::GroupError::NotCoordinator)
        }
        // Kafka's coordinator answers these (NOT_ENOUGH_REPLICAS*, REQUEST_TIMED_OUT) with
        // COORDINATOR_NOT_AVAILABLE: the client retries.
        WriteError::NotCommitted(_) => {
            BrokerError::Group(super::GroupError::CoordinatorNotAvailable)
        }
    }
}

impl Shared {
    /// See `OffsetsLog::loading`; never without a log (unit tests).
    pub(super) fn loading(&self, group_id: &str) -> bool {
        self.log.as_ref().is_some_and(|log| log.loading(group_id))
    }

    /// COORDINATOR_LOAD_IN_PROGRESS while `loading(group_id)` for a group not in memory:
    /// it may be among the partition's stored groups, not read back yet (a failover back
    /// to this broker). A group in memory is served: this broker kept it (a new leader
    /// epoch reloads into the groups in memory, where Kafka's active shard stays active)
    /// or read it at start-up or wrote it before `__consumer_offsets` existed. Asked
    /// before taking the groups' lock (the runtime takes its own lock, then that one, to
    /// unload).
    pub(super) fn refuse_while_loading(&self, group_id: &str) -> Result<(), super::GroupError> {
        if self.loading(group_id) && !self.in_memory(group_id) {
            return Err(super::GroupError::CoordinatorLoadInProgress);
        }
        Ok(())
    }

    /// Whether a classic or consumer group of that id is in memory.
    fn in_memory(&self, group_id: &str) -> bool {
        self.groups.lock().contains_key(group_id) || self.consumer.exists(group_id)
    }

    /// Persists `records`: through the groups' `__consumer_offsets` partitions when the
    /// topic exists, else straight to the store with synced writes.
    pub(super) async fn persist(&self, records: Vec<OffsetRecord>) -> Result<(), BrokerError> {
        if records.is_empty() {
            return Ok(());
        }
        let Some((log, partitions)) = self
            .log
            .as_ref()
            .and_then(|log| log.partitions().map(|n| (log, n)))
        else {
            return self.persist_to_store(records).await;
        };
        let mut by_partition: BTreeMap<i32, Vec<OffsetRecord>> = BTreeMap::new();
        for record in records {
            let partition = records::partition_for(records::group_of(&record), partitions);
            by_partition.entry(partition).or_default().push(record);
        }
        for (partition, records) in by_partition {
            log.write(&self.store, &self.txns, partition, records, None)
                .await?;
        }
        Ok(())
    }

    /// [`Shared::persist`] of records of one `partition`, by a caller holding its write
    /// order (see [`Shared::write_order`]).
    pub(super) async fn persist_in_order(
        &self,
        partition: i32,
        records: Vec<OffsetRecord>,
    ) -> Result<(), BrokerError> {
        match &self.log {
            Some(log) if log.partitions().is_some() => {
                log.write_in_order(&self.store, &self.txns, partition, records, None)
                    .await
            }
            _ => self.persist_to_store(records).await,
        }
    }

    /// `partition`'s write order, held while a write's content is taken and written
    /// (none without a log: unit tests write straight to the store).
    pub(super) async fn write_order(
        &self,
        partition: i32,
    ) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        match &self.log {
            Some(log) => Some(log.lock_partition(partition).await),
            None => None,
        }
    }

    /// Before `__consumer_offsets` exists (and in unit tests): straight to the store.
    async fn persist_to_store(&self, records: Vec<OffsetRecord>) -> Result<(), BrokerError> {
        {
            let mut txns = self.txns.lock();
            let base = txns.local_offsets(records.len());
            for (i, record) in records.iter().enumerate() {
                let partition = self.offsets_partition(records::group_of(record));
                txns.observe_plain(partition, slice::from_ref(record), base + i as i64);
            }
        }
        self.store
            .run_blocking(move |s| apply_synced(s, &records))
            .await?;
        Ok(())
    }

    /// The `__consumer_offsets` partition of `group_id` (0 while the topic does not exist).
    pub(super) fn offsets_partition(&self, group_id: &str) -> i32 {
        self.log
            .as_ref()
            .and_then(OffsetsLog::partitions)
            .map_or(0, |n| records::partition_for(group_id, n))
    }

    /// Persists the commits of `producer`'s transaction for `group_id`: appended as a
    /// transactional batch, pending until the marker. Without a log (unit tests) they
    /// only become pending in memory.
    pub(super) async fn persist_transactional(
        &self,
        group_id: &str,
        producer: TxnProducer,
        records: Vec<OffsetRecord>,
    ) -> Result<(), BrokerError> {
        let partition = self.offsets_partition(group_id);
        match &self.log {
            Some(log) => {
                if log.partitions().is_none() {
                    // No partition to carry the commit (FindCoordinator creates the topic).
                    return Err(super::GroupError::CoordinatorNotAvailable.into());
                }
                log.write(&self.store, &self.txns, partition, records, Some(producer))
                    .await
            }
            None => {
                let mut txns = self.txns.lock();
                let base = txns.local_offsets(records.len());
                txns.add(
                    partition,
                    producer.producer_id,
                    producer.producer_epoch,
                    base,
                    &records,
                );
                Ok(())
            }
        }
    }
}

/// The store-only path: each change as one synced write.
fn apply_synced(store: &OffsetStore, records: &[OffsetRecord]) -> brook_storage::Result<()> {
    for record in records {
        match record {
            OffsetRecord::Commit {
                group,
                topic,
                partition,
                offset,
            } => store.commit(group, &[(topic.clone(), *partition, offset.clone())])?,
            OffsetRecord::DeleteOffset {
                group,
                topic,
                partition,
            } => store.delete_offsets(group, &[(topic.clone(), *partition)])?,
            OffsetRecord::PutGroup { group, metadata } => store.put_group(group, metadata)?,
            OffsetRecord::DeleteGroup { group } => store.delete_group(group)?,
            OffsetRecord::PutGroupRecord { .. } | OffsetRecord::DeleteGroupRecord { .. } => {
                store.apply_synced(slice::from_ref(record))?
            }
        }
    }
    Ok(())
}

/// One uncompressed v2 batch of `records`, key and value in Kafka's format; with a
/// `producer`, transactional (its id and epoch, no sequence: Kafka's coordinator writes
/// `NO_SEQUENCE` too, so the log does not order these batches).
pub(super) fn encode_batch(
    records: &[OffsetRecord],
    now_ms: i64,
    producer: Option<TxnProducer>,
) -> Result<BytesMut, BrokerError> {
    let encoded: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, record)| {
            let (key, value) = records::encode(record);
            Record {
                transactional: producer.is_some(),
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: producer.map_or(-1, |p| p.producer_id),
                producer_epoch: producer.map_or(-1, |p| p.producer_epoch),
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: now_ms,
                key: Some(Bytes::from(key)),
                value: value.map(Bytes::from),
                headers: Default::default(),
            }
        })
        .collect();
    crate::coordinator::encode_uncompressed_batch(&encoded)
        .map_err(|e| BrokerError::ServerFault(format!("encoding offsets records: {e}")))
}
