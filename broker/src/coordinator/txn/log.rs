//! The coordinator's persistence through `__transaction_state`: one record per change,
//! appended by the partition's leader as a plain uncompressed batch, fsynced and waited
//! to the high watermark (Kafka's coordinator writes with acks=all) before the change is
//! applied in memory and the client answered; and the reading of one record back, for the
//! load of a partition (`shards`).
//!
//! A tokio mutex per partition keeps the appends of one partition in the order their
//! changes were decided; it is the only lock held across `.await`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use brook_protocol::kafka_protocol::records::{Record, TimestampType};
use brook_storage::StorageError;
use bytes::{Bytes, BytesMut};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::records::{self, TxnLogValue, TXN_STATE_TOPIC};
use super::state::TxnMetadata;
use super::TxnError;
use crate::coordinator::writer::{Durability, PartitionWriter, WriteError};
use crate::error::BrokerError;
use crate::replication::acks::NotReplicated;

/// How long a coordinator write waits for the ISR.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The per-partition append locks.
#[derive(Default)]
pub struct PartitionLocks(parking_lot::Mutex<HashMap<i32, Arc<tokio::sync::Mutex<()>>>>);

impl PartitionLocks {
    fn get(&self, partition: i32) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(self.0.lock().entry(partition).or_default())
    }
}

/// Appends the record of `transactional_id` (`None`: a tombstone) to `partition`, which
/// this broker must lead at `coordinator_epoch`, and returns once it is durable.
pub async fn write(
    writer: &PartitionWriter,
    stopping: &CancellationToken,
    locks: &PartitionLocks,
    partition: i32,
    coordinator_epoch: i32,
    transactional_id: &str,
    value: Option<&TxnLogValue>,
) -> Result<(), TxnError> {
    let lock = locks.get(partition);
    let _ordered = lock.lock().await;
    let now_ms = brook_storage::log_manager::now_ms();
    let batch = encode_batch(transactional_id, value, now_ms)?;
    writer
        .write(
            TXN_STATE_TOPIC,
            partition,
            Some(coordinator_epoch),
            batch,
            Durability::Fsync,
            WRITE_TIMEOUT,
            stopping,
        )
        .await
        .map(drop)
        .map_err(write_error)
}

/// Kafka's `appendTransactionToLog` error mapping.
fn write_error(e: WriteError) -> TxnError {
    match e {
        WriteError::Partition(e) => match e {
            BrokerError::NotLeaderOrFollower { .. } => TxnError::NotCoordinator,
            BrokerError::UnknownTopicOrPartition { .. } => TxnError::CoordinatorNotAvailable,
            BrokerError::Storage(
                StorageError::RecordTooLarge { .. } | StorageError::RecordBatchTooLarge { .. },
            ) => TxnError::Internal(e.to_string()),
            // KAFKA_STORAGE_ERROR and the like: another replica may take over.
            _ => TxnError::NotCoordinator,
        },
        // Another leadership than the one that decided the change.
        WriteError::EpochChanged { .. } | WriteError::NotCommitted(NotReplicated::Moved { .. }) => {
            TxnError::NotCoordinator
        }
        // Kafka answers NOT_ENOUGH_REPLICAS* and timeouts with COORDINATOR_NOT_AVAILABLE:
        // the client retries.
        WriteError::NotCommitted(_) => TxnError::CoordinatorNotAvailable,
    }
}

/// One uncompressed v2 batch holding the record of `transactional_id`.
pub fn encode_batch(
    transactional_id: &str,
    value: Option<&TxnLogValue>,
    now_ms: i64,
) -> Result<BytesMut, TxnError> {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now_ms,
        key: Some(Bytes::from(records::encode_key(transactional_id))),
        value: value.map(|v| Bytes::from(records::encode_value(v))),
        headers: Default::default(),
    };
    crate::coordinator::encode_uncompressed_batch(std::slice::from_ref(&record))
        .map_err(|e| TxnError::Internal(format!("encoding a transaction log record: {e}")))
}

/// Applies one log record to the loaded states; unreadable records are skipped with a
/// warning (Kafka fails the load; Brook keeps coordinating the other ids).
pub fn apply_record(
    states: &mut HashMap<String, TxnMetadata>,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    at: impl Fn() -> String,
) {
    let Some(key) = key else {
        return;
    };
    let id = match records::decode_key(key) {
        Ok(Some(id)) => id,
        Ok(None) => return,
        Err(e) => {
            warn!(at = %at(), error = %e, "skipping unreadable transaction log key");
            return;
        }
    };
    match records::decode_value(value) {
        Ok(Some(v)) => {
            states.insert(id.clone(), TxnMetadata::from_log(&id, &v));
        }
        Ok(None) => {
            states.remove(&id);
        }
        Err(e) => {
            warn!(at = %at(), transactional_id = %id, error = %e, "skipping unreadable transaction log value")
        }
    }
}
