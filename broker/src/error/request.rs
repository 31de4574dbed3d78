//! The refusals of the admin APIs that answer with a message beside the code (leader
//! elections, coordinator lookups), worded as Kafka words them so admin tools print the
//! same line. `crate::error` maps each to its Kafka code.

use brook_raft::ElectionRefusal;

/// Why ElectLeaders did not elect a partition's leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    /// An election type other than preferred (0) or unclean (1).
    #[error("unknown election type {0}")]
    UnknownElectionType(i8),
    #[error("This server does not host this topic-partition.")]
    UnknownTopicOrPartition,
    #[error("{}", election_message(.0))]
    Refused(ElectionRefusal),
}

/// Kafka's messages for the ElectLeaders codes (`Errors`' default messages).
fn election_message(refusal: &ElectionRefusal) -> &'static str {
    match refusal {
        ElectionRefusal::ElectionNotNeeded => "Leader election not needed for topic partition.",
        ElectionRefusal::PreferredLeaderNotAvailable => "The preferred leader was not available.",
        ElectionRefusal::EligibleLeadersNotAvailable => {
            "Eligible topic partition leaders are not available."
        }
    }
}

/// Why FindCoordinator names no coordinator for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CoordinatorLookupError {
    /// The internal topic is missing or its partition has no active leader: clients retry.
    #[error("The coordinator is not available.")]
    NotAvailable,
    #[error("Unknown coordinator key type.")]
    UnknownKeyType,
    /// The session may not DESCRIBE the group or transactional id.
    #[error("{0}")]
    NotAuthorized(super::Denied),
}

/// Why AlterPartitionReassignments refused one partition, in Kafka's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReassignmentError {
    #[error("Unable to find a topic named {0}.")]
    UnknownTopic(String),
    #[error("{0}")]
    Refused(brook_raft::ReassignmentRefusal),
    /// KIP-860 (v1 with `allow_replication_factor_change` false): the target has another
    /// number of replicas than the partition has (before a reassignment in progress).
    #[error("The replication factor is changed from {from} to {to}")]
    ReplicationFactorChange { from: usize, to: usize },
}
