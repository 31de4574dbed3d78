//! The internal topic `__transaction_state`, created through the metadata quorum as Kafka
//! does it: lazily, by the first FindCoordinator for a transactional id or InitProducerId
//! with one, with `transaction.state.log.num.partitions` partitions and the configs of
//! Kafka's `TransactionStateManager.transactionTopicConfigs`: `cleanup.policy=compact`,
//! `compression.type=uncompressed`, `unclean.leader.election.enable=false`,
//! `min.insync.replicas=transaction.state.log.min.isr`,
//! `segment.bytes=transaction.state.log.segment.bytes`.
//! `transaction.state.log.replication.factor` (default 3) is capped at the active brokers
//! (one node: 1) and the min ISR at that replication factor, so a small cluster can still
//! write; its partitions spread over the brokers like any topic's.

use std::collections::BTreeMap;

use super::topics::{self, NewTopic};
use crate::broker::Broker;
use crate::coordinator::txn::records::TXN_STATE_TOPIC;
use crate::error::BrokerError;

/// Creates `__transaction_state` unless it exists (`topics::ensure_internal`: `Ok(true)`
/// when it did not exist when asked).
pub async fn ensure(broker: &Broker) -> Result<bool, BrokerError> {
    topics::ensure_internal(broker, TXN_STATE_TOPIC, settings).await
}

/// The topic's definition, with Kafka's settings for it.
fn settings(broker: &Broker) -> NewTopic {
    let config = &broker.config;
    let brokers = i16::try_from(broker.image().active_brokers().count().max(1)).unwrap_or(i16::MAX);
    let replication_factor = config.transaction_state_log_replication_factor.min(brokers);
    let min_isr = config
        .transaction_state_log_min_isr
        .min(i32::from(replication_factor));
    let configs = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("compression.type".to_string(), "uncompressed".to_string()),
        (
            "unclean.leader.election.enable".to_string(),
            "false".to_string(),
        ),
        ("min.insync.replicas".to_string(), min_isr.to_string()),
        (
            "segment.bytes".to_string(),
            config.transaction_state_log_segment_bytes.to_string(),
        ),
    ]);
    NewTopic {
        name: TXN_STATE_TOPIC.to_string(),
        partitions: config.transaction_state_log_num_partitions,
        replication_factor,
        configs,
        assignments: Vec::new(),
    }
}
