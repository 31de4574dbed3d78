//! EndTxn: commit or abort the producer's transaction. Answered once the Prepare* state
//! is durable in `__transaction_state`; the markers are written after (see
//! `coordinator::txn`). A retry after completion with the same outcome succeeds.
//! PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2. v5 (Transactions V2) also returns
//! the producer id and epoch; Brook does not advertise `transaction.version`, so clients
//! stay at v4 and these are the unchanged ones.

use brook_protocol::kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use crate::broker::Broker;
use crate::error::{fenced_for_version, BrokerError};

const FIRST_FENCED_VERSION: i16 = 2;

pub async fn handle(broker: &Broker, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    let result = broker
        .txn
        .end_txn(
            broker,
            &req.transactional_id,
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
        )
        .await;
    let code = match result {
        Ok(()) => 0,
        Err(e) => {
            fenced_for_version(BrokerError::from(e).code(), version, FIRST_FENCED_VERSION).code()
        }
    };
    let mut response = EndTxnResponse::default().with_error_code(code);
    if version >= 5 {
        response = response
            .with_producer_id(if code == 0 {
                req.producer_id
            } else {
                ProducerId(-1)
            })
            .with_producer_epoch(if code == 0 { req.producer_epoch } else { -1 });
    }
    response
}
