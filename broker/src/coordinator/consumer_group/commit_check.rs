//! Kafka 4.4's `ConsumerGroup.validateOffsetCommit` for OffsetCommit and TxnOffsetCommit
//! into a consumer group: the member's current epoch passes; a newer one is refused; an
//! older one passes only for partitions the member has held since that epoch (their
//! assignment epoch, KIP-1251), so a commit racing a heartbeat that moved the member to a
//! new epoch without taking its partitions is not refused (franz-go's and the Java
//! client's transactional sessions rely on it).

use super::group::ConsumerGroup;
use crate::error::GroupError;

/// A commit by `member_id` at `member_epoch` of `partitions` (topic name, partition).
pub fn validate_offset_commit(
    group: &ConsumerGroup,
    member_id: &str,
    member_epoch: i32,
    transactional: bool,
    partitions: &[(&str, i32)],
) -> Result<(), GroupError> {
    // From outside the group: allowed while it has no members (an admin's reset), and for
    // a transactional producer that is no member at all.
    if member_epoch < 0 && group.members.is_empty() {
        return Ok(());
    }
    if transactional && member_epoch == -1 && member_id.is_empty() {
        return Ok(());
    }
    let member = group
        .members
        .get(member_id)
        .ok_or(GroupError::UnknownMemberId)?;
    let current = member.member_epoch;
    if member_epoch == current {
        return Ok(());
    }
    // A classic member commits with its generation, which must be its epoch exactly
    // (Kafka's classic-member check: ILLEGAL_GENERATION).
    if member.classic.is_some() {
        return Err(GroupError::IllegalGeneration {
            given: member_epoch,
            current,
        });
    }
    if member_epoch > current {
        return Err(GroupError::StaleCommit(format!(
            "Received member epoch {member_epoch} is newer than current member epoch {current}."
        )));
    }
    for (topic, partition) in partitions {
        let held_since = group
            .subscribed_metadata
            .get(*topic)
            .and_then(|meta| member.assignment_epochs.get(&(meta.topic_id, *partition)));
        match held_since {
            None => {
                return Err(GroupError::StaleCommit(format!(
                    "Partition {topic}-{partition} is not assigned or pending revocation for member."
                )))
            }
            Some(&since) if member_epoch < since => {
                return Err(GroupError::StaleCommit(format!(
                    "Received member epoch {member_epoch} is older than assignment epoch {since} for partition {topic}-{partition}."
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Instant;

    use uuid::Uuid;

    use super::*;
    use crate::coordinator::consumer_group::assignor::TopicMeta;
    use crate::coordinator::consumer_group::member::ConsumerMember;

    const TOPIC: Uuid = Uuid::from_u128(5);

    /// Member "m" at epoch 7, holding partition 0 since epoch 3 and partition 1 since 7.
    fn group() -> ConsumerGroup {
        let mut g = ConsumerGroup::new("g");
        g.subscribed_metadata.insert(
            "t".into(),
            TopicMeta {
                topic_id: TOPIC,
                partitions: 3,
            },
        );
        let mut m = ConsumerMember::new("m".into(), Instant::now());
        m.member_epoch = 7;
        m.assigned.insert(TOPIC, BTreeSet::from([0, 1]));
        m.assignment_epochs.insert((TOPIC, 0), 3);
        m.assignment_epochs.insert((TOPIC, 1), 7);
        g.members.insert("m".into(), m);
        g
    }

    fn message(r: Result<(), GroupError>) -> String {
        match r {
            Err(GroupError::StaleCommit(m)) => m,
            other => panic!("expected STALE_MEMBER_EPOCH, got {other:?}"),
        }
    }

    #[test]
    fn an_older_epoch_commits_only_partitions_held_since_then() {
        let g = group();
        assert_eq!(
            validate_offset_commit(&g, "m", 7, false, &[("t", 0), ("t", 1)]),
            Ok(())
        );
        assert_eq!(
            validate_offset_commit(&g, "m", 5, true, &[("t", 0)]),
            Ok(())
        );
        assert_eq!(
            message(validate_offset_commit(&g, "m", 5, false, &[("t", 1)])),
            "Received member epoch 5 is older than assignment epoch 7 for partition t-1."
        );
        assert_eq!(
            message(validate_offset_commit(&g, "m", 5, false, &[("t", 2)])),
            "Partition t-2 is not assigned or pending revocation for member."
        );
        assert_eq!(
            message(validate_offset_commit(&g, "m", 8, false, &[("t", 0)])),
            "Received member epoch 8 is newer than current member epoch 7."
        );
        assert_eq!(
            validate_offset_commit(&g, "x", 7, false, &[("t", 0)]),
            Err(GroupError::UnknownMemberId)
        );
    }

    #[test]
    fn commits_from_outside_the_group() {
        let g = group();
        // A transactional producer that is no member: allowed.
        assert_eq!(
            validate_offset_commit(&g, "", -1, true, &[("t", 0)]),
            Ok(())
        );
        // An admin commit while members are active: not.
        assert_eq!(
            validate_offset_commit(&g, "", -1, false, &[("t", 0)]),
            Err(GroupError::UnknownMemberId)
        );
        let empty = ConsumerGroup::new("e");
        assert_eq!(
            validate_offset_commit(&empty, "", -1, false, &[("t", 0)]),
            Ok(())
        );
    }
}
