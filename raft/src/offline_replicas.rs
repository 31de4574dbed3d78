//! Replicas a broker reported offline because their log directory failed (Kafka's JBOD
//! failure handling, KIP-858: `BrokerHeartbeat.offlineLogDirs` →
//! `ReplicationControlManager.handleDirectoriesOffline`).
//!
//! Kafka records which directory holds each replica (`PartitionRecord.directories`) and,
//! when a broker reports a directory offline, treats every replica assigned to it as
//! offline. Brook's partition records carry no directory assignment, so the broker reports
//! the replicas themselves ([`Command::MarkReplicasOffline`](crate::Command::MarkReplicasOffline)):
//! it alone knows which of its logs lived in the failed directory. The effect on the
//! cluster is Kafka's:
//! - the broker leaves the ISR of each such partition (unless it is the last member: the
//!   ISR never empties, as for a fence) and a partition it led gets another leader from
//!   the ISR, else none (no unclean election here: a failed disk is no reason to lose data);
//! - Metadata lists it among the partition's offline replicas;
//! - an AlterPartition adding it back is refused (INELIGIBLE_REPLICA) and its fetcher stops
//!   following those partitions.
//!
//! The set belongs to one registration (`broker_epoch`): a restarted broker registers
//! again, with its repaired directory online, and its replicas catch up and rejoin the ISR
//! as any restarted broker's do. No I/O, no clock: every voter computes the same result.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::command::{ApplyError, ApplyResult};
use crate::election;
use crate::image::{MetadataImage, PartitionImage, NO_LEADER};

/// The replicas one registration of a broker reported offline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfflineReplicas {
    pub broker_id: i32,
    /// The registration that reported them; a newer registration has none offline.
    pub broker_epoch: u64,
    /// `(topic id, partition)`.
    pub partitions: BTreeSet<(Uuid, i32)>,
}

impl MetadataImage {
    /// Whether `broker_id`'s current registration reported its replica of the partition
    /// offline (its log directory failed).
    pub fn is_replica_offline(&self, broker_id: i32, topic_id: &Uuid, partition: i32) -> bool {
        let Some(entry) = self.offline_replicas.get(&broker_id) else {
            return false;
        };
        self.broker(broker_id)
            .is_some_and(|b| b.broker_epoch == entry.broker_epoch)
            && entry.partitions.contains(&(*topic_id, partition))
    }

    /// Whether `broker_id` may lead `topic_id`-`partition`: active, and its replica there
    /// not in a failed log directory (every election asks this).
    pub fn may_lead(&self, broker_id: i32, topic_id: &Uuid, partition: i32) -> bool {
        self.is_active(broker_id) && !self.is_replica_offline(broker_id, topic_id, partition)
    }
}

/// [`Command::MarkReplicasOffline`](crate::Command::MarkReplicasOffline): records
/// `partitions` offline for `broker_id`'s registration `broker_epoch` (added to what it
/// reported before) and moves their leadership and ISR off it. Unknown partitions, and
/// those not assigned to the broker, are skipped. [`ApplyError::UnknownBroker`] or
/// [`ApplyError::StaleBrokerEpoch`] for a registration that is not the current one.
pub fn mark_offline(
    image: &mut MetadataImage,
    broker_id: i32,
    broker_epoch: u64,
    partitions: &[(Uuid, i32)],
) -> ApplyResult {
    let current = image
        .broker(broker_id)
        .ok_or(ApplyError::UnknownBroker { broker_id })?
        .broker_epoch;
    if current != broker_epoch {
        return Err(ApplyError::StaleBrokerEpoch {
            broker_id,
            given: broker_epoch,
            current,
        });
    }
    let entry = image
        .offline_replicas
        .entry(broker_id)
        .or_insert_with(|| OfflineReplicas {
            broker_id,
            broker_epoch,
            partitions: BTreeSet::new(),
        });
    if entry.broker_epoch != broker_epoch {
        // Left by an older registration: it no longer applies.
        entry.broker_epoch = broker_epoch;
        entry.partitions.clear();
    }
    entry.partitions.extend(partitions.iter().copied());
    let snapshot = image.clone();
    for (topic_id, partition) in partitions {
        let Some(name) = snapshot.topic_name(topic_id) else {
            continue;
        };
        let Some(p) = image
            .topics
            .get_mut(name)
            .and_then(|t| t.partitions.get_mut(partition))
        else {
            continue;
        };
        if p.replicas.contains(&broker_id) {
            move_off(&snapshot, topic_id, *partition, p, broker_id);
        }
    }
    Ok(())
}

/// `broker_id`'s replica of `p` is offline: it leaves the ISR unless it is the last member,
/// and if it led, the first active ISR member in replica order leads instead (or none).
/// The leader epoch moves with the leader, the partition epoch with any change.
fn move_off(
    image: &MetadataImage,
    topic_id: &Uuid,
    partition: i32,
    p: &mut PartitionImage,
    broker_id: i32,
) {
    let mut isr: Vec<i32> = p.isr.iter().copied().filter(|&r| r != broker_id).collect();
    if isr.is_empty() {
        isr = p.isr.clone();
    }
    let mut next = p.clone();
    next.isr = isr.clone();
    let leader = if p.leader == broker_id || p.leader == NO_LEADER {
        election::elect(image, topic_id, partition, &next, Some(broker_id))
    } else {
        p.leader
    };
    let mut changed = false;
    if p.leader != leader {
        p.leader = leader;
        p.leader_epoch = p.leader_epoch.saturating_add(1);
        changed = true;
    }
    if p.isr != isr {
        p.isr = isr;
        changed = true;
    }
    if changed {
        p.partition_epoch = p.partition_epoch.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{BrokerRegistration, TopicImage};

    fn cluster() -> (MetadataImage, Uuid) {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            let b: BrokerRegistration = serde_json::from_value(serde_json::json!({
                "broker_id": id, "host": "h", "port": 9092, "rack": null,
                "broker_epoch": 10 + id as u64,
            }))
            .expect("a registration");
            image.brokers.insert(id, b);
        }
        let topic_id = Uuid::from_u128(7);
        // From JSON, so fields added later with serde defaults need no change here.
        let partition = |partition: i32, leader: i32| {
            serde_json::json!({"partition": partition, "leader": leader, "leader_epoch": 4,
                "replicas": [1, 2, 3], "isr": [1, 2, 3], "partition_epoch": 9})
        };
        let topic: TopicImage = serde_json::from_value(serde_json::json!({
            "name": "t", "topic_id": topic_id, "configs": {},
            "partitions": {"0": partition(0, 1), "1": partition(1, 2)},
        }))
        .expect("a topic image");
        image.topic_names_by_id.insert(topic_id, "t".into());
        image.topics.insert("t".into(), topic);
        (image, topic_id)
    }

    #[test]
    fn an_offline_replica_loses_leadership_and_isr_membership_and_is_listed_offline() {
        let (mut image, id) = cluster();
        mark_offline(&mut image, 1, 11, &[(id, 0), (id, 1)]).expect("applies");
        let p0 = image.partition("t", 0).expect("p0");
        assert_eq!((p0.leader, p0.leader_epoch, p0.partition_epoch), (2, 5, 10));
        assert_eq!(p0.isr, vec![2, 3]);
        let p1 = image.partition("t", 1).expect("p1");
        assert_eq!((p1.leader, p1.leader_epoch, p1.partition_epoch), (2, 4, 10));
        assert_eq!(p1.isr, vec![2, 3]);
        assert!(image.is_replica_offline(1, &id, 0));
        assert!(!image.is_replica_offline(2, &id, 0));
        // A new registration (the broker restarted) has every replica online again.
        image.brokers.get_mut(&1).expect("b1").broker_epoch = 40;
        assert!(!image.is_replica_offline(1, &id, 0));
    }

    #[test]
    fn an_offline_replica_cannot_be_added_back_to_the_isr() {
        let (mut image, id) = cluster();
        mark_offline(&mut image, 1, 11, &[(id, 0)]).expect("applies");
        let expand = crate::Command::AlterPartition {
            topic_id: id,
            partition: 0,
            broker_id: 2,
            broker_epoch: 12,
            leader_epoch: 5,
            partition_epoch: 10,
            isr: vec![2, 3, 1],
            leader_recovery_state: crate::LeaderRecoveryState::Recovered,
        };
        assert_eq!(
            crate::apply::apply(&mut image, &expand, 100),
            Err(ApplyError::IneligibleReplica { broker_id: 1 })
        );
    }

    #[test]
    fn the_last_isr_member_stays_in_the_isr_and_the_partition_waits_leaderless() {
        let (mut image, id) = cluster();
        if let Some(p) = image
            .topics
            .get_mut("t")
            .and_then(|t| t.partitions.get_mut(&0))
        {
            p.isr = vec![1];
        }
        mark_offline(&mut image, 1, 11, &[(id, 0)]).expect("applies");
        let p0 = image.partition("t", 0).expect("p0");
        assert_eq!((p0.leader, p0.isr.clone()), (NO_LEADER, vec![1]));
    }

    #[test]
    fn a_stale_registration_or_unknown_partitions_change_nothing_else() {
        let (mut image, id) = cluster();
        let before = image.clone();
        assert!(matches!(
            mark_offline(&mut image, 1, 3, &[(id, 0)]),
            Err(ApplyError::StaleBrokerEpoch { .. })
        ));
        assert!(matches!(
            mark_offline(&mut image, 9, 3, &[(id, 0)]),
            Err(ApplyError::UnknownBroker { broker_id: 9 })
        ));
        assert_eq!(image, before);
        mark_offline(&mut image, 1, 11, &[(Uuid::from_u128(99), 0), (id, 5)]).expect("applies");
        assert_eq!(image.topics, before.topics);
    }
}
