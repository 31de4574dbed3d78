//! The internal topic `__consumer_offsets`, created through the metadata quorum as Kafka
//! does it: lazily, by the first FindCoordinator for a group (or a client asking for the
//! topic by name), with `offsets.topic.num.partitions` partitions and the configs of
//! Kafka's `GroupCoordinator.groupMetadataTopicConfigs`: `cleanup.policy=compact`,
//! `segment.bytes=offsets.topic.segment.bytes`, `compression.type=producer`.
//! `offsets.topic.replication.factor` (default 3) is capped at the active brokers (one
//! node: 1); its partitions are placed over the brokers like any topic's, so the groups'
//! coordinators spread over the cluster.

use std::collections::BTreeMap;

use super::topics::{self, NewTopic};
use crate::broker::Broker;
use crate::coordinator::group::records::OFFSETS_TOPIC;
use crate::error::BrokerError;

/// Creates `__consumer_offsets` unless it exists (`topics::ensure_internal`: `Ok(true)`
/// when it did not exist when asked).
pub async fn ensure(broker: &Broker) -> Result<bool, BrokerError> {
    topics::ensure_internal(broker, OFFSETS_TOPIC, settings).await
}

/// The topic's definition, with Kafka's settings for it.
fn settings(broker: &Broker) -> NewTopic {
    let config = &broker.config;
    let brokers = i16::try_from(broker.image().active_brokers().count().max(1)).unwrap_or(i16::MAX);
    let configs = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        (
            "segment.bytes".to_string(),
            config.offsets_topic_segment_bytes.to_string(),
        ),
        ("compression.type".to_string(), "producer".to_string()),
    ]);
    NewTopic {
        name: OFFSETS_TOPIC.to_string(),
        partitions: config.offsets_topic_num_partitions,
        replication_factor: config.offsets_topic_replication_factor.min(brokers),
        configs,
        assignments: Vec::new(),
    }
}
