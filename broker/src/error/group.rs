//! The classic group protocol's errors; `crate::error` maps each to its Kafka code.
//! Defined here, beside the map, so the error module depends on no coordinator type
//! (the coordinator re-exports it from `coordinator::group`).

/// Why a group operation failed; `crate::error::group_code` maps each to its Kafka code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("generation {given} is not the group's {current}")]
    IllegalGeneration { given: i32, current: i32 },
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    #[error("static member {instance_id} has been fenced by a newer member id")]
    FencedInstanceId { instance_id: String },
    #[error("protocol type or protocols inconsistent with the group")]
    InconsistentGroupProtocol,
    #[error("session timeout {0} ms outside the broker's bounds")]
    InvalidSessionTimeout(i32),
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    /// The group's `__consumer_offsets` partition is led by another broker.
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    #[error("group not found")]
    GroupIdNotFound,
    /// A KIP-848 request for a group id this coordinator does not have, with Kafka's
    /// message (`Consumer group <g> not found.` for a heartbeat, `Group <g> not found.` for
    /// a leave); GROUP_ID_NOT_FOUND.
    #[error("{0}")]
    GroupNotFound(String),
    /// The group's `__consumer_offsets` partition is led here but its groups are not all
    /// in memory yet (Kafka's message).
    #[error("The coordinator is loading and hence can't process requests.")]
    CoordinatorLoadInProgress,
    #[error("the group still has members")]
    NonEmptyGroup,
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("offset metadata of {0} bytes is too large")]
    OffsetMetadataTooLarge(usize),
    /// KIP-394: a first JoinGroup is answered with a member id to rejoin with.
    #[error("a member id is required to join the group")]
    MemberIdRequired,
    /// KIP-447: a partition's offset is pending in an open transaction.
    #[error("an offset commit of an open transaction is pending")]
    UnstableOffsetCommit,
    // KIP-848 consumer groups; the messages are Kafka's (GroupMetadataManager).
    #[error("The consumer group member has a {relation} member epoch ({given}) than the one known by the group coordinator ({current}). The member must abandon all its partitions and rejoin.")]
    FencedMemberEpoch {
        relation: &'static str,
        given: i32,
        current: i32,
    },
    /// OffsetCommit/OffsetFetch v9+ with an epoch older than the member's.
    #[error("The received member epoch {given} is older than the current member epoch {current}.")]
    StaleMemberEpoch { given: i32, current: i32 },
    /// An offset commit refused by Kafka 4.4's per-partition assignment epochs, with its
    /// message (`ConsumerGroup.validateOffsetCommit`).
    #[error("{0}")]
    StaleCommit(String),
    /// A ConsumerGroupHeartbeat from a member the group does not have, with Kafka's message
    /// (`ConsumerGroup.getOrMaybeCreateMember`, `throwIfStaticMemberIsUnknown`).
    #[error("{0}")]
    UnknownMember(String),
    /// A ConsumerGroupHeartbeat with the instance id another member holds now (Kafka's
    /// `throwIfInstanceIdIsFenced`); FENCED_INSTANCE_ID.
    #[error(
        "Static member {member_id} with instance id {instance_id} was fenced by member {owner}."
    )]
    StaticMemberFenced {
        member_id: String,
        instance_id: String,
        owner: String,
    },
    #[error("Static member {member_id} with instance id {instance_id} cannot join the group because the instance id is owned by {owner} member.")]
    UnreleasedInstanceId {
        member_id: String,
        instance_id: String,
        owner: String,
    },
    #[error("ServerAssignor {0} is not supported. Supported assignors: uniform, range.")]
    UnsupportedAssignor(String),
    /// A `SubscribedTopicRegex` that does not compile; `description` is RE2/J's where
    /// Brook knows it (see `coordinator::consumer_group::regex`).
    #[error("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}.")]
    InvalidRegularExpression {
        pattern: String,
        description: String,
    },
    /// A ConsumerGroupHeartbeat that breaks the protocol's rules (Kafka's wording).
    #[error("{0}")]
    InvalidRequest(String),
    /// The group exists with the other protocol (no online migration in Brook yet);
    /// Kafka's message, which differs by direction.
    #[error("{0}")]
    WrongGroupType(String),
    /// A consumer-protocol member committing with OffsetCommit below v9.
    #[error("OffsetCommit version {0} is not supported by members of consumer groups.")]
    UnsupportedVersion(i16),
}
