//! A consumer group as the set of its `__consumer_offsets` records (its "image"), the
//! changes between two images, and the group rebuilt from its records when a broker
//! becomes its coordinator.
//!
//! Persisting by image difference instead of per code path: after any change (a
//! heartbeat, a member fenced by the timer, a deletion) the coordinator takes the records
//! whose bytes differ from the last ones written (`ConsumerGroup::take_changes`), under
//! the partition's write order. Every change is then written exactly once, in order, and
//! a path that forgets to persist cannot exist. The cost is encoding the group's records
//! at each change (a few hundred bytes per member).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::assignor::TopicMeta;
use super::group::ConsumerGroup;
use super::member::{ClassicMember, ConsumerMember, MemberState};
use super::records::{self, RecordKey};
use super::regex::ResolvedRegex;

/// A group's records: key bytes → value bytes.
pub type RecordImage = BTreeMap<Vec<u8>, Vec<u8>>;

/// Records as the offset store returns them: (key, value), in key order.
pub type StoredRecords = Vec<(Vec<u8>, Vec<u8>)>;

/// A record to write: its key and value (`None`: a tombstone).
pub type RecordChange = (Vec<u8>, Option<Vec<u8>>);

/// Kafka's `MemberState` values in `ConsumerGroupCurrentMemberAssignmentValue.State`.
fn state_value(state: MemberState) -> i8 {
    match state {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn state_of(value: i8) -> MemberState {
    match value {
        1 => MemberState::UnrevokedPartitions,
        2 => MemberState::UnreleasedPartitions,
        _ => MemberState::Stable,
    }
}

/// A stable hash (FNV-1a, 64 bits) of the subscribed topics' metadata, written as the
/// group record's `MetadataHash` so a coordinator that loads the group does not take
/// unchanged metadata for a change (and bump every member's epoch after a failover).
pub fn metadata_hash(topics: &BTreeMap<String, TopicMeta>) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (name, meta) in topics {
        eat(&(name.len() as u32).to_be_bytes());
        eat(name.as_bytes());
        eat(meta.topic_id.as_bytes());
        eat(&meta.partitions.to_be_bytes());
    }
    h as i64
}

/// Every record of `group` as it stands.
pub fn image(group: &ConsumerGroup) -> RecordImage {
    let id = group.group_id.as_str();
    let mut out = RecordImage::new();
    let hash = group
        .loaded_metadata_hash
        .unwrap_or_else(|| metadata_hash(&group.subscribed_metadata));
    out.insert(
        RecordKey::GroupMetadata.encode(id),
        records::group_metadata_value(&records::GroupMetadataValue {
            epoch: group.group_epoch,
            metadata_hash: hash,
        }),
    );
    out.insert(
        RecordKey::TargetAssignmentMetadata.encode(id),
        records::target_assignment_metadata_value(group.assignment_epoch),
    );
    for (member_id, member) in &group.members {
        out.insert(
            RecordKey::MemberMetadata(member_id.clone()).encode(id),
            records::member_metadata_value(&records::MemberMetadataValue {
                instance_id: member.instance_id.clone(),
                rack_id: member.rack_id.clone(),
                client_id: member.client_id.clone(),
                client_host: member.client_host.clone(),
                subscribed_topic_names: member.subscribed_topic_names.clone(),
                subscribed_topic_regex: member.subscribed_topic_regex.clone(),
                rebalance_timeout_ms: member.rebalance_timeout_ms,
                server_assignor: member.server_assignor.clone(),
                classic: member
                    .classic
                    .as_ref()
                    .map(|c| records::ClassicMemberValue {
                        session_timeout_ms: c.session_timeout_ms,
                        protocols: c
                            .protocols
                            .iter()
                            .map(|(n, m)| (n.clone(), m.to_vec()))
                            .collect(),
                    }),
            }),
        );
        out.insert(
            RecordKey::CurrentMemberAssignment(member_id.clone()).encode(id),
            records::current_assignment_value(&records::CurrentAssignmentValue {
                member_epoch: member.member_epoch,
                previous_member_epoch: member.previous_member_epoch,
                state: state_value(member.state),
                assigned: member.assigned.clone(),
                pending_revocation: member.pending_revocation.clone(),
                assignment_epochs: member.assignment_epochs.clone(),
            }),
        );
    }
    for (pattern, resolved) in &group.resolved_regexes {
        out.insert(
            RecordKey::RegularExpression(pattern.clone()).encode(id),
            records::regex_value(&records::RegexValue {
                topics: resolved.topics.iter().cloned().collect(),
                version: resolved.version,
                timestamp_ms: resolved.timestamp_ms,
            }),
        );
    }
    for (member_id, target) in &group.target {
        out.insert(
            RecordKey::TargetAssignmentMember(member_id.clone()).encode(id),
            records::target_assignment_member_value(target),
        );
    }
    out
}

/// The records that turn `old` into `new`, in the order Kafka writes them: tombstones of
/// current assignments, target assignments, regexes and members first (Kafka's replay
/// refuses an assignment tombstone of a member already gone), then members, regexes,
/// the group epoch, target assignments, the assignment epoch, current assignments.
pub fn changes(old: &RecordImage, new: &RecordImage) -> Vec<RecordChange> {
    let rank = |key: &[u8], tombstone: bool| -> u8 {
        let record_type = key.get(..2).map_or(0, |t| i16::from_be_bytes([t[0], t[1]]));
        let order: &[i16] = if tombstone {
            &[
                records::CURRENT_MEMBER_ASSIGNMENT,
                records::TARGET_ASSIGNMENT_MEMBER,
                records::REGULAR_EXPRESSION,
                records::MEMBER_METADATA,
                records::TARGET_ASSIGNMENT_METADATA,
                records::GROUP_METADATA,
            ]
        } else {
            &[
                records::MEMBER_METADATA,
                records::REGULAR_EXPRESSION,
                records::GROUP_METADATA,
                records::TARGET_ASSIGNMENT_MEMBER,
                records::TARGET_ASSIGNMENT_METADATA,
                records::CURRENT_MEMBER_ASSIGNMENT,
            ]
        };
        let at = order.iter().position(|t| *t == record_type).unwrap_or(0) as u8;
        if tombstone {
            at
        } else {
            10 + at
        }
    };
    let mut out: Vec<(u8, RecordChange)> = Vec::new();
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        out.push((rank(key, true), (key.clone(), None)));
    }
    for (key, value) in new {
        if old.get(key) != Some(value) {
            out.push((rank(key, false), (key.clone(), Some(value.clone()))));
        }
    }
    out.sort_by(|a, b| (a.0, &a.1 .0).cmp(&(b.0, &b.1 .0)));
    out.into_iter().map(|(_, change)| change).collect()
}

/// Tombstones of every record in `written`, in Kafka's order.
pub fn tombstones(written: &RecordImage) -> Vec<RecordChange> {
    changes(written, &RecordImage::new())
}

/// The group `group_id` rebuilt from its stored records (the latest value per key). Its
/// members' session timers start again at `now` (as Kafka schedules them on load); a
/// member with a current assignment but no metadata record is incomplete and left out.
pub fn rebuild(
    group_id: &str,
    stored: StoredRecords,
    session_timeout: Duration,
    now: Instant,
) -> Result<ConsumerGroup, String> {
    let mut group = ConsumerGroup::new(group_id);
    let mut metadata = BTreeMap::new();
    let mut current = BTreeMap::new();
    for (key, value) in &stored {
        let (owner, named) = records::decode_key(key)?;
        if owner != group_id {
            return Err(format!("a record of group {owner:?} among {group_id:?}'s"));
        }
        match named {
            RecordKey::GroupMetadata => {
                let v = records::decode_group_metadata_value(value)?;
                group.group_epoch = v.epoch;
                group.loaded_metadata_hash = Some(v.metadata_hash);
            }
            RecordKey::TargetAssignmentMetadata => {
                group.assignment_epoch = records::decode_target_assignment_metadata_value(value)?;
            }
            RecordKey::MemberMetadata(member) => {
                metadata.insert(member, records::decode_member_metadata_value(value)?);
            }
            RecordKey::CurrentMemberAssignment(member) => {
                current.insert(member, records::decode_current_assignment_value(value)?);
            }
            RecordKey::TargetAssignmentMember(member) => {
                let target = records::decode_target_assignment_member_value(value)?;
                group.target.insert(member, target);
            }
            // What a pattern resolved to; the next heartbeat or topic change brings it up
            // to the current metadata.
            RecordKey::RegularExpression(pattern) => {
                let v = records::decode_regex_value(value)?;
                group.resolved_regexes.insert(
                    pattern,
                    ResolvedRegex {
                        topics: v.topics.into_iter().collect(),
                        version: v.version,
                        timestamp_ms: v.timestamp_ms,
                    },
                );
            }
        }
    }
    for (member_id, m) in metadata {
        let mut member = ConsumerMember::new(member_id.clone(), now);
        member.instance_id = m.instance_id;
        member.rack_id = m.rack_id;
        member.client_id = m.client_id;
        member.client_host = m.client_host;
        member.subscribed_topic_names = m.subscribed_topic_names;
        member.subscribed_topic_regex = m.subscribed_topic_regex;
        member.server_assignor = m.server_assignor;
        member.rebalance_timeout_ms = m.rebalance_timeout_ms;
        member.session_deadline = now + session_timeout;
        if let Some(c) = m.classic {
            // A classic member's session is its own JoinGroup's timeout.
            let ms = u64::try_from(c.session_timeout_ms).unwrap_or(0);
            member.session_deadline = now + Duration::from_millis(ms);
            member.classic = Some(ClassicMember {
                session_timeout_ms: c.session_timeout_ms,
                protocols: c
                    .protocols
                    .into_iter()
                    .map(|(n, m)| (n, bytes::Bytes::from(m)))
                    .collect(),
                rebalance_deadline: None,
            });
        }
        if let Some(c) = current.remove(&member_id) {
            member.member_epoch = c.member_epoch;
            member.previous_member_epoch = c.previous_member_epoch;
            member.state = state_of(c.state);
            member.assigned = c.assigned;
            member.pending_revocation = c.pending_revocation;
            // Without the tag (an older writer), a partition counts as held since the
            // member's epoch.
            let stored_epochs = c.assignment_epochs;
            member.carry_assignment_epochs(&stored_epochs);
            if member.state == MemberState::UnrevokedPartitions {
                let ms = u64::try_from(member.rebalance_timeout_ms).unwrap_or(0);
                member.revocation_deadline = Some(now + Duration::from_millis(ms));
            }
        }
        group.members.insert(member_id, member);
    }
    group.target.retain(|id, _| group.members.contains_key(id));
    if let Some(server_assignor) = group
        .members
        .values()
        .find_map(|m| m.server_assignor.clone())
    {
        group.assignor_name = server_assignor;
    }
    // What is on disk is what was written: the next change is a difference from it.
    group.written = stored.into_iter().collect();
    Ok(group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use uuid::Uuid;

    fn group() -> ConsumerGroup {
        let now = Instant::now();
        let mut g = ConsumerGroup::new("g");
        g.group_epoch = 3;
        g.assignment_epoch = 3;
        let topic = Uuid::from_u128(7);
        g.subscribed_metadata.insert(
            "t".into(),
            TopicMeta {
                topic_id: topic,
                partitions: 2,
            },
        );
        for (id, p) in [("a", 0), ("b", 1)] {
            let mut m = ConsumerMember::new(id.into(), now);
            m.client_id = "c".into();
            m.subscribed_topic_names = vec!["t".into()];
            m.subscribed_topic_regex = Some("t.*".into());
            m.member_epoch = 3;
            m.previous_member_epoch = 2;
            m.rebalance_timeout_ms = 1000;
            m.assigned.insert(topic, BTreeSet::from([p]));
            g.target.insert(id.into(), m.assigned.clone());
            g.members.insert(id.into(), m);
        }
        g.resolved_regexes.insert(
            "t.*".into(),
            ResolvedRegex {
                topics: BTreeSet::from(["t".to_string()]),
                version: 9,
                timestamp_ms: 1,
            },
        );
        g
    }

    #[test]
    fn a_group_rebuilt_from_its_records_has_the_same_records() {
        let g = group();
        let written = image(&g);
        let stored: Vec<_> = written.clone().into_iter().collect();
        let back = rebuild("g", stored, Duration::from_secs(45), Instant::now()).expect("rebuild");
        assert_eq!(back.group_epoch, 3);
        assert_eq!(back.members["a"].member_epoch, 3);
        assert_eq!(back.members["b"].assigned, g.members["b"].assigned);
        assert_eq!(
            back.members["b"].subscribed_topic_regex.as_deref(),
            Some("t.*")
        );
        assert_eq!(back.resolved_regexes["t.*"].version, 9);
        assert_eq!(
            back.loaded_metadata_hash,
            Some(metadata_hash(&g.subscribed_metadata))
        );
        assert_eq!(image(&back), written);
        assert_eq!(back.written, written);
    }

    #[test]
    fn changes_write_only_what_differs_with_tombstones_first() {
        let g = group();
        let before = image(&g);
        let mut after = g;
        after.remove_member("b");
        let changes = changes(&before, &image(&after));
        let kinds: Vec<(i16, bool)> = changes
            .iter()
            .map(|(k, v)| (i16::from_be_bytes([k[0], k[1]]), v.is_some()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (records::CURRENT_MEMBER_ASSIGNMENT, false),
                (records::TARGET_ASSIGNMENT_MEMBER, false),
                (records::MEMBER_METADATA, false),
                (records::GROUP_METADATA, true),
            ]
        );
        assert!(super::changes(&before, &before).is_empty());
        assert_eq!(tombstones(&before).len(), before.len());
    }
}
