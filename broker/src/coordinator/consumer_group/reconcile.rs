//! Moves one member towards its target assignment, the rules of Kafka's
//! `CurrentAssignmentBuilder`: a member first revokes what it must give up (keeping its
//! epoch), only then reaches the target epoch, and a partition is handed to it only
//! once no other member still holds it (assigned or pending revocation). Pure function.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::member::{normalized, Assignment, ConsumerMember, MemberState};

/// `member` after one reconciliation step. `owned` is what the member reported in this
/// heartbeat (`None`: not sent); `held_by_other(topic, partition)` says whether another
/// member still holds a partition.
pub fn reconcile(
    member: &ConsumerMember,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    held_by_other: &dyn Fn(&Uuid, i32) -> bool,
) -> ConsumerMember {
    match member.state {
        MemberState::Stable if member.member_epoch == target_epoch => member.clone(),
        MemberState::Stable => next(member, target_epoch, target, owned, held_by_other),
        MemberState::UnrevokedPartitions => {
            if still_owns(owned, &member.pending_revocation) {
                member.clone()
            } else {
                // Revoked: one epoch further (at most the target's), then on towards it.
                let epoch = (member.member_epoch + 1).min(target_epoch);
                next(member, epoch, target, owned, held_by_other)
            }
        }
        MemberState::UnreleasedPartitions => {
            next(member, target_epoch, target, owned, held_by_other)
        }
    }
}

/// Kafka's `computeNextAssignment`.
fn next(
    member: &ConsumerMember,
    epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    held_by_other: &dyn Fn(&Uuid, i32) -> bool,
) -> ConsumerMember {
    let mut kept = Assignment::new();
    let mut revoke = Assignment::new();
    let mut assignable = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<Uuid> = target
        .keys()
        .chain(member.assigned.keys())
        .copied()
        .collect();
    for topic in topics {
        let empty = BTreeSet::new();
        let wanted = target.get(&topic).unwrap_or(&empty);
        let current = member.assigned.get(&topic).unwrap_or(&empty);
        kept.insert(topic, wanted.intersection(current).copied().collect());
        revoke.insert(topic, current.difference(wanted).copied().collect());
        for &p in wanted.difference(current) {
            if held_by_other(&topic, p) {
                unreleased = true;
            } else {
                assignable.entry(topic).or_default().insert(p);
            }
        }
    }
    let (kept, revoke) = (normalized(kept), normalized(revoke));
    let mut out = member.clone();
    if !revoke.is_empty() && still_owns(owned, &revoke) {
        // Give up first; the epoch stays until the member reports the revocation.
        out.state = MemberState::UnrevokedPartitions;
        out.assigned = kept;
        out.pending_revocation = revoke;
        return out;
    }
    let mut assigned = kept;
    for (topic, partitions) in assignable {
        assigned.entry(topic).or_default().extend(partitions);
    }
    out.state = if unreleased {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    if out.member_epoch != epoch {
        out.previous_member_epoch = out.member_epoch;
        out.member_epoch = epoch;
    }
    out.assigned = normalized(assigned);
    out.pending_revocation = Assignment::new();
    out
}

/// Whether the member may still own any of `revoke`: unknown (`None`) counts as yes.
fn still_owns(owned: Option<&Assignment>, revoke: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    revoke.iter().any(|(topic, partitions)| {
        owned
            .get(topic)
            .is_some_and(|o| partitions.iter().any(|p| o.contains(p)))
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn topic() -> Uuid {
        Uuid::from_u128(7)
    }

    fn parts(ps: &[i32]) -> Assignment {
        let mut a = Assignment::new();
        a.insert(topic(), ps.iter().copied().collect());
        normalized(a)
    }

    fn member(epoch: i32, assigned: &[i32]) -> ConsumerMember {
        let mut m = ConsumerMember::new("m".into(), Instant::now());
        m.member_epoch = epoch;
        m.assigned = parts(assigned);
        m
    }

    #[test]
    fn a_partition_to_revoke_keeps_the_epoch_until_the_member_reports_it_gone() {
        let m = member(1, &[0, 1, 2]);
        let target = parts(&[0, 1]);
        let still = parts(&[0, 1, 2]);
        let step = reconcile(&m, 2, &target, Some(&still), &|_, _| false);
        assert_eq!(step.state, MemberState::UnrevokedPartitions);
        assert_eq!(step.member_epoch, 1);
        assert_eq!(step.assigned, parts(&[0, 1]));
        assert_eq!(step.pending_revocation, parts(&[2]));
        let revoked = parts(&[0, 1]);
        let done = reconcile(&step, 2, &target, Some(&revoked), &|_, _| false);
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!((done.member_epoch, done.previous_member_epoch), (2, 1));
        assert!(done.pending_revocation.is_empty());
    }

    #[test]
    fn a_partition_still_held_by_another_member_is_not_assigned_yet() {
        let m = member(1, &[0]);
        let target = parts(&[0, 1]);
        let step = reconcile(&m, 2, &target, Some(&parts(&[0])), &|_, p| p == 1);
        assert_eq!(step.state, MemberState::UnreleasedPartitions);
        assert_eq!(step.member_epoch, 2);
        assert_eq!(step.assigned, parts(&[0]));
        let later = reconcile(&step, 2, &target, Some(&parts(&[0])), &|_, _| false);
        assert_eq!(later.state, MemberState::Stable);
        assert_eq!(later.assigned, parts(&[0, 1]));
    }

    #[test]
    fn without_the_owned_partitions_a_revocation_is_not_assumed() {
        let m = member(1, &[0, 1]);
        let step = reconcile(&m, 2, &parts(&[0]), None, &|_, _| false);
        assert_eq!(step.state, MemberState::UnrevokedPartitions);
        let again = reconcile(&step, 2, &parts(&[0]), None, &|_, _| false);
        assert_eq!(again.state, MemberState::UnrevokedPartitions);
    }
}
