//! KIP-848 consumer groups (`group.protocol=consumer`): the coordinator computes every
//! member's assignment and hands partitions over through member epochs
//! (ConsumerGroupHeartbeat), instead of a leader assigning in JoinGroup/SyncGroup.
//!
//! Every change of a group is written to `__consumer_offsets` as Kafka's records (see
//! `records` and `image`) before the heartbeat that made it is answered, and a broker
//! that becomes the group's coordinator rebuilds it from them: members keep their epochs
//! and assignments across a coordinator failover or restart. The groups sit behind one
//! `parking_lot::Mutex`, never held
//! across `.await`, taken after the classic groups' lock when both are needed (the
//! classic coordinator in `super::group` owns this value and checks both kinds).

pub mod assignor;
pub mod classic_member;
pub mod commit_check;
pub mod consumer_protocol;
pub mod describe;
pub mod group;
pub mod heartbeat;
pub mod image;
pub mod member;
pub mod reconcile;
pub mod records;
pub mod regex;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use brook_raft::MetadataImage;
use parking_lot::Mutex;
use tracing::info;

pub use classic_member::{ClassicJoin, ClassicJoined};
pub use group::{ConsumerGroup, ConsumerGroupState};
pub use heartbeat::{HeartbeatReply, HeartbeatRequest};
pub use image::RecordChange;
pub use regex::{Caller, TopicsView};

use crate::config::group::ConsumerGroupOverrides;
use crate::error::GroupError;
use assignor::TopicMeta;

/// Kafka's default `group.consumer.max.size` and `group.max.size` (`Integer.MAX_VALUE`).
pub const MAX_SIZE_DEFAULT: usize = i32::MAX as usize;

/// Kafka's `group.consumer.*` settings Brook honours.
#[derive(Debug, Clone)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.session.timeout.ms` (45 s).
    pub session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (5 s), told to members in every response.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`, the first being the default.
    pub assignors: Vec<String>,
    /// `group.consumer.migration.policy`.
    pub migration_policy: MigrationPolicy,
    /// `group.consumer.max.size`: a classic group larger than this is not upgraded.
    pub consumer_max_size: usize,
    /// `group.max.size` (Kafka's classic group limit): a consumer group that would
    /// become a larger classic group is not downgraded.
    pub classic_max_size: usize,
}

/// Kafka's `ConsumerGroupMigrationPolicy` (`group.consumer.migration.policy`): whether a
/// non-empty classic group is converted online to a consumer group when a consumer-protocol
/// member joins (upgrade), and a consumer group back to a classic one when its last
/// consumer-protocol member leaves (downgrade). Empty groups are replaced either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    Disabled,
    Upgrade,
    Downgrade,
    #[default]
    Bidirectional,
}

impl MigrationPolicy {
    /// The config value, case-insensitive as Kafka parses it; `None` if unknown.
    pub fn parse(value: &str) -> Option<MigrationPolicy> {
        match value.trim().to_ascii_lowercase().as_str() {
            "disabled" => Some(MigrationPolicy::Disabled),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            _ => None,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Upgrade | MigrationPolicy::Bidirectional
        )
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Downgrade | MigrationPolicy::Bidirectional
        )
    }
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignors: assignor::ASSIGNORS.iter().map(|a| a.to_string()).collect(),
            migration_policy: MigrationPolicy::default(),
            // Kafka's defaults for both: Integer.MAX_VALUE.
            consumer_max_size: MAX_SIZE_DEFAULT,
            classic_max_size: MAX_SIZE_DEFAULT,
        }
    }
}

impl ConsumerGroupConfig {
    /// This config with a group's own `consumer.session.timeout.ms` /
    /// `consumer.heartbeat.interval.ms` where it sets them (KIP-848 group configs), as
    /// Kafka's `GroupMetadataManager` prefers the group's config over the broker's.
    pub fn with_overrides(mut self, overrides: ConsumerGroupOverrides) -> Self {
        if let Some(ms) = overrides.session_timeout_ms {
            self.session_timeout_ms = ms;
        }
        if let Some(ms) = overrides.heartbeat_interval_ms {
            self.heartbeat_interval_ms = ms;
        }
        self
    }

    pub fn default_assignor(&self) -> String {
        self.assignors
            .iter()
            .find(|a| assignor::ASSIGNORS.contains(&a.as_str()))
            .cloned()
            .unwrap_or_else(|| assignor::UNIFORM.to_owned())
    }
}

#[derive(Default)]
pub struct ConsumerGroups {
    groups: Mutex<HashMap<String, ConsumerGroup>>,
    config: Mutex<ConsumerGroupConfig>,
}

impl ConsumerGroups {
    pub fn set_config(&self, config: ConsumerGroupConfig) {
        *self.config.lock() = config;
    }

    pub fn config(&self) -> ConsumerGroupConfig {
        self.config.lock().clone()
    }

    pub fn exists(&self, group_id: &str) -> bool {
        self.groups.lock().contains_key(group_id)
    }

    /// Whether the group exists and has members (classic members then may not take it).
    pub fn has_members(&self, group_id: &str) -> bool {
        self.groups
            .lock()
            .get(group_id)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// Drops an empty group (a classic JoinGroup takes the id over, as Kafka does);
    /// returns the tombstones of its records.
    pub fn remove_if_empty(&self, group_id: &str) -> Vec<RecordChange> {
        let mut groups = self.groups.lock();
        if groups.get(group_id).is_some_and(|g| g.members.is_empty()) {
            if let Some(group) = groups.remove(group_id) {
                return image::tombstones(&group.written);
            }
        }
        Vec::new()
    }

    /// DeleteGroups of a consumer group: `None` if there is none of that id; only an
    /// empty one goes (NON_EMPTY_GROUP otherwise, as for classic groups), and the
    /// tombstones of its records are returned.
    pub fn delete_if_empty(&self, group_id: &str) -> Option<Result<Vec<RecordChange>, GroupError>> {
        let mut groups = self.groups.lock();
        let empty = groups.get(group_id)?.members.is_empty();
        if !empty {
            return Some(Err(GroupError::NonEmptyGroup));
        }
        let group = groups.remove(group_id)?;
        Some(Ok(image::tombstones(&group.written)))
    }

    /// The records `group_id` needs written since its last write (see
    /// `ConsumerGroup::take_changes`); empty for an unknown group.
    pub fn take_changes(&self, group_id: &str) -> Vec<RecordChange> {
        self.groups
            .lock()
            .get_mut(group_id)
            .map(ConsumerGroup::take_changes)
            .unwrap_or_default()
    }

    /// See `ConsumerGroup::write_failed`.
    pub fn write_failed(&self, group_id: &str, changes: &[RecordChange]) {
        if let Some(group) = self.groups.lock().get_mut(group_id) {
            group.write_failed(changes);
        }
    }

    /// A group rebuilt from its records (this broker became its coordinator); a group
    /// already in memory is kept. Unreadable records leave the group out, logged.
    pub fn load(&self, group_id: &str, stored: image::StoredRecords, now: Instant) {
        let timeout = std::time::Duration::from_millis(
            u64::try_from(self.config.lock().session_timeout_ms).unwrap_or(0),
        );
        let mut groups = self.groups.lock();
        if groups.contains_key(group_id) {
            return;
        }
        match image::rebuild(group_id, stored, timeout, now) {
            Ok(group) => {
                groups.insert(group_id.to_owned(), group);
            }
            Err(e) => {
                tracing::error!(group = %group_id, error = %e, "stored consumer group records unreadable; the group is not loaded");
            }
        }
    }

    /// Forgets the groups `owned` accepts (their partitions are led elsewhere now).
    pub fn unload(&self, owned: impl Fn(&str) -> bool) -> usize {
        let mut groups = self.groups.lock();
        let before = groups.len();
        groups.retain(|id, _| !owned(id));
        before - groups.len()
    }

    /// The topics the group's members subscribe to (`None`: no such consumer group);
    /// OffsetDelete refuses them (GROUP_SUBSCRIBED_TO_TOPIC, KIP-496).
    pub fn subscribed_topics(&self, group_id: &str) -> Option<std::collections::BTreeSet<String>> {
        self.groups
            .lock()
            .get(group_id)
            .map(|g| g.members.values().flat_map(|m| g.subscription(m)).collect())
    }

    /// One heartbeat from `caller` under `config` (the broker's, with the group's own
    /// overrides), against `view`; creates the group for its first member (a join, epoch
    /// 0), and answers any other epoch for a group it does not have GROUP_ID_NOT_FOUND
    /// with Kafka's message. The group's topic patterns are brought up to that image
    /// first, resolved for `caller` (a new one refused with INVALID_REGULAR_EXPRESSION
    /// before the group changes).
    pub fn heartbeat(
        &self,
        group_id: &str,
        req: &HeartbeatRequest,
        caller: &Caller,
        view: &TopicsView<'_>,
        config: &ConsumerGroupConfig,
        now: Instant,
    ) -> Result<HeartbeatReply, GroupError> {
        let mut groups = self.groups.lock();
        let created = !groups.contains_key(group_id);
        if created {
            if req.member_epoch != 0 {
                return Err(not_found(group_id, req.member_epoch));
            }
            groups.insert(group_id.to_owned(), ConsumerGroup::new(group_id));
        }
        let group = groups
            .get_mut(group_id)
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        let before = group.group_epoch;
        let pattern = req.subscribed_topic_regex.as_deref();
        let reply = group
            .refresh_regexes(pattern, Some(caller), view, unix_time_ms())
            .and_then(|moved| {
                if moved {
                    group.group_epoch += 1;
                }
                group.heartbeat(req, view.topics, config, now)
            });
        if group.group_epoch != before {
            info!(group = %group_id, epoch = group.group_epoch, members = group.members.len(),
                "consumer group epoch bumped");
        }
        if reply.is_err() && created && group.members.is_empty() {
            groups.remove(group_id);
        }
        reply
    }

    /// The metadata image's topics changed (created, deleted; `view` is the new image):
    /// each group subscribed by pattern re-resolves its patterns now, for the caller of its
    /// latest heartbeat, and one whose members' topics moved gets a new group epoch and
    /// target assignment, without waiting for a heartbeat. Returns those groups (their
    /// records are to be written).
    pub fn topics_changed(&self, view: &TopicsView<'_>) -> Vec<String> {
        let default_assignor = self.config().default_assignor();
        let now_ms = unix_time_ms();
        let mut groups = self.groups.lock();
        let mut changed = Vec::new();
        for group in groups.values_mut() {
            if group.resolved_regexes.is_empty() {
                continue;
            }
            if let Ok(true) = group.refresh_regexes(None, None, view, now_ms) {
                group.group_epoch += 1;
                group.refresh_metadata(view.topics);
                group.maybe_assign(&default_assignor);
                info!(group = %group.group_id, epoch = group.group_epoch,
                    "consumer group epoch bumped: the topics its patterns match changed");
                changed.push(group.group_id.clone());
            }
        }
        changed
    }

    /// Fences members whose session or rebalance timeout passed; returns the groups
    /// that changed (their records are to be written).
    pub fn tick(&self, now: Instant) -> Vec<String> {
        let mut groups = self.groups.lock();
        let mut changed = Vec::new();
        for group in groups.values_mut() {
            let fenced = group.expire(now);
            for member in &fenced {
                info!(group = %group.group_id, member = %member, "consumer group member fenced: its session or rebalance timeout expired");
            }
            if !fenced.is_empty() {
                changed.push(group.group_id.clone());
            }
        }
        changed
    }

    /// (group id, state) of every consumer group.
    pub fn list(&self) -> Vec<(String, ConsumerGroupState)> {
        let groups = self.groups.lock();
        groups
            .values()
            .map(|g| (g.group_id.clone(), g.state()))
            .collect()
    }

    /// Kafka's `ConsumerGroup.validateOffsetCommit` (see `commit_check`) for a commit of
    /// `entries` (topic name, partition, offset); `None` when the group is not a consumer
    /// group.
    pub fn validate_commit<T>(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        transactional: bool,
        entries: &[(String, i32, T)],
    ) -> Option<Result<(), GroupError>> {
        let groups = self.groups.lock();
        let group = groups.get(group_id)?;
        let partitions: Vec<(&str, i32)> =
            entries.iter().map(|(t, p, _)| (t.as_str(), *p)).collect();
        Some(commit_check::validate_offset_commit(
            group,
            member_id,
            member_epoch,
            transactional,
            &partitions,
        ))
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch`: an admin fetch (no member id, epoch
    /// -1) always passes; a member's must carry its current epoch.
    pub fn validate_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let groups = self.groups.lock();
        let Some(group) = groups.get(group_id) else {
            return Ok(());
        };
        match member_id {
            None | Some("") if member_epoch < 0 => Ok(()),
            _ => check_member_epoch(group, member_id.unwrap_or_default(), member_epoch),
        }
    }

    /// Whether `member_id` is a consumer-protocol member of the consumer group
    /// `group_id` (a classic member commits with the classic protocol's versions).
    pub fn is_member(&self, group_id: &str, member_id: &str) -> bool {
        self.groups
            .lock()
            .get(group_id)
            .and_then(|g| g.members.get(member_id))
            .is_some_and(|m| m.classic.is_none())
    }

    /// Runs `f` on the group `group_id` if there is one; see the `classic_*` methods of
    /// `ConsumerGroup`. The caller writes the group's changes afterwards.
    pub fn with_group_mut<T>(
        &self,
        group_id: &str,
        f: impl FnOnce(&mut ConsumerGroup) -> T,
    ) -> Option<T> {
        self.groups.lock().get_mut(group_id).map(f)
    }

    /// Adds a group converted from a classic one (an online upgrade).
    pub fn insert_converted(&self, group: ConsumerGroup) {
        self.groups.lock().insert(group.group_id.clone(), group);
    }

    /// Takes `group_id` out for a downgrade when its members are all classic now, the
    /// policy allows it and the classic group would not exceed `group.max.size` (Kafka's
    /// `validateOnlineDowngradeWith*`, asked after the leaving or replaced member is
    /// gone: its count is Kafka's less that member); `None` otherwise.
    pub fn take_for_downgrade(&self, group_id: &str) -> Option<ConsumerGroup> {
        let config = self.config();
        let mut groups = self.groups.lock();
        if !groups.get(group_id)?.only_classic_members_but(&[]) {
            return None;
        }
        if !config.migration_policy.downgrade_enabled() {
            info!(group = %group_id,
                "cannot downgrade consumer group to classic group because the online downgrade is disabled");
            return None;
        }
        let size = groups.get(group_id)?.members.len();
        if size > config.classic_max_size {
            info!(group = %group_id, size, max = config.classic_max_size,
                "cannot downgrade consumer group to classic group because its group size is greater than classic group max size");
            return None;
        }
        groups.remove(group_id)
    }

    pub(crate) fn with_group<T>(
        &self,
        group_id: &str,
        f: impl FnOnce(&ConsumerGroup) -> T,
    ) -> Option<T> {
        self.groups.lock().get(group_id).map(f)
    }
}

/// The topics of `image` as the assignors see them.
pub fn topic_metas(image: &MetadataImage) -> BTreeMap<String, TopicMeta> {
    image
        .topics
        .iter()
        .map(|(name, t)| {
            let meta = TopicMeta {
                topic_id: t.topic_id,
                partitions: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
            };
            (name.clone(), meta)
        })
        .collect()
}

/// The version a pattern is resolved at: the image's applied raft index (Kafka: the
/// metadata image's offset).
pub fn metadata_version(image: &MetadataImage) -> i64 {
    i64::try_from(image.applied_index()).unwrap_or(i64::MAX)
}

/// A heartbeat at `member_epoch` (not a join) for a group id there is no consumer group
/// of: Kafka 4.4's GROUP_ID_NOT_FOUND, whose message differs between a leave
/// (`GroupMetadataManager.group`) and any other heartbeat (`getOrMaybeCreateConsumerGroup`).
fn not_found(group_id: &str, member_epoch: i32) -> GroupError {
    GroupError::GroupNotFound(match member_epoch {
        member::LEAVE_GROUP_MEMBER_EPOCH | member::LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
            format!("Group {group_id} not found.")
        }
        _ => format!("Consumer group {group_id} not found."),
    })
}

fn unix_time_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn check_member_epoch(
    group: &ConsumerGroup,
    member_id: &str,
    member_epoch: i32,
) -> Result<(), GroupError> {
    let member = group
        .members
        .get(member_id)
        .ok_or(GroupError::UnknownMemberId)?;
    let current = member.member_epoch;
    if member_epoch > current {
        return Err(GroupError::FencedMemberEpoch {
            relation: "greater",
            given: member_epoch,
            current,
        });
    }
    if member_epoch < current {
        return Err(GroupError::StaleMemberEpoch {
            given: member_epoch,
            current,
        });
    }
    Ok(())
}
