//! DescribeTransactions: the state of each transactional id this broker coordinates
//! (NOT_COORDINATOR for the others, TRANSACTIONAL_ID_NOT_FOUND for unknown ids), as
//! `kafka-transactions.sh describe` shows it.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::describe_transactions_response::{
    TopicData, TransactionState,
};
use brook_protocol::kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::error::BrokerError;

pub fn handle(
    broker: &Broker,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> DescribeTransactionsResponse {
    let states = req
        .transactional_ids
        .iter()
        .map(|id| {
            let base = TransactionState::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            match broker.txn.describe(broker, id) {
                Ok(view) => {
                    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                    for (topic, partition) in &view.partitions {
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
