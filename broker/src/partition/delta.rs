//! What a new metadata image means for this broker's replicas, Kafka's
//! `ReplicaManager.applyDelta` in pure form: for every partition whose assignment or
//! leadership changed between two images, whether this broker becomes its leader, becomes
//! (or stays) a follower under a new leader or epoch, or stops holding it (the log goes
//! only then: a replica's log is kept whatever its role).

use std::collections::BTreeMap;

use brook_raft::{MetadataImage, PartitionImage};

/// A partition by topic name and index.
pub type TopicPartition = (String, i32);

/// One change of this broker's role for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleChange {
    /// This broker leads the partition from `leader_epoch` on.
    BecomeLeader { leader_epoch: i32 },
    /// Another broker (or none: -1) leads it; this broker keeps its replica.
    BecomeFollower { leader: i32, leader_epoch: i32 },
    /// This broker is no longer a replica (or the topic is gone): delete the log.
    Stop,
    /// Same leader and epoch, but the replicas, the ISR or the partition epoch changed
    /// (the leader's high watermark and min-ISR checks follow the committed ISR; a new
    /// partition epoch resolves the leader's ISR changes in flight, even one refused by
    /// the compare-and-set that leaves the ISR as it was).
    UpdateAssignment,
}

/// Each partition with its topic id (a topic deleted and created again under the same
/// name is another partition).
fn partitions(image: &MetadataImage) -> BTreeMap<TopicPartition, (uuid::Uuid, &PartitionImage)> {
    image
        .topics
        .values()
        .flat_map(|t| {
            t.partitions
                .values()
                .map(move |p| ((t.name.clone(), p.partition), (t.topic_id, p)))
        })
        .collect()
}

/// The role changes of `node_id` from `old` to `new`.
pub fn role_changes(
    old: &MetadataImage,
    new: &MetadataImage,
    node_id: i32,
) -> Vec<(TopicPartition, RoleChange)> {
    let before = partitions(old);
    let after = partitions(new);
    let mut out = Vec::new();
    for (tp, &(id, p)) in &after {
        if !p.replicas.contains(&node_id) {
            if before
                .get(tp)
                .is_some_and(|(_, o)| o.replicas.contains(&node_id))
            {
                out.push((tp.clone(), RoleChange::Stop));
            }
            continue;
        }
        let same = before.get(tp).filter(|(old_id, o)| {
            *old_id == id
                && o.leader == p.leader
                && o.leader_epoch == p.leader_epoch
                && o.replicas.contains(&node_id)
        });
        if let Some((_, o)) = same {
            if p.leader == node_id
                && (o.isr != p.isr
                    || o.replicas != p.replicas
                    || o.partition_epoch != p.partition_epoch)
            {
                out.push((tp.clone(), RoleChange::UpdateAssignment));
            }
            continue;
        }
        if let Some((old_id, o)) = before.get(tp) {
            if *old_id != id && o.replicas.contains(&node_id) {
                // The topic was deleted and created again: the old replica goes first.
                out.push((tp.clone(), RoleChange::Stop));
            }
        }
        let change = if p.leader == node_id {
            RoleChange::BecomeLeader {
                leader_epoch: p.leader_epoch,
            }
        } else {
            RoleChange::BecomeFollower {
                leader: p.leader,
                leader_epoch: p.leader_epoch,
            }
        };
        out.push((tp.clone(), change));
    }
    for (tp, (_, p)) in &before {
        if !after.contains_key(tp) && p.replicas.contains(&node_id) {
            out.push((tp.clone(), RoleChange::Stop));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use brook_raft::TopicImage;
    use uuid::Uuid;

    use super::*;

    fn image(parts: &[(i32, i32, i32, &[i32])]) -> MetadataImage {
        let mut image = MetadataImage::default();
        let partitions = parts
            .iter()
            .map(|&(partition, leader, leader_epoch, replicas)| {
                (
                    partition,
                    PartitionImage {
                        partition,
                        leader,
                        leader_epoch,
                        replicas: replicas.to_vec(),
                        isr: vec![leader],
                        partition_epoch: 0,
                        adding_replicas: Vec::new(),
                        removing_replicas: Vec::new(),
                        elr: Vec::new(),
                        last_known_elr: Vec::new(),
                        leader_recovery_state: brook_raft::LeaderRecoveryState::Recovered,
                    },
                )
            })
            .collect();
        image.topics.insert(
            "t".into(),
            TopicImage {
                name: "t".into(),
                topic_id: Uuid::from_u128(1),
                partitions,
                configs: BTreeMap::new(),
            },
        );
        image
    }

    #[test]
    fn a_new_topic_makes_this_broker_leader_or_follower_of_its_replicas_only() {
        let new = image(&[(0, 1, 0, &[1, 2]), (1, 2, 0, &[2, 1]), (2, 3, 0, &[3])]);
        let changes = role_changes(&MetadataImage::default(), &new, 1);
        assert_eq!(
            changes,
            vec![
                (
                    ("t".into(), 0),
                    RoleChange::BecomeLeader { leader_epoch: 0 }
                ),
                (
                    ("t".into(), 1),
                    RoleChange::BecomeFollower {
                        leader: 2,
                        leader_epoch: 0
                    }
                ),
            ]
        );
    }

    #[test]
    fn losing_the_lead_keeps_the_replica_and_leaving_the_assignment_or_topic_stops_it() {
        let old = image(&[(0, 1, 0, &[1, 2]), (1, 1, 0, &[1])]);
        let fenced = image(&[(0, -1, 1, &[1, 2]), (1, 1, 0, &[1])]);
        assert_eq!(
            role_changes(&old, &fenced, 1),
            vec![(
                ("t".into(), 0),
                RoleChange::BecomeFollower {
                    leader: -1,
                    leader_epoch: 1
                }
            )]
        );
        let moved = image(&[(0, 2, 1, &[2, 3]), (1, 1, 0, &[1])]);
        assert_eq!(
            role_changes(&old, &moved, 1),
            vec![(("t".into(), 0), RoleChange::Stop)]
        );
        let gone = MetadataImage::default();
        assert_eq!(role_changes(&old, &gone, 1).len(), 2);
        assert!(role_changes(&old, &old, 1).is_empty());
    }

    #[test]
    fn a_new_partition_epoch_reaches_the_leader_even_with_the_same_isr() {
        let old = image(&[(0, 1, 0, &[1, 2])]);
        let mut new = old.clone();
        if let Some(p) = new
            .topics
            .get_mut("t")
            .and_then(|t| t.partitions.get_mut(&0))
        {
            p.partition_epoch = 1;
        }
        assert_eq!(
            role_changes(&old, &new, 1),
            vec![(("t".into(), 0), RoleChange::UpdateAssignment)]
        );
        assert!(role_changes(&old, &new, 2).is_empty());
    }
}
