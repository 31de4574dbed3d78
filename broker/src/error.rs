//! `BrokerError` and THE single mapping from internal errors to Kafka error codes.
//! Handlers put the code in the failing partition's (or resource's) entry; only errors
//! that make a response impossible close the connection.

use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::{ApplyError, ProposeError};
use brook_storage::StorageError;

use crate::config::ConfigError;
use crate::coordinator::group::GroupError;
use crate::coordinator::txn::TxnError;
use crate::replication::acks::NotReplicated;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("no handler for request {0}")]
    NoHandler(String),
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
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("topic deletion is disabled (delete.topic.enable=false)")]
    TopicDeletionDisabled,
    #[error("replication factor {requested} is invalid with {brokers} broker(s)")]
    InvalidReplicationFactor { requested: i16, brokers: usize },
    #[error(transparent)]
    Group(#[from] GroupError),
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
}

impl BrokerError {
    /// The Kafka error code a client gets for this error.
    pub fn code(&self) -> ResponseError {
        match self {
            BrokerError::NoHandler(_) => ResponseError::UnsupportedVersion,
            BrokerError::Storage(e) => storage_code(e),
            BrokerError::Propose(ProposeError::Apply(e)) => apply_code(e),
            BrokerError::Propose(ProposeError::NotLeader { .. }) => ResponseError::NotController,
            BrokerError::Propose(_) => ResponseError::RequestTimedOut,
            BrokerError::Config(e) => config_code(e),
            BrokerError::InvalidTopic { .. } => ResponseError::InvalidTopicException,
            BrokerError::UnknownTopicOrPartition { .. } => ResponseError::UnknownTopicOrPartition,
            BrokerError::InvalidRequest(_) => ResponseError::InvalidRequest,
            BrokerError::TopicDeletionDisabled => ResponseError::TopicDeletionDisabled,
            BrokerError::InvalidReplicationFactor { .. } => ResponseError::InvalidReplicationFactor,
            BrokerError::Group(e) => group_code(e),
            BrokerError::NotLeaderOrFollower { .. } => ResponseError::NotLeaderOrFollower,
            BrokerError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
            BrokerError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
            BrokerError::NotCoordinator { .. } => ResponseError::NotCoordinator,
            BrokerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
            BrokerError::Txn(e) => txn_code(e),
            BrokerError::NotReplicated(e) => e.code(),
            BrokerError::SecurityDisabled(_) => ResponseError::SecurityDisabled,
        }
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
        | ConfigError::UnknownBrokerKey { .. }
        | ConfigError::BadListOperation { .. }
        | ConfigError::Unsupported { .. }
        | ConfigError::Missing { .. }
        | ConfigError::Contradiction { .. }
        | ConfigError::BadOverride { .. }
        | ConfigError::Io { .. } => ResponseError::InvalidConfig,
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

/// The classic group protocol's codes (Kafka's `GroupCoordinator` error choices).
pub fn group_code(e: &GroupError) -> ResponseError {
    match e {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration { .. } => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::FencedInstanceId { .. } => ResponseError::FencedInstanceId,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout(_) => ResponseError::InvalidSessionTimeout,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge(_) => ResponseError::OffsetMetadataTooLarge,
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
        #[allow(unreachable_patterns)]
        _ => ResponseError::InvalidRequest,
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
}
