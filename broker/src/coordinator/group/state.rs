//! One classic group's state machine, after Kafka's `ClassicGroup` and the classic
//! paths of `GroupMetadataManager`: Empty → PreparingRebalance → CompletingRebalance →
//! Stable (→ PreparingRebalance again), Dead once deleted.
//!
//! Pure logic: time is passed in, parked requests are oneshot senders completed here.
//! Invariants: `generation_id` only grows; `leader` is a member while the group has
//! members; every member with a `group_instance_id` is in `static_members`; a member in
//! `pending_members` (KIP-394) is not yet in `members`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::types::*;

pub struct Group {
    pub group_id: String,
    pub state: GroupState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// group.instance.id → member id (KIP-345).
    pub static_members: HashMap<String, String>,
    /// Ids handed out with MEMBER_ID_REQUIRED, and until when they may join.
    pub pending_members: HashMap<String, Instant>,
    /// When the current PreparingRebalance phase completes at the latest.
    pub rebalance_deadline: Option<Instant>,
    /// The first rebalance of an Empty group waits `group.initial.rebalance.delay.ms`
    /// for more members instead of completing as soon as everyone known has joined.
    initial_delay: bool,
    /// Set when the persisted form changed; the coordinator writes it and clears it.
    pub dirty: bool,
    /// When the group last became Empty (wall clock, ms), kept by the coordinator:
    /// offsets retention counts from it (KIP-211). `None` while it has members.
    pub empty_since_ms: Option<i64>,
}

impl Group {
    pub fn new(group_id: &str) -> Group {
        Group {
            group_id: group_id.to_owned(),
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            rebalance_deadline: None,
            initial_delay: false,
            dirty: false,
            empty_since_ms: None,
        }
    }

    /// Kafka's member id shape: `<client id>-<uuid>`, or the instance id for static members.
    fn new_member_id(&self, req: &JoinRequest) -> String {
        let prefix = req.group_instance_id.as_deref().unwrap_or(&req.client_id);
        format!("{prefix}-{}", uuid::Uuid::new_v4())
    }

    /// JoinGroup, given a request already checked for group id and session bounds.
    pub fn join(&mut self, req: JoinRequest, now: Instant, initial_delay: Duration) -> JoinReply {
        if self.state == GroupState::Dead {
            return JoinReply::Done(Err(GroupError::CoordinatorNotAvailable));
        }
        if !self.protocols_compatible(&req) {
            return JoinReply::Done(Err(GroupError::InconsistentGroupProtocol));
        }
        if req.member_id.is_empty() {
            self.join_unknown_member(req, now, initial_delay)
        } else {
            self.join_known_member(req, now, initial_delay)
        }
    }

    fn protocols_compatible(&self, req: &JoinRequest) -> bool {
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        // The group's type must match and some protocol must stay common to everyone
        // (the member's own previous entry does not count: it is being replaced).
        self.protocol_type.as_deref() == Some(req.protocol_type.as_str())
            && req.protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .filter(|m| m.member_id != req.member_id)
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
    }

    fn join_unknown_member(
        &mut self,
        req: JoinRequest,
        now: Instant,
        initial_delay: Duration,
    ) -> JoinReply {
        let member_id = self.new_member_id(&req);
        if let Some(instance_id) = req.group_instance_id.clone() {
            if let Some(old_id) = self.static_members.get(&instance_id).cloned() {
                return self.replace_static_member(req, old_id, member_id, now, initial_delay);
            }
        } else if req.require_known_member_id {
            let expiry = now + Duration::from_millis(millis(req.session_timeout_ms));
            self.pending_members.insert(member_id.clone(), expiry);
            return JoinReply::MemberIdRequired(member_id);
        }
        self.add_member_and_rebalance(req, member_id, now, initial_delay)
    }

    fn join_known_member(
        &mut self,
        req: JoinRequest,
        now: Instant,
        initial_delay: Duration,
    ) -> JoinReply {
        if let Some(err) = self.fenced(&req.member_id, req.group_instance_id.as_deref()) {
            return JoinReply::Done(Err(err));
        }
        if !self.members.contains_key(&req.member_id) {
            if self.pending_members.remove(&req.member_id).is_some() {
                let member_id = req.member_id.clone();
                return self.add_member_and_rebalance(req, member_id, now, initial_delay);
            }
            return JoinReply::Done(Err(GroupError::UnknownMemberId));
        }
        let member_id = req.member_id.clone();
        let unchanged = self
            .members
            .get(&member_id)
            .is_some_and(|m| m.same_protocols(&req.protocols));
        match self.state {
            GroupState::PreparingRebalance => {
                let reply = self.park_join(req, now);
                self.maybe_complete_join(now);
                reply
            }
            GroupState::CompletingRebalance if unchanged => {
                // A resend of the join that just completed: answer it again.
                JoinReply::Done(Ok(self.join_result(&member_id)))
            }
            GroupState::Stable if unchanged && self.leader.as_ref() != Some(&member_id) => {
                JoinReply::Done(Ok(self.join_result(&member_id)))
            }
            _ => {
                let reply = self.park_join(req, now);
                self.prepare_rebalance(now, initial_delay);
                self.maybe_complete_join(now);
                reply
            }
        }
    }

    /// KIP-345: a known instance rejoining with a fresh member id takes over the old
    /// member and its assignment. As in Kafka, its protocols are updated and a Stable group
    /// rebalances only if that changes the protocol the group would select: the subscription
    /// bytes may differ (a restarted consumer no longer lists the partitions it owned), and
    /// that alone must not cost the group a rebalance.
    fn replace_static_member(
        &mut self,
        req: JoinRequest,
        old_id: String,
        new_id: String,
        now: Instant,
        initial_delay: Duration,
    ) -> JoinReply {
        let Some(mut member) = self.members.remove(&old_id) else {
            return self.add_member_and_rebalance(req, new_id, now, initial_delay);
        };
        // The old incarnation's parked requests learn they were fenced.
        if let Some(w) = member.join_waiter.take() {
            let _ = w.send(Err(GroupError::FencedInstanceId {
                instance_id: req.group_instance_id.clone().unwrap_or_default(),
            }));
        }
        if let Some(w) = member.sync_waiter.take() {
            let _ = w.send(Err(GroupError::FencedInstanceId {
                instance_id: req.group_instance_id.clone().unwrap_or_default(),
            }));
        }
        member.member_id = new_id.clone();
        member.last_heartbeat = now;
        member.protocols = req.protocols.clone();
        member.session_timeout_ms = req.session_timeout_ms;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        let previous_leader = self.leader.clone().unwrap_or_default();
        let was_leader = previous_leader == old_id;
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        if let Some(instance_id) = &req.group_instance_id {
            self.static_members
                .insert(instance_id.clone(), new_id.clone());
        }
        self.members.insert(new_id.clone(), member);
        self.dirty = true;
        match self.state {
            GroupState::Stable if self.select_protocol() == self.protocol_name => {
                let mut result = self.join_result(&new_id);
                if was_leader && req.supports_skip_assignment {
                    // KIP-814: the leader learns the members but keeps the assignment.
                    result.skip_assignment = true;
                    result.members = self.member_metadata();
                } else if was_leader {
                    // Before JoinGroup v9 the old leader id is returned, so the rejoined
                    // leader does not see itself as leader and computes no new assignment.
                    result.leader = previous_leader;
                }
                JoinReply::Done(Ok(result))
            }
            GroupState::PreparingRebalance => {
                let mut req = req;
                req.member_id = new_id;
                let reply = self.park_join(req, now);
                self.maybe_complete_join(now);
                reply
            }
            // A Stable group whose protocol would change, or a group completing a rebalance
            // (the leader may be assigning partitions to the replaced member id): rebalance.
            _ => {
                let mut req = req;
                req.member_id = new_id;
                let reply = self.park_join(req, now);
                self.prepare_rebalance(now, initial_delay);
                self.maybe_complete_join(now);
                reply
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        mut req: JoinRequest,
        member_id: String,
        now: Instant,
        initial_delay: Duration,
    ) -> JoinReply {
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance_id) = &req.group_instance_id {
            self.static_members
                .insert(instance_id.clone(), member_id.clone());
        }
        self.members
            .insert(member_id.clone(), Member::new(&req, member_id.clone(), now));
        req.member_id = member_id;
        let reply = self.park_join(req, now);
        self.prepare_rebalance(now, initial_delay);
        self.maybe_complete_join(now);
        reply
    }

    /// Records the member's (possibly new) protocols and parks its JoinGroup.
    fn park_join(&mut self, req: JoinRequest, now: Instant) -> JoinReply {
        let Some(member) = self.members.get_mut(&req.member_id) else {
            return JoinReply::Done(Err(GroupError::UnknownMemberId));
        };
        member.protocols = req.protocols;
        member.session_timeout_ms = req.session_timeout_ms;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.client_id = req.client_id;
        member.last_heartbeat = now;
        let (tx, rx) = oneshot::channel();
        // A retried join (e.g. from a new connection) supersedes the parked one.
        if let Some(old) = member.join_waiter.replace(tx) {
            let _ = old.send(Err(GroupError::RebalanceInProgress));
        }
        JoinReply::Wait(rx)
    }

    /// Enters PreparingRebalance: pending syncs fail with REBALANCE_IN_PROGRESS and the
    /// phase ends at the longest rebalance timeout (or the initial delay for a new group).
    pub fn prepare_rebalance(&mut self, now: Instant, initial_delay: Duration) {
        if self.state == GroupState::PreparingRebalance {
            return;
        }
        if self.state == GroupState::CompletingRebalance {
            for member in self.members.values_mut() {
                member.assignment = Bytes::new();
                if let Some(w) = member.sync_waiter.take() {
                    let _ = w.send(Err(GroupError::RebalanceInProgress));
                }
            }
        }
        let rebalance_timeout = self
            .members
            .values()
            .map(|m| millis(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0);
        self.initial_delay = self.state == GroupState::Empty && !initial_delay.is_zero();
        let wait = if self.initial_delay {
            initial_delay.min(Duration::from_millis(rebalance_timeout))
        } else {
            Duration::from_millis(rebalance_timeout)
        };
        self.rebalance_deadline = Some(now + wait);
        self.state = GroupState::PreparingRebalance;
    }

    /// Completes the join phase when every member has rejoined (not during the initial
    /// delay) or the deadline passed: members that did not rejoin are dropped, the
    /// generation advances, a protocol is chosen and every parked join is answered.
    pub fn maybe_complete_join(&mut self, now: Instant) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let deadline_passed = self.rebalance_deadline.is_some_and(|d| now >= d);
        let all_joined = self.members.values().all(|m| m.join_waiter.is_some());
        if !(deadline_passed || (all_joined && !self.initial_delay)) {
            return;
        }
        // Dynamic members that did not rejoin in time leave; static ones keep their seat
        // until their session expires (KIP-345).
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            self.remove_member(&id);
        }
        self.rebalance_deadline = None;
        self.initial_delay = false;
        self.generation_id += 1;
        self.dirty = true;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.leader = None;
            return;
        }
        self.protocol_name = self.select_protocol();
        self.state = GroupState::CompletingRebalance;
        tracing::info!(
            group = %self.group_id,
            generation_id = self.generation_id,
            members = self.members.len(),
            "group rebalanced"
        );
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let mut result = self.join_result(&id);
            if self.leader.as_ref() == Some(&id) {
                result.members = self.member_metadata();
            }
            if let Some(member) = self.members.get_mut(&id) {
                member.last_heartbeat = now;
                if let Some(w) = member.join_waiter.take() {
                    let _ = w.send(Ok(result));
                }
            }
        }
    }

    pub fn join_result(&self, member_id: &str) -> JoinResult {
        JoinResult {
            member_id: member_id.to_owned(),
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }

    /// KIP-345 fencing: a static instance's id must match the member id presented.
    pub fn fenced(&self, member_id: &str, instance_id: Option<&str>) -> Option<GroupError> {
        let instance_id = instance_id?;
        match self.static_members.get(instance_id) {
            Some(current) if current != member_id => Some(GroupError::FencedInstanceId {
                instance_id: instance_id.to_owned(),
            }),
            _ => None,
        }
    }

    /// Drops a member, failing its parked requests, and clears it from the static map.
    pub fn remove_member(&mut self, member_id: &str) {
        if let Some(mut member) = self.members.remove(member_id) {
            if let Some(w) = member.join_waiter.take() {
                let _ = w.send(Err(GroupError::UnknownMemberId));
            }
            if let Some(w) = member.sync_waiter.take() {
                let _ = w.send(Err(GroupError::UnknownMemberId));
            }
            if let Some(instance_id) = &member.group_instance_id {
                if self.static_members.get(instance_id).map(String::as_str) == Some(member_id) {
                    self.static_members.remove(instance_id);
                }
            }
            self.dirty = true;
        }
    }
}

pub(super) fn millis(ms: i32) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}
