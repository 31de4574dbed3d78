//! Committed offsets: OffsetCommit (group checks, then one durable append to the group's
//! `__consumer_offsets` partition applied to the store, then the cache), OffsetFetch (from the cache) and OffsetDelete (refused for topics an active
//! consumer group subscribes to, KIP-496).

use std::collections::BTreeSet;
use std::time::Instant;

use brook_storage::offsets::{CommittedOffset, OffsetRecord};

use super::state::Group;
use super::types::{GroupError, GroupState};
use super::{GroupCoordinator, OffsetMap};
use crate::error::BrokerError;

/// Who is committing: the group member's identity and generation (-1 from outside).
#[derive(Debug, Clone)]
pub struct Committer {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    /// What a commit with a generation to a group that does not exist gets: Kafka 4
    /// answers GROUP_ID_NOT_FOUND from OffsetCommit v9, ILLEGAL_GENERATION before.
    pub missing_group_error: GroupError,
}

impl GroupCoordinator {
    /// Validates the committer against the group, then stores `entries` durably.
    pub async fn commit_offsets(
        &self,
        group_id: &str,
        committer: Committer,
        entries: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), BrokerError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId.into());
        }
        self.serves(group_id)?;
        {
            let mut groups = self.shared.groups.lock();
            match groups.get(group_id) {
                Some(group) => group.validate_offset_commit(
                    &committer.member_id,
                    committer.group_instance_id.as_deref(),
                    committer.generation_id,
                )?,
                None => {
                    let (member, epoch) = (&committer.member_id, committer.generation_id);
                    let consumer = &self.shared.consumer;
                    if let Some(checked) =
                        consumer.validate_commit(group_id, member, epoch, false, &entries)
                    {
                        checked?;
                    } else if committer.generation_id < 0 {
                        // A standalone commit creates the (Empty) group, as Kafka does.
                        groups.insert(group_id.to_owned(), Group::new(group_id));
                    } else {
                        return Err(committer.missing_group_error.into());
                    }
                }
            }
        }
        if entries.is_empty() {
            return Ok(());
        }
        let records = entries
            .iter()
            .map(|(topic, partition, offset)| OffsetRecord::Commit {
                group: group_id.to_owned(),
                topic: topic.clone(),
                partition: *partition,
                offset: offset.clone(),
            })
            .collect();
        self.shared.persist(records).await?;
        let mut offsets = self.shared.offsets.lock();
        let map = offsets.entry(group_id.to_owned()).or_default();
        for (topic, partition, committed) in entries {
            map.insert((topic, partition), committed);
        }
        Ok(())
    }

    /// The group's committed offsets (empty for an unknown group, as Kafka answers).
    pub fn fetch_offsets(&self, group_id: &str) -> OffsetMap {
        self.shared
            .offsets
            .lock()
            .get(group_id)
            .cloned()
            .unwrap_or_default()
    }

    /// OffsetDelete: per partition, `Ok` or why not; a group-level error fails all.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<Result<(), GroupError>>, BrokerError> {
        self.serves(group_id)?;
        let subscribed: BTreeSet<String> = {
            let groups = self.shared.groups.lock();
            match groups.get(group_id) {
                // A consumer group (KIP-848): its members' subscriptions.
                None => self
                    .shared
                    .consumer
                    .subscribed_topics(group_id)
                    .ok_or(GroupError::GroupIdNotFound)?,
                Some(group) => match group.state {
                    GroupState::Dead => return Err(GroupError::GroupIdNotFound.into()),
                    GroupState::Empty => BTreeSet::new(),
                    _ if group.protocol_type.as_deref() == Some("consumer") => {
                        subscribed_topics(group)
                    }
                    _ => return Err(GroupError::NonEmptyGroup.into()),
                },
            }
        };
        let results: Vec<Result<(), GroupError>> = partitions
            .iter()
            .map(|(topic, _)| {
                if subscribed.contains(topic) {
                    Err(GroupError::GroupSubscribedToTopic)
                } else {
                    Ok(())
                }
            })
            .collect();
        let deletable: Vec<(String, i32)> = partitions
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(p, _)| p.clone())
            .collect();
        if !deletable.is_empty() {
            let tombstones = deletable
                .iter()
                .map(|(topic, partition)| OffsetRecord::DeleteOffset {
                    group: group_id.to_owned(),
                    topic: topic.clone(),
                    partition: *partition,
                })
                .collect();
            self.shared.persist(tombstones).await?;
            if let Some(map) = self.shared.offsets.lock().get_mut(group_id) {
                for p in deletable {
                    map.remove(&p);
                }
            }
        }
        Ok(results)
    }

    /// The state, protocol and members of a group for DescribeGroups.
    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let groups = self.shared.groups.lock();
        let g = groups.get(group_id)?;
        let stable = g.state == GroupState::Stable;
        let protocol = g.protocol_name.clone().unwrap_or_default();
        Some(GroupDescription {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            // Kafka shows the protocol and member bytes only once the group is Stable.
            protocol_data: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: g
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Default::default()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Default::default()
                    },
                })
                .collect(),
        })
    }

    /// Test and tooling hook: runs the timers now instead of on the next tick.
    pub fn tick_now(&self) {
        let now = Instant::now();
        let mut groups = self.shared.groups.lock();
        for group in groups.values_mut() {
            group.tick(now);
            self.shared.queue_if_dirty(group);
        }
    }
}

#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Debug, Clone)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: bytes::Bytes,
    pub assignment: bytes::Bytes,
}

/// The topics in the members' `ConsumerProtocolSubscription`s (version i16, then an
/// array of i16-length strings). A member whose metadata cannot be read adds nothing.
fn subscribed_topics(group: &Group) -> BTreeSet<String> {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let mut topics = BTreeSet::new();
    for member in group.members.values() {
        topics.extend(parse_subscription(&member.metadata(&protocol)).unwrap_or_default());
    }
    topics
}

pub(crate) fn parse_subscription(bytes: &[u8]) -> Option<Vec<String>> {
    let mut at = 2usize; // skip the version
    let count = i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
    at += 4;
    let mut topics = Vec::new();
    for _ in 0..count.max(0) {
        let len = i16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?);
        at += 2;
        let len = usize::try_from(len).ok()?;
        let name = std::str::from_utf8(bytes.get(at..at + len)?).ok()?;
        topics.push(name.to_owned());
        at += len;
    }
    Some(topics)
}
