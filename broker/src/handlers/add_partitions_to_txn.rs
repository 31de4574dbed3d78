//! AddPartitionsToTxn. v0-3 (clients): one transaction's partitions join it; partitions
//! of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED,
//! as Kafka answers. v4+ (partition leaders, KIP-890): a batch of transactions, each
//! either added like v3 (a leader adding a partition for a Transactions V2 producer) or,
//! with `VerifyOnly`, checked: a partition in the producer's ongoing transaction gets NONE,
//! one outside it TRANSACTION_ABORTABLE (v5+; INVALID_TXN_STATE to v4, which predates the
//! code). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.

use std::collections::BTreeSet;

use brook_protocol::kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use brook_protocol::kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use brook_protocol::kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::handles::CoordinatorHost;
use crate::coordinator::txn::state::TopicPartition;
use crate::coordinator::txn::{TRANSACTIONS_V1, TRANSACTION_VERSION_2};
use crate::error::{fenced_for_version, BrokerError, Denied, PartitionError, TxnError};
use crate::server::session::Session;

/// The first AddPartitionsToTxn version with PRODUCER_FENCED.
const FIRST_FENCED_VERSION: i16 = 2;
/// The first version with TRANSACTION_ABORTABLE (KIP-890).
const FIRST_ABORTABLE_VERSION: i16 = 5;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let access = Access::new(broker, session);
    if version <= 3 {
        let results = add(
            broker,
            Some(&access),
            &req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            &req.v3_and_below_topics,
            version,
            TRANSACTIONS_V1,
        )
        .await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    // v4+ batches come from brokers only (KIP-890): CLUSTER_ACTION on the cluster for the
    // whole request, and no check per transactional id or topic (Kafka's
    // `handleAddPartitionsToTxnRequest`).
    if !access.cluster(AclOperation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(Denied::Cluster.code().code());
    }
    let mut out = Vec::with_capacity(req.transactions.len());
    for txn in &req.transactions {
        let results = if txn.verify_only {
            verify(broker, txn, version)
        } else {
            add(
                broker,
                None,
                &txn.transactional_id,
                txn.producer_id.0,
                txn.producer_epoch,
                &txn.topics,
                version,
                TRANSACTION_VERSION_2,
            )
            .await
        };
        out.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id.clone())
                .with_topic_results(results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(out)
}

fn partitions(topics: &[AddPartitionsToTxnTopic]) -> BTreeSet<TopicPartition> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect()
}

#[allow(clippy::too_many_arguments)]
/// `access`: the client's checks (v3 and below); `None` for a broker's batch, authorized as a
/// whole.
async fn add(
    broker: &Broker,
    access: Option<&Access<'_>>,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    topics: &[AddPartitionsToTxnTopic],
    version: i16,
    client_version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    // Kafka's handleAddPartitionsToTxnRequest: WRITE on the transactional id, then WRITE
    // on each topic (the others OPERATION_NOT_ATTEMPTED).
    if access.is_some_and(|a| !a.transactional_id(AclOperation::Write, id)) {
        return answer(topics, |_| Denied::TransactionalId.code().code());
    }
    let wanted = partitions(topics);
    let denied: BTreeSet<&TopicPartition> = wanted
        .iter()
        .filter(|(t, _)| access.is_some_and(|a| !a.topic(AclOperation::Write, t)))
        .collect();
    if !denied.is_empty() {
        return answer(topics, |tp| {
            if denied.contains(tp) {
                Denied::Topic.code().code()
            } else {
                TxnError::OperationNotAttempted.code().code()
            }
        });
    }
    let image = broker.image();
    let unknown: BTreeSet<&TopicPartition> = wanted
        .iter()
        .filter(|(t, p)| image.partition(t, *p).is_none())
        .collect();
    if !unknown.is_empty() {
        return answer(topics, |tp| {
            if unknown.contains(tp) {
                PartitionError::UnknownTopicOrPartition.code().code()
            } else {
                TxnError::OperationNotAttempted.code().code()
            }
        });
    }
    let code = match broker
        .txn
        .add_partitions(
            &broker.coordinator_handles(),
            id,
            producer_id,
            producer_epoch,
            &wanted,
            client_version,
        )
        .await
    {
        Ok(()) => 0,
        Err(e) => {
            fenced_for_version(BrokerError::from(e).code(), version, FIRST_FENCED_VERSION).code()
        }
    };
    answer(topics, |_| code)
}

fn verify(
    broker: &Broker,
    txn: &AddPartitionsToTxnTransaction,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let outside = if version >= FIRST_ABORTABLE_VERSION {
        TxnError::NotInTransaction
    } else {
        TxnError::InvalidTxnState
    };
    match broker.txn.verify_partitions(
        &broker.coordinator_handles(),
        &txn.transactional_id,
        txn.producer_id.0,
        txn.producer_epoch,
    ) {
        Ok(included) => answer(&txn.topics, |tp| {
            if included.contains(tp) {
                0
            } else {
                outside.code().code()
            }
        }),
        Err(e) => {
            let code = BrokerError::from(e).code().code();
            answer(&txn.topics, |_| code)
        }
    }
}

fn answer(
    topics: &[AddPartitionsToTxnTopic],
    code: impl Fn(&TopicPartition) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            let name = t.name.0.to_string();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code(&(name.clone(), *p)))
                        })
                        .collect(),
                )
        })
        .collect()
}
