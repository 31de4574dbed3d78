//! One KIP-848 consumer group: its members, the group epoch (bumped by every change of
//! membership, subscription or subscribed metadata), the target assignment computed at
//! the assignment epoch, and the state ConsumerGroupDescribe and ListGroups show.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::assignor::{self, MemberSpec, TopicMeta};
use super::image::{self, RecordChange, RecordImage};
use super::member::{Assignment, ConsumerMember, MemberState};
use super::regex::{Caller, ResolvedRegex};

/// Kafka's `ConsumerGroup.ConsumerGroupState`, spelled as Kafka shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

#[derive(Debug)]
pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment per member id, as of `assignment_epoch`.
    pub target: BTreeMap<String, Assignment>,
    /// The subscribed topics' metadata the group epoch was last computed with.
    pub subscribed_metadata: BTreeMap<String, TopicMeta>,
    /// The assignor that computed the current target.
    pub assignor_name: String,
    /// The group's records as last written to `__consumer_offsets` (see `image`).
    pub written: RecordImage,
    /// The metadata hash of the group record it was loaded from, until the subscribed
    /// metadata is first computed again: equal metadata then is no change.
    pub loaded_metadata_hash: Option<i64>,
    /// What each pattern the members subscribe to resolved to (see `super::regex`).
    pub resolved_regexes: BTreeMap<String, ResolvedRegex>,
    /// Whom the patterns were last resolved for (the latest heartbeat's sender; not
    /// persisted: a loaded group waits for a heartbeat before re-resolving).
    pub regex_caller: Option<Caller>,
}

impl ConsumerGroup {
    pub fn new(group_id: &str) -> ConsumerGroup {
        ConsumerGroup {
            group_id: group_id.to_owned(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            subscribed_metadata: BTreeMap::new(),
            assignor_name: assignor::UNIFORM.to_owned(),
            written: RecordImage::new(),
            loaded_metadata_hash: None,
            resolved_regexes: BTreeMap::new(),
            regex_caller: None,
        }
    }

    /// The records to write since the last call: what differs from `written`, which then
    /// holds the group as it stands. Called under the partition's write order.
    pub fn take_changes(&mut self) -> Vec<RecordChange> {
        let now = image::image(self);
        let changes = image::changes(&self.written, &now);
        self.written = now;
        changes
    }

    /// `changes` may or may not have reached the log: their keys are marked unknown, so
    /// the next `take_changes` writes each again (or its tombstone).
    pub fn write_failed(&mut self, changes: &[RecordChange]) {
        for (key, _) in changes {
            self.written.insert(key.clone(), Vec::new());
        }
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.state != MemberState::Stable || m.member_epoch != self.assignment_epoch)
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// The member holding `instance_id`, if any.
    pub fn static_member(&self, instance_id: &str) -> Option<&ConsumerMember> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
    }

    /// Removes a member (left, fenced or expired): its partitions become free at once and
    /// the group epoch moves so the others are given a new target.
    pub fn remove_member(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_some() {
            self.target.remove(member_id);
            self.forget_unused_regexes(None);
            self.group_epoch += 1;
        }
    }

    /// Bumps the group epoch when the subscribed topics' metadata changed (a topic
    /// created, deleted or grown).
    pub fn refresh_metadata(&mut self, topics: &BTreeMap<String, TopicMeta>) {
        let subscribed: BTreeSet<String> = self
            .members
            .values()
            .flat_map(|m| self.subscription(m))
            .collect();
        let now: BTreeMap<String, TopicMeta> = topics
            .iter()
            .filter(|(name, _)| subscribed.contains(*name))
            .map(|(n, m)| (n.clone(), m.clone()))
            .collect();
        let loaded_hash = self.loaded_metadata_hash.take();
        if now != self.subscribed_metadata {
            let unchanged_since_load = loaded_hash == Some(image::metadata_hash(&now));
            self.subscribed_metadata = now;
            if !unchanged_since_load {
                self.group_epoch += 1;
            }
        }
    }

    /// Recomputes the target assignment if the group epoch moved past it. The assignor
    /// is the one most members ask for (`group.remote.assignor`), else `default_assignor`.
    pub fn maybe_assign(&mut self, default_assignor: &str) {
        if self.group_epoch <= self.assignment_epoch && !self.members.is_empty() {
            return;
        }
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.server_assignor.as_deref() {
                *votes.entry(a).or_default() += 1;
            }
        }
        let chosen = votes
            .iter()
            .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
            .map_or(default_assignor, |(name, _)| name)
            .to_owned();
        let specs: BTreeMap<String, MemberSpec> = self
            .members
            .iter()
            .map(|(id, m)| {
                (
                    id.clone(),
                    MemberSpec {
                        subscribed: self.subscription(m),
                        previous: self.target.get(id).cloned().unwrap_or_default(),
                        instance_id: m.instance_id.clone(),
                    },
                )
            })
            .collect();
        self.target = assignor::assign(&chosen, &specs, &self.subscribed_metadata);
        self.assignor_name = chosen;
        self.assignment_epoch = self.group_epoch;
    }

    /// Whether a member other than `member_id` still holds the partition.
    pub fn held_by_other(&self, member_id: &str, topic_id: &Uuid, partition: i32) -> bool {
        self.members
            .values()
            .any(|m| m.member_id != member_id && m.holds(topic_id, partition))
    }
}
