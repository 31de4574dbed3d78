//! The classic protocol's requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for a
//! group id that is a consumer group: routed to the consumer group's classic members
//! (`consumer_group::classic_member`), the group's changed records written, and a group
//! left with classic members only downgraded back to a classic group when
//! `group.consumer.migration.policy` and `group.max.size` allow it (see `migration`):
//! after a member left, or at once when a classic static member replaced the last
//! consumer-protocol member.
//!
//! A consumer group's lock is taken after the classic groups' lock when both are held.

use std::sync::Arc;
use std::time::Instant;

use tracing::info;

use super::migration::AfterDowngrade;
use super::types::{JoinRequest, SyncResult};
use super::{
    migration, GroupCoordinator, GroupError, JoinOutcome, JoinResult, Shared, SyncRequest,
};
use crate::coordinator::consumer_group::classic_member::CONSUMER_PROTOCOL_TYPE;
use crate::coordinator::consumer_group::{image, ClassicJoin, MigrationPolicy};

impl GroupCoordinator {
    /// JoinGroup into a consumer group with members: answered at once (no leader; the
    /// member's SyncGroup gets what the coordinator assigned it). Under the `disabled`
    /// policy classic members are refused, as Kafka 4.4 refuses them.
    pub(super) async fn join_consumer_group(
        &self,
        group_id: &str,
        req: JoinRequest,
    ) -> Result<JoinOutcome, GroupError> {
        let config = self.shared.consumer.config();
        if config.migration_policy == MigrationPolicy::Disabled {
            // Kafka: "Cannot join the consumer group %s with the classic protocol because
            // the group migration is disabled."
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let member_id = if req.member_id.is_empty() {
            // Kafka's consumer groups name a new classic member with a bare UUID.
            let id = uuid::Uuid::new_v4().to_string();
            if req.require_known_member_id && req.group_instance_id.is_none() {
                return Ok(JoinOutcome::MemberIdRequired(id));
            }
            id
        } else {
            req.member_id.clone()
        };
        let join = ClassicJoin {
            member_id,
            instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
        };
        // The consumer group appeared after the handler looked: the member retries.
        let Some(topics) = req.topics.clone() else {
            return Err(GroupError::CoordinatorNotAvailable);
        };
        let assignor = config.default_assignor();
        let (joined, downgrade) = self
            .shared
            .consumer
            .with_group_mut(group_id, |g| {
                let replaces_last = g.replaces_last_consumer_member(&join);
                // Kafka's staleness: the target is older than the epoch this join leaves.
                let assignment_epoch = g.assignment_epoch;
                let joined = g.classic_join(&join, &topics, &assignor, Instant::now())?;
                let after = if assignment_epoch < g.group_epoch {
                    AfterDowngrade::Rebalance
                } else {
                    AfterDowngrade::KeepAssignment
                };
                Ok::<_, GroupError>((joined, replaces_last.then_some(after)))
            })
            .ok_or(GroupError::CoordinatorNotAvailable)??;
        // A classic static member that replaced the last consumer-protocol member
        // downgrades the group at once, as Kafka 4.4 does when the policy and
        // `group.max.size` allow it; its SyncGroup then reaches the classic group.
        if let Some(after) = downgrade {
            self.shared
                .downgrade_if_classic_only(group_id, after)
                .await?;
        }
        self.shared.flush_consumer_group(group_id).await?;
        Ok(JoinOutcome::Joined(JoinResult {
            member_id: joined.member_id,
            generation_id: joined.generation_id,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_owned()),
            protocol_name: Some(joined.protocol_name),
            leader: String::new(),
            members: Vec::new(),
            skip_assignment: false,
        }))
    }

    /// SyncGroup of a classic member of a consumer group; `None` if `group_id` is not a
    /// consumer group.
    pub(super) fn sync_in_consumer_group(
        &self,
        group_id: &str,
        req: &SyncRequest,
    ) -> Option<Result<SyncResult, GroupError>> {
        if self.shared.groups.lock().contains_key(group_id) {
            return None;
        }
        let protocol = (req.protocol_type.as_deref(), req.protocol_name.as_deref());
        let result = self.shared.consumer.with_group_mut(group_id, |g| {
            g.classic_sync(
                &req.member_id,
                req.group_instance_id.as_deref(),
                req.generation_id,
                protocol,
                Instant::now(),
            )
        })?;
        Some(result.map(|assignment| SyncResult {
            protocol_type: req.protocol_type.clone(),
            protocol_name: req.protocol_name.clone(),
            assignment,
        }))
    }

    /// Heartbeat of a classic member of a consumer group; `None` if `group_id` is not a
    /// consumer group.
    pub(super) fn heartbeat_in_consumer_group(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Option<Result<(), GroupError>> {
        if self.shared.groups.lock().contains_key(group_id) {
            return None;
        }
        let assignor = self.shared.consumer.config().default_assignor();
        let (result, moved) = self.shared.consumer.with_group_mut(group_id, |g| {
            let before = g.assignment_epoch;
            let r = g.classic_heartbeat(
                member_id,
                instance_id,
                generation_id,
                &assignor,
                Instant::now(),
            );
            (r, g.assignment_epoch != before)
        })?;
        if moved {
            self.spawn_write(group_id);
        }
        Some(result)
    }

    /// LeaveGroup of classic members of a consumer group; `None` if `group_id` is not a
    /// consumer group.
    pub(super) fn leave_consumer_group(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Option<Vec<Result<(), GroupError>>> {
        if self.shared.groups.lock().contains_key(group_id) {
            return None;
        }
        let results = self.shared.consumer.with_group_mut(group_id, |g| {
            members
                .iter()
                .map(|(m, i)| g.classic_leave(m, i.as_deref()))
                .collect::<Vec<_>>()
        })?;
        if results.iter().any(Result::is_ok) {
            self.spawn_write(group_id);
        }
        Some(results)
    }

    /// Writes the group's changes (downgrading it first if it has classic members only)
    /// on a task of its own: the classic Heartbeat and LeaveGroup answer without waiting,
    /// as for classic groups, whose metadata the write loop writes.
    fn spawn_write(&self, group_id: &str) {
        let shared = Arc::clone(&self.shared);
        let group_id = group_id.to_owned();
        tokio::spawn(async move {
            // A failure is logged and the records are written with the next change.
            let _ = shared
                .downgrade_if_classic_only(&group_id, AfterDowngrade::Rebalance)
                .await;
            let _ = shared.flush_consumer_group(&group_id).await;
        });
    }
}

impl Shared {
    /// A consumer group left with classic members only becomes a classic group again
    /// (Kafka's `convertToClassicGroup`) when the policy allows a downgrade: its records
    /// are tombstoned and the classic group's metadata written; the members rejoin.
    pub(super) async fn downgrade_if_classic_only(
        &self,
        group_id: &str,
        after: AfterDowngrade,
    ) -> Result<(), GroupError> {
        // Held from the consumer group's removal until its tombstones are written: the
        // classic group's record, queued meanwhile, lands after them. A crash in between
        // then leaves no group (its members rejoin) rather than the stale consumer group
        // beside the classic one, which loading would prefer.
        let partition = self.offsets_partition(group_id);
        let _ordered = self.write_order(partition).await;
        let tombstones = {
            let mut groups = self.groups.lock();
            if groups.contains_key(group_id) {
                return Ok(());
            }
            let Some(consumer) = self.consumer.take_for_downgrade(group_id) else {
                return Ok(());
            };
            let mut classic = migration::downgrade(&consumer, after, Instant::now());
            info!(group = %group_id, generation_id = classic.generation_id,
                members = classic.members.len(), "converted the consumer group to a classic group");
            self.queue_if_dirty(&mut classic);
            groups.insert(group_id.to_owned(), classic);
            image::tombstones(&consumer.written)
        };
        self.write_removed_consumer_group_in_order(partition, group_id, tombstones)
            .await
    }
}
