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

use crate::acl::AclsImage;
use crate::offline_replicas::OfflineReplicas;
use crate::quota::ClientQuotasImage;

/// No leader: every in-sync replica is fenced (Kafka's `-1`).
pub const NO_LEADER: i32 = -1;

/// A partition's replicas, leader and in-sync replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionImage {
    pub partition: i32,
    /// The leading broker, or [`NO_LEADER`].
    pub leader: i32,
    /// Bumped on every leader change (KIP-101 / KIP-279 fencing).
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Bumped on every change of leader or ISR (KRaft's partition epoch): the version an
    /// AlterPartition compare-and-set is checked against.
    #[serde(default)]
    pub partition_epoch: i32,
    /// While a reassignment (KIP-455) is in progress: the target replicas not yet in the
    /// replica list when it started, which catch up as followers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<i32>,
    /// While a reassignment is in progress: the replicas outside the target, dropped when
    /// it completes (see [`crate::reassignment`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<i32>,
    /// KIP-966's eligible leader replicas: members that left the ISR while it was below
    /// the topic's min ISR, in id order. Each holds every record up to the high watermark
    /// (which does not move while the ISR is below min ISR), so when the ISR is empty one of
    /// them may lead without an unclean election. Never overlaps the ISR; empty while
    /// `eligible.leader.replicas.version` is 0 (see [`crate::partition_change`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elr: Vec<i32>,
    /// The partition's last leader, recorded when its ISR became empty (Kafka 4.x keeps
    /// the last known leader here, "balanced recovery"): with ISR and ELR both empty it
    /// leads again once it is back, before any unclean election. Cleared once a leader is
    /// elected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_known_elr: Vec<i32>,
    /// KIP-704: [`LeaderRecoveryState::Recovering`] from an unclean election until the
    /// leader reports [`LeaderRecoveryState::Recovered`] with an AlterPartition. Absent
    /// (images and log entries written before it) means recovered, as in Kafka's records.
    #[serde(default, skip_serializing_if = "LeaderRecoveryState::is_recovered")]
    pub leader_recovery_state: LeaderRecoveryState,
}

impl PartitionImage {
    pub fn has_leader(&self) -> bool {
        self.leader != NO_LEADER
    }
}

/// Kafka's `LeaderRecoveryState` (KIP-704), kept per partition in the quorum.
///
/// An unclean election (a leader from outside the ISR and ELR, or the last known leader when
/// both are empty) makes the partition `Recovering`, with the new leader alone in the ISR:
/// its log is the partition's truth, records the others had beyond it are lost. While it is
/// `Recovering` the controller takes no AlterPartition that says `Recovering` with more than
/// the leader in the ISR; the leader's next AlterPartition says `Recovered` (a Kafka leader
/// counts itself recovered once it has taken leadership) and makes the partition recovered
/// in the same change that lets its ISR grow. Only the quorum's records show it: Kafka's
/// Metadata and DescribeTopicPartitions do not carry it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaderRecoveryState {
    /// Kafka's RECOVERED (0): the leader's log holds every committed record.
    #[default]
    Recovered,
    /// Kafka's RECOVERING (1): elected uncleanly, the leader has not reported back yet.
    Recovering,
}

impl LeaderRecoveryState {
    pub fn is_recovered(&self) -> bool {
        *self == LeaderRecoveryState::Recovered
    }

    /// Kafka's wire value (AlterPartition v1+, PartitionRecord).
    pub fn value(self) -> i8 {
        match self {
            LeaderRecoveryState::Recovered => 0,
            LeaderRecoveryState::Recovering => 1,
        }
    }
}

/// A topic: its id, partitions and dynamic (non-default) configs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: BTreeMap<i32, PartitionImage>,
    pub configs: BTreeMap<String, String>,
}

/// A broker's registration with the quorum (KRaft's `RegisterBrokerRecord` plus its
/// fencing state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub broker_id: i32,
    /// The advertised endpoint other brokers reach this one on (its inter-broker listener).
    pub host: String,
    pub port: u16,
    /// Every advertised client listener, by name (KRaft's `BrokerEndpoint`s): Metadata
    /// answers a client with the addresses of the listener it came in on. Empty in
    /// registrations made before listeners were recorded.
    #[serde(default)]
    pub listeners: Vec<ListenerEndpoint>,
    pub rack: Option<String>,
    /// A random id per process start: a restarted broker registers with a new one and
    /// replaces its old registration.
    #[serde(default)]
    pub incarnation_id: Uuid,
    /// The raft log index of the registration: requests and heartbeats carrying an older
    /// epoch come from a previous incarnation.
    #[serde(default)]
    pub broker_epoch: u64,
    /// A fenced broker leads nothing and is left out of Metadata. Registration starts
    /// fenced; the controller unfences on the first heartbeat of a caught-up broker.
    #[serde(default)]
    pub fenced: bool,
    /// The broker is stopping (SIGTERM): fenced, and not to be unfenced by a late heartbeat.
    #[serde(default)]
    pub in_controlled_shutdown: bool,
}

/// One advertised listener of a broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenerEndpoint {
    /// Upper case, as Kafka normalises listener names.
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl BrokerRegistration {
    /// The broker's address on listener `name`: `None` when it has no such listener (Kafka
    /// leaves such a broker out of that listener's Metadata); a registration without
    /// recorded listeners answers its one endpoint.
    pub fn endpoint(&self, name: &str) -> Option<(&str, u16)> {
        if self.listeners.is_empty() {
            return Some((&self.host, self.port));
        }
        self.listeners
            .iter()
            .find(|l| l.name == name)
            .map(|l| (l.host.as_str(), l.port))
    }

    /// May lead partitions and appear in Metadata.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// A block of producer ids handed to one broker (Kafka's AllocateProducerIds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlock {
    pub first: i64,
    pub len: i64,
}

/// One user's SCRAM credential for one mechanism (KRaft's `UserScramCredentialRecord`):
/// what the server needs to check a login, never the password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredentialImage {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
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
    /// Dynamic group configs by group id (KIP-848, resource type GROUP); a group with
    /// none set has no entry. Groups need not exist to have configs.
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// The cluster id, set once by the first node to find it unset.
    pub cluster_id: Option<String>,
    /// The first producer id no broker has been given yet.
    pub next_producer_id: i64,
    /// The newest producer-id block of each broker.
    pub producer_id_blocks: BTreeMap<i32, ProducerIdBlock>,
    /// SCRAM credentials by user, then by Kafka's mechanism type (1 SCRAM-SHA-256,
    /// 2 SCRAM-SHA-512).
    pub scram_credentials: BTreeMap<String, BTreeMap<i8, ScramCredentialImage>>,
    /// ACL bindings, indexed for the authorizer (KRaft's `AccessControlEntryRecord`s).
    pub acls: AclsImage,
    /// Client quotas by entity (KRaft's `ClientQuotaRecord`s).
    pub client_quotas: ClientQuotasImage,
    /// Whether a [`Command::Bootstrap`](crate::Command::Bootstrap) has been applied: the
    /// records `brook format` wrote (Kafka's bootstrap metadata) go in once per cluster.
    pub bootstrapped: bool,
    /// Feature levels finalized by UpdateFeatures (KRaft's `FeatureLevelRecord`s), by
    /// feature name; a feature never updated has no entry (the broker's default applies),
    /// one disabled is at 0.
    pub features: BTreeMap<String, i16>,
    /// Replicas whose log directory failed, by the broker that reported them
    /// (`offline_replicas.rs`).
    pub offline_replicas: BTreeMap<i32, OfflineReplicas>,
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

    /// Registered brokers that are neither fenced nor shutting down, by id.
    pub fn active_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| b.is_active())
    }

    /// Whether `broker_id` is registered and active.
    pub fn is_active(&self, broker_id: i32) -> bool {
        self.brokers.get(&broker_id).is_some_and(|b| b.is_active())
    }

    /// Dynamic configs of one broker (`Some(id)`) or the cluster default (`None`).
    pub fn broker_configs(&self, broker_id: Option<i32>) -> Option<&BTreeMap<String, String>> {
        self.broker_configs.get(&broker_id)
    }

    /// Dynamic configs of one group, if it has any.
    pub fn group_configs(&self, group_id: &str) -> Option<&BTreeMap<String, String>> {
        self.group_configs.get(group_id)
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
            && self.group_configs == other.group_configs
            && self.cluster_id == other.cluster_id
            && self.next_producer_id == other.next_producer_id
            && self.producer_id_blocks == other.producer_id_blocks
            && self.scram_credentials == other.scram_credentials
            && self.acls == other.acls
            && self.client_quotas == other.client_quotas
            && self.bootstrapped == other.bootstrapped
            && self.offline_replicas == other.offline_replicas
    }
}

/// The stored form of an image: JSON object keys must be strings, so the broker-config map
/// (keyed by `Option<i32>`) becomes a list, and the by-id index is rebuilt on load.
#[derive(Serialize, Deserialize)]
struct ImageRepr {
    topics: Vec<TopicImage>,
    brokers: Vec<BrokerRegistration>,
    broker_configs: Vec<BrokerConfigsRepr>,
    #[serde(default)]
    group_configs: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default)]
    cluster_id: Option<String>,
    #[serde(default)]
    next_producer_id: i64,
    #[serde(default)]
    producer_id_blocks: Vec<(i32, ProducerIdBlock)>,
    #[serde(default)]
    scram_credentials: Vec<(String, i8, ScramCredentialImage)>,
    #[serde(default)]
    acls: AclsImage,
    #[serde(default)]
    client_quotas: ClientQuotasImage,
    #[serde(default)]
    bootstrapped: bool,
    #[serde(default)]
    features: BTreeMap<String, i16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    offline_replicas: Vec<OfflineReplicas>,
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
            group_configs: image.group_configs,
            cluster_id: image.cluster_id,
            next_producer_id: image.next_producer_id,
            producer_id_blocks: image.producer_id_blocks.into_iter().collect(),
            scram_credentials: image
                .scram_credentials
                .into_iter()
                .flat_map(|(user, by_mechanism)| {
                    by_mechanism
                        .into_iter()
                        .map(move |(mechanism, c)| (user.clone(), mechanism, c))
                })
                .collect(),
            acls: image.acls,
            client_quotas: image.client_quotas,
            bootstrapped: image.bootstrapped,
            features: image.features,
            offline_replicas: image.offline_replicas.into_values().collect(),
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
            group_configs: repr.group_configs,
            cluster_id: repr.cluster_id,
            next_producer_id: repr.next_producer_id,
            producer_id_blocks: repr.producer_id_blocks.into_iter().collect(),
            scram_credentials: repr.scram_credentials.into_iter().fold(
                BTreeMap::new(),
                |mut all: BTreeMap<String, BTreeMap<i8, ScramCredentialImage>>, (user, m, c)| {
                    all.entry(user).or_default().insert(m, c);
                    all
                },
            ),
            acls: repr.acls,
            client_quotas: repr.client_quotas,
            bootstrapped: repr.bootstrapped,
            features: repr.features,
            offline_replicas: repr
                .offline_replicas
                .into_iter()
                .map(|o| (o.broker_id, o))
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
                        partition_epoch: 4,
                        adding_replicas: Vec::new(),
                        removing_replicas: Vec::new(),
                        elr: vec![2],
                        last_known_elr: Vec::new(),
                        leader_recovery_state: LeaderRecoveryState::Recovering,
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
        image.group_configs.insert(
            "g".into(),
            BTreeMap::from([("consumer.session.timeout.ms".into(), "50000".into())]),
        );
        image.scram_credentials.insert(
            "alice".into(),
            BTreeMap::from([(
                2,
                ScramCredentialImage {
                    salt: vec![1, 2],
                    stored_key: vec![3],
                    server_key: vec![4],
                    iterations: 8192,
                },
            )]),
        );

        image.acls.insert(&crate::acl::AclBinding {
            resource_type: 2,
            resource_name: "orders".into(),
            pattern_type: 4,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 4,
            permission_type: 3,
        });

        image.bootstrapped = true;

        let json = serde_json::to_vec(&image).expect("serializable");
        let back: MetadataImage = serde_json::from_slice(&json).expect("round trip");
        assert_eq!(back, image);
        assert_eq!(
            back.topic_by_id(&topic_id).map(|t| t.name.as_str()),
            Some("orders")
        );
        assert_eq!(back.partition("orders", 0).map(|p| p.leader_epoch), Some(3));
    }

    #[test]
    fn a_partition_without_a_leader_recovery_state_is_recovered_and_a_recovered_one_writes_none() {
        // A partition as snapshots and log entries from before KIP-704 hold it.
        let old = r#"{"partition":0,"leader":1,"leader_epoch":3,"replicas":[1,2],"isr":[1],"partition_epoch":4}"#;
        let p: PartitionImage = serde_json::from_str(old).expect("an old partition parses");
        assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovered);
        assert_eq!(serde_json::to_string(&p).expect("serializable"), old);
        let recovering = PartitionImage {
            leader_recovery_state: LeaderRecoveryState::Recovering,
            ..p
        };
        let json = serde_json::to_string(&recovering).expect("serializable");
        assert!(
            json.ends_with(r#""leader_recovery_state":"Recovering"}"#),
            "{json}"
        );
        assert_eq!(
            (
                LeaderRecoveryState::Recovered.value(),
                LeaderRecoveryState::Recovering.value()
            ),
            (0, 1)
        );
    }
}
