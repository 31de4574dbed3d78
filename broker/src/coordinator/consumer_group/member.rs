//! A member of a KIP-848 consumer group: what it subscribes to, its epochs, and the
//! partitions it owns (`assigned`) or must give up (`pending_revocation`), the fields of
//! Kafka's `ConsumerGroupMember`. No I/O, no locking: the group owns its members.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use uuid::Uuid;

/// Partitions by topic id, as the protocol and Kafka's records carry them.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Kafka's `MemberState`, named as ConsumerGroupDescribe and the records spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Owns exactly its target assignment at the assignment epoch.
    Stable,
    /// Must revoke `pending_revocation` before it moves to a newer epoch.
    UnrevokedPartitions,
    /// Waits for partitions that other members have not released yet.
    UnreleasedPartitions,
}

/// `member_epoch` of a static member that left temporarily (KIP-848's -2): it keeps its
/// assignment until its session times out or its instance id rejoins.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;
/// `member_epoch` of a member leaving for good.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    /// A pattern over topic names the coordinator resolves (KIP-848; `None`: none).
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
    /// The member epoch at which each partition it holds (assigned or pending
    /// revocation) was given to it: a commit with an older member epoch is still valid
    /// for a partition held since then (Kafka 4.4's assignment epochs).
    pub assignment_epochs: BTreeMap<(Uuid, i32), i32>,
    /// When the session ends without another heartbeat.
    pub session_deadline: Instant,
    /// When a member still holding partitions to revoke is fenced (its rebalance timeout).
    pub revocation_deadline: Option<Instant>,
    /// Set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)
    /// inside this consumer group (KIP-848's online migration).
    pub classic: Option<ClassicMember>,
}

/// What a classic-protocol member of a consumer group keeps besides a consumer member's
/// fields: Kafka's `ClassicMemberMetadata` (persisted in the member's record) and the
/// deadline of the JoinGroup or SyncGroup it owes (Kafka's join and sync timeouts: a
/// member told to rejoin, or given a generation, that does not come back within its
/// rebalance timeout is fenced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMember {
    pub session_timeout_ms: i32,
    /// (name, metadata) as the member listed them in its JoinGroup, in its order.
    pub protocols: Vec<(String, bytes::Bytes)>,
    pub rebalance_deadline: Option<Instant>,
}

impl ClassicMember {
    /// The protocol the member prefers: the one its JoinGroup answer names.
    pub fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |(n, _)| n.as_str())
    }
}

impl ConsumerMember {
    pub fn new(member_id: String, now: Instant) -> ConsumerMember {
        ConsumerMember {
            member_id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            rebalance_timeout_ms: 0,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            assignment_epochs: BTreeMap::new(),
            session_deadline: now,
            revocation_deadline: None,
            classic: None,
        }
    }

    /// Keeps the assignment epoch of every partition still held from `previous`, and
    /// gives those newly held the member's current epoch.
    pub fn carry_assignment_epochs(&mut self, previous: &BTreeMap<(Uuid, i32), i32>) {
        let epoch = self.member_epoch;
        let mut epochs = BTreeMap::new();
        for a in [&self.assigned, &self.pending_revocation] {
            for (topic, partitions) in a {
                for p in partitions {
                    let at = previous.get(&(*topic, *p)).copied().unwrap_or(epoch);
                    epochs.insert((*topic, *p), at);
                }
            }
        }
        self.assignment_epochs = epochs;
    }

    /// Every partition this member still holds: assigned or not yet revoked.
    pub fn holds(&self, topic_id: &Uuid, partition: i32) -> bool {
        let has = |a: &Assignment| a.get(topic_id).is_some_and(|p| p.contains(&partition));
        has(&self.assigned) || has(&self.pending_revocation)
    }
}

/// The number of partitions in `a`.
pub fn partition_count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// `a` without empty topic entries, so two equal assignments compare equal.
pub fn normalized(mut a: Assignment) -> Assignment {
    a.retain(|_, p| !p.is_empty());
    a
}
