//! The persisted form of a group's metadata: Kafka's `GroupMetadataValue` v3 (protocol
//! type, generation, protocol, leader, current-state timestamp, members with instance
//! id, client id/host, rebalance and session timeouts, the chosen protocol's
//! subscription and the assignment), the value of the group's `GroupMetadataKey` record
//! in `__consumer_offsets`; the offset store keeps the same bytes. Pure: no I/O.
//!
//! On load the group comes back with its last generation; its members' sessions restart
//! at load time, so members that never come back expire and the group rebalances. The
//! current-state timestamp of an Empty group is when it became empty, which
//! `offsets.retention.minutes` counts from (KIP-211).

use std::time::Instant;

use bytes::Bytes;

use super::records::{Reader, Writer};
use super::state::Group;
use super::types::{GroupState, Member};

/// The `GroupMetadataValue` version written; versions 0-3 are read.
pub const VALUE_VERSION: i16 = 3;

/// Why stored group metadata could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("group metadata is malformed: {0}")]
    Malformed(String),
    #[error("group metadata version {0} is unknown")]
    UnknownVersion(i16),
}

/// Serialises what a restart needs. A group mid-rebalance is stored as it last was
/// stable: members without assignments simply rejoin.
pub fn encode(group: &Group) -> Result<Vec<u8>, SnapshotError> {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let mut w = Writer::default();
    w.i16(VALUE_VERSION)
        .string(group.protocol_type.as_deref().unwrap_or_default())
        .i32(group.generation_id)
        .nullable_string(group.protocol_name.as_deref())
        .nullable_string(group.leader.as_deref())
        .i64(group.empty_since_ms.unwrap_or(-1))
        .i32(i32::try_from(group.members.len()).unwrap_or(i32::MAX));
    for m in group.members.values() {
        w.string(&m.member_id)
            .nullable_string(m.group_instance_id.as_deref())
            .string(&m.client_id)
            .string(&m.client_host)
            .i32(m.rebalance_timeout_ms)
            .i32(m.session_timeout_ms)
            .bytes(&m.metadata(&protocol))
            .bytes(&m.assignment);
    }
    Ok(w.0)
}

/// Rebuilds a group from its stored form: Stable with its members, or Empty.
pub fn decode(group_id: &str, bytes: &[u8], now: Instant) -> Result<Group, SnapshotError> {
    let mut r = Reader(bytes);
    let bad = SnapshotError::Malformed;
    let version = r.i16("version").map_err(bad)?;
    if !(0..=VALUE_VERSION).contains(&version) {
        return Err(SnapshotError::UnknownVersion(version));
    }
    let protocol_type = r.string("protocol type").map_err(bad)?;
    let mut group = Group::new(group_id);
    group.generation_id = r.i32("generation").map_err(bad)?;
    group.protocol_type = Some(protocol_type).filter(|t| !t.is_empty());
    group.protocol_name = r.nullable_string("protocol").map_err(bad)?;
    let leader = r.nullable_string("leader").map_err(bad)?;
    let state_timestamp = if version >= 2 {
        r.i64("current state timestamp").map_err(bad)?
    } else {
        -1
    };
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let count = r.i32("members").map_err(bad)?;
    for _ in 0..count.max(0) {
        let member_id = r.string("member id").map_err(bad)?;
        let group_instance_id = if version >= 3 {
            r.nullable_string("group instance id").map_err(bad)?
        } else {
            None
        };
        let client_id = r.string("client id").map_err(bad)?;
        let client_host = r.string("client host").map_err(bad)?;
        let rebalance_timeout_ms = if version >= 1 {
            r.i32("rebalance timeout").map_err(bad)?
        } else {
            -1
        };
        let session_timeout_ms = r.i32("session timeout").map_err(bad)?;
        let metadata = r.bytes("subscription").map_err(bad)?;
        let assignment = r.bytes("assignment").map_err(bad)?;
        if let Some(instance_id) = &group_instance_id {
            group
                .static_members
                .insert(instance_id.clone(), member_id.clone());
        }
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms: if rebalance_timeout_ms < 0 {
                session_timeout_ms
            } else {
                rebalance_timeout_ms
            },
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocols: vec![(protocol.clone(), Bytes::from(metadata))],
            assignment: Bytes::from(assignment),
            last_heartbeat: now,
            join_waiter: None,
            sync_waiter: None,
        };
        group.members.insert(member_id, member);
    }
    if group.members.is_empty() {
        group.state = GroupState::Empty;
        group.leader = None;
        group.empty_since_ms = Some(state_timestamp).filter(|t| *t >= 0);
    } else {
        group.state = GroupState::Stable;
        group.leader = leader
            .filter(|l| group.members.contains_key(l))
            .or_else(|| group.members.keys().next().cloned());
    }
    Ok(group)
}
