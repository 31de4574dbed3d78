//! Partition reassignment (KIP-455), as KRaft's controller runs it: pure rules applied by
//! the state machine, so every voter reaches the same replica sets.
//!
//! A reassignment to `target` moves in three steps, all visible in the image:
//! 1. the replica list becomes `target` followed by the replicas being removed, with
//!    `adding_replicas` (in `target`, not yet replicas) and `removing_replicas` (replicas
//!    not in `target`) recorded: the new replicas start following and catching up;
//! 2. each new replica joins the ISR through the leader's AlterPartition once caught up;
//! 3. when the ISR without the removed replicas holds every remaining replica, the
//!    reassignment completes in the same change: the removed replicas leave the replica
//!    list and the ISR, and if the leader was one of them the first in-sync target replica
//!    leads. A reassignment that only reorders replicas, or drops some, completes at once.
//!
//! Cancelling (a null target) reverts to the replicas before the reassignment, keeping
//! the removed ones and dropping those being added; if only added replicas are in sync,
//! reverting needs an unclean election and is refused unless the topic enables it.
//!
//! A new target while one is in progress replaces it, computed against the current
//! replica list (adding ones included), as Kafka does.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::election::unclean_leader_election_enabled;
use crate::image::{MetadataImage, PartitionImage, NO_LEADER};

/// One partition's requested reassignment: `None` cancels the one in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reassignment {
    pub topic_id: Uuid,
    pub partition: i32,
    pub target: Option<Vec<i32>>,
}

/// Why a reassignment of one partition is refused (Kafka's per-partition errors of
/// AlterPartitionReassignments). The messages are Kafka's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReassignmentRefusal {
    /// UNKNOWN_TOPIC_OR_PARTITION.
    UnknownPartition { topic: String, partition: i32 },
    /// INVALID_REPLICA_ASSIGNMENT: an empty target.
    EmptyReplicas,
    /// INVALID_REPLICA_ASSIGNMENT: a broker listed twice.
    DuplicateBroker(i32),
    /// INVALID_REPLICA_ASSIGNMENT: a broker that is not registered.
    UnknownBroker(i32),
    /// NO_REASSIGNMENT_IN_PROGRESS: a cancel with nothing to cancel.
    NoReassignmentInProgress,
    /// INVALID_REPLICA_ASSIGNMENT: reverting would need an unclean election.
    UncleanRevert { topic: String, partition: i32 },
}

impl fmt::Display for ReassignmentRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPartition { topic, partition } => {
                write!(f, "Unable to find partition {topic}:{partition}.")
            }
            Self::EmptyReplicas => f.write_str(
                "The manual partition assignment includes an empty replica list.",
            ),
            Self::DuplicateBroker(b) => write!(
                f,
                "The manual partition assignment includes the broker {b} more than once."
            ),
            Self::UnknownBroker(b) => write!(
                f,
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            ),
            Self::NoReassignmentInProgress => {
                f.write_str("No partition reassignment is in progress.")
            }
            Self::UncleanRevert { topic, partition } => write!(
                f,
                "Unable to revert partition assignment for {topic}:{partition} because it would require an unclean leader election."
            ),
        }
    }
}

impl std::error::Error for ReassignmentRefusal {}

/// Whether `p` is being reassigned.
pub fn in_progress(p: &PartitionImage) -> bool {
    !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty()
}

/// Checks one reassignment against `image` without changing it; the proposer answers
/// with this, and apply checks again (the image may have moved on).
pub fn check(
    image: &MetadataImage,
    topic_id: &Uuid,
    partition: i32,
    target: Option<&[i32]>,
) -> Result<(), ReassignmentRefusal> {
    let topic = image.topic_by_id(topic_id);
    let Some(p) = topic.and_then(|t| t.partitions.get(&partition)) else {
        return Err(ReassignmentRefusal::UnknownPartition {
            topic: topic.map_or_else(|| topic_id.to_string(), |t| t.name.clone()),
            partition,
        });
    };
    match target {
        Some(target) => check_target(image, target),
        None if !in_progress(p) => Err(ReassignmentRefusal::NoReassignmentInProgress),
        None => {
            let (_, _, unclean) = revert(p);
            let allowed = topic.is_some_and(|t| unclean_leader_election_enabled(image, t));
            if unclean && !allowed {
                return Err(ReassignmentRefusal::UncleanRevert {
                    topic: topic.map(|t| t.name.clone()).unwrap_or_default(),
                    partition,
                });
            }
            Ok(())
        }
    }
}

/// Kafka's `validateManualPartitionAssignment`, brokers checked in id order.
fn check_target(image: &MetadataImage, target: &[i32]) -> Result<(), ReassignmentRefusal> {
    if target.is_empty() {
        return Err(ReassignmentRefusal::EmptyReplicas);
    }
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for b in sorted {
        if image.broker(b).is_none() {
            return Err(ReassignmentRefusal::UnknownBroker(b));
        }
        if previous == Some(b) {
            return Err(ReassignmentRefusal::DuplicateBroker(b));
        }
        previous = Some(b);
    }
    Ok(())
}

/// Applies each reassignment that still passes [`check`], in order; the others are left
/// alone (the proposer reported them).
pub fn apply(image: &mut MetadataImage, reassignments: &[Reassignment]) {
    for r in reassignments {
        if check(image, &r.topic_id, r.partition, r.target.as_deref()).is_err() {
            continue;
        }
        let Some(name) = image.topic_name(&r.topic_id).map(str::to_string) else {
            continue;
        };
        let active = Active::of(image);
        let Some(p) = image
            .topics
            .get_mut(&name)
            .and_then(|t| t.partitions.get_mut(&r.partition))
        else {
            continue;
        };
        let next = match &r.target {
            Some(target) => start(p, target),
            None => {
                let (replicas, isr, _) = revert(p);
                let mut next = p.clone();
                next.replicas = replicas;
                next.isr = isr;
                next.adding_replicas.clear();
                next.removing_replicas.clear();
                next
            }
        };
        settle(&active, p, next);
    }
}

/// The partition with a reassignment to `target` recorded (step 1), before completion.
fn start(p: &PartitionImage, target: &[i32]) -> PartitionImage {
    let removing: Vec<i32> = sorted_difference(&p.replicas, target);
    let adding: Vec<i32> = sorted_difference(target, &p.replicas);
    let mut next = p.clone();
    next.replicas = target.iter().chain(&removing).copied().collect();
    next.adding_replicas = adding;
    next.removing_replicas = removing;
    next
}

/// `a` without the members of `b`, in id order (Kafka builds these from a `TreeSet`).
fn sorted_difference(a: &[i32], b: &[i32]) -> Vec<i32> {
    let set: BTreeSet<i32> = a.iter().copied().filter(|x| !b.contains(x)).collect();
    set.into_iter().collect()
}

/// Kafka's `PartitionReassignmentRevert`: the original replicas (those being added
/// dropped), the ISR without them, and whether reverting is unclean (only added replicas
/// were in sync: the first original replica becomes the ISR).
fn revert(p: &PartitionImage) -> (Vec<i32>, Vec<i32>, bool) {
    let replicas: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !p.adding_replicas.contains(r))
        .collect();
    let isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| !p.adding_replicas.contains(r))
        .collect();
    if isr.is_empty() {
        let first = replicas.first().copied().into_iter().collect();
        return (replicas, first, true);
    }
    (replicas, isr, false)
}

/// Step 3 when it applies: the replica list and ISR without the removed replicas, if that
/// ISR is not empty and holds every remaining replica.
fn completed(p: &PartitionImage) -> Option<(Vec<i32>, Vec<i32>)> {
    if !in_progress(p) {
        return None;
    }
    let keep = |r: &i32| !p.removing_replicas.contains(r);
    let isr: Vec<i32> = p.isr.iter().copied().filter(keep).collect();
    let replicas: Vec<i32> = p.replicas.iter().copied().filter(keep).collect();
    if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
        return None;
    }
    Some((replicas, isr))
}

/// The brokers that may lead (registered, unfenced, not shutting down), taken from the
/// image before a partition in it is borrowed mutably.
pub(crate) struct Active(BTreeSet<i32>);

impl Active {
    pub(crate) fn of(image: &MetadataImage) -> Self {
        Active(image.active_brokers().map(|b| b.broker_id).collect())
    }
}

/// Completes `p`'s reassignment if its ISR now allows it (called after every ISR change
/// of the leader's AlterPartition). Returns whether anything changed.
pub(crate) fn complete_if_ready(active: &Active, p: &mut PartitionImage) -> bool {
    if completed(p).is_none() {
        return false;
    }
    let next = p.clone();
    settle(active, p, next)
}

/// Moves `p` to `next` (replicas / ISR already chosen), completing the reassignment when it
/// can, keeping the leader if it may still lead and else electing the first in-sync active
/// replica in replica order. The leader epoch moves with the leader, the partition epoch
/// with any change. Returns whether anything changed.
fn settle(active: &Active, p: &mut PartitionImage, mut next: PartitionImage) -> bool {
    if let Some((replicas, isr)) = completed(&next) {
        next.replicas = replicas;
        next.isr = isr;
        next.adding_replicas.clear();
        next.removing_replicas.clear();
    }
    let leader_stays = next.leader != NO_LEADER
        && next.isr.contains(&next.leader)
        && next.replicas.contains(&next.leader)
        && active.0.contains(&next.leader);
    if !leader_stays {
        // As `election::elect`: the first in-sync active replica in replica order.
        next.leader = next
            .replicas
            .iter()
            .copied()
            .find(|r| next.isr.contains(r) && active.0.contains(r))
            .unwrap_or(NO_LEADER);
    }
    if next == *p {
        return false;
    }
    if next.leader != p.leader {
        next.leader_epoch = p.leader_epoch.saturating_add(1);
    }
    next.partition_epoch = p.partition_epoch.saturating_add(1);
    *p = next;
    true
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::image::{BrokerRegistration, TopicImage};

    const TOPIC: u128 = 7;

    fn cluster(brokers: &[i32], replicas: &[i32], isr: &[i32], leader: i32) -> MetadataImage {
        let mut image = MetadataImage::default();
        for &b in brokers {
            image.brokers.insert(
                b,
                BrokerRegistration {
                    broker_id: b,
                    host: "localhost".into(),
                    port: 9092,
                    listeners: Vec::new(),
                    rack: None,
                    incarnation_id: Uuid::nil(),
                    broker_epoch: 1,
                    fenced: false,
                    in_controlled_shutdown: false,
                },
            );
        }
        let topic_id = Uuid::from_u128(TOPIC);
        let partition = PartitionImage {
            partition: 0,
            leader,
            leader_epoch: 3,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            partition_epoch: 5,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: crate::image::LeaderRecoveryState::Recovered,
        };
        image.topics.insert(
            "t".into(),
            TopicImage {
                name: "t".into(),
                topic_id,
                partitions: BTreeMap::from([(0, partition)]),
                configs: BTreeMap::new(),
            },
        );
        image.topic_names_by_id.insert(topic_id, "t".into());
        image
    }

    fn reassign(image: &mut MetadataImage, target: Option<&[i32]>) {
        apply(
            image,
            &[Reassignment {
                topic_id: Uuid::from_u128(TOPIC),
                partition: 0,
                target: target.map(<[i32]>::to_vec),
            }],
        );
    }

    fn part(image: &MetadataImage) -> PartitionImage {
        image.partition("t", 0).cloned().expect("partition")
    }

    fn join_isr(image: &mut MetadataImage, broker: i32) {
        let active = Active::of(image);
        let p = image
            .topics
            .get_mut("t")
            .and_then(|t| t.partitions.get_mut(&0))
            .expect("partition");
        p.isr.push(broker);
        p.partition_epoch += 1;
        complete_if_ready(&active, p);
    }

    #[test]
    fn a_move_adds_first_completes_once_the_new_replica_is_in_sync_and_moves_the_leader() {
        let mut image = cluster(&[1, 2, 3, 4], &[1, 2, 3], &[1, 2, 3], 1);
        reassign(&mut image, Some(&[2, 3, 4]));
        let p = part(&image);
        assert_eq!(p.replicas, vec![2, 3, 4, 1]);
        assert_eq!(p.adding_replicas, vec![4]);
        assert_eq!(p.removing_replicas, vec![1]);
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 3, 6));
        assert!(in_progress(&p));

        join_isr(&mut image, 4);
        let p = part(&image);
        assert_eq!(p.replicas, vec![2, 3, 4]);
        assert_eq!(p.isr, vec![2, 3, 4]);
        assert!(!in_progress(&p));
        assert_eq!(
            (p.leader, p.leader_epoch),
            (2, 4),
            "the first in-sync target leads"
        );
    }

    #[test]
    fn reordering_or_shrinking_completes_at_once_and_keeps_a_leader_that_stays() {
        let mut image = cluster(&[1, 2, 3], &[1, 2, 3], &[1, 2, 3], 2);
        reassign(&mut image, Some(&[2, 1]));
        let p = part(&image);
        assert_eq!(
            (p.replicas.clone(), p.isr.clone()),
            (vec![2, 1], vec![1, 2])
        );
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 3, 6));
        assert!(!in_progress(&p));
        // The same assignment again changes nothing.
        reassign(&mut image, Some(&[2, 1]));
        assert_eq!(part(&image).partition_epoch, 6);
    }

    #[test]
    fn cancelling_restores_the_original_replicas_and_isr() {
        let mut image = cluster(&[1, 2, 3, 4], &[1, 2, 3], &[1, 2, 3], 1);
        reassign(&mut image, Some(&[2, 3, 4]));
        reassign(&mut image, None);
        let p = part(&image);
        assert_eq!(
            (p.replicas.clone(), p.isr.clone()),
            (vec![2, 3, 1], vec![1, 2, 3])
        );
        assert!(!in_progress(&p));
        assert_eq!(p.leader, 1);
        assert_eq!(
            check(&image, &Uuid::from_u128(TOPIC), 0, None),
            Err(ReassignmentRefusal::NoReassignmentInProgress)
        );
    }

    #[test]
    fn a_revert_that_needs_an_unclean_election_is_refused_unless_enabled() {
        let mut image = cluster(&[1, 2, 3], &[1], &[1], 1);
        reassign(&mut image, Some(&[1, 2]));
        // Only the added replica is in sync (the original one was lost).
        if let Some(p) = image
            .topics
            .get_mut("t")
            .and_then(|t| t.partitions.get_mut(&0))
        {
            p.isr = vec![2];
            p.leader = 2;
        }
        let refusal = check(&image, &Uuid::from_u128(TOPIC), 0, None).expect_err("unclean");
        assert_eq!(
            refusal.to_string(),
            "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
        );
        if let Some(t) = image.topics.get_mut("t") {
            t.configs
                .insert("unclean.leader.election.enable".into(), "true".into());
        }
        reassign(&mut image, None);
        let p = part(&image);
        assert_eq!(
            (p.replicas.clone(), p.isr.clone(), p.leader),
            (vec![1], vec![1], 1)
        );
    }

    #[test]
    fn targets_are_checked_as_kafka_checks_them() {
        let image = cluster(&[1, 2, 3], &[1, 2], &[1, 2], 1);
        let id = Uuid::from_u128(TOPIC);
        let msg = |t: &[i32]| {
            check(&image, &id, 0, Some(t))
                .expect_err("refused")
                .to_string()
        };
        assert_eq!(
            msg(&[]),
            "The manual partition assignment includes an empty replica list."
        );
        assert_eq!(
            msg(&[3, 1, 3]),
            "The manual partition assignment includes the broker 3 more than once."
        );
        assert_eq!(
            msg(&[1, 9]),
            "The manual partition assignment includes broker 9, but no such broker is registered."
        );
        assert_eq!(
            check(&image, &id, 4, Some(&[1])),
            Err(ReassignmentRefusal::UnknownPartition {
                topic: "t".into(),
                partition: 4
            })
        );
        assert!(check(&image, &id, 0, Some(&[3, 2])).is_ok());
    }

    #[test]
    fn a_new_target_replaces_the_one_in_progress() {
        let mut image = cluster(&[1, 2, 3, 4, 5], &[1, 2, 3], &[1, 2, 3], 1);
        reassign(&mut image, Some(&[2, 3, 4]));
        reassign(&mut image, Some(&[2, 3, 5]));
        let p = part(&image);
        assert_eq!(p.replicas, vec![2, 3, 5, 1, 4]);
        assert_eq!(p.adding_replicas, vec![5]);
        assert_eq!(p.removing_replicas, vec![1, 4]);
        join_isr(&mut image, 5);
        let p = part(&image);
        assert_eq!(
            (p.replicas.clone(), p.isr.clone()),
            (vec![2, 3, 5], vec![2, 3, 5])
        );
        assert_eq!(p.leader, 2);
    }
}
