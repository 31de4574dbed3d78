//! KIP-848 consumer groups (`group.protocol=consumer`): the coordinator computes every
//! member's assignment and hands partitions over through member epochs
//! (ConsumerGroupHeartbeat), instead of a leader assigning in JoinGroup/SyncGroup.
//!
//! This slice keeps the groups in memory on the coordinator (their committed offsets
//! are persisted like a classic group's); after a restart the members rejoin at epoch 0
//! and get a fresh assignment. The groups sit behind one `parking_lot::Mutex`, never held
//! across `.await`, taken after the classic groups' lock when both are needed (the
//! classic coordinator in `super::group` owns this value and checks both kinds).

pub mod assignor;
pub mod describe;
pub mod group;
pub mod heartbeat;
pub mod member;
pub mod reconcile;
pub mod regex;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use brook_raft::MetadataImage;
use parking_lot::Mutex;
use tracing::info;

pub use group::{ConsumerGroup, ConsumerGroupState};
pub use heartbeat::{HeartbeatReply, HeartbeatRequest};

use crate::config::group::ConsumerGroupOverrides;
use crate::error::GroupError;
use assignor::TopicMeta;

/// Kafka's `group.consumer.*` settings Brook honours.
#[derive(Debug, Clone)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.session.timeout.ms` (45 s).
    pub session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (5 s), told to members in every response.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`, the first being the default.
    pub assignors: Vec<String>,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignors: assignor::ASSIGNORS.iter().map(|a| a.to_string()).collect(),
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

    /// Drops an empty group (a classic JoinGroup takes the id over, as Kafka does).
    pub fn remove_if_empty(&self, group_id: &str) {
        let mut groups = self.groups.lock();
        if groups.get(group_id).is_some_and(|g| g.members.is_empty()) {
            groups.remove(group_id);
        }
    }

    /// DeleteGroups of a consumer group: `None` if there is none of that id; only an
    /// empty one goes (NON_EMPTY_GROUP otherwise, as for classic groups).
    pub fn delete_if_empty(&self, group_id: &str) -> Option<Result<(), GroupError>> {
        let mut groups = self.groups.lock();
        let empty = groups.get(group_id)?.members.is_empty();
        if !empty {
            return Some(Err(GroupError::NonEmptyGroup));
        }
        groups.remove(group_id);
        Some(Ok(()))
    }

    /// The topics the group's members subscribe to (`None`: no such consumer group);
    /// OffsetDelete refuses them (GROUP_SUBSCRIBED_TO_TOPIC, KIP-496).
    pub fn subscribed_topics(&self, group_id: &str) -> Option<std::collections::BTreeSet<String>> {
        self.groups
            .lock()
            .get(group_id)
            .map(|g| g.members.values().flat_map(|m| g.subscription(m)).collect())
    }

    /// One heartbeat under `config` (the broker's, with the group's own overrides), with
    /// `topics` as of the metadata image at `metadata_version`; creates the group for its
    /// first member. The group's topic patterns are brought up to that image first (a new
    /// one refused with INVALID_REGULAR_EXPRESSION before the group changes).
    pub fn heartbeat(
        &self,
        group_id: &str,
        req: &HeartbeatRequest,
        topics: &BTreeMap<String, TopicMeta>,
        metadata_version: i64,
        config: &ConsumerGroupConfig,
        now: Instant,
    ) -> Result<HeartbeatReply, GroupError> {
        let mut groups = self.groups.lock();
        let created = !groups.contains_key(group_id);
        if created {
            if req.member_epoch != 0 {
                return Err(GroupError::UnknownMemberId);
            }
            groups.insert(group_id.to_owned(), ConsumerGroup::new(group_id));
        }
        let group = groups
            .get_mut(group_id)
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        let before = group.group_epoch;
        let pattern = req.subscribed_topic_regex.as_deref();
        let reply = group
            .refresh_regexes(pattern, topics, metadata_version, unix_time_ms())
            .and_then(|moved| {
                if moved {
                    group.group_epoch += 1;
                }
                group.heartbeat(req, topics, config, now)
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

    /// The metadata image's topics changed (created, deleted; `topics` as of the image at
    /// `version`): each group subscribed by pattern re-resolves its patterns now, and one
    /// whose members' topics moved gets a new group epoch and target assignment, without
    /// waiting for a heartbeat.
    pub fn topics_changed(&self, topics: &BTreeMap<String, TopicMeta>, version: i64) {
        let default_assignor = self.config().default_assignor();
        let now_ms = unix_time_ms();
        let mut groups = self.groups.lock();
        for group in groups.values_mut() {
            if group.resolved_regexes.is_empty() {
                continue;
            }
            if let Ok(true) = group.refresh_regexes(None, topics, version, now_ms) {
                group.group_epoch += 1;
                group.refresh_metadata(topics);
                group.maybe_assign(&default_assignor);
                info!(group = %group.group_id, epoch = group.group_epoch,
                    "consumer group epoch bumped: the topics its patterns match changed");
            }
        }
    }

    /// Fences members whose session or rebalance timeout passed.
    pub fn tick(&self, now: Instant) {
        let mut groups = self.groups.lock();
        for group in groups.values_mut() {
            for member in group.expire(now) {
                info!(group = %group.group_id, member = %member, "consumer group member fenced: its session or rebalance timeout expired");
            }
        }
    }

    /// (group id, state) of every consumer group.
    pub fn list(&self) -> Vec<(String, ConsumerGroupState)> {
        let groups = self.groups.lock();
        groups
            .values()
            .map(|g| (g.group_id.clone(), g.state()))
            .collect()
    }

    /// Kafka's `ConsumerGroup.validateOffsetCommit` (non-transactional); `None` when the
    /// group is not a consumer group. A commit from outside the group (epoch < 0) is
    /// only allowed while the group has no members.
    pub fn validate_commit(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Option<Result<(), GroupError>> {
        let groups = self.groups.lock();
        let group = groups.get(group_id)?;
        if member_epoch < 0 && group.members.is_empty() {
            return Some(Ok(()));
        }
        Some(check_member_epoch(group, member_id, member_epoch))
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

    /// Whether `member_id` is a member of the consumer group `group_id`.
    pub fn is_member(&self, group_id: &str, member_id: &str) -> bool {
        self.groups
            .lock()
            .get(group_id)
            .is_some_and(|g| g.members.contains_key(member_id))
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
