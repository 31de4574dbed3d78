//! The cluster metadata as of one applied log entry: an immutable value shared by `Arc`.
//!
//! Like Kafka's `MetadataImage`, readers never see a half-applied command: the state
//! machine builds the next image (copy-on-write via `Arc::make_mut`) and publishes it whole
//! on a `watch` channel. Lookups by topic name and by topic id are both O(log n) / O(1);
//! the invariant `topic_names_by_id[t.topic_id] == t.name` for every topic `t` holds for
//! every published image and is restored on deserialization (the index is not stored).
//!
//! No Kafka wire types here: broker ids are `i32` and topic ids `Uuid`, as in Kafka.

use std::collections::{BTreeMap, HashMap};

use openraft::LogId;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A partition's replicas, leader and in-sync replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionImage {
    pub partition: i32,
    pub leader: i32,
    /// Bumped on every leader change (KIP-101 / KIP-279 fencing).
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// A topic: its id, partitions and dynamic (non-default) configs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: BTreeMap<i32, PartitionImage>,
    pub configs: BTreeMap<String, String>,
}

/// A broker's advertised endpoint, as registered with the quorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub broker_id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// The whole cluster metadata after applying the log up to `applied`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ImageRepr", into = "ImageRepr")]
pub struct MetadataImage {
    pub topics: BTreeMap<String, TopicImage>,
    pub topic_names_by_id: HashMap<Uuid, String>,
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    /// Dynamic broker configs; the `None` key holds the cluster-wide defaults.
    pub broker_configs: BTreeMap<Option<i32>, BTreeMap<String, String>>,
    /// The last raft log entry reflected in this image (`None` before the first one).
    pub applied: Option<LogId<u64>>,
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, topic_id: &Uuid) -> Option<&TopicImage> {
        self.topic_names_by_id
            .get(topic_id)
            .and_then(|name| self.topics.get(name))
    }

    pub fn topic_name(&self, topic_id: &Uuid) -> Option<&str> {
        self.topic_names_by_id.get(topic_id).map(String::as_str)
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionImage> {
        self.topics.get(topic)?.partitions.get(&partition)
    }

    pub fn broker(&self, broker_id: i32) -> Option<&BrokerRegistration> {
        self.brokers.get(&broker_id)
    }

    /// Dynamic configs of one broker (`Some(id)`) or the cluster default (`None`).
    pub fn broker_configs(&self, broker_id: Option<i32>) -> Option<&BTreeMap<String, String>> {
        self.broker_configs.get(&broker_id)
    }

    /// The applied log index, 0 before anything was applied; handy to wait for
    /// "an image at least as new as index N".
    pub fn applied_index(&self) -> u64 {
        self.applied.map_or(0, |id| id.index)
    }

    /// True when both images hold the same metadata, whatever log entry they were built at.
    pub fn same_metadata(&self, other: &MetadataImage) -> bool {
        self.topics == other.topics
            && self.topic_names_by_id == other.topic_names_by_id
            && self.brokers == other.brokers
            && self.broker_configs == other.broker_configs
    }
}

/// The stored form of an image: JSON object keys must be strings, so the broker-config map
/// (keyed by `Option<i32>`) becomes a list, and the by-id index is rebuilt on load.
#[derive(Serialize, Deserialize)]
struct ImageRepr {
    topics: Vec<TopicImage>,
    brokers: Vec<BrokerRegistration>,
    broker_configs: Vec<BrokerConfigsRepr>,
    applied: Option<LogId<u64>>,
}

#[derive(Serialize, Deserialize)]
struct BrokerConfigsRepr {
    broker_id: Option<i32>,
    configs: BTreeMap<String, String>,
}

impl From<MetadataImage> for ImageRepr {
    fn from(image: MetadataImage) -> Self {
        ImageRepr {
            topics: image.topics.into_values().collect(),
            brokers: image.brokers.into_values().collect(),
            broker_configs: image
                .broker_configs
                .into_iter()
                .map(|(broker_id, configs)| BrokerConfigsRepr { broker_id, configs })
                .collect(),
            applied: image.applied,
        }
    }
}

impl From<ImageRepr> for MetadataImage {
    fn from(repr: ImageRepr) -> Self {
        let topic_names_by_id = repr
            .topics
            .iter()
            .map(|t| (t.topic_id, t.name.clone()))
            .collect();
        MetadataImage {
            topics: repr
                .topics
                .into_iter()
                .map(|t| (t.name.clone(), t))
                .collect(),
            topic_names_by_id,
            brokers: repr.brokers.into_iter().map(|b| (b.broker_id, b)).collect(),
            broker_configs: repr
                .broker_configs
                .into_iter()
                .map(|b| (b.broker_id, b.configs))
                .collect(),
            applied: repr.applied,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_round_trips_through_json_with_its_id_index_rebuilt() {
        let topic_id = Uuid::from_u128(42);
        let mut image = MetadataImage::default();
        image.topics.insert(
            "orders".into(),
            TopicImage {
                name: "orders".into(),
                topic_id,
                partitions: BTreeMap::from([(
                    0,
                    PartitionImage {
                        partition: 0,
                        leader: 1,
                        leader_epoch: 3,
                        replicas: vec![1, 2],
                        isr: vec![1],
                    },
                )]),
                configs: BTreeMap::from([("cleanup.policy".into(), "compact".into())]),
            },
        );
        image.topic_names_by_id.insert(topic_id, "orders".into());
        image
            .broker_configs
            .insert(None, BTreeMap::from([("a".into(), "1".into())]));
        image
            .broker_configs
            .insert(Some(1), BTreeMap::from([("b".into(), "2".into())]));

        let json = serde_json::to_vec(&image).expect("serializable");
        let back: MetadataImage = serde_json::from_slice(&json).expect("round trip");
        assert_eq!(back, image);
        assert_eq!(
            back.topic_by_id(&topic_id).map(|t| t.name.as_str()),
            Some("orders")
        );
        assert_eq!(back.partition("orders", 0).map(|p| p.leader_epoch), Some(3));
    }
}
