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
    /// A broker announces itself; re-registration (after a restart) replaces the old entry.
    RegisterBroker {
        broker_id: i32,
        host: String,
        port: u16,
        rack: Option<String>,
    },
    /// A partition's leader or ISR changed. As in KRaft's `PartitionChangeRecord`, the
    /// leader epoch is bumped only when the leader changes.
    SetPartitionLeaderIsr {
        topic_id: Uuid,
        partition: i32,
        leader: i32,
        isr: Vec<i32>,
    },
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
            Command::RegisterBroker { .. } => "register_broker",
            Command::SetPartitionLeaderIsr { .. } => "set_partition_leader_isr",
        }
    }
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
    fn apply_errors_round_trip_through_json() {
        let err: ApplyResult = Err(ApplyError::UnknownTopic {
            topic_id: Uuid::from_u128(7),
        });
        let json = serde_json::to_string(&err).expect("serializable");
        let back: ApplyResult = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, err);
    }
}
