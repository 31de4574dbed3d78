//! The vocabulary of the classic group protocol: states, members, the errors a group
//! operation can end in, and what a parked JoinGroup/SyncGroup is eventually told.
//! No I/O; the waiters are tokio oneshot senders, completed under the group lock.

use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::coordinator::consumer_group::assignor::TopicMeta;

/// Kafka's `ClassicGroupState`, spelled as `ListGroups`/`DescribeGroups` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

pub use crate::error::GroupError;

/// A member's view of a completed join (the JoinGroup response body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    pub member_id: String,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    /// Only the leader gets them: (member id, instance id, metadata of the chosen protocol).
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// KIP-814: a rejoining static leader keeps the existing assignment.
    pub skip_assignment: bool,
}

/// What a JoinGroup call gets: now, later (parked), or an error carrying a member id
/// (KIP-394's `MEMBER_ID_REQUIRED`).
#[derive(Debug)]
pub enum JoinReply {
    Done(Result<JoinResult, GroupError>),
    MemberIdRequired(String),
    Wait(oneshot::Receiver<Result<JoinResult, GroupError>>),
}

/// What a SyncGroup call gets: its assignment now or later.
#[derive(Debug)]
pub enum SyncReply {
    Done(Result<SyncResult, GroupError>),
    Wait(oneshot::Receiver<Result<SyncResult, GroupError>>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResult {
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// The JoinGroup arguments the state machine needs.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: an unknown member must first be given an id (KIP-394).
    pub require_known_member_id: bool,
    /// v9+: a static leader rejoining may skip the assignment (KIP-814).
    pub supports_skip_assignment: bool,
    /// The cluster's topics, for a member joining a consumer group (KIP-848 migration):
    /// the coordinator assigns it and resolves the partitions it owns. `None` when the
    /// handler saw no consumer group of that id.
    pub topics: Option<std::sync::Arc<std::collections::BTreeMap<String, TopicMeta>>>,
}

/// One member of a classic group.
#[derive(Debug)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_heartbeat: Instant,
    pub join_waiter: Option<oneshot::Sender<Result<JoinResult, GroupError>>>,
    pub sync_waiter: Option<oneshot::Sender<Result<SyncResult, GroupError>>>,
}

impl Member {
    pub fn new(req: &JoinRequest, member_id: String, now: Instant) -> Member {
        Member {
            member_id,
            group_instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment: Bytes::new(),
            last_heartbeat: now,
            join_waiter: None,
            sync_waiter: None,
        }
    }

    /// The metadata this member sent for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// Parked members are alive by definition: Kafka does not expire a member whose
    /// JoinGroup or SyncGroup is in flight.
    pub fn is_parked(&self) -> bool {
        self.join_waiter.is_some() || self.sync_waiter.is_some()
    }
}
