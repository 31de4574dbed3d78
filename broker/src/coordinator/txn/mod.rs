//! The transaction coordinator (Kafka's `TransactionCoordinator` +
//! `TransactionStateManager`), Transactions V1 and V2 (KIP-890: see `state`).
//!
//! A transactional id belongs to one partition of `__transaction_state`
//! (`records::partition_for`); the broker leading that partition coordinates it, at the
//! partition's leader epoch (the coordinator epoch markers carry). Every other broker
//! answers NOT_COORDINATOR, and the leader answers COORDINATOR_LOAD_IN_PROGRESS until it
//! has loaded the partition's records (`worker` loads and unloads partitions as the
//! leadership moves).
//!
//! State lives in memory behind one `parking_lot::Mutex` (never held across `.await`);
//! each change is decided under it (`state`: sets the id's pending state), written to the
//! log (`log::write`, durable and replicated), then applied. EndTxn answers once the
//! Prepare* record is written; the owned `worker` task then writes the markers
//! (`markers::write_all`) and the Complete* record, retrying until done or until this
//! broker stops coordinating the id. The worker also aborts timed-out transactions and
//! expires idle ids.

pub mod log;
pub mod markers;
pub mod partition_check;
pub mod records;
mod shards;
pub mod state;
#[cfg(test)]
mod state_tests;
mod worker;

use std::collections::{BTreeSet, HashMap, HashSet};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::coordinator::handles::CoordinatorHandles;
use crate::coordinator::runtime::{CoordinatorRuntime, Load, OnNewEpoch};
pub use crate::error::TxnError;
pub use records::TRANSACTION_VERSION_2;

/// The client transaction version of Transactions V1 requests (AddPartitionsToTxn ≤ v3,
/// AddOffsetsToTxn, EndTxn ≤ v4).
pub const TRANSACTIONS_V1: i16 = 0;
use state::{EndStep, InitStep, TopicPartition, Transit, TxnMetadata, TxnState};
pub use worker::run;

/// The coordinator's limits from the broker config.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expire_interval_ms: u64,
    /// `add.partitions.to.txn.retry.backoff.ms` / `add.partitions.to.txn.retry.backoff.max.ms`.
    pub add_retry_backoff: std::time::Duration,
    pub add_retry_max: std::time::Duration,
}

impl TxnConfig {
    pub fn from_broker(config: &crate::config::BrokerConfig) -> Self {
        TxnConfig {
            max_timeout_ms: config.transaction_max_timeout_ms,
            id_expiration_ms: i64::from(config.transactional_id_expiration_ms),
            abort_interval_ms: config.transaction_abort_timed_out_interval_ms.max(1) as u64,
            expire_interval_ms: config.transaction_remove_expired_interval_ms.max(1) as u64,
            add_retry_backoff: millis(config.add_partitions_to_txn_retry_backoff_ms),
            add_retry_max: millis(config.add_partitions_to_txn_retry_backoff_max_ms),
        }
    }
}

/// Whether a `__transaction_state` partition's ids are usable.
fn millis(ms: i32) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// One id as DescribeTransactions / ListTransactions show it.
#[derive(Debug, Clone)]
pub struct TxnView {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: TxnState,
    pub timeout_ms: i32,
    pub start_timestamp_ms: i64,
    pub partitions: BTreeSet<TopicPartition>,
}

pub struct TxnCoordinator {
    config: TxnConfig,
    txns: Mutex<HashMap<String, TxnMetadata>>,
    /// The `__transaction_state` partitions this broker leads and their loads (`shards`).
    runtime: CoordinatorRuntime,
    locks: log::PartitionLocks,
    /// Ids whose markers the worker is writing now.
    in_flight: Mutex<HashSet<String>>,
    /// Wakes the worker: a transaction was prepared.
    prepared: Notify,
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig, node_id: i32) -> Self {
        TxnCoordinator {
            config,
            txns: Mutex::new(HashMap::new()),
            // A new coordinator epoch reloads: pending changes were decided under the old.
            runtime: CoordinatorRuntime::new(records::TXN_STATE_TOPIC, node_id, OnNewEpoch::Reload),
            locks: log::PartitionLocks::default(),
            in_flight: Mutex::new(HashSet::new()),
            prepared: Notify::new(),
        }
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The `__transaction_state` partitions this broker serves.
    pub fn runtime(&self) -> &CoordinatorRuntime {
        &self.runtime
    }

    /// The partition and coordinator epoch of `transactional_id` when this broker
    /// coordinates it (Kafka's `getTransactionState` checks).
    pub fn coordinates(
        &self,
        cx: &CoordinatorHandles<'_>,
        transactional_id: &str,
    ) -> Result<(i32, i32), TxnError> {
        let image = cx.image();
        let (partition, part) = records::state_partition(&image, transactional_id)
            .ok_or(TxnError::CoordinatorNotAvailable)?;
        if !part.has_leader() {
            return Err(TxnError::CoordinatorNotAvailable);
        }
        if part.leader != cx.node_id {
            return Err(TxnError::NotCoordinator);
        }
        match self.runtime.status(partition) {
            Some(Load::Loaded { epoch }) if epoch == part.leader_epoch => Ok((partition, epoch)),
            Some(_) | None => Err(TxnError::CoordinatorLoadInProgress),
        }
    }

    /// Writes `transit` of `id` and applies it. On failure the change is forgotten.
    async fn persist(
        &self,
        cx: &CoordinatorHandles<'_>,
        id: &str,
        (partition, epoch): (i32, i32),
        transit: Transit,
        fence: bool,
    ) -> Result<(), TxnError> {
        let value = (transit.state != TxnState::Dead).then(|| transit.log_value());
        let written = log::write(
            cx.writer,
            cx.stopping,
            &self.locks,
            partition,
            epoch,
            id,
            value.as_ref(),
        )
        .await;
        let still_ours = self.runtime.status(partition) == Some(Load::Loaded { epoch });
        let mut txns = self.txns.lock();
        let Some(meta) = txns.get_mut(id) else {
            return written.and(Err(TxnError::NotCoordinator));
        };
        if let Err(e) = written {
            meta.abandon(fence);
            return Err(e);
        }
        if !still_ours {
            // Unloaded meanwhile: the new coordinator reads this record from the log.
            return Err(TxnError::NotCoordinator);
        }
        let dead = transit.state == TxnState::Dead;
        meta.complete(transit)?;
        if dead {
            txns.remove(id);
        }
        Ok(())
    }

    /// InitProducerId with a transactional id. `expected` is the (producer id, epoch) the
    /// request names (KIP-360), if any.
    pub async fn init_producer_id(
        &self,
        cx: &CoordinatorHandles<'_>,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id".into()));
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout(timeout_ms));
        }
        let at = self.coordinates(cx, id)?;
        let needs_pid = self
            .txns
            .lock()
            .get(id)
            .is_none_or(|m| m.needs_new_producer_id(expected));
        let new_pid = allocate_producer_id_if(cx, needs_pid).await?;
        let now_ms = brook_storage::log_manager::now_ms();
        let step = {
            let mut txns = self.txns.lock();
            let meta = match txns.entry(id.to_owned()) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let Some(pid) = new_pid else {
                        return Err(TxnError::ConcurrentTransactions);
                    };
                    e.insert(TxnMetadata::new(id, pid, timeout_ms, now_ms))
                }
            };
            // A brand-new id uses the allocated id as its first producer id.
            let fresh = meta.producer_epoch == state::NO_PRODUCER_EPOCH;
            meta.prepare_init(timeout_ms, expected, new_pid.filter(|_| !fresh), now_ms)?
        };
        match step {
            InitStep::Write(transit) => {
                let answer = (transit.producer_id, transit.producer_epoch);
                self.persist(cx, id, at, transit, false).await?;
                Ok(answer)
            }
            InitStep::FenceAndAbort(transit) => {
                self.persist(cx, id, at, transit, true).await?;
                self.prepared.notify_one();
                // The client retries once the abort is complete, getting a new epoch.
                Err(TxnError::ConcurrentTransactions)
            }
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn with the group's offsets partition), or a
    /// partition leader adding a partition for a Transactions V2 client (`client_version` 2).
    pub async fn add_partitions(
        &self,
        cx: &CoordinatorHandles<'_>,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        client_version: i16,
    ) -> Result<(), TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id".into()));
        }
        let at = self.coordinates(cx, id)?;
        let now_ms = brook_storage::log_manager::now_ms();
        let transit = {
            let mut txns = self.txns.lock();
            let meta = txns.get_mut(id).ok_or(TxnError::InvalidProducerIdMapping)?;
            meta.prepare_add_partitions(
                producer_id,
                producer_epoch,
                partitions,
                client_version,
                now_ms,
            )?
        };
        match transit {
            None => Ok(()),
            Some(transit) => self.persist(cx, id, at, transit, false).await,
        }
    }

    /// The v4+ `VerifyOnly` form: the partitions of the producer's ongoing transaction.
    pub fn verify_partitions(
        &self,
        cx: &CoordinatorHandles<'_>,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<BTreeSet<TopicPartition>, TxnError> {
        self.coordinates(cx, id)?;
        let txns = self.txns.lock();
        let meta = txns.get(id).ok_or(TxnError::InvalidProducerIdMapping)?;
        meta.verify_partitions(producer_id, producer_epoch)
    }

    /// EndTxn: answers once the Prepare* record is durable; the worker writes the markers.
    /// Returns the producer id and epoch of the client's next transaction (EndTxn v5:
    /// Transactions V2 bumps the epoch every transaction).
    pub async fn end_txn(
        &self,
        cx: &CoordinatorHandles<'_>,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_version: i16,
    ) -> Result<(i64, i16), TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id".into()));
        }
        let at = self.coordinates(cx, id)?;
        let needs_pid = self
            .txns
            .lock()
            .get(id)
            .is_some_and(|m| m.end_needs_new_producer_id(client_version));
        let new_pid = allocate_producer_id_if(cx, needs_pid).await?;
        let now_ms = brook_storage::log_manager::now_ms();
        let step = {
            let mut txns = self.txns.lock();
            let meta = txns.get_mut(id).ok_or(TxnError::InvalidProducerIdMapping)?;
            match meta.prepare_end(
                producer_id,
                producer_epoch,
                commit,
                client_version,
                new_pid,
                now_ms,
            )? {
                EndStep::AlreadyDone => return Ok(meta.next_transaction_producer()),
                EndStep::Write(transit) => transit,
            }
        };
        self.persist(cx, id, at, step, false).await?;
        self.prepared.notify_one();
        self.txns
            .lock()
            .get(id)
            .map(TxnMetadata::next_transaction_producer)
            .ok_or(TxnError::NotCoordinator)
    }

    /// DescribeTransactions of one id.
    pub fn describe(&self, cx: &CoordinatorHandles<'_>, id: &str) -> Result<TxnView, TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id".into()));
        }
        self.coordinates(cx, id)?;
        let txns = self.txns.lock();
        let meta = txns
            .get(id)
            .filter(|m| m.state != TxnState::Dead)
            .ok_or(TxnError::TransactionalIdNotFound)?;
        Ok(view(meta))
    }

    /// Every id of the partitions this broker coordinates (ListTransactions filters them);
    /// COORDINATOR_LOAD_IN_PROGRESS while one of them is still loading, as Kafka answers.
    pub fn list(&self) -> Result<Vec<TxnView>, TxnError> {
        if self.runtime.any_loading() {
            return Err(TxnError::CoordinatorLoadInProgress);
        }
        let mut out: Vec<TxnView> = self
            .txns
            .lock()
            .values()
            .filter(|m| m.state != TxnState::Dead)
            .map(view)
            .collect();
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(out)
    }
}

/// A new producer id when `needed`, allocated before the id's state is locked (the
/// allocation may wait for the metadata quorum).
async fn allocate_producer_id_if(
    cx: &CoordinatorHandles<'_>,
    needed: bool,
) -> Result<Option<i64>, TxnError> {
    if !needed {
        return Ok(None);
    }
    cx.producer_ids
        .allocate(cx.quorum, cx.node_id)
        .await
        .map(Some)
        .map_err(|_| TxnError::CoordinatorNotAvailable)
}

fn view(meta: &TxnMetadata) -> TxnView {
    TxnView {
        transactional_id: meta.transactional_id.clone(),
        producer_id: meta.producer_id,
        producer_epoch: meta.producer_epoch,
        state: meta.state,
        timeout_ms: meta.timeout_ms,
        start_timestamp_ms: meta.start_timestamp_ms,
        partitions: meta.partitions.clone(),
    }
}
