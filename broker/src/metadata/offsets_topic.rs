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

/// Creates `__consumer_offsets` unless it exists; losing a creation race is success.
/// `Ok(true)`: it did not exist when asked (its partitions are only now being led and
/// loaded).
pub async fn ensure(broker: &Broker) -> Result<bool, BrokerError> {
    if broker.image().topic(OFFSETS_TOPIC).is_some() {
        return Ok(false);
    }
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
    let created = topics::create(
        broker,
        NewTopic {
            name: OFFSETS_TOPIC.to_string(),
            partitions: config.offsets_topic_num_partitions,
            replication_factor: config.offsets_topic_replication_factor.min(brokers),
            configs,
            assignments: Vec::new(),
        },
    )
    .await;
    match created {
        Ok(_) => {
            tracing::info!(
                partitions = config.offsets_topic_num_partitions,
                "created the internal topic __consumer_offsets"
            );
            Ok(true)
        }
        Err(e) if e.is_topic_already_exists() => Ok(true),
        Err(e) => Err(e),
    }
}
