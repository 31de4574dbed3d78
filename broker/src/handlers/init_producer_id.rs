//! InitProducerId. Without a transactional id (idempotent producers): a fresh producer id
//! at epoch 0, or the same id at the next epoch when a producer re-initialises (KIP-360).
//! With one: the transaction coordinator's answer (epoch bump, fencing of the previous
//! producer, an open transaction aborted first with CONCURRENT_TRANSACTIONS until done;
//! see `coordinator::txn`). The first such request creates `__transaction_state`, as
//! FindCoordinator does. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v4.

use brook_protocol::kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId,
};
use brook_protocol::kafka_protocol::ResponseError;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::handles::CoordinatorHost;
use crate::error::{fenced_for_version, BrokerError, Denied};
use crate::metadata::txn_state_topic;
use crate::server::session::Session;

/// The first InitProducerId version with PRODUCER_FENCED.
const FIRST_FENCED_VERSION: i16 = 4;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    // Kafka's handleInitProducerIdRequest: WRITE on the transactional id; an idempotent
    // producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
    let access = Access::new(broker, session);
    let denied = match &req.transactional_id {
        Some(id) => {
            (!access.transactional_id(AclOperation::Write, id)).then_some(Denied::TransactionalId)
        }
        None => (!access.idempotent_write()).then_some(Denied::Cluster),
    };
    if let Some(denied) = denied {
        return failed(denied.code());
    }
    if let Some(id) = &req.transactional_id {
        let expected = (req.producer_id.0 >= 0 && req.producer_epoch >= 0)
            .then_some((req.producer_id.0, req.producer_epoch));
        let result = match txn_state_topic::ensure(broker).await {
            Ok(_) => broker
                .txn
                .init_producer_id(
                    &broker.coordinator_handles(),
                    id,
                    req.transaction_timeout_ms,
                    expected,
                )
                .await
                .map_err(BrokerError::from),
            Err(e) => {
                tracing::warn!(error = %e, "creating __transaction_state failed");
                Err(BrokerError::from(
                    crate::coordinator::txn::TxnError::CoordinatorNotAvailable,
                ))
            }
        };
        return match result {
            Ok((producer_id, epoch)) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch),
            Err(e) => failed(fenced_for_version(e.code(), version, FIRST_FENCED_VERSION)),
        };
    }
    // A producer re-initialising with its id keeps the id and bumps the epoch (KIP-360).
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX {
        return InitProducerIdResponse::default()
            .with_producer_id(req.producer_id)
            .with_producer_epoch(req.producer_epoch + 1);
    }
    match broker
        .producer_ids
        .allocate(&broker.quorum, broker.node_id)
        .await
    {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => failed(e.code()),
    }
}

fn failed(code: ResponseError) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(code.code())
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}
