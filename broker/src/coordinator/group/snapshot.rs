//! The persisted form of a group's metadata (Kafka's `GroupMetadataValue`): protocol
//! type and name, generation, leader and members with their instance id, the metadata
//! of the chosen protocol and their assignment. JSON with a version field, stored by the
//! offset store as opaque bytes. Pure: no I/O.
//!
//! On load the group comes back with its last generation; its members' sessions restart
//! at load time, so members that never come back expire and the group rebalances.

use std::time::Instant;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::state::Group;
use super::types::{GroupState, Member};

/// Bumped on an incompatible change; an unknown version is refused, not guessed at.
pub const SNAPSHOT_VERSION: u16 = 1;

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupSnapshot {
    pub version: u16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation_id: i32,
    pub leader: Option<String>,
    pub members: Vec<MemberSnapshot>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemberSnapshot {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub metadata: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// Why stored group metadata could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("group metadata is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("group metadata version {0} is unknown")]
    UnknownVersion(u16),
}

/// Serialises what a restart needs. A group mid-rebalance is stored as it last was
/// stable: members without assignments simply rejoin.
pub fn encode(group: &Group) -> Result<Vec<u8>, serde_json::Error> {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let snapshot = GroupSnapshot {
        version: SNAPSHOT_VERSION,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        generation_id: group.generation_id,
        leader: group.leader.clone(),
        members: group
            .members
            .values()
            .map(|m| MemberSnapshot {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                metadata: m.metadata(&protocol).to_vec(),
                assignment: m.assignment.to_vec(),
            })
            .collect(),
    };
    serde_json::to_vec(&snapshot)
}

/// Rebuilds a group from its stored form: Stable with its members, or Empty.
pub fn decode(group_id: &str, bytes: &[u8], now: Instant) -> Result<Group, SnapshotError> {
    let snapshot: GroupSnapshot = serde_json::from_slice(bytes)?;
    if snapshot.version != SNAPSHOT_VERSION {
        return Err(SnapshotError::UnknownVersion(snapshot.version));
    }
    let mut group = Group::new(group_id);
    group.generation_id = snapshot.generation_id;
    group.protocol_type = snapshot.protocol_type;
    group.protocol_name = snapshot.protocol_name.clone();
    let protocol = snapshot.protocol_name.unwrap_or_default();
    for m in snapshot.members {
        if let Some(instance_id) = &m.group_instance_id {
            group
                .static_members
                .insert(instance_id.clone(), m.member_id.clone());
        }
        let member = Member {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            session_timeout_ms: m.session_timeout_ms,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocols: vec![(protocol.clone(), Bytes::from(m.metadata))],
            assignment: Bytes::from(m.assignment),
            last_heartbeat: now,
            join_waiter: None,
            sync_waiter: None,
        };
        group.members.insert(m.member_id, member);
    }
    if group.members.is_empty() {
        group.state = GroupState::Empty;
        group.leader = None;
    } else {
        group.state = GroupState::Stable;
        group.leader = snapshot
            .leader
            .filter(|l| group.members.contains_key(l))
            .or_else(|| group.members.keys().next().cloned());
    }
    Ok(group)
}
