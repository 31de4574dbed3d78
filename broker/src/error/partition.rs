//! Why one partition's entry of a response is refused, when no richer error says so:
//! `crate::error::partition_code` turns each into its Kafka code. Handlers put the code
//! in that partition's entry (Kafka answers per partition, never failing the request).

/// A refusal for one partition (or one topic's entry, where the API answers per topic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// The topic or the partition is not in the metadata image.
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// A topic id the metadata image does not know.
    #[error("unknown topic id")]
    UnknownTopicId,
    /// The partition has no leader right now (an election is pending).
    #[error("the partition has no leader")]
    LeaderNotAvailable,
    /// This broker does not lead the partition.
    #[error("this broker does not lead the partition")]
    NotLeaderOrFollower,
    /// Fewer in-sync replicas than `min.insync.replicas` (or a coordinator that cannot
    /// answer a produce now: clients retry without a metadata refresh).
    #[error("not enough in-sync replicas")]
    NotEnoughReplicas,
    /// An offset outside `[log start, high watermark]`.
    #[error("offset out of range")]
    OffsetOutOfRange,
    /// DeleteRecords on a topic whose `cleanup.policy` does not include `delete`.
    #[error("the topic's cleanup policy does not allow deleting records")]
    PolicyViolation,
    /// A batch whose header or records do not parse.
    #[error("corrupt record batch")]
    CorruptMessage,
    /// A well-formed record the log refuses (a compacted topic's record without a key).
    #[error("invalid record")]
    InvalidRecord,
    /// Produce `acks` other than -1, 0 or 1.
    #[error("invalid required acks")]
    InvalidRequiredAcks,
    /// The partition's log cannot be read or written on this broker.
    #[error("the partition's log is offline")]
    Offline,
}
