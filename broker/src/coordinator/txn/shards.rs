//! The transaction coordinator's shards on the coordinator runtime: a
//! `__transaction_state` partition's shard is the latest state of each of its
//! transactional ids, replayed from the log start to the log end as Kafka's
//! `loadTransactionMetadata` does (tombstoned ids end absent); once loaded it joins the
//! coordinator's map of ids, and the worker completes the Prepare* transactions it holds
//! (a crash between EndTxn and its markers).

use std::collections::{BTreeSet, HashMap};

use brook_protocol::kafka_protocol::records::Record;
use brook_storage::LogHandle;
use tracing::info;

use super::log::apply_record;
use super::records::{partition_for, TXN_STATE_TOPIC};
use super::state::{TxnMetadata, TxnState};
use super::TxnCoordinator;
use crate::coordinator::runtime::CoordinatorShards;
use crate::error::BrokerError;

/// A partition's ids being loaded.
pub struct TxnShard {
    partition: i32,
    states: HashMap<String, TxnMetadata>,
}

impl TxnShard {
    fn replay(&mut self, records: &[Record]) {
        let partition = self.partition;
        for record in records.iter().filter(|r| !r.control) {
            apply_record(
                &mut self.states,
                record.key.as_deref(),
                record.value.as_deref(),
                || format!("{TXN_STATE_TOPIC}-{partition} offset {}", record.offset),
            );
        }
    }
}

/// Every transactional id's latest state in `log`, as a load replays it.
#[cfg(test)]
pub(super) async fn load(log: &LogHandle) -> Result<HashMap<String, TxnMetadata>, BrokerError> {
    let mut shard = TxnShard {
        partition: log.partition(),
        states: HashMap::new(),
    };
    let mut cursor = crate::coordinator::log_reader::LogCursor::new(log, log.log_start_offset());
    while let Some(records) = cursor.next_chunk().await? {
        shard.replay(&records);
    }
    Ok(shard.states)
}

impl CoordinatorShards for TxnCoordinator {
    type Shard = TxnShard;

    async fn begin_load(&self, log: &LogHandle) -> Result<(TxnShard, i64), BrokerError> {
        let shard = TxnShard {
            partition: log.partition(),
            states: HashMap::new(),
        };
        Ok((shard, log.log_start_offset()))
    }

    async fn replay(
        &self,
        shard: &mut TxnShard,
        records: Vec<Record>,
        _next: i64,
    ) -> Result<(), BrokerError> {
        shard.replay(&records);
        Ok(())
    }

    fn loaded(&self, partition: i32, epoch: i32, count: i32, shard: TxnShard) {
        let mut txns = self.txns.lock();
        txns.retain(|id, _| partition_for(id, count) != partition);
        let (mut prepared, mut ongoing) = (0, 0);
        for (id, meta) in shard.states {
            prepared += usize::from(meta.state.is_prepared());
            ongoing += usize::from(meta.state == TxnState::Ongoing);
            txns.insert(id, meta);
        }
        info!(
            partition,
            coordinator_epoch = epoch,
            prepared,
            ongoing,
            "transaction states loaded"
        );
        self.prepared.notify_one();
    }

    fn unload(&self, partitions: &BTreeSet<i32>, count: i32) {
        self.txns
            .lock()
            .retain(|id, _| !partitions.contains(&partition_for(id, count)));
        info!(partitions = ?partitions, "no longer coordinating transactions of these partitions");
    }
}
