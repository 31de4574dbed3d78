//! Appending as leader (Kafka's `Partition.appendRecordsToLeader`): the checks a client's
//! records pass before they are written — this broker leads, acks=all only with enough
//! in-sync replicas (NOT_ENOUGH_REPLICAS, nothing written, so a retry cannot duplicate),
//! no control batch from a client, a transactional batch's producer is in its
//! transaction (KIP-890, checked by the caller's `verify`), every record of a compacted
//! topic has a key — then the append at the leader epoch and the high-watermark advance.
//! Batch headers are read with storage's `BatchHeader`; storage validates each batch
//! (CRC, sequence) when it appends.

use std::future::Future;
use std::sync::Arc;

use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::{AppendInfo, BatchHeader};
use bytes::{Bytes, BytesMut};

use super::compacted_keys::{reject_keyless, KeylessRecords};
use super::replica::Partition;
use crate::error::BrokerError;
use crate::replication::leader::LeaderPartition;

/// Why records were not appended.
#[derive(Debug)]
pub enum AppendError {
    /// Not the leader, or the log refused the records.
    Broker(BrokerError),
    /// acks=all while the ISR is smaller than `min.insync.replicas`.
    NotEnoughReplicas,
    /// A client sent a control batch (Kafka's `LogValidator`: "Client cannot produce
    /// control batches"); markers are written by transaction coordinators only.
    ControlBatch,
    /// The transaction check refused the batch.
    Transaction(ResponseError),
    /// A compacted topic's batch holds key-less records.
    Keyless(KeylessRecords),
}

impl From<BrokerError> for AppendError {
    fn from(e: BrokerError) -> Self {
        AppendError::Broker(e)
    }
}

/// What an append wrote, and the leader state whose high watermark an acks=all answer
/// waits for.
pub struct Appended {
    pub info: AppendInfo,
    pub leader: Arc<LeaderPartition>,
}

/// The `verify` of an append without a transactional id.
pub type NoVerify = fn(i64, i16) -> std::future::Ready<Result<(), ResponseError>>;

/// Whether the producer needs all in-sync replicas (acks=all) to acknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequiredAcks {
    Leader,
    All,
}

impl Partition {
    /// Appends a client's `records` as leader. `verify(producer_id, producer_epoch)` runs
    /// for a transactional batch whose producer has no transaction open here yet (the
    /// coordinator check of KIP-890); `None` skips it (no transactional id).
    pub async fn append_as_leader<V, F>(
        &self,
        records: Bytes,
        acks: RequiredAcks,
        verify: Option<V>,
        now_ms: i64,
    ) -> Result<Appended, AppendError>
    where
        V: FnOnce(i64, i16) -> F,
        F: Future<Output = Result<(), ResponseError>>,
    {
        let state = self.leader(None)?;
        if acks == RequiredAcks::All && state.isr_below_min() {
            return Err(AppendError::NotEnoughReplicas);
        }
        if has_control_batch(&records) {
            return Err(AppendError::ControlBatch);
        }
        let log = self.log();
        if let (Some(verify), Some((producer_id, producer_epoch))) =
            (verify, transactional_producer(&records))
        {
            if !log.has_ongoing_transaction(producer_id, producer_epoch) {
                verify(producer_id, producer_epoch)
                    .await
                    .map_err(AppendError::Transaction)?;
            }
        }
        if log.is_compacted() {
            reject_keyless(self.topic(), self.index(), &records)
                .await
                .map_err(AppendError::Keyless)?;
        }
        // One copy: the batch header is stamped in place (base offset, leader epoch).
        let info = self
            .append_batch(&state, BytesMut::from(&records[..]), now_ms)
            .await?;
        Ok(Appended {
            info,
            leader: state,
        })
    }

    /// Appends a batch a coordinator built (a transaction marker, group or transaction
    /// state) at the leader epoch of `state`, and advances the high watermark.
    pub async fn append_batch(
        &self,
        state: &LeaderPartition,
        batch: BytesMut,
        now_ms: i64,
    ) -> Result<AppendInfo, BrokerError> {
        let info = self.log().append(batch, state.leader_epoch, now_ms).await?;
        state.maybe_advance_high_watermark();
        Ok(info)
    }
}

/// The producer id and epoch of a produce's first batch when it is transactional.
fn transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    let header = BatchHeader::parse(records).ok()?;
    header
        .is_transactional()
        .then_some((header.producer_id, header.producer_epoch))
}

/// Whether any batch of a produce is a control batch, read from each header in place (no
/// CRC check: storage validates every batch afterwards; a malformed header ends the walk).
fn has_control_batch(records: &[u8]) -> bool {
    let mut at = 0usize;
    while let Some(rest) = records.get(at..).filter(|r| !r.is_empty()) {
        let Ok(header) = BatchHeader::parse(rest) else {
            return false;
        };
        if header.is_control() {
            return true;
        }
        at += header.size();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(attributes: u16, length: i32) -> Vec<u8> {
        let mut b = vec![0u8; 12 + length.max(49) as usize];
        b[8..12].copy_from_slice(&length.to_be_bytes());
        b[16] = 2;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        b
    }

    #[test]
    fn a_transactional_first_batch_names_its_producer() {
        let mut b = batch(0x10, 60);
        b[43..51].copy_from_slice(&77i64.to_be_bytes());
        b[51..53].copy_from_slice(&3i16.to_be_bytes());
        assert_eq!(transactional_producer(&b), Some((77, 3)));
        b[22] = 0;
        assert_eq!(transactional_producer(&b), None);
        assert_eq!(transactional_producer(&b[..40]), None);
    }

    #[test]
    fn a_control_batch_anywhere_in_a_produce_is_found() {
        let mut records = batch(0x10, 60);
        assert!(!has_control_batch(&records));
        records.extend(batch(0x30, 60));
        assert!(has_control_batch(&records));
        assert!(!has_control_batch(&batch(0, -1)));
        assert!(!has_control_batch(&[0u8; 5]));
    }

    use crate::partition::replica::Role;
    use crate::partition::testing::{batch as client_batch, Fixture};

    fn no_verify() -> Option<NoVerify> {
        None
    }

    fn code(e: &AppendError) -> ResponseError {
        crate::error::append_code(e)
    }

    #[tokio::test]
    async fn an_append_as_sole_replica_is_committed_at_once() {
        let f = Fixture::leader(&[1], &[1], 1);
        let appended = f
            .partition
            .append_as_leader(client_batch(3), RequiredAcks::All, no_verify(), 0)
            .await
            .expect("append");
        assert_eq!(
            (appended.info.base_offset, appended.info.last_offset),
            (0, 2)
        );
        assert_eq!(f.partition.log().high_watermark(), 3);
        assert_eq!(appended.leader.leader_epoch, 0);
    }

    #[tokio::test]
    async fn acks_all_below_min_isr_is_refused_before_anything_is_written() {
        let f = Fixture::leader(&[1, 2, 3], &[1], 2);
        let refused = f
            .partition
            .append_as_leader(client_batch(1), RequiredAcks::All, no_verify(), 0)
            .await
            .err()
            .expect("refused");
        assert_eq!(code(&refused), ResponseError::NotEnoughReplicas);
        assert_eq!(f.partition.log().log_end_offset(), 0);
        // acks=1 is stored, but the high watermark stands still (KAFKA-15583).
        f.partition
            .append_as_leader(client_batch(1), RequiredAcks::Leader, no_verify(), 0)
            .await
            .expect("acks=1 append");
        assert_eq!(f.partition.log().log_end_offset(), 1);
        assert_eq!(f.partition.log().high_watermark(), 0);
    }

    #[tokio::test]
    async fn a_follower_refuses_appends_naming_the_leader() {
        let f = Fixture::leader(&[1, 2], &[1, 2], 1);
        f.partition.set_role_now(Role::Follower {
            leader: 2,
            leader_epoch: 4,
        });
        let refused = f
            .partition
            .append_as_leader(client_batch(1), RequiredAcks::Leader, no_verify(), 0)
            .await
            .err()
            .expect("refused");
        assert!(matches!(
            refused,
            AppendError::Broker(BrokerError::NotLeaderOrFollower {
                leader: 2,
                leader_epoch: 4,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn clients_cannot_append_control_batches() {
        let f = Fixture::leader(&[1], &[1], 1);
        let marker = brook_storage::testing::encode_batch(
            &brook_storage::testing::TestBatch::marker(5, 0, brook_storage::ControlType::Commit, 0),
        );
        let refused = f
            .partition
            .append_as_leader(Bytes::from(marker), RequiredAcks::Leader, no_verify(), 0)
            .await
            .err()
            .expect("refused");
        assert_eq!(code(&refused), ResponseError::InvalidRecord);
    }

    #[tokio::test]
    async fn a_transactional_batch_outside_its_transaction_asks_the_coordinator_first() {
        let f = Fixture::leader(&[1], &[1], 1);
        let txn = Bytes::from(brook_storage::testing::encode_batch(
            &brook_storage::testing::TestBatch::sized(0, 1, 10).transactional(42, 0, 0),
        ));
        let asked = std::sync::Mutex::new(Vec::new());
        let refuse = |producer_id: i64, producer_epoch: i16| {
            asked
                .lock()
                .expect("lock")
                .push((producer_id, producer_epoch));
            std::future::ready(Err(ResponseError::InvalidTxnState))
        };
        let refused = f
            .partition
            .append_as_leader(txn.clone(), RequiredAcks::Leader, Some(refuse), 0)
            .await
            .err()
            .expect("refused");
        assert_eq!(code(&refused), ResponseError::InvalidTxnState);
        assert_eq!(*asked.lock().expect("lock"), vec![(42, 0)]);
        assert_eq!(f.partition.log().log_end_offset(), 0, "nothing written");
        let accept = |_: i64, _: i16| std::future::ready(Ok(()));
        f.partition
            .append_as_leader(txn, RequiredAcks::Leader, Some(accept), 0)
            .await
            .expect("appended once verified");
        assert_eq!(f.partition.log().log_end_offset(), 1);
    }
}
