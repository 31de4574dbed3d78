//! InitProducerId for idempotent producers (no transactional id): a fresh producer id
//! at epoch 0, or the same id at the next epoch when a producer re-initialises
//! (KIP-360). Transactions are not served yet: a transactional id gets
//! `COORDINATOR_NOT_AVAILABLE`, as from a broker whose transaction coordinator is down.

use brook_protocol::kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId,
};
use brook_protocol::kafka_protocol::ResponseError;

use crate::broker::Broker;

pub async fn handle(
    broker: &Broker,
    req: InitProducerIdRequest,
    _version: i16,
) -> InitProducerIdResponse {
    if req.transactional_id.is_some() {
        return InitProducerIdResponse::default()
            .with_error_code(ResponseError::CoordinatorNotAvailable.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    // A producer re-initialising with its id keeps the id and bumps the epoch (KIP-360).
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX {
        return InitProducerIdResponse::default()
            .with_producer_id(req.producer_id)
            .with_producer_epoch(req.producer_epoch + 1);
    }
    match broker.producer_ids.allocate(broker).await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => InitProducerIdResponse::default()
            .with_error_code(e.code().code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}
