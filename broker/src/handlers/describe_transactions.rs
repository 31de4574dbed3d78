//! DescribeTransactions: the state of each transactional id this broker coordinates
//! (NOT_COORDINATOR for the others, TRANSACTIONAL_ID_NOT_FOUND for unknown ids), as
//! `kafka-transactions.sh describe` shows it.
//!
//! Authorization (Kafka's `handleDescribeTransactionsRequest`): DESCRIBE on each
//! transactional id, a refused one `TRANSACTIONAL_ID_AUTHORIZATION_FAILED` (and nothing else
//! about it); a described transaction lists only the topics the session may DESCRIBE.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::describe_transactions_response::{
    TopicData, TransactionState,
};
use brook_protocol::kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::handles::CoordinatorHost;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> DescribeTransactionsResponse {
    let access = Access::new(broker, session);
    let states = req
        .transactional_ids
        .iter()
        .map(|id| {
            if !access.transactional_id(AclOperation::Describe, id) {
                return TransactionState::default()
                    .with_transactional_id(id.clone())
                    .with_error_code(Denied::TransactionalId.code().code());
            }
            let base = TransactionState::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            match broker.txn.describe(&broker.coordinator_handles(), id) {
                Ok(view) => {
                    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                    for (topic, partition) in view
                        .partitions
                        .iter()
                        .filter(|(topic, _)| access.topic(AclOperation::Describe, topic))
                    {
                        by_topic.entry(topic.clone()).or_default().push(*partition);
                    }
                    base.with_transaction_state(StrBytes::from_static_str(view.state.name()))
                        .with_transaction_timeout_ms(view.timeout_ms)
                        .with_transaction_start_time_ms(view.start_timestamp_ms)
                        .with_producer_id(ProducerId(view.producer_id))
                        .with_producer_epoch(view.producer_epoch)
                        .with_topics(
                            by_topic
                                .into_iter()
                                .map(|(topic, partitions)| {
                                    TopicData::default()
                                        .with_topic(TopicName(StrBytes::from_string(topic)))
                                        .with_partitions(partitions)
                                })
                                .collect(),
                        )
                }
                Err(e) => base.with_error_code(BrokerError::from(e).code().code()),
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
