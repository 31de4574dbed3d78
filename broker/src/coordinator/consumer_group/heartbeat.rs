//! ConsumerGroupHeartbeat on one group (Kafka's `GroupMetadataManager.consumerGroupHeartbeat`):
//! join at epoch 0 with the client's member id (KIP-1082), leave at -1, a static member's
//! temporary leave at -2, and otherwise: check the epoch, take the member's new
//! subscription, bump the group epoch on a change, recompute the target if needed and
//! reconcile the member one step. The request is validated before the group is touched.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::assignor::{TopicMeta, ASSIGNORS};
use super::group::ConsumerGroup;
use super::member::{
    Assignment, ConsumerMember, MemberState, LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use super::reconcile::reconcile;
use super::ConsumerGroupConfig;
use crate::error::GroupError;

/// The request's fields, with topics already resolved to ids.
#[derive(Debug, Clone)]
pub struct HeartbeatRequest {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatReply {
    pub member_id: String,
    pub member_epoch: i32,
    /// Sent when it changed, or to a full request (a join or a retry after an error).
    pub assignment: Option<Assignment>,
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, with its messages.
pub fn validate(req: &HeartbeatRequest, version: i16) -> Result<(), GroupError> {
    let invalid = |m: &str| Err(GroupError::InvalidRequest(m.to_owned()));
    if req.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    // From v1 the client generates its member id (KIP-1082), so it is never empty.
    if req.member_id.is_empty() && (version >= 1 || req.member_epoch != 0) {
        return invalid("MemberId can't be empty.");
    }
    match req.member_epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            // Kafka 4.4 accepts an empty list: a member may subscribe by a pattern alone.
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        LEAVE_GROUP_STATIC_MEMBER_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e > 0 || e == LEAVE_GROUP_MEMBER_EPOCH || e == LEAVE_GROUP_STATIC_MEMBER_EPOCH => {}
        _ => return invalid("MemberEpoch is invalid."),
    }
    if let Some(a) = &req.server_assignor {
        if !ASSIGNORS.contains(&a.as_str()) {
            return Err(GroupError::UnsupportedAssignor(a.clone()));
        }
    }
    Ok(())
}

impl ConsumerGroup {
    pub fn heartbeat(
        &mut self,
        req: &HeartbeatRequest,
        topics: &BTreeMap<String, TopicMeta>,
        cfg: &ConsumerGroupConfig,
        now: Instant,
    ) -> Result<HeartbeatReply, GroupError> {
        match req.member_epoch {
            LEAVE_GROUP_MEMBER_EPOCH => return self.leave(req),
            LEAVE_GROUP_STATIC_MEMBER_EPOCH => return self.leave_temporarily(req, cfg, now),
            _ => {}
        }
        let joining = req.member_epoch == 0;
        let mut changed = false;
        if joining {
            changed = self.join(req, now)?;
        }
        let member = self.known_member(req)?;
        if !joining {
            check_epoch(member, req.member_epoch, req.owned.as_ref())?;
        }
        let mut member = member.clone();
        if let Some(names) = &req.subscribed_topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            changed |= names != member.subscribed_topic_names;
            member.subscribed_topic_names = names;
        }
        // `null`: unchanged; "" (what librdkafka sends with a subscription by names): none.
        if let Some(regex) = &req.subscribed_topic_regex {
            let regex = (!regex.is_empty()).then(|| regex.clone());
            changed |= regex != member.subscribed_topic_regex;
            member.subscribed_topic_regex = regex;
        }
        if req.server_assignor.is_some() && req.server_assignor != member.server_assignor {
            member.server_assignor = req.server_assignor.clone();
            changed = true;
        }
        if req.rebalance_timeout_ms != -1 {
            member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if req.rack_id.is_some() {
            member.rack_id = req.rack_id.clone();
        }
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.session_deadline = now + millis(cfg.session_timeout_ms);
        let member_id = member.member_id.clone();
        self.members.insert(member_id.clone(), member);
        if changed {
            self.group_epoch += 1;
            self.forget_unused_regexes(None);
        }
        self.refresh_metadata(topics);
        self.maybe_assign(&cfg.default_assignor());

        let member = &self.members[&member_id];
        let next = self.reconciled(member, req.owned.as_ref(), now);
        let full = req.rebalance_timeout_ms != -1
            && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
            && req.owned.is_some();
        let send = joining || full || next.assigned != member.assigned;
        let reply = HeartbeatReply {
            member_id: member_id.clone(),
            member_epoch: next.member_epoch,
            assignment: send.then(|| next.assigned.clone()),
        };
        self.members.insert(member_id, next);
        Ok(reply)
    }

    /// `member` one reconciliation step towards its target (what it reported owning:
    /// `owned`), with its revocation deadline: kept while it is still revoking, set when it
    /// starts to, cleared otherwise. Shared by consumer and classic members.
    pub(super) fn reconciled(
        &self,
        member: &ConsumerMember,
        owned: Option<&Assignment>,
        now: Instant,
    ) -> ConsumerMember {
        let empty = Assignment::new();
        let target = self.target.get(&member.member_id).unwrap_or(&empty);
        let held = |t: &uuid::Uuid, p: i32| self.held_by_other(&member.member_id, t, p);
        let mut next = reconcile(member, self.assignment_epoch, target, owned, &held);
        next.revocation_deadline = match (member.state, next.state) {
            (MemberState::UnrevokedPartitions, MemberState::UnrevokedPartitions) => {
                member.revocation_deadline
            }
            (_, MemberState::UnrevokedPartitions) => Some(now + millis(next.rebalance_timeout_ms)),
            _ => None,
        };
        next.carry_assignment_epochs(&member.assignment_epochs);
        next
    }

    /// Epoch 0: a new member, a dynamic member rejoining (after it was fenced: it has
    /// given up its partitions), or a static member taking over its instance id from a
    /// predecessor that left temporarily. Returns whether the group epoch must move.
    fn join(&mut self, req: &HeartbeatRequest, now: Instant) -> Result<bool, GroupError> {
        let member_id = &req.member_id;
        if let Some(instance_id) = &req.instance_id {
            if let Some(existing) = self.static_member(instance_id) {
                if existing.member_id != *member_id {
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                        return Err(GroupError::UnreleasedInstanceId {
                            member_id: member_id.clone(),
                            instance_id: instance_id.clone(),
                            owner: existing.member_id.clone(),
                        });
                    }
                    // The successor inherits the assignment and subscription.
                    let old_id = existing.member_id.clone();
                    let mut successor = existing.clone();
                    successor.member_id = member_id.clone();
                    successor.member_epoch = 0;
                    successor.previous_member_epoch = 0;
                    self.members.remove(&old_id);
                    if let Some(t) = self.target.remove(&old_id) {
                        self.target.insert(member_id.clone(), t);
                    }
                    self.members.insert(member_id.clone(), successor);
                    return Ok(false);
                }
            }
        }
        let rejoin = self.members.contains_key(member_id);
        if rejoin {
            self.members.remove(member_id);
        }
        let mut member = ConsumerMember::new(member_id.clone(), now);
        member.instance_id = req.instance_id.clone();
        self.members.insert(member_id.clone(), member);
        Ok(true)
    }

    /// The member the request speaks for, by instance id for static members; refused with
    /// Kafka's messages.
    fn known_member(&self, req: &HeartbeatRequest) -> Result<&ConsumerMember, GroupError> {
        if let Some(instance_id) = &req.instance_id {
            let member = self.static_member(instance_id).ok_or_else(|| {
                GroupError::UnknownMember(format!("Instance id {instance_id} is unknown."))
            })?;
            if member.member_id != req.member_id {
                return Err(GroupError::StaticMemberFenced {
                    member_id: req.member_id.clone(),
                    instance_id: instance_id.clone(),
                    owner: member.member_id.clone(),
                });
            }
            return Ok(member);
        }
        self.members.get(&req.member_id).ok_or_else(|| {
            GroupError::UnknownMember(format!(
                "Member {} is not a member of group {}.",
                req.member_id, self.group_id
            ))
        })
    }

    fn leave(&mut self, req: &HeartbeatRequest) -> Result<HeartbeatReply, GroupError> {
        let member_id = self.known_member(req)?.member_id.clone();
        self.remove_member(&member_id);
        Ok(HeartbeatReply {
            member_id,
            member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
            assignment: None,
        })
    }

    /// -2: the static member keeps its partitions (nobody else gets them) until its
    /// session times out or a successor with its instance id joins.
    fn leave_temporarily(
        &mut self,
        req: &HeartbeatRequest,
        cfg: &ConsumerGroupConfig,
        now: Instant,
    ) -> Result<HeartbeatReply, GroupError> {
        let member_id = self.known_member(req)?.member_id.clone();
        if let Some(m) = self.members.get_mut(&member_id) {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
            m.session_deadline = now + millis(cfg.session_timeout_ms);
        }
        Ok(HeartbeatReply {
            member_id,
            member_epoch: LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            assignment: None,
        })
    }

    /// Members whose session or revocation deadline passed; they are removed (fenced).
    pub fn expire(&mut self, now: Instant) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline <= now
                    || m.revocation_deadline.is_some_and(|d| d <= now)
                    || m.classic
                        .as_ref()
                        .and_then(|c| c.rebalance_deadline)
                        .is_some_and(|d| d <= now)
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in &expired {
            self.remove_member(id);
        }
        expired
    }
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`: the member's own epoch, or its
/// previous one with no partition beyond its current assignment (its last response was
/// lost).
fn check_epoch(
    member: &ConsumerMember,
    given: i32,
    owned: Option<&Assignment>,
) -> Result<(), GroupError> {
    let current = member.member_epoch;
    let fenced = |relation| {
        Err(GroupError::FencedMemberEpoch {
            relation,
            given,
            current,
        })
    };
    if given > current {
        return fenced("greater");
    }
    if given < current {
        let subset = owned.is_some_and(|owned| {
            owned.iter().all(|(topic, ps)| {
                member
                    .assigned
                    .get(topic)
                    .is_some_and(|mine| ps.is_subset(mine))
                    || ps.is_empty()
            })
        });
        if given != member.previous_member_epoch || !subset {
            return fenced("smaller");
        }
    }
    Ok(())
}

pub(super) fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
