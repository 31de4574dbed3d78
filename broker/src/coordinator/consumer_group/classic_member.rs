//! Classic-protocol members inside a consumer group (KIP-848's online migration, Kafka's
//! `classicGroup*ToConsumerGroup` paths of `GroupMetadataManager`): such a member keeps
//! speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup while the coordinator computes its
//! assignment like any other member's.
//!
//! - JoinGroup takes the member's subscription from its first protocol's
//!   `ConsumerProtocolSubscription`, bumps the group epoch on a change, computes the
//!   target and reconciles the member one step against the partitions it says it owns.
//!   It is answered at once: generation = the member epoch, no leader (so the member
//!   sends an empty SyncGroup), the member's first protocol as the group's.
//! - SyncGroup hands out the member's assigned partitions (what it must revoke is left
//!   out, so a cooperative member revokes it and rejoins).
//! - Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: its epoch is
//!   behind the assignment epoch, it has partitions to revoke, or partitions it waited
//!   for were released.
//!
//! A member told to rejoin (or given a generation) that does not JoinGroup (or SyncGroup)
//! within its rebalance timeout is fenced, as Kafka's join and sync timeouts do; its
//! session is its JoinGroup's session timeout. Pure logic, time passed in.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;

use super::assignor::TopicMeta;
use super::consumer_protocol::{by_topic_id, decode_subscription, encode_assignment};
use super::group::ConsumerGroup;
use super::heartbeat::millis;
use super::member::{ClassicMember, ConsumerMember, MemberState};
use crate::error::GroupError;

/// The protocol type every classic member of a consumer group must use.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A JoinGroup, as the consumer group needs it (the member id already given).
#[derive(Debug, Clone)]
pub struct ClassicJoin {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
}

/// What the JoinGroup response carries for a classic member of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicJoined {
    pub member_id: String,
    pub generation_id: i32,
    pub protocol_name: String,
}

impl ConsumerGroup {
    /// JoinGroup from a classic member (see the module comment).
    pub fn classic_join(
        &mut self,
        req: &ClassicJoin,
        topics: &BTreeMap<String, TopicMeta>,
        default_assignor: &str,
        now: Instant,
    ) -> Result<ClassicJoined, GroupError> {
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE
            || req.protocols.is_empty()
            || !self.supports_classic_protocols(&req.member_id, &req.protocols)
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let subscription = req
            .protocols
            .first()
            .and_then(|(_, metadata)| decode_subscription(metadata))
            .ok_or(GroupError::InconsistentGroupProtocol)?;
        let member_id = req.member_id.clone();
        let mut changed = self.take_over_static_seat(req)?;
        let mut member = match self.members.get(&member_id) {
            Some(m) if m.classic.is_none() => return Err(GroupError::UnknownMemberId),
            Some(m) => m.clone(),
            None => {
                changed = true;
                ConsumerMember::new(member_id.clone(), now)
            }
        };
        let mut names = subscription.topics.clone();
        names.sort();
        names.dedup();
        changed |=
            names != member.subscribed_topic_names || member.subscribed_topic_regex.is_some();
        member.subscribed_topic_names = names;
        member.subscribed_topic_regex = None;
        member.rack_id = subscription.rack_id.clone();
        member.instance_id = req.instance_id.clone();
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.session_deadline = now + millis(req.session_timeout_ms);
        member.classic = Some(ClassicMember {
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols.clone(),
            // Kafka's sync timeout: the SyncGroup is due within the rebalance timeout.
            rebalance_deadline: Some(now + millis(req.rebalance_timeout_ms)),
        });
        self.members.insert(member_id.clone(), member);
        if changed {
            self.group_epoch += 1;
            self.forget_unused_regexes(None);
        }
        self.refresh_metadata(topics);
        self.maybe_assign(default_assignor);

        let owned = by_topic_id(&subscription.owned, topics);
        let member = &self.members[&member_id];
        let next = self.reconciled(member, Some(&owned), now);
        let joined = ClassicJoined {
            member_id: member_id.clone(),
            generation_id: next.member_epoch,
            protocol_name: req.protocols[0].0.clone(),
        };
        self.members.insert(member_id, next);
        Ok(joined)
    }

    /// SyncGroup from a classic member: its assigned partitions, in its subscription's
    /// version of the consumer protocol.
    pub fn classic_sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        protocol: (Option<&str>, Option<&str>),
        now: Instant,
    ) -> Result<Bytes, GroupError> {
        let assignment_epoch = self.assignment_epoch;
        let member = self.classic_member_mut(member_id, instance_id)?;
        check_generation(member, generation_id)?;
        let classic = member.classic.as_ref().ok_or(GroupError::UnknownMemberId)?;
        let (protocol_type, protocol_name) = protocol;
        if protocol_type.is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE)
            || protocol_name.is_some_and(|n| n != classic.protocol_name())
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        // Kafka's throwIfRebalanceInProgress: a member behind the assignment must rejoin,
        // unless it is still revoking (it has rejoined and keeps its epoch meanwhile).
        if assignment_epoch > member.member_epoch
            && member.state != MemberState::UnrevokedPartitions
        {
            owe_rejoin(member, now);
            return Err(GroupError::RebalanceInProgress);
        }
        let version = classic
            .protocols
            .first()
            .and_then(|(_, m)| decode_subscription(m))
            .map_or(0, |s| s.version);
        let session = millis(classic.session_timeout_ms);
        if let Some(c) = member.classic.as_mut() {
            c.rebalance_deadline = None;
        }
        member.session_deadline = now + session;
        let assigned = member.assigned.clone();
        Ok(encode_assignment(
            &assigned,
            &self.subscribed_metadata,
            version,
        ))
    }

    /// Heartbeat from a classic member: REBALANCE_IN_PROGRESS when it must rejoin.
    pub fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        default_assignor: &str,
        now: Instant,
    ) -> Result<(), GroupError> {
        // A member that left moved the group epoch; the target catches up here when no
        // consumer-protocol member's heartbeat did.
        self.maybe_assign(default_assignor);
        let assignment_epoch = self.assignment_epoch;
        let waiting = self
            .members
            .get(member_id)
            .is_some_and(|m| self.waiting_on_unreleased(m));
        let member = self.classic_member_mut(member_id, instance_id)?;
        check_generation(member, generation_id)?;
        let session = member.classic.as_ref().map_or(0, |c| c.session_timeout_ms);
        member.session_deadline = now + millis(session);
        let rejoin = member.member_epoch < assignment_epoch
            || member.state == MemberState::UnrevokedPartitions
            || (member.state == MemberState::UnreleasedPartitions && !waiting);
        if rejoin {
            owe_rejoin(member, now);
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup of one classic member: it goes at once, its partitions free.
    pub fn classic_leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        let id = match instance_id {
            Some(instance) => {
                let m = self
                    .static_member(instance)
                    .ok_or(GroupError::UnknownMemberId)?;
                if !member_id.is_empty() && m.member_id != member_id {
                    return Err(GroupError::FencedInstanceId {
                        instance_id: instance.to_owned(),
                    });
                }
                m.member_id.clone()
            }
            None => self
                .members
                .get(member_id)
                .ok_or(GroupError::UnknownMemberId)?
                .member_id
                .clone(),
        };
        self.remove_member(&id);
        Ok(())
    }

    /// Whether every member but those in `except` speaks the classic protocol, and at
    /// least one is left (Kafka's condition for a downgrade).
    pub fn only_classic_members_but(&self, except: &[&str]) -> bool {
        let rest: Vec<&ConsumerMember> = self
            .members
            .values()
            .filter(|m| !except.contains(&m.member_id.as_str()))
            .collect();
        !rest.is_empty() && rest.iter().all(|m| m.classic.is_some())
    }

    /// Whether `req` is a classic static member taking the seat of the group's only
    /// consumer-protocol member (same `group.instance.id`, another member id): Kafka's
    /// `allMembersUseClassicProtocolExcept(replaced)`, the first condition of a downgrade
    /// by static member replacement.
    pub fn replaces_last_consumer_member(&self, req: &ClassicJoin) -> bool {
        let Some(replaced) = req
            .instance_id
            .as_deref()
            .and_then(|instance| self.static_member(instance))
        else {
            return false;
        };
        replaced.member_id != req.member_id
            && replaced.classic.is_none()
            && self
                .members
                .values()
                .all(|m| m.member_id == replaced.member_id || m.classic.is_some())
    }

    /// Kafka's `ConsumerGroup.supportsClassicProtocols`: the classic members (other than
    /// `member_id`) and the newcomer share a protocol name.
    fn supports_classic_protocols(&self, member_id: &str, protocols: &[(String, Bytes)]) -> bool {
        let others: Vec<&ClassicMember> = self
            .members
            .values()
            .filter(|m| m.member_id != member_id)
            .filter_map(|m| m.classic.as_ref())
            .collect();
        protocols.iter().any(|(name, _)| {
            others
                .iter()
                .all(|c| c.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// A static member rejoining with a new member id takes over its predecessor's seat
    /// (assignment and target) as Kafka's static members do; a known member id that is
    /// not the seat's owner is fenced. Returns whether the group epoch must move.
    fn take_over_static_seat(&mut self, req: &ClassicJoin) -> Result<bool, GroupError> {
        let Some(instance_id) = &req.instance_id else {
            return Ok(false);
        };
        let Some(existing) = self.static_member(instance_id) else {
            return Ok(false);
        };
        if existing.member_id == req.member_id {
            return Ok(false);
        }
        if self.members.contains_key(&req.member_id) {
            return Err(GroupError::FencedInstanceId {
                instance_id: instance_id.clone(),
            });
        }
        let old_id = existing.member_id.clone();
        let mut successor = existing.clone();
        successor.member_id = req.member_id.clone();
        // Kafka copies the member at epoch 0 (a consumer-protocol predecessor may be at
        // -2, its temporary leave); reconciling then brings it to the assignment epoch.
        successor.member_epoch = 0;
        successor.previous_member_epoch = 0;
        // A consumer-protocol predecessor's copy becomes a classic member here (the join
        // fills in the rest), or the join would refuse it as a consumer-protocol member.
        successor.classic.get_or_insert_with(|| ClassicMember {
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols.clone(),
            rebalance_deadline: None,
        });
        self.members.remove(&old_id);
        if let Some(t) = self.target.remove(&old_id) {
            self.target.insert(req.member_id.clone(), t);
        }
        self.members.insert(req.member_id.clone(), successor);
        Ok(false)
    }

    fn classic_member_mut(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&mut ConsumerMember, GroupError> {
        let member = self
            .members
            .get_mut(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if let Some(instance) = instance_id {
            if member.instance_id.as_deref() != Some(instance) {
                return Err(GroupError::FencedInstanceId {
                    instance_id: instance.to_owned(),
                });
            }
        }
        // Kafka: "Member %s does not use the classic protocol."
        if member.classic.is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(member)
    }

    /// Kafka's `ConsumerGroup.waitingOnUnreleasedPartition`: some partition of the
    /// member's target it does not have yet is still held by another member.
    fn waiting_on_unreleased(&self, member: &ConsumerMember) -> bool {
        let Some(target) = self.target.get(&member.member_id) else {
            return false;
        };
        target.iter().any(|(topic, partitions)| {
            partitions.iter().any(|p| {
                !member.holds(topic, *p) && self.held_by_other(&member.member_id, topic, *p)
            })
        })
    }
}

fn check_generation(member: &ConsumerMember, generation_id: i32) -> Result<(), GroupError> {
    if generation_id != member.member_epoch {
        return Err(GroupError::IllegalGeneration {
            given: generation_id,
            current: member.member_epoch,
        });
    }
    Ok(())
}

/// Kafka's join timeout: the member told to rejoin must do so within its rebalance timeout.
fn owe_rejoin(member: &mut ConsumerMember, now: Instant) {
    let timeout = millis(member.rebalance_timeout_ms);
    if let Some(c) = member.classic.as_mut() {
        c.rebalance_deadline.get_or_insert(now + timeout);
    }
}
