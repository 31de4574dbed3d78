//! EndTxn: commit or abort the producer's transaction. Answered once the Prepare* state
//! is durable in `__transaction_state`; the markers are written after (see
//! `coordinator::txn`). A retry after completion with the same outcome succeeds.
//! PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2. v5 is Transactions V2 (KIP-890):
//! the coordinator bumps the producer epoch every transaction and the answer carries the
//! producer id and epoch of the client's next transaction.

use brook_protocol::kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::handles::CoordinatorHost;
use crate::coordinator::txn::{TRANSACTIONS_V1, TRANSACTION_VERSION_2};
use crate::error::{fenced_for_version, BrokerError, Denied};
use crate::server::session::Session;

const FIRST_FENCED_VERSION: i16 = 2;
/// EndTxn v5 is sent by Transactions V2 clients only.
const FIRST_V2_VERSION: i16 = 5;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    // Kafka's handleEndTxnRequest: WRITE on the transactional id.
    if !Access::new(broker, session).transactional_id(AclOperation::Write, &req.transactional_id) {
        return EndTxnResponse::default()
            .with_error_code(Denied::TransactionalId.code().code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    let result = broker
        .txn
        .end_txn(
            &broker.coordinator_handles(),
            &req.transactional_id,
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
            if version >= FIRST_V2_VERSION {
                TRANSACTION_VERSION_2
            } else {
                TRANSACTIONS_V1
            },
        )
        .await;
    tracing::debug!(
        transactional_id = %req.transactional_id.as_str(),
        version,
        producer_epoch = req.producer_epoch,
        commit = req.committed,
        result = ?result,
        "EndTxn"
    );
    let (code, (producer_id, producer_epoch)) = match result {
        Ok(next) => (0, next),
        Err(e) => (
            fenced_for_version(BrokerError::from(e).code(), version, FIRST_FENCED_VERSION).code(),
            (-1, -1),
        ),
    };
    EndTxnResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
}
