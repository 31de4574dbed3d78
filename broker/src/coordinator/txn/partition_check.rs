//! The partition leader's side of KIP-890 (Kafka's `AddPartitionsToTxnManager` and the
//! checks around it in `ReplicaManager`).
//!
//! Before the first transactional batch of a producer epoch on a partition (the log has
//! no transaction of it open), the leader asks the producer's transaction coordinator:
//! - Transactions V1 clients (Produce ≤ v11): is the partition in the ongoing
//!   transaction? (`VerifyOnly`). A producer that skipped AddPartitionsToTxn, or a late
//!   batch of a transaction that already ended, is refused instead of opening a
//!   transaction no coordinator will ever end (a hanging transaction).
//! - Transactions V2 clients (Produce v12+, TxnOffsetCommit v5+): add the partition to the
//!   transaction; the client no longer sends AddPartitionsToTxn / AddOffsetsToTxn.
//!
//! The coordinator is asked in-process when this broker coordinates the id, else with an
//! AddPartitionsToTxn v5 request (the batched form) to the broker that does. Its answer is
//! translated as Kafka's leader does: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH (clients
//! know that one from Produce), "not in the transaction" is TRANSACTION_ABORTABLE to
//! clients that know that code and INVALID_TXN_STATE to older ones, and a coordinator that
//! is busy, moving or unreachable becomes a retriable error of the caller's API.
//!
//! A V2 add answered CONCURRENT_TRANSACTIONS (the producer's previous transaction is
//! still writing its markers) is retried here for `add.partitions.to.txn.retry.backoff.max.ms`
//! before the caller's API sees it, as Kafka's leader does.
//!
//! Kafka also keeps a verification guard between the answer and the append; Brook does
//! not (a marker landing in between is the one race left open).

use std::collections::BTreeSet;
use std::time::Duration;

use brook_protocol::kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use brook_protocol::kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use tokio::time::Instant;
use tracing::debug;

use super::records::state_partition;
use super::state::TopicPartition;
use super::{TxnError, TRANSACTION_VERSION_2};
use crate::coordinator::handles::CoordinatorHandles;
use crate::replication::client::PeerConnection;

/// The AddPartitionsToTxn version a leader sends (the first with TRANSACTION_ABORTABLE).
const REQUEST_VERSION: i16 = 5;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the leader asks of the coordinator (Kafka's `TransactionSupportedOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Is the partition in the transaction? `abortable`: the client knows
    /// TRANSACTION_ABORTABLE (Produce v11+).
    Verify { abortable: bool },
    /// Add the partition (Transactions V2).
    Add,
}

impl Operation {
    /// The operation of a transactional Produce at `version`.
    pub fn for_produce(version: i16) -> Self {
        match version {
            12.. => Operation::Add,
            11 => Operation::Verify { abortable: true },
            _ => Operation::Verify { abortable: false },
        }
    }
}

/// One producer's transaction as a request names it.
#[derive(Debug, Clone, Copy)]
pub struct Producer<'a> {
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Checks (or adds) `tp` in the producer's transaction. `retriable` is the caller's
/// API's retriable error for a coordinator that cannot answer now (Produce:
/// NOT_ENOUGH_REPLICAS, which makes clients retry without a metadata refresh).
pub async fn ensure_in_transaction(
    cx: &CoordinatorHandles<'_>,
    producer: Producer<'_>,
    tp: &TopicPartition,
    operation: Operation,
    retriable: ResponseError,
) -> Result<(), ResponseError> {
    let config = cx.txn.config();
    let deadline = Instant::now() + config.add_retry_max;
    loop {
        let answer = ask(cx, producer, tp, operation).await;
        if operation == Operation::Add
            && answer == Err(TxnError::ConcurrentTransactions)
            && Instant::now() + config.add_retry_backoff <= deadline
        {
            // The previous transaction's markers are still being written (its EndTxn is
            // answered once Prepare* is durable). Kafka's leader holds the request and
            // retries (`add.partitions.to.txn.retry.backoff.ms` up to `.max.ms`): failing
            // it instead lets a client that aborts now, with no produce of this
            // transaction through, send its abort while the commit is still
            // PrepareCommit, and that abort is answered PRODUCER_FENCED.
            tokio::time::sleep(config.add_retry_backoff).await;
            continue;
        }
        return translate(answer, operation, retriable);
    }
}

/// One question to the id's coordinator, in-process or over the network.
async fn ask(
    cx: &CoordinatorHandles<'_>,
    producer: Producer<'_>,
    tp: &TopicPartition,
    operation: Operation,
) -> Result<(), TxnError> {
    match cx.txn.coordinates(cx, producer.transactional_id) {
        Ok(_) => local(cx, producer, tp, operation).await,
        Err(TxnError::NotCoordinator) => remote(cx, producer, tp, operation).await,
        Err(e) => Err(e),
    }
}

/// Kafka's translation of a coordinator's answer for the client of the leader's API.
fn translate(
    answer: Result<(), TxnError>,
    operation: Operation,
    retriable: ResponseError,
) -> Result<(), ResponseError> {
    let Err(e) = answer else {
        return Ok(());
    };
    Err(match e {
        TxnError::ProducerFenced => TxnError::InvalidProducerEpoch.code(),
        TxnError::NotInTransaction if operation == (Operation::Verify { abortable: false }) => {
            TxnError::InvalidTxnState.code()
        }
        TxnError::ConcurrentTransactions
        | TxnError::Unreachable
        | TxnError::CoordinatorLoadInProgress
        | TxnError::CoordinatorNotAvailable
        | TxnError::NotCoordinator
        | TxnError::TimedOut => retriable,
        other => other.code(),
    })
}

async fn local(
    cx: &CoordinatorHandles<'_>,
    producer: Producer<'_>,
    tp: &TopicPartition,
    operation: Operation,
) -> Result<(), TxnError> {
    let included = match operation {
        Operation::Verify { .. } => cx
            .txn
            .verify_partitions(
                cx,
                producer.transactional_id,
                producer.producer_id,
                producer.producer_epoch,
            )
            .map(|included| included.contains(tp)),
        Operation::Add => cx
            .txn
            .add_partitions(
                cx,
                producer.transactional_id,
                producer.producer_id,
                producer.producer_epoch,
                &BTreeSet::from([tp.clone()]),
                TRANSACTION_VERSION_2,
            )
            .await
            .map(|()| true),
    };
    match included? {
        true => Ok(()),
        false => Err(TxnError::NotInTransaction),
    }
}

/// Asks the broker leading the id's `__transaction_state` partition.
async fn remote(
    cx: &CoordinatorHandles<'_>,
    producer: Producer<'_>,
    tp: &TopicPartition,
    operation: Operation,
) -> Result<(), TxnError> {
    let image = cx.image();
    let coordinator = state_partition(&image, producer.transactional_id)
        .and_then(|(_, part)| part.has_leader().then_some(part.leader));
    let Some(endpoint) = coordinator.and_then(|node| image.broker(node)) else {
        return Err(TxnError::CoordinatorNotAvailable);
    };
    let addr = format!("{}:{}", endpoint.host, endpoint.port);
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                producer.transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer.producer_id))
            .with_producer_epoch(producer.producer_epoch)
            .with_verify_only(matches!(operation, Operation::Verify { .. }))
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.0.clone())))
                .with_partitions(vec![tp.1])]),
    ]);
    let response: AddPartitionsToTxnResponse = match PeerConnection::call_once(
        cx.peers,
        endpoint,
        CONNECT_TIMEOUT,
        ApiKey::AddPartitionsToTxn,
        REQUEST_VERSION,
        &request,
        REQUEST_TIMEOUT,
    )
    .await
    {
        Ok(response) => response,
        Err(e) => {
            debug!(coordinator = %addr, error = %e, "asking the transaction coordinator failed");
            return Err(TxnError::Unreachable);
        }
    };
    if let Some(e) = TxnError::from_code(response.error_code) {
        return Err(e);
    }
    let code = response
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .filter(|t| *t.name == *tp.0)
        .flat_map(|t| &t.results_by_partition)
        .find(|p| p.partition_index == tp.1)
        .map(|p| p.partition_error_code);
    match code {
        Some(code) => TxnError::from_code(code).map_or(Ok(()), Err),
        None => Err(TxnError::Internal(format!(
            "the coordinator at {addr} answered nothing for {}-{}",
            tp.0, tp.1
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produce_versions_pick_kafkas_operation() {
        assert_eq!(
            Operation::for_produce(9),
            Operation::Verify { abortable: false }
        );
        assert_eq!(
            Operation::for_produce(11),
            Operation::Verify { abortable: true }
        );
        assert_eq!(Operation::for_produce(12), Operation::Add);
        assert_eq!(Operation::for_produce(13), Operation::Add);
    }

    #[test]
    fn coordinator_answers_are_translated_as_kafkas_leader_does() {
        let old = Operation::Verify { abortable: false };
        let new = Operation::Verify { abortable: true };
        let retriable = ResponseError::NotEnoughReplicas;
        // Answers as they come over the wire, read back as the coordinator's errors.
        let translate = |code: i16, operation, retriable| {
            translate(
                TxnError::from_code(code).map_or(Ok(()), Err),
                operation,
                retriable,
            )
        };
        let abortable = ResponseError::TransactionAbortable.code();
        assert_eq!(translate(0, old, retriable), Ok(()));
        assert_eq!(
            translate(abortable, old, retriable),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(
            translate(abortable, new, retriable),
            Err(ResponseError::TransactionAbortable)
        );
        assert_eq!(
            translate(
                ResponseError::ProducerFenced.code(),
                Operation::Add,
                retriable
            ),
            Err(ResponseError::InvalidProducerEpoch)
        );
        for busy in [
            ResponseError::ConcurrentTransactions,
            ResponseError::CoordinatorLoadInProgress,
            ResponseError::NotCoordinator,
        ] {
            assert_eq!(
                translate(busy.code(), Operation::Add, retriable),
                Err(retriable)
            );
        }
        assert_eq!(
            translate(
                ResponseError::InvalidProducerIdMapping.code(),
                new,
                retriable
            ),
            Err(ResponseError::InvalidProducerIdMapping)
        );
        for unreachable in [
            ResponseError::NetworkException,
            ResponseError::RequestTimedOut,
        ] {
            assert_eq!(
                translate(unreachable.code(), new, retriable),
                Err(retriable)
            );
        }
        // A code this broker's coordinator never answers passes through unchanged.
        assert_eq!(
            translate(
                ResponseError::ClusterAuthorizationFailed.code(),
                new,
                retriable
            ),
            Err(ResponseError::ClusterAuthorizationFailed)
        );
    }
}
