//! The commands of the metadata log and the errors their application can produce.
//!
//! A [`Command`] is what a broker proposes to the quorum; once committed it is applied by
//! every voter, in log order, to its [`MetadataImage`](crate::image::MetadataImage). Like
//! the records of Kafka's `__cluster_metadata` topic (KIP-631), a command carries every
//! value its application needs (topic ids, replica assignments) so that applying it is
//! deterministic: no clock, no randomness, no local state other than the image.
//!
//! Commands are serialized with serde into the raft log, so renaming a variant or a field
//! is an on-disk format change (see `raft/FORMAT.md`); add new fields with `#[serde(default)]`.
//!
//! An [`ApplyError`] is a *result* of a committed entry, not a failure of the log: the entry
//! still counts as applied and every voter reaches the same error, which goes back to the
//! proposer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl::AclBinding;
use crate::image::{LeaderRecoveryState, ListenerEndpoint};

/// One partition's replica assignment, as proposed when a topic or partition is created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionAssignment {
    pub partition: i32,
    /// Broker ids, preferred leader first (Kafka's "preferred replica" is the first one).
    pub replicas: Vec<i32>,
    pub leader: i32,
}

/// A change to the cluster metadata, replicated through the raft log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Create a topic; its id is chosen by the proposer so that apply stays deterministic.
    CreateTopic {
        name: String,
        topic_id: Uuid,
        partitions: Vec<PartitionAssignment>,
        configs: BTreeMap<String, String>,
    },
    DeleteTopic {
        topic_id: Uuid,
    },
    /// Add partitions to a topic; their numbers must continue the existing ones
    /// (Kafka never removes partitions, so the new ones are `count..count + n`).
    CreatePartitions {
        topic_id: Uuid,
        partitions: Vec<PartitionAssignment>,
    },
    /// IncrementalAlterConfigs on a topic: `set` first, then `delete`.
    AlterTopicConfigs {
        topic_id: Uuid,
        set: BTreeMap<String, String>,
        delete: Vec<String>,
    },
    /// The legacy AlterConfigs on a topic: the given map replaces every dynamic config.
    ReplaceTopicConfigs {
        topic_id: Uuid,
        configs: BTreeMap<String, String>,
    },
    /// IncrementalAlterConfigs on a broker; `None` is the cluster-wide default
    /// (Kafka's empty broker name, KIP-226).
    AlterBrokerConfigs {
        broker_id: Option<i32>,
        set: BTreeMap<String, String>,
        delete: Vec<String>,
    },
    ReplaceBrokerConfigs {
        broker_id: Option<i32>,
        configs: BTreeMap<String, String>,
    },
    /// IncrementalAlterConfigs on a group (KIP-848 group configs, Kafka's `ConfigRecord`
    /// with resource type GROUP): `set` first, then `delete`. The group need not exist.
    AlterGroupConfigs {
        group_id: String,
        set: BTreeMap<String, String>,
        delete: Vec<String>,
    },
    /// The legacy AlterConfigs on a group: the given map replaces every dynamic config.
    ReplaceGroupConfigs {
        group_id: String,
        configs: BTreeMap<String, String>,
    },
    /// A broker announces itself; re-registration (after a restart, with a new incarnation
    /// id) replaces the old entry. The registration starts fenced and its epoch is the
    /// entry's log index; the partitions it led under an older incarnation lose it as
    /// leader (its log may have lost an unflushed tail), the unfence elects it again.
    RegisterBroker {
        broker_id: i32,
        host: String,
        port: u16,
        rack: Option<String>,
        #[serde(default)]
        incarnation_id: Uuid,
        /// Every advertised client listener (see [`crate::image::ListenerEndpoint`]).
        #[serde(default)]
        listeners: Vec<ListenerEndpoint>,
        /// The broker epoch its last clean shutdown recorded, -1 when none was (Kafka's
        /// `PreviousBrokerEpoch`, KIP-966): a new incarnation whose previous epoch is not
        /// the registration's current one shut down uncleanly and, with ELR on, leaves
        /// every ISR and ELR. Absent in entries from builds before it, which count as clean.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous_broker_epoch: Option<i64>,
    },
    /// The controller saw no heartbeat for `broker.session.timeout.ms`, or the broker is
    /// stopping: it leads nothing (partitions it led get another in-sync leader, or with
    /// unclean leader election enabled the first active replica, or none) and leaves every
    /// ISR it is not the last member of. Ignored for another epoch.
    FenceBroker {
        broker_id: i32,
        broker_epoch: u64,
        #[serde(default)]
        reason: FenceReason,
    },
    /// A fenced broker heartbeats again and has caught up: it may lead the partitions that
    /// are leaderless and list it in their ISR (or, with unclean leader election enabled,
    /// leaderless ones with no active ISR member). It joins no ISR: the leader adds it
    /// with [`Command::AlterPartition`] once it caught up. Ignored for another epoch or a
    /// broker in controlled shutdown.
    UnfenceBroker {
        broker_id: i32,
        broker_epoch: u64,
    },
    /// The cluster id, written once: the first writer wins, later ones are no-ops.
    SetClusterId {
        cluster_id: String,
    },
    /// Hands `broker_id` the next `block_size` producer ids (Kafka's AllocateProducerIds),
    /// so producer ids are unique across the cluster.
    AllocateProducerIds {
        broker_id: i32,
        block_size: i64,
    },
    /// A partition's leader or ISR changed. As in KRaft's `PartitionChangeRecord`, the
    /// leader epoch is bumped only when the leader changes. Unconditional: kept for logs
    /// written before [`Command::AlterPartition`]; new code proposes that instead.
    SetPartitionLeaderIsr {
        topic_id: Uuid,
        partition: i32,
        leader: i32,
        isr: Vec<i32>,
    },
    /// The partition leader's ISR change, a compare-and-set against the image (Kafka's
    /// AlterPartition, KIP-497 / KIP-903). Checked in this order: the topic and partition
    /// exist; `broker_id` is registered with `broker_epoch` as its current epoch
    /// ([`ApplyError::StaleBrokerEpoch`]); `leader_epoch` is the current one
    /// ([`ApplyError::FencedLeaderEpoch`] if older, [`ApplyError::InvalidRequest`] if newer);
    /// `broker_id` is the current leader ([`ApplyError::InvalidRequest`]); `partition_epoch`
    /// is the current one ([`ApplyError::InvalidUpdateVersion`]); `isr` is non-empty, holds
    /// the leader, no duplicates and only replicas ([`ApplyError::InvalidRequest`]); every
    /// broker it adds is registered, unfenced, not shutting down and has not reported its
    /// replica offline ([`ApplyError::IneligibleReplica`]); between the last two, KIP-704's
    /// checks: `leader_recovery_state` recovering with more than the leader in `isr`, or
    /// recovering for a recovered partition ([`ApplyError::InvalidRequest`], as Kafka's
    /// controller). On success the ISR and the leader recovery state are replaced and the
    /// partition epoch bumped; leader and leader epoch stay. A request for the ISR and
    /// leader recovery state the partition already has succeeds and changes nothing, the
    /// partition epoch included (Kafka's controller writes no PartitionChangeRecord).
    AlterPartition {
        topic_id: Uuid,
        partition: i32,
        /// The sender, which must lead the partition.
        broker_id: i32,
        broker_epoch: u64,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
        /// The leader's own state (Kafka's AlterPartition v1+ `LeaderRecoveryState`): a
        /// leader counts itself recovered once it leads, so its first AlterPartition after
        /// an unclean election ends the partition's recovery. Absent in entries from builds
        /// before it, which knew no other state than recovered.
        #[serde(default, skip_serializing_if = "LeaderRecoveryState::is_recovered")]
        leader_recovery_state: LeaderRecoveryState,
    },
    /// Kafka's ElectLeaders for the listed `(topic id, partition)` pairs; unknown ones are
    /// skipped (the proposer reports per-partition errors, see
    /// [`preferred_leader_electable`](crate::election::preferred_leader_electable) and
    /// [`unclean_electable`](crate::election::unclean_electable)). Partitions the election
    /// does not apply to are left unchanged.
    ElectLeaders {
        partitions: Vec<(Uuid, i32)>,
        election: ElectionType,
    },
    /// Kafka's AlterPartitionReassignments (KIP-455): each partition's reassignment starts
    /// (or is replaced, or with no target cancelled) as
    /// [`crate::reassignment`] describes; those refused by
    /// [`crate::reassignment::check`] at apply time are skipped (the proposer reported
    /// what it saw).
    AlterPartitionReassignments {
        reassignments: Vec<crate::reassignment::Reassignment>,
    },
    /// Kafka's UnregisterBroker (KIP-1073's `kafka-cluster unregister`): the broker leads
    /// nothing and leaves every ISR it is not the last member of (as a fence), then its
    /// registration goes; the replica lists that name it stay. A broker process still
    /// running registers again. [`ApplyError::BrokerNotRegistered`] if it is not registered.
    UnregisterBroker {
        broker_id: i32,
    },
    /// Kafka's AlterUserScramCredentials, already checked by the proposer (iterations,
    /// duplicates, what exists): each upsertion sets one user's credential for one
    /// mechanism, each deletion removes one (absent ones are no-ops).
    AlterUserScramCredentials {
        upsertions: Vec<ScramUpsertion>,
        deletions: Vec<(String, i8)>,
    },
    /// Kafka's CreateAcls, validated by the proposer: adds each binding (one already
    /// present is a no-op, as in Kafka's `AclControlManager`).
    CreateAcls {
        bindings: Vec<AclBinding>,
    },
    /// Kafka's DeleteAcls: removes each binding the proposer's filters matched (absent
    /// ones, deleted meanwhile, are no-ops).
    DeleteAcls {
        bindings: Vec<AclBinding>,
    },
    /// The records `brook format` wrote to a node's metadata directory (Kafka's bootstrap
    /// metadata, `kafka-storage format --add-scram`), proposed by a leader that finds the
    /// image not yet bootstrapped. Applied once per cluster: the first one committed applies
    /// its records and marks the image bootstrapped; any later one is a no-op. Only
    /// [`Command::AlterUserScramCredentials`] records are written today.
    Bootstrap {
        records: Vec<Command>,
    },
    /// Kafka's UpdateFeatures, validated by the proposer against the image it read: sets
    /// each feature's finalized level (0 disables it; KRaft's `FeatureLevelRecord`).
    UpdateFeatures {
        levels: Vec<(String, i16)>,
    },
    /// Kafka's AlterClientQuotas, validated by the proposer (entity types, keys, finite
    /// positive values): per entity, sets then removes keys; an entity left with no
    /// quota goes (Kafka's `ClientQuotaRecord`s of one request, applied atomically).
    AlterClientQuotas {
        alterations: Vec<crate::quota::QuotaAlteration>,
    },
    /// A broker's log directory failed: its replicas of these `(topic id, partition)`s are
    /// offline for this registration, so they lose leadership and ISR membership (Kafka's
    /// `handleDirectoriesOffline`, see [`crate::offline_replicas`]). Proposed by the broker;
    /// [`ApplyError::StaleBrokerEpoch`] for an older registration.
    MarkReplicasOffline {
        broker_id: i32,
        broker_epoch: u64,
        partitions: Vec<(Uuid, i32)>,
    },
}

/// A user's new SCRAM credential for one mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub user: String,
    pub mechanism: i8,
    pub credential: crate::image::ScramCredentialImage,
}

/// Which leader an [`Command::ElectLeaders`] picks (Kafka's `ElectionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// The first replica, if it is in the ISR, active and not already leading.
    Preferred,
    /// For a leaderless partition only: the first active ISR member in replica order, else
    /// the first active replica, whose ISR becomes that replica alone (it may lack
    /// acknowledged records: data loss is accepted to regain availability) and whose
    /// partition is then recovering (KIP-704) until its AlterPartition says otherwise.
    Unclean,
}

impl Command {
    /// A short name for logs and metrics labels (bounded cardinality).
    pub fn kind(&self) -> &'static str {
        match self {
            Command::CreateTopic { .. } => "create_topic",
            Command::DeleteTopic { .. } => "delete_topic",
            Command::CreatePartitions { .. } => "create_partitions",
            Command::AlterTopicConfigs { .. } => "alter_topic_configs",
            Command::ReplaceTopicConfigs { .. } => "replace_topic_configs",
            Command::AlterBrokerConfigs { .. } => "alter_broker_configs",
            Command::ReplaceBrokerConfigs { .. } => "replace_broker_configs",
            Command::AlterGroupConfigs { .. } => "alter_group_configs",
            Command::ReplaceGroupConfigs { .. } => "replace_group_configs",
            Command::RegisterBroker { .. } => "register_broker",
            Command::SetPartitionLeaderIsr { .. } => "set_partition_leader_isr",
            Command::FenceBroker { .. } => "fence_broker",
            Command::UnfenceBroker { .. } => "unfence_broker",
            Command::SetClusterId { .. } => "set_cluster_id",
            Command::AllocateProducerIds { .. } => "allocate_producer_ids",
            Command::AlterPartition { .. } => "alter_partition",
            Command::ElectLeaders { .. } => "elect_leaders",
            Command::AlterPartitionReassignments { .. } => "alter_partition_reassignments",
            Command::UnregisterBroker { .. } => "unregister_broker",
            Command::AlterUserScramCredentials { .. } => "alter_user_scram_credentials",
            Command::CreateAcls { .. } => "create_acls",
            Command::DeleteAcls { .. } => "delete_acls",
            Command::Bootstrap { .. } => "bootstrap",
            Command::UpdateFeatures { .. } => "update_features",
            Command::AlterClientQuotas { .. } => "alter_client_quotas",
            Command::MarkReplicasOffline { .. } => "mark_replicas_offline",
        }
    }
}

/// Why a broker is fenced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FenceReason {
    /// No heartbeat within the session timeout.
    #[default]
    SessionExpired,
    /// SIGTERM: the broker asked to stop (KRaft's controlled shutdown).
    ControlledShutdown,
}

/// Why a committed command changed nothing. Every voter computes the same error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ApplyError {
    #[error("topic {name:?} already exists")]
    TopicAlreadyExists { name: String },
    #[error("topic id {topic_id} is already used by topic {existing:?}")]
    TopicIdAlreadyExists { topic_id: Uuid, existing: String },
    #[error("unknown topic id {topic_id}")]
    UnknownTopic { topic_id: Uuid },
    #[error("unknown partition {partition} of topic {topic:?}")]
    UnknownPartition { topic: String, partition: i32 },
    #[error("invalid partitions for topic {topic:?}: {reason}")]
    InvalidPartitions { topic: String, reason: String },
    #[error("broker {broker_id} is not registered")]
    UnknownBroker { broker_id: i32 },
    /// UnregisterBroker of a broker id with no registration (Kafka's
    /// BROKER_ID_NOT_REGISTERED, in its words).
    #[error("Broker ID {broker_id} is not currently registered")]
    BrokerNotRegistered { broker_id: i32 },
    /// Also returned by [`Command::AlterPartition`] for a sender that is not registered,
    /// with `current` 0.
    #[error("broker {broker_id} epoch {given} is stale (current {current})")]
    StaleBrokerEpoch {
        broker_id: i32,
        given: u64,
        current: u64,
    },
    /// An AlterPartition from a leader epoch older than the partition's (Kafka's
    /// FENCED_LEADER_EPOCH): the sender no longer leads under that epoch.
    #[error("leader epoch {given} is fenced (current leader epoch {current})")]
    FencedLeaderEpoch { given: i32, current: i32 },
    /// An AlterPartition whose partition epoch is not the partition's (Kafka's
    /// INVALID_UPDATE_VERSION): the ISR changed since the sender last saw it.
    #[error("partition epoch {given} is not the current partition epoch {current}")]
    InvalidUpdateVersion { given: i32, current: i32 },
    /// An AlterPartition adding a broker to the ISR that is not registered, fenced, in
    /// controlled shutdown or whose replica is in a failed log directory (Kafka's
    /// INELIGIBLE_REPLICA).
    #[error("broker {broker_id} is not eligible to join the ISR (unregistered, fenced or shutting down)")]
    IneligibleReplica { broker_id: i32 },
    /// A malformed or misdirected request (Kafka's INVALID_REQUEST).
    #[error("invalid request: {reason}")]
    InvalidRequest { reason: String },
    #[error("invalid producer id block size {block_size}")]
    InvalidProducerIdBlock { block_size: i64 },
}

/// What applying one log entry produced; the raft response type (`C::R`).
pub type ApplyResult = Result<(), ApplyError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_through_json() {
        let cmd = Command::AlterBrokerConfigs {
            broker_id: None,
            set: BTreeMap::from([("log.retention.ms".to_string(), "1000".to_string())]),
            delete: vec!["log.segment.bytes".to_string()],
        };
        let json = serde_json::to_string(&cmd).expect("serializable");
        let back: Command = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, cmd);
        assert_eq!(back.kind(), "alter_broker_configs");
    }

    #[test]
    fn group_config_commands_round_trip_through_json() {
        let alter = Command::AlterGroupConfigs {
            group_id: "g".into(),
            set: BTreeMap::from([("consumer.session.timeout.ms".into(), "50000".into())]),
            delete: vec!["consumer.heartbeat.interval.ms".into()],
        };
        let json = serde_json::to_string(&alter).expect("serializable");
        assert_eq!(
            json,
            "{\"AlterGroupConfigs\":{\"group_id\":\"g\",\"set\":{\"consumer.session.timeout.ms\":\"50000\"},\
             \"delete\":[\"consumer.heartbeat.interval.ms\"]}}"
        );
        let back: Command = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, alter);
        assert_eq!(back.kind(), "alter_group_configs");
        let replace = Command::ReplaceGroupConfigs {
            group_id: "g".into(),
            configs: BTreeMap::new(),
        };
        let json = serde_json::to_string(&replace).expect("serializable");
        assert_eq!(
            serde_json::from_str::<Command>(&json).expect("round trip"),
            replace
        );
    }

    #[test]
    fn apply_errors_round_trip_through_json() {
        let err: ApplyResult = Err(ApplyError::UnknownTopic {
            topic_id: Uuid::from_u128(7),
        });
        let json = serde_json::to_string(&err).expect("serializable");
        let back: ApplyResult = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, err);
    }

    #[test]
    fn alter_partition_and_elect_leaders_round_trip_through_json() {
        let alter = Command::AlterPartition {
            topic_id: Uuid::from_u128(3),
            partition: 2,
            broker_id: 1,
            broker_epoch: 42,
            leader_epoch: 5,
            partition_epoch: 9,
            isr: vec![1, 3],
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        let json = serde_json::to_string(&alter).expect("serializable");
        assert_eq!(
            json,
            format!(
                "{{\"AlterPartition\":{{\"topic_id\":\"{}\",\"partition\":2,\"broker_id\":1,\
                 \"broker_epoch\":42,\"leader_epoch\":5,\"partition_epoch\":9,\"isr\":[1,3]}}}}",
                Uuid::from_u128(3)
            )
        );
        let back: Command = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, alter);
        assert_eq!(back.kind(), "alter_partition");

        for election in [ElectionType::Preferred, ElectionType::Unclean] {
            let elect = Command::ElectLeaders {
                partitions: vec![(Uuid::from_u128(3), 0), (Uuid::from_u128(4), 7)],
                election,
            };
            let json = serde_json::to_string(&elect).expect("serializable");
            let back: Command = serde_json::from_str(&json).expect("round trip");
            assert_eq!(back, elect);
            assert_eq!(back.kind(), "elect_leaders");
        }
        let json = serde_json::to_string(&ElectionType::Unclean).expect("serializable");
        assert_eq!(json, "\"Unclean\"");
    }

    #[test]
    fn the_alter_partition_errors_round_trip_through_json() {
        for err in [
            ApplyError::FencedLeaderEpoch {
                given: 1,
                current: 2,
            },
            ApplyError::InvalidUpdateVersion {
                given: 3,
                current: 4,
            },
            ApplyError::IneligibleReplica { broker_id: 5 },
            ApplyError::InvalidRequest {
                reason: "broker 2 is not the leader of t-0 (leader 1)".into(),
            },
        ] {
            let json = serde_json::to_string(&err).expect("serializable");
            let back: ApplyError = serde_json::from_str(&json).expect("round trip");
            assert_eq!(back, err);
            assert!(!err.to_string().is_empty());
        }
    }
}
