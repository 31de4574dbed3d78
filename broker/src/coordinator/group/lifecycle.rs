//! The rest of a classic group's state machine: SyncGroup, Heartbeat, LeaveGroup,
//! session expiry and the timer tick, plus the checks OffsetCommit makes against the
//! group (Kafka's `ClassicGroup.validateOffsetCommit`). Pure logic, time passed in.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::state::{millis, Group};
use super::types::*;

/// SyncGroup's arguments.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    /// v5+: must match the group's when given.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

impl Group {
    fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        if let Some(err) = self.fenced(member_id, instance_id) {
            return Err(err);
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration {
                given: generation_id,
                current: self.generation_id,
            });
        }
        Ok(())
    }

    fn sync_result(&self, member_id: &str) -> SyncResult {
        SyncResult {
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    /// SyncGroup: the leader's assignments are stored and handed to every member; the
    /// others wait for the leader (Kafka's `doSyncGroup`).
    pub fn sync(&mut self, req: SyncRequest, now: Instant) -> SyncReply {
        match self.state {
            GroupState::Dead => return SyncReply::Done(Err(GroupError::CoordinatorNotAvailable)),
            GroupState::Empty => return SyncReply::Done(Err(GroupError::UnknownMemberId)),
            _ => {}
        }
        let checked = self.check_member(
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        );
        if let Err(e) = checked {
            return SyncReply::Done(Err(e));
        }
        let type_mismatch = req
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != self.protocol_type.as_ref());
        let name_mismatch = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| Some(n) != self.protocol_name.as_ref());
        if type_mismatch || name_mismatch {
            return SyncReply::Done(Err(GroupError::InconsistentGroupProtocol));
        }
        match self.state {
            GroupState::PreparingRebalance => SyncReply::Done(Err(GroupError::RebalanceInProgress)),
            GroupState::Stable => SyncReply::Done(Ok(self.sync_result(&req.member_id))),
            _ => {
                let (tx, rx) = oneshot::channel();
                if let Some(member) = self.members.get_mut(&req.member_id) {
                    member.last_heartbeat = now;
                    if let Some(old) = member.sync_waiter.replace(tx) {
                        let _ = old.send(Err(GroupError::RebalanceInProgress));
                    }
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    for member in self.members.values_mut() {
                        member.assignment = req
                            .assignments
                            .iter()
                            .find(|(id, _)| *id == member.member_id)
                            .map(|(_, a)| a.clone())
                            .unwrap_or_default();
                    }
                    self.state = GroupState::Stable;
                    self.dirty = true;
                    let ids: Vec<String> = self.members.keys().cloned().collect();
                    for id in ids {
                        let result = self.sync_result(&id);
                        if let Some(w) =
                            self.members.get_mut(&id).and_then(|m| m.sync_waiter.take())
                        {
                            let _ = w.send(Ok(result));
                        }
                    }
                }
                SyncReply::Wait(rx)
            }
        }
    }

    /// Heartbeat: keeps the session alive; tells members to rejoin while rebalancing.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        match self.state {
            GroupState::Dead => return Err(GroupError::CoordinatorNotAvailable),
            GroupState::Empty => return Err(GroupError::UnknownMemberId),
            _ => {}
        }
        self.check_member(member_id, instance_id, generation_id)?;
        if let Some(member) = self.members.get_mut(member_id) {
            member.last_heartbeat = now;
        }
        match self.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// LeaveGroup for one member identity (v3+ batches call this per member).
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let target = match instance_id {
            Some(instance) => {
                let current = self
                    .static_members
                    .get(instance)
                    .cloned()
                    .ok_or(GroupError::UnknownMemberId)?;
                // An empty member id is the admin client removing the instance.
                if !member_id.is_empty() && member_id != current {
                    return Err(GroupError::FencedInstanceId {
                        instance_id: instance.to_owned(),
                    });
                }
                current
            }
            None => {
                if self.pending_members.remove(member_id).is_some() {
                    return Ok(());
                }
                if !self.members.contains_key(member_id) {
                    return Err(GroupError::UnknownMemberId);
                }
                member_id.to_owned()
            }
        };
        self.remove_member_and_rebalance(&target, now);
        Ok(())
    }

    fn remove_member_and_rebalance(&mut self, member_id: &str, now: Instant) {
        self.remove_member(member_id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now, Duration::ZERO);
                self.maybe_complete_join(now);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now),
            _ => {}
        }
    }

    /// The timer: expires members whose session ran out (not while parked in a join or
    /// sync), forgets unused KIP-394 ids, and completes a join phase whose deadline passed.
    pub fn tick(&mut self, now: Instant) {
        self.pending_members.retain(|_, expiry| *expiry > now);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                !m.is_parked()
                    && now >= m.last_heartbeat + Duration::from_millis(millis(m.session_timeout_ms))
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.group_id, member = %id, "member session expired");
            self.remove_member_and_rebalance(&id, now);
        }
        self.maybe_complete_join(now);
    }

    /// OffsetCommit's group checks. `generation_id < 0` with no member id is a commit
    /// from outside the group (admin tools, `assign()` consumers): only for an Empty group.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        match self.state {
            GroupState::Dead => return Err(GroupError::CoordinatorNotAvailable),
            GroupState::Empty if generation_id < 0 && member_id.is_empty() => return Ok(()),
            GroupState::Empty => return Err(GroupError::UnknownMemberId),
            _ => {}
        }
        if generation_id < 0 && member_id.is_empty() {
            // Committing from outside while members own the partitions would race them.
            return Err(GroupError::UnknownMemberId);
        }
        self.check_member(member_id, instance_id, generation_id)?;
        if self.state == GroupState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// TxnOffsetCommit's group checks (Kafka's `validateOffsetCommit` with
    /// `isTransactional`): a generation, member id or instance id given (v3+, KIP-447) is
    /// checked as for OffsetCommit; none given (v0-2) is accepted whatever the state, and
    /// the group's rebalance state does not matter (a zombie is fenced by generation).
    pub fn validate_txn_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.check_member(member_id, instance_id, generation_id)?;
        }
        Ok(())
    }
}
