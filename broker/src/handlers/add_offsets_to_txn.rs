//! AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction, so
//! the transaction's end writes a marker there and the group coordinator then applies or
//! drops the offsets TxnOffsetCommit left pending. The offsets topic is created if it does
//! not exist yet (the partition count decides which partition the group maps to).
//! PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.

use std::collections::BTreeSet;

use brook_protocol::kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::group::records::{group_partition_index, OFFSETS_TOPIC};
use crate::coordinator::handles::CoordinatorHost;
use crate::coordinator::txn::TxnError;
use crate::coordinator::txn::TRANSACTIONS_V1;
use crate::error::{fenced_for_version, BrokerError};
use crate::metadata::offsets_topic;
use crate::server::session::Session;

const FIRST_FENCED_VERSION: i16 = 2;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    // Kafka's handleAddOffsetsToTxnRequest: WRITE on the transactional id, READ on the group.
    let access = Access::new(broker, session);
    let denied = access.txn_offsets(&req.transactional_id, &req.group_id);
    if let Some(denied) = denied {
        return AddOffsetsToTxnResponse::default().with_error_code(denied.code().code());
    }
    let code = match add(broker, &req).await {
        Ok(()) => 0,
        Err(e) => fenced_for_version(e.code(), version, FIRST_FENCED_VERSION).code(),
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}

async fn add(broker: &Broker, req: &AddOffsetsToTxnRequest) -> Result<(), BrokerError> {
    offsets_topic::ensure(broker).await?;
    let partition = group_partition_index(&broker.image(), &req.group_id)
        .ok_or(TxnError::CoordinatorNotAvailable)?;
    let wanted = BTreeSet::from([(OFFSETS_TOPIC.to_string(), partition)]);
    broker
        .txn
        .add_partitions(
            &broker.coordinator_handles(),
            &req.transactional_id,
            req.producer_id.0,
            req.producer_epoch,
            &wanted,
            TRANSACTIONS_V1,
        )
        .await
        .map_err(BrokerError::from)
}
