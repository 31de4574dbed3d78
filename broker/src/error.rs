//! `BrokerError` and THE single mapping from internal errors to Kafka error codes.
//! Handlers put the code in the failing partition's (or resource's) entry; only errors
//! that make a response impossible close the connection. Handlers name no code: they
//! build one of these errors and ask it for `code()`.
//!
//! What is Brook's own fault (a task that died, a record it cannot encode, state it
//! cannot read back) is [`BrokerError::ServerFault`]: UNKNOWN_SERVER_ERROR, never
//! INVALID_REQUEST, which tells the client its request was wrong.
//!
//! The group, transaction, partition and admin-request errors are defined in this
//! module's children, not beside their users, so this module imports no coordinator or
//! broker type (the coordinators re-export theirs): dependencies point into it only.

mod denied;
mod fetch;
mod group;
mod partition;
mod request;
mod txn;

use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::{ApplyError, ElectionRefusal, ProposeError};
use brook_storage::StorageError;

pub use self::denied::Denied;
pub use self::fetch::FetchSessionError;
pub use self::group::GroupError;
pub use self::partition::PartitionError;
pub use self::request::{CoordinatorLookupError, ElectionError, ReassignmentError};
pub use self::txn::TxnError;
use crate::config::ConfigError;
use crate::replication::acks::NotReplicated;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("no handler for request {0}")]
    NoHandler(String),
    /// A request version newer than this broker supports (ApiVersions answers v0, KIP-511).
    #[error("unsupported request version")]
    UnsupportedVersion,
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Propose(#[from] ProposeError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopic { name: String, reason: String },
    #[error("unknown topic or partition {topic}-{partition}")]
    UnknownTopicOrPartition { topic: String, partition: i32 },
    /// A topic an admin request names that does not exist.
    #[error("topic {name} does not exist")]
    UnknownTopic { name: String },
    /// CreatePartitions never shrinks a topic (Kafka: INVALID_PARTITIONS).
    #[error("topic currently has {current} partitions, {requested} would not be an increase")]
    PartitionsNotIncreased { current: i32, requested: i32 },
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Brook's own fault, not the request's: a task that died, a record it could not
    /// encode, state it could not read back.
    #[error("internal error: {0}")]
    ServerFault(String),
    #[error("topic deletion is disabled (delete.topic.enable=false)")]
    TopicDeletionDisabled,
    /// `controller_mutation_rate` (KIP-599); Kafka's message is its error's own.
    #[error("The throttling quota has been exceeded.")]
    ThrottlingQuotaExceeded,
    #[error("replication factor {requested} is invalid with {brokers} broker(s)")]
    InvalidReplicationFactor { requested: i16, brokers: usize },
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// This broker does not lead the partition; `leader` is who does (-1: nobody yet).
    #[error(
        "this broker does not lead {topic}-{partition} (leader {leader}, epoch {leader_epoch})"
    )]
    NotLeaderOrFollower {
        topic: String,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
    },
    /// The request's `current_leader_epoch` is older than the partition's (KIP-320).
    #[error("leader epoch {requested} is fenced (current {current})")]
    FencedLeaderEpoch { requested: i32, current: i32 },
    /// The request's `current_leader_epoch` is newer than this broker knows.
    #[error("leader epoch {requested} is unknown (current {current})")]
    UnknownLeaderEpoch { requested: i32, current: i32 },
    /// Explicit replica assignments that name unknown or repeated brokers.
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// The group's `__consumer_offsets` partition is led by another broker.
    #[error("this broker does not coordinate group {group:?}")]
    NotCoordinator { group: String },
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// An appended write (a transaction marker) did not reach the ISR.
    #[error("not replicated: {0:?}")]
    NotReplicated(NotReplicated),
    /// An ACL request to a broker with no authorizer; the message is Kafka's own wording
    /// for that API (`AclApis`).
    #[error("{0}")]
    SecurityDisabled(&'static str),
    /// The session lacks the ACL Kafka checks for the request.
    #[error("{0}")]
    NotAuthorized(Denied),
    /// An UpdateFeatures level refused; the text is Kafka's whole message
    /// ("Invalid update version 3 for feature transaction.version. …").
    #[error("{0}")]
    InvalidUpdateVersion(String),
}

/// A refused DescribeConfigs / AlterConfigs / IncrementalAlterConfigs resource.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("broker {0} is not this broker")]
    NotThisBroker(String),
    #[error("unsupported resource type {0}")]
    UnsupportedResourceType(i8),
    /// A resource name Kafka refuses for its type; the text is Kafka's whole message
    /// ("Group name must not be empty", "Default group resources are not allowed.").
    #[error("{0}")]
    InvalidName(&'static str),
    /// Kafka's `ConfigAdminManager` wording.
    #[error("Error due to duplicate config keys")]
    DuplicateConfigKeys,
    #[error("Unknown operations type {0}")]
    UnknownOperation(i8),
    /// A per-broker update the listeners cannot serve (Kafka's `DynamicBrokerConfig`
    /// wording; `ConfigAdminManager` answers INVALID_REQUEST).
    #[error("Invalid dynamic configuration: {0}")]
    InvalidDynamicConfig(String),
    /// A `min.insync.replicas` change Kafka 4.4's controller refuses while eligible leader
    /// replicas are on (KIP-966: min ISR is a topic or cluster-wide setting); the text is
    /// Kafka's whole message.
    #[error("{0}")]
    MinIsrWhileElr(&'static str),
    /// A change the config rules refuse.
    #[error(transparent)]
    Refused(#[from] ConfigError),
    /// A stored topic config that cannot be described.
    #[error(transparent)]
    Undescribable(ConfigError),
    /// The topic is unknown, or proposing the change failed.
    #[error(transparent)]
    Broker(#[from] BrokerError),
}

impl BrokerError {
    /// The Kafka error code a client gets for this error.
    pub fn code(&self) -> ResponseError {
        match self {
            BrokerError::NoHandler(_) | BrokerError::UnsupportedVersion => {
                ResponseError::UnsupportedVersion
            }
            BrokerError::Storage(e) => storage_code(e),
            BrokerError::Propose(ProposeError::Apply(e)) => apply_code(e),
            BrokerError::Propose(ProposeError::NotLeader { .. }) => ResponseError::NotController,
            BrokerError::Propose(_) => ResponseError::RequestTimedOut,
            BrokerError::Config(e) => config_code(e),
            BrokerError::InvalidTopic { .. } => ResponseError::InvalidTopicException,
            BrokerError::UnknownTopicOrPartition { .. } | BrokerError::UnknownTopic { .. } => {
                ResponseError::UnknownTopicOrPartition
            }
            BrokerError::PartitionsNotIncreased { .. } => ResponseError::InvalidPartitions,
            BrokerError::InvalidRequest(_) => ResponseError::InvalidRequest,
            BrokerError::InvalidUpdateVersion(_) => ResponseError::InvalidUpdateVersion,
            BrokerError::ServerFault(_) => ResponseError::UnknownServerError,
            BrokerError::TopicDeletionDisabled => ResponseError::TopicDeletionDisabled,
            BrokerError::ThrottlingQuotaExceeded => ResponseError::ThrottlingQuotaExceeded,
            BrokerError::InvalidReplicationFactor { .. } => ResponseError::InvalidReplicationFactor,
            BrokerError::Group(e) => group_code(e),
            BrokerError::Partition(e) => partition_code(e),
            BrokerError::NotLeaderOrFollower { .. } => ResponseError::NotLeaderOrFollower,
            BrokerError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
            BrokerError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
            BrokerError::NotCoordinator { .. } => ResponseError::NotCoordinator,
            BrokerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
            BrokerError::Txn(e) => txn_code(e),
            BrokerError::NotReplicated(e) => e.code(),
            BrokerError::SecurityDisabled(_) => ResponseError::SecurityDisabled,
            BrokerError::NotAuthorized(denied) => denied.code(),
        }
    }

    /// A CreateTopics that lost the race to another creation of the same topic.
    pub fn is_topic_already_exists(&self) -> bool {
        self.code() == ResponseError::TopicAlreadyExists
    }

    /// A disk failure (KAFKA_STORAGE_ERROR): logged once at ERROR where it is answered.
    pub fn is_storage_fault(&self) -> bool {
        self.code() == ResponseError::KafkaStorageError
    }
}

/// A refused configuration: what Kafka's broker-side dynamic config checks refuse
/// (`DynamicBrokerConfig.validateConfigs`) is `INVALID_REQUEST`; everything else —
/// topic configs, unknown names, list operations, what Brook does not support — is
/// `INVALID_CONFIG`, as Kafka's controller answers.
pub fn config_code(e: &ConfigError) -> ResponseError {
    match e {
        ConfigError::ReadOnly { .. }
        | ConfigError::PerBrokerOnly { .. }
        | ConfigError::PerListenerOnly { .. }
        | ConfigError::InvalidBrokerValue { .. } => ResponseError::InvalidRequest,
        ConfigError::InvalidValue { .. }
        | ConfigError::UnknownTopicKey { .. }
        | ConfigError::UnknownGroupKey { .. }
        | ConfigError::InvalidGroupValue { .. }
        | ConfigError::UnknownBrokerKey { .. }
        | ConfigError::BadListOperation { .. }
        | ConfigError::Unsupported { .. }
        | ConfigError::Missing { .. }
        | ConfigError::Contradiction { .. }
        | ConfigError::BadOverride { .. }
        | ConfigError::Io { .. } => ResponseError::InvalidConfig,
    }
}

/// The Kafka code of a refused KIP-853 voter change (Kafka's `AddVoterHandler` /
/// `RemoveVoterHandler` codes).
pub fn voter_change_code(e: &brook_raft::voters::VoterChangeError) -> ResponseError {
    use brook_raft::voters::VoterChangeError as V;
    match e {
        V::NotLeader => ResponseError::NotLeaderOrFollower,
        V::TimedOut(_) => ResponseError::RequestTimedOut,
        V::DuplicateVoter(_) => ResponseError::DuplicateVoter,
        V::VoterNotFound(_) => ResponseError::VoterNotFound,
        V::Invalid(_) => ResponseError::InvalidRequest,
    }
}

fn storage_code(e: &StorageError) -> ResponseError {
    match e {
        StorageError::CorruptBatch { .. } | StorageError::EmptyAppend => {
            ResponseError::CorruptMessage
        }
        StorageError::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        StorageError::RecordBatchTooLarge { .. } => ResponseError::RecordListTooLarge,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        StorageError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        StorageError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        StorageError::TransactionCoordinatorFenced { .. } => {
            ResponseError::TransactionCoordinatorFenced
        }
        StorageError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        StorageError::LogDeleted { .. } => ResponseError::UnknownTopicOrPartition,
        _ => ResponseError::KafkaStorageError,
    }
}

/// One partition's refusal.
pub fn partition_code(e: &PartitionError) -> ResponseError {
    match e {
        PartitionError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        PartitionError::UnknownTopicId => ResponseError::UnknownTopicId,
        PartitionError::LeaderNotAvailable => ResponseError::LeaderNotAvailable,
        PartitionError::NotLeaderOrFollower => ResponseError::NotLeaderOrFollower,
        PartitionError::NotEnoughReplicas => ResponseError::NotEnoughReplicas,
        PartitionError::OffsetOutOfRange => ResponseError::OffsetOutOfRange,
        PartitionError::PolicyViolation => ResponseError::PolicyViolation,
        PartitionError::CorruptMessage => ResponseError::CorruptMessage,
        PartitionError::InvalidRecord => ResponseError::InvalidRecord,
        PartitionError::InvalidRequiredAcks => ResponseError::InvalidRequiredAcks,
        PartitionError::Offline => ResponseError::KafkaStorageError,
    }
}

impl PartitionError {
    pub fn code(&self) -> ResponseError {
        partition_code(self)
    }
}

/// A refused fetch session's code.
pub fn fetch_session_code(e: &FetchSessionError) -> ResponseError {
    match e {
        FetchSessionError::NotFound => ResponseError::FetchSessionIdNotFound,
        FetchSessionError::InvalidEpoch => ResponseError::InvalidFetchSessionEpoch,
        FetchSessionError::TopicIdMismatch => ResponseError::FetchSessionTopicIdError,
    }
}

impl FetchSessionError {
    pub fn code(&self) -> ResponseError {
        fetch_session_code(self)
    }
}

/// The classic group protocol's codes (Kafka's `GroupCoordinator` error choices).
pub fn group_code(e: &GroupError) -> ResponseError {
    match e {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId | GroupError::UnknownMember(_) => {
            ResponseError::UnknownMemberId
        }
        GroupError::IllegalGeneration { .. } => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::FencedInstanceId { .. } | GroupError::StaticMemberFenced { .. } => {
            ResponseError::FencedInstanceId
        }
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout(_) => ResponseError::InvalidSessionTimeout,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::GroupIdNotFound | GroupError::GroupNotFound(_) => {
            ResponseError::GroupIdNotFound
        }
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge(_) => ResponseError::OffsetMetadataTooLarge,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::UnstableOffsetCommit => ResponseError::UnstableOffsetCommit,
        GroupError::FencedMemberEpoch { .. } => ResponseError::FencedMemberEpoch,
        GroupError::StaleMemberEpoch { .. } | GroupError::StaleCommit(_) => {
            ResponseError::StaleMemberEpoch
        }
        GroupError::UnreleasedInstanceId { .. } => ResponseError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor(_) => ResponseError::UnsupportedAssignor,
        GroupError::InvalidRegularExpression { .. } => ResponseError::InvalidRegularExpression,
        GroupError::InvalidRequest(_) => ResponseError::InvalidRequest,
        GroupError::WrongGroupType(_) => ResponseError::GroupIdNotFound,
        GroupError::UnsupportedVersion(_) => ResponseError::UnsupportedVersion,
    }
}

impl GroupError {
    pub fn code(&self) -> ResponseError {
        group_code(self)
    }
}

/// The transaction coordinator's codes (Kafka's `TransactionCoordinator` choices).
/// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for old request versions: see
/// [`fenced_for_version`].
pub fn txn_code(e: &TxnError) -> ResponseError {
    match e {
        TxnError::NotCoordinator => ResponseError::NotCoordinator,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        TxnError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::ProducerFenced => ResponseError::ProducerFenced,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
        TxnError::InvalidTransactionTimeout(_) => ResponseError::InvalidTransactionTimeout,
        TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
        TxnError::InvalidRequest(_) => ResponseError::InvalidRequest,
        TxnError::Internal(_) => ResponseError::UnknownServerError,
        TxnError::OperationNotAttempted => ResponseError::OperationNotAttempted,
        TxnError::NotInTransaction => ResponseError::TransactionAbortable,
        TxnError::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
        TxnError::Unreachable => ResponseError::NetworkException,
        TxnError::TimedOut => ResponseError::RequestTimedOut,
        TxnError::Remote(code) => {
            ResponseError::try_from_code(*code).unwrap_or(ResponseError::UnknownServerError)
        }
    }
}

impl TxnError {
    pub fn code(&self) -> ResponseError {
        txn_code(self)
    }

    /// The errors a remote coordinator's answer can carry, each with a code of its own.
    pub const ON_THE_WIRE: [TxnError; 13] = [
        TxnError::NotCoordinator,
        TxnError::CoordinatorNotAvailable,
        TxnError::CoordinatorLoadInProgress,
        TxnError::ConcurrentTransactions,
        TxnError::ProducerFenced,
        TxnError::InvalidProducerIdMapping,
        TxnError::InvalidTxnState,
        TxnError::TransactionalIdNotFound,
        TxnError::OperationNotAttempted,
        TxnError::NotInTransaction,
        TxnError::InvalidProducerEpoch,
        TxnError::Unreachable,
        TxnError::TimedOut,
    ];

    /// A coordinator's answer as another broker sends it on the wire (0: none), read back
    /// into the error this broker's own coordinator would have returned.
    pub fn from_code(code: i16) -> Option<TxnError> {
        match code {
            0 => None,
            _ => Some(
                Self::ON_THE_WIRE
                    .iter()
                    .find(|e| e.code().code() == code)
                    .cloned()
                    .unwrap_or(TxnError::Remote(code)),
            ),
        }
    }
}

/// PRODUCER_FENCED (90) exists from these request versions on; older clients get
/// INVALID_PRODUCER_EPOCH (47), which they treat as fenced too (KIP-588): InitProducerId
/// v4, AddPartitionsToTxn / AddOffsetsToTxn / EndTxn / TxnOffsetCommit v2.
pub fn fenced_for_version(code: ResponseError, version: i16, first_fenced: i16) -> ResponseError {
    if code == ResponseError::ProducerFenced && version < first_fenced {
        ResponseError::InvalidProducerEpoch
    } else {
        code
    }
}

/// The metadata quorum's refusals. Every variant is named, so a new one is a compile
/// error here rather than a silent INVALID_REQUEST.
fn apply_code(e: &ApplyError) -> ResponseError {
    match e {
        ApplyError::TopicAlreadyExists { .. } | ApplyError::TopicIdAlreadyExists { .. } => {
            ResponseError::TopicAlreadyExists
        }
        ApplyError::UnknownTopic { .. } => ResponseError::UnknownTopicId,
        ApplyError::UnknownPartition { .. } => ResponseError::UnknownTopicOrPartition,
        ApplyError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
        ApplyError::UnknownBroker { .. } | ApplyError::StaleBrokerEpoch { .. } => {
            ResponseError::StaleBrokerEpoch
        }
        ApplyError::BrokerNotRegistered { .. } => ResponseError::BrokerIdNotRegistered,
        ApplyError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        ApplyError::InvalidUpdateVersion { .. } => ResponseError::InvalidUpdateVersion,
        ApplyError::IneligibleReplica { .. } => ResponseError::IneligibleReplica,
        ApplyError::InvalidRequest { .. } => ResponseError::InvalidRequest,
        // Brook's own producer-id allocator asked for a bad block: not the client's fault.
        ApplyError::InvalidProducerIdBlock { .. } => ResponseError::UnknownServerError,
    }
}

/// A refused config resource.
pub fn resource_code(e: &ResourceError) -> ResponseError {
    match e {
        ResourceError::NotThisBroker(_)
        | ResourceError::UnsupportedResourceType(_)
        | ResourceError::InvalidName(_)
        | ResourceError::DuplicateConfigKeys
        | ResourceError::UnknownOperation(_)
        | ResourceError::InvalidDynamicConfig(_) => ResponseError::InvalidRequest,
        ResourceError::Refused(e) => config_code(e),
        ResourceError::Undescribable(_) | ResourceError::MinIsrWhileElr(_) => {
            ResponseError::InvalidConfig
        }
        ResourceError::Broker(e) => e.code(),
    }
}

impl ResourceError {
    pub fn code(&self) -> ResponseError {
        resource_code(self)
    }
}

/// ElectLeaders' per-partition codes (Kafka's controller choices).
pub fn election_code(e: &ElectionError) -> ResponseError {
    match e {
        ElectionError::UnknownElectionType(_) => ResponseError::InvalidRequest,
        ElectionError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        ElectionError::Refused(ElectionRefusal::ElectionNotNeeded) => {
            ResponseError::ElectionNotNeeded
        }
        ElectionError::Refused(ElectionRefusal::PreferredLeaderNotAvailable) => {
            ResponseError::PreferredLeaderNotAvailable
        }
        ElectionError::Refused(ElectionRefusal::EligibleLeadersNotAvailable) => {
            ResponseError::EligibleLeadersNotAvailable
        }
    }
}

impl ElectionError {
    pub fn code(&self) -> ResponseError {
        election_code(self)
    }
}

/// AlterPartitionReassignments' per-partition codes (Kafka's controller choices).
pub fn reassignment_code(e: &ReassignmentError) -> ResponseError {
    use brook_raft::ReassignmentRefusal as R;
    match e {
        ReassignmentError::UnknownTopic(_)
        | ReassignmentError::Refused(R::UnknownPartition { .. }) => {
            ResponseError::UnknownTopicOrPartition
        }
        ReassignmentError::Refused(R::NoReassignmentInProgress) => {
            ResponseError::NoReassignmentInProgress
        }
        ReassignmentError::Refused(
            R::EmptyReplicas
            | R::DuplicateBroker(_)
            | R::UnknownBroker(_)
            | R::UncleanRevert { .. },
        ) => ResponseError::InvalidReplicaAssignment,
        ReassignmentError::ReplicationFactorChange { .. } => {
            ResponseError::InvalidReplicationFactor
        }
    }
}

impl ReassignmentError {
    pub fn code(&self) -> ResponseError {
        reassignment_code(self)
    }
}

/// FindCoordinator's codes.
pub fn lookup_code(e: &CoordinatorLookupError) -> ResponseError {
    match e {
        CoordinatorLookupError::NotAvailable => ResponseError::CoordinatorNotAvailable,
        CoordinatorLookupError::UnknownKeyType => ResponseError::InvalidRequest,
        CoordinatorLookupError::NotAuthorized(denied) => denied.code(),
    }
}

impl CoordinatorLookupError {
    pub fn code(&self) -> ResponseError {
        lookup_code(self)
    }
}

/// Why a client's records were not appended as leader (`partition::append`): Kafka's
/// `Partition.appendRecordsToLeader` and `LogValidator` choices.
pub fn append_code(e: &crate::partition::append::AppendError) -> ResponseError {
    use crate::partition::append::AppendError;
    match e {
        AppendError::Broker(e) => e.code(),
        AppendError::NotEnoughReplicas => ResponseError::NotEnoughReplicas,
        AppendError::ControlBatch | AppendError::Keyless(_) => ResponseError::InvalidRecord,
        AppendError::Transaction(code) => *code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_refusals_get_the_codes_kafka_answers() {
        let read_only = ConfigError::ReadOnly {
            key: "num.partitions".into(),
        };
        assert_eq!(config_code(&read_only), ResponseError::InvalidRequest);
        let broker_value = ConfigError::InvalidBrokerValue {
            key: "log.retention.ms".into(),
            value: "abc".into(),
            reason: "Not a number of type LONG".into(),
        };
        assert_eq!(config_code(&broker_value), ResponseError::InvalidRequest);
        let topic_value = ConfigError::invalid("retention.ms", "abc", "Not a number");
        assert_eq!(config_code(&topic_value), ResponseError::InvalidConfig);
        let unknown = ConfigError::UnknownTopicKey {
            key: "made.up".into(),
        };
        assert_eq!(
            BrokerError::from(unknown).code(),
            ResponseError::InvalidConfig
        );
        let unsupported = ConfigError::Unsupported {
            key: "sasl.enabled.mechanisms".into(),
            reason: "no".into(),
        };
        assert_eq!(config_code(&unsupported), ResponseError::InvalidConfig);
        // Kafka's GroupConfig.validate throws InvalidConfigurationException throughout.
        let unknown_group = ConfigError::UnknownGroupKey {
            key: "made.up".into(),
        };
        assert_eq!(config_code(&unknown_group), ResponseError::InvalidConfig);
        let group_range = ConfigError::InvalidGroupValue {
            key: "consumer.session.timeout.ms".into(),
            reason: "out of range".into(),
        };
        assert_eq!(config_code(&group_range), ResponseError::InvalidConfig);
    }

    #[test]
    fn storage_errors_map_to_the_codes_the_spec_names() {
        let too_large = BrokerError::Storage(StorageError::RecordTooLarge { size: 2, max: 1 });
        assert_eq!(too_large.code(), ResponseError::MessageTooLarge);
        let out_of_range = BrokerError::Storage(StorageError::OffsetOutOfRange {
            requested: 9,
            log_start: 0,
            log_end: 3,
        });
        assert_eq!(out_of_range.code(), ResponseError::OffsetOutOfRange);
        assert_eq!(
            BrokerError::Storage(StorageError::EmptyAppend).code(),
            ResponseError::CorruptMessage
        );
    }

    #[test]
    fn group_errors_map_to_the_classic_protocol_codes() {
        let stale = BrokerError::from(GroupError::IllegalGeneration {
            given: 1,
            current: 2,
        });
        assert_eq!(stale.code(), ResponseError::IllegalGeneration);
        let fenced = GroupError::FencedInstanceId {
            instance_id: "i".into(),
        };
        assert_eq!(group_code(&fenced), ResponseError::FencedInstanceId);
        assert_eq!(
            group_code(&GroupError::InvalidSessionTimeout(1)),
            ResponseError::InvalidSessionTimeout
        );
        assert_eq!(
            group_code(&GroupError::NonEmptyGroup),
            ResponseError::NonEmptyGroup
        );
        assert_eq!(
            group_code(&GroupError::UnknownMemberId),
            ResponseError::UnknownMemberId
        );
    }

    #[test]
    fn leadership_errors_map_to_the_codes_clients_retry_on() {
        let moved = BrokerError::NotLeaderOrFollower {
            topic: "t".into(),
            partition: 0,
            leader: 2,
            leader_epoch: 3,
        };
        assert_eq!(moved.code(), ResponseError::NotLeaderOrFollower);
        let old = BrokerError::FencedLeaderEpoch {
            requested: 1,
            current: 2,
        };
        assert_eq!(old.code(), ResponseError::FencedLeaderEpoch);
        let new = BrokerError::UnknownLeaderEpoch {
            requested: 3,
            current: 2,
        };
        assert_eq!(new.code(), ResponseError::UnknownLeaderEpoch);
        let elsewhere = BrokerError::NotCoordinator { group: "g".into() };
        assert_eq!(elsewhere.code(), ResponseError::NotCoordinator);
    }

    #[test]
    fn transaction_errors_map_to_kafkas_coordinator_codes() {
        let fenced = BrokerError::from(TxnError::ProducerFenced).code();
        assert_eq!(fenced, ResponseError::ProducerFenced);
        assert_eq!(
            fenced_for_version(fenced, 1, 2),
            ResponseError::InvalidProducerEpoch
        );
        assert_eq!(
            fenced_for_version(fenced, 2, 2),
            ResponseError::ProducerFenced
        );
        assert_eq!(
            fenced_for_version(ResponseError::ConcurrentTransactions, 0, 2),
            ResponseError::ConcurrentTransactions
        );
        assert_eq!(
            txn_code(&TxnError::InvalidTransactionTimeout(1)),
            ResponseError::InvalidTransactionTimeout
        );
        assert_eq!(
            txn_code(&TxnError::CoordinatorLoadInProgress),
            ResponseError::CoordinatorLoadInProgress
        );
        assert_eq!(
            txn_code(&TxnError::InvalidProducerIdMapping),
            ResponseError::InvalidProducerIdMapping
        );
        assert_eq!(
            BrokerError::NotReplicated(NotReplicated::TimedOut).code(),
            ResponseError::RequestTimedOut
        );
        let zombie = BrokerError::Storage(StorageError::TransactionCoordinatorFenced {
            producer_id: 1,
            current_epoch: 2,
            received_epoch: 1,
        });
        assert_eq!(zombie.code(), ResponseError::TransactionCoordinatorFenced);
    }

    #[test]
    fn an_acl_request_without_an_authorizer_is_security_disabled() {
        let e = BrokerError::SecurityDisabled("No Authorizer is configured.");
        assert_eq!(e.code(), ResponseError::SecurityDisabled);
        assert_eq!(e.code().code(), 54);
        assert_eq!(e.to_string(), "No Authorizer is configured.");
    }

    #[test]
    fn metadata_errors_map_to_topic_codes() {
        let exists = BrokerError::Propose(ProposeError::Apply(ApplyError::TopicAlreadyExists {
            name: "t".into(),
        }));
        assert_eq!(exists.code(), ResponseError::TopicAlreadyExists);
        let invalid = BrokerError::InvalidTopic {
            name: "a b".into(),
            reason: "bad char".into(),
        };
        assert_eq!(invalid.code(), ResponseError::InvalidTopicException);
    }

    #[test]
    fn server_faults_are_unknown_server_error_never_invalid_request() {
        let fault = BrokerError::ServerFault("encoding offsets records: too large".into());
        assert_eq!(fault.code(), ResponseError::UnknownServerError);
        assert_eq!(
            fault.to_string(),
            "internal error: encoding offsets records: too large"
        );
        // The quorum refusing Brook's own producer-id block request is Brook's fault.
        let block = BrokerError::Propose(ProposeError::Apply(ApplyError::InvalidProducerIdBlock {
            block_size: 0,
        }));
        assert_eq!(block.code(), ResponseError::UnknownServerError);
        assert_eq!(
            txn_code(&TxnError::Internal("x".into())),
            ResponseError::UnknownServerError
        );
    }

    #[test]
    fn every_quorum_refusal_gets_its_own_code() {
        let apply = |e: ApplyError| BrokerError::Propose(ProposeError::Apply(e)).code();
        assert_eq!(
            apply(ApplyError::FencedLeaderEpoch {
                given: 1,
                current: 2
            }),
            ResponseError::FencedLeaderEpoch
        );
        assert_eq!(
            apply(ApplyError::InvalidUpdateVersion {
                given: 1,
                current: 2
            }),
            ResponseError::InvalidUpdateVersion
        );
        assert_eq!(
            apply(ApplyError::IneligibleReplica { broker_id: 3 }),
            ResponseError::IneligibleReplica
        );
        assert_eq!(
            apply(ApplyError::InvalidRequest { reason: "r".into() }),
            ResponseError::InvalidRequest
        );
        assert_eq!(
            apply(ApplyError::UnknownBroker { broker_id: 3 }),
            ResponseError::StaleBrokerEpoch
        );
        let exists = BrokerError::Propose(ProposeError::Apply(ApplyError::TopicAlreadyExists {
            name: "t".into(),
        }));
        assert!(exists.is_topic_already_exists());
        assert!(!BrokerError::TopicDeletionDisabled.is_topic_already_exists());
        assert_eq!(
            BrokerError::ThrottlingQuotaExceeded.code(),
            ResponseError::ThrottlingQuotaExceeded
        );
    }

    #[test]
    fn partition_errors_map_to_the_codes_kafka_puts_in_a_partition_entry() {
        for (e, code) in [
            (
                PartitionError::UnknownTopicOrPartition,
                ResponseError::UnknownTopicOrPartition,
            ),
            (
                PartitionError::UnknownTopicId,
                ResponseError::UnknownTopicId,
            ),
            (
                PartitionError::LeaderNotAvailable,
                ResponseError::LeaderNotAvailable,
            ),
            (
                PartitionError::NotLeaderOrFollower,
                ResponseError::NotLeaderOrFollower,
            ),
            (
                PartitionError::NotEnoughReplicas,
                ResponseError::NotEnoughReplicas,
            ),
            (
                PartitionError::OffsetOutOfRange,
                ResponseError::OffsetOutOfRange,
            ),
            (
                PartitionError::PolicyViolation,
                ResponseError::PolicyViolation,
            ),
            (
                PartitionError::CorruptMessage,
                ResponseError::CorruptMessage,
            ),
            (PartitionError::InvalidRecord, ResponseError::InvalidRecord),
            (
                PartitionError::InvalidRequiredAcks,
                ResponseError::InvalidRequiredAcks,
            ),
            (PartitionError::Offline, ResponseError::KafkaStorageError),
        ] {
            assert_eq!(e.code(), code, "{e:?}");
            assert_eq!(BrokerError::from(e).code(), code, "{e:?}");
        }
        let disk = BrokerError::Storage(StorageError::EmptyAppend);
        assert!(!disk.is_storage_fault());
        assert!(BrokerError::from(PartitionError::Offline).is_storage_fault());
    }

    #[test]
    fn a_full_disk_under_an_append_is_kafka_storage_error() {
        // Kafka answers an append's IOException with KAFKA_STORAGE_ERROR (its log dir then
        // fails); Brook answers the same and keeps serving (test_disk_full.py).
        let full = BrokerError::Storage(StorageError::Io {
            context: "append to segment",
            path: "/data/t-0/00000000000000000000.log".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        });
        assert_eq!(full.code(), ResponseError::KafkaStorageError);
        assert!(full.is_storage_fault());
    }

    #[test]
    fn admin_refusals_carry_kafkas_codes_and_messages() {
        let unknown = BrokerError::UnknownTopic { name: "t".into() };
        assert_eq!(unknown.code(), ResponseError::UnknownTopicOrPartition);
        assert_eq!(unknown.to_string(), "topic t does not exist");
        let shrink = BrokerError::PartitionsNotIncreased {
            current: 3,
            requested: 2,
        };
        assert_eq!(shrink.code(), ResponseError::InvalidPartitions);
        assert_eq!(
            shrink.to_string(),
            "topic currently has 3 partitions, 2 would not be an increase"
        );
        assert_eq!(
            BrokerError::UnsupportedVersion.code(),
            ResponseError::UnsupportedVersion
        );
        for (e, code, message) in [
            (
                ResourceError::NotThisBroker("7".into()),
                ResponseError::InvalidRequest,
                "broker 7 is not this broker",
            ),
            (
                ResourceError::UnsupportedResourceType(9),
                ResponseError::InvalidRequest,
                "unsupported resource type 9",
            ),
            (
                ResourceError::DuplicateConfigKeys,
                ResponseError::InvalidRequest,
                "Error due to duplicate config keys",
            ),
            (
                ResourceError::UnknownOperation(7),
                ResponseError::InvalidRequest,
                "Unknown operations type 7",
            ),
            (
                ResourceError::from(unknown),
                ResponseError::UnknownTopicOrPartition,
                "topic t does not exist",
            ),
        ] {
            assert_eq!(e.code(), code, "{e:?}");
            assert_eq!(e.to_string(), message);
        }
        let read_only = ConfigError::ReadOnly {
            key: "num.partitions".into(),
        };
        assert_eq!(
            ResourceError::from(read_only).code(),
            ResponseError::InvalidRequest
        );
        let stored = ConfigError::ReadOnly {
            key: "num.partitions".into(),
        };
        assert_eq!(
            ResourceError::Undescribable(stored).code(),
            ResponseError::InvalidConfig
        );
    }

    #[test]
    fn election_and_lookup_refusals_use_kafkas_default_messages() {
        for (e, code, message) in [
            (
                ElectionError::UnknownTopicOrPartition,
                ResponseError::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            ),
            (
                ElectionError::Refused(ElectionRefusal::ElectionNotNeeded),
                ResponseError::ElectionNotNeeded,
                "Leader election not needed for topic partition.",
            ),
            (
                ElectionError::Refused(ElectionRefusal::PreferredLeaderNotAvailable),
                ResponseError::PreferredLeaderNotAvailable,
                "The preferred leader was not available.",
            ),
            (
                ElectionError::Refused(ElectionRefusal::EligibleLeadersNotAvailable),
                ResponseError::EligibleLeadersNotAvailable,
                "Eligible topic partition leaders are not available.",
            ),
        ] {
            assert_eq!(e.code(), code);
            assert_eq!(e.to_string(), message);
        }
        assert_eq!(
            ElectionError::UnknownElectionType(5).code(),
            ResponseError::InvalidRequest
        );
        let busy = CoordinatorLookupError::NotAvailable;
        assert_eq!(busy.code(), ResponseError::CoordinatorNotAvailable);
        assert_eq!(busy.to_string(), "The coordinator is not available.");
        let key = CoordinatorLookupError::UnknownKeyType;
        assert_eq!(key.code(), ResponseError::InvalidRequest);
        assert_eq!(key.to_string(), "Unknown coordinator key type.");
    }

    #[test]
    fn a_refused_fetch_session_gets_kip_227s_codes() {
        assert_eq!(
            FetchSessionError::NotFound.code(),
            ResponseError::FetchSessionIdNotFound
        );
        assert_eq!(
            FetchSessionError::InvalidEpoch.code(),
            ResponseError::InvalidFetchSessionEpoch
        );
        assert_eq!(
            FetchSessionError::TopicIdMismatch.code(),
            ResponseError::FetchSessionTopicIdError
        );
    }

    #[test]
    fn group_answers_outside_failures_have_their_codes() {
        assert_eq!(
            GroupError::MemberIdRequired.code(),
            ResponseError::MemberIdRequired
        );
        assert_eq!(
            GroupError::UnstableOffsetCommit.code(),
            ResponseError::UnstableOffsetCommit
        );
        assert_eq!(
            GroupError::OffsetMetadataTooLarge(5000).code(),
            ResponseError::OffsetMetadataTooLarge
        );
        assert_eq!(
            GroupError::GroupIdNotFound.code(),
            ResponseError::GroupIdNotFound
        );
    }

    #[test]
    fn a_coordinators_wire_answer_reads_back_as_the_error_it_came_from() {
        assert_eq!(TxnError::from_code(0), None);
        for e in TxnError::ON_THE_WIRE {
            assert_eq!(TxnError::from_code(e.code().code()), Some(e.clone()));
        }
        assert_eq!(
            TxnError::NotInTransaction.code(),
            ResponseError::TransactionAbortable
        );
        let other = ResponseError::ClusterAuthorizationFailed.code();
        assert_eq!(TxnError::from_code(other), Some(TxnError::Remote(other)));
        assert_eq!(
            TxnError::Remote(other).code(),
            ResponseError::ClusterAuthorizationFailed
        );
        assert_eq!(
            TxnError::Remote(-1).code(),
            ResponseError::UnknownServerError
        );
    }
}
