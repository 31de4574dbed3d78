//! Partition-leadership rules applied by the state machine when brokers are fenced,
//! unfenced or re-registered, and by [`Command::ElectLeaders`](crate::Command::ElectLeaders)
//! (KRaft's `ReplicationControlManager` callers of `PartitionChangeBuilder`). No I/O, no
//! clock: every voter computes the same result. The per-partition rules, with and without
//! KIP-966's eligible leader replicas, are [`crate::partition_change`]'s:
//! - a leader comes from the ISR, first in replica order, and must be active (registered,
//!   not fenced, not shutting down); with ELR on and the ISR empty, from the ELR; then the
//!   last known leader; none → [`NO_LEADER`];
//! - with ELR off the ISR never empties: the last member stays in it while fenced, so the
//!   partition waits leaderless for it rather than electing a replica that may lack data;
//!   with ELR on it empties and its members below min ISR wait in the ELR;
//! - unless unclean leader election is enabled for the topic
//!   ([`unclean_leader_election_enabled`]): then a partition left leaderless with no
//!   eligible member by a fence, unfence or re-registration elects the first active replica
//!   in replica order, whose ISR becomes that replica alone (acknowledged records it lacks
//!   are lost). Only the topic's dynamic config and the cluster-wide dynamic default are
//!   read: a static `unclean.leader.election.enable` in a broker's properties file is not
//!   part of the image, so apply cannot see it (the broker can still propose
//!   [`ElectionType::Unclean`]);
//! - the leader epoch moves only when the leader changes, the partition epoch on every
//!   change of leader, ISR or ELR.

use std::fmt;

use uuid::Uuid;

use crate::command::ElectionType;
use crate::image::{MetadataImage, PartitionImage, TopicImage, NO_LEADER};
use crate::partition_change::{self, elr_enabled, Change, Election, Policy};

/// The topic (and cluster-default) config enabling unclean leader election.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// Why an [`ElectionType`] does not apply to a partition (Kafka's ElectLeaders error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionRefusal {
    /// The preferred replica already leads (preferred), or the partition has a leader
    /// (unclean): `ELECTION_NOT_NEEDED`.
    ElectionNotNeeded,
    /// The preferred replica is not in the ISR or not active: `PREFERRED_LEADER_NOT_AVAILABLE`.
    PreferredLeaderNotAvailable,
    /// No replica of a leaderless partition is active: `ELIGIBLE_LEADERS_NOT_AVAILABLE`.
    EligibleLeadersNotAvailable,
}

impl fmt::Display for ElectionRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ElectionRefusal::ElectionNotNeeded => "leader election not needed",
            ElectionRefusal::PreferredLeaderNotAvailable => {
                "the preferred leader is not in the ISR or not active"
            }
            ElectionRefusal::EligibleLeadersNotAvailable => "no replica is eligible to lead",
        })
    }
}

impl std::error::Error for ElectionRefusal {}

/// The preferred acceptable leader among `isr`: first in replica order, able to lead
/// (`MetadataImage::may_lead`), and not `excluded`.
pub fn elect(
    image: &MetadataImage,
    topic_id: &Uuid,
    partition: i32,
    p: &PartitionImage,
    excluded: Option<i32>,
) -> i32 {
    p.replicas
        .iter()
        .copied()
        .find(|&r| {
            Some(r) != excluded && p.isr.contains(&r) && image.may_lead(r, topic_id, partition)
        })
        .unwrap_or(NO_LEADER)
}

/// Whether `unclean.leader.election.enable` is `true` for `topic`: its dynamic topic config
/// if set, else the cluster-wide dynamic default (`image.broker_configs(None)`), else false.
/// Static broker properties are not in the image and so are not seen here.
pub fn unclean_leader_election_enabled(image: &MetadataImage, topic: &TopicImage) -> bool {
    topic
        .configs
        .get(UNCLEAN_LEADER_ELECTION_ENABLE)
        .or_else(|| {
            image
                .broker_configs(None)
                .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION_ENABLE))
        })
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Whether a preferred election would change `p`'s leader: `Ok` when the first replica is
/// active, not already the leader, and in the ISR (or, with ELR on and the ISR empty, in
/// the ELR).
pub fn preferred_leader_electable(
    image: &MetadataImage,
    p: &PartitionImage,
) -> Result<(), ElectionRefusal> {
    let Some(&preferred) = p.replicas.first() else {
        return Err(ElectionRefusal::PreferredLeaderNotAvailable);
    };
    if p.leader == preferred {
        return Err(ElectionRefusal::ElectionNotNeeded);
    }
    let eligible = p.isr.contains(&preferred)
        || (p.isr.is_empty() && elr_enabled(image) && p.elr.contains(&preferred));
    if !eligible || !image.is_active(preferred) {
        return Err(ElectionRefusal::PreferredLeaderNotAvailable);
    }
    Ok(())
}

/// The leader an unclean election would give the leaderless `p`: the first active ISR
/// member in replica order, else (ISR empty, ELR on) the first active ELR member, else the
/// last known leader, else the first active replica.
pub fn unclean_electable(
    image: &MetadataImage,
    p: &PartitionImage,
) -> Result<i32, ElectionRefusal> {
    if p.has_leader() {
        return Err(ElectionRefusal::ElectionNotNeeded);
    }
    // Min ISR only decides whether a non-empty ISR keeps an ELR, which cannot lead then.
    let policy = Policy {
        elr: elr_enabled(image),
        min_isr: 1,
        unclean: true,
    };
    let mut trial = p.clone();
    partition_change::apply(
        &mut trial,
        policy,
        &Change {
            target_isr: p.isr.clone(),
            unclean_shutdown: None,
            acceptable: &|r| image.is_active(r),
            election: Election::Unclean,
            leader_recovery_state: None,
        },
    );
    match trial.leader {
        NO_LEADER => Err(ElectionRefusal::EligibleLeadersNotAvailable),
        leader => Ok(leader),
    }
}

/// [`Command::ElectLeaders`](crate::Command::ElectLeaders): runs `kind` on each listed
/// partition, in order; unknown partitions and those the election does not apply to are
/// left alone.
pub fn elect_leaders(image: &mut MetadataImage, partitions: &[(Uuid, i32)], kind: ElectionType) {
    for (topic_id, partition) in partitions {
        let snapshot = image.clone();
        let Some(topic) = snapshot.topic_by_id(topic_id) else {
            continue;
        };
        let Some(p) = topic.partitions.get(partition) else {
            continue;
        };
        let election = match kind {
            ElectionType::Preferred if preferred_leader_electable(&snapshot, p).is_ok() => {
                Election::Preferred
            }
            ElectionType::Unclean if unclean_electable(&snapshot, p).is_ok() => Election::Unclean,
            _ => continue,
        };
        let policy = Policy::of(&snapshot, topic);
        let change = Change {
            target_isr: p.isr.clone(),
            unclean_shutdown: None,
            acceptable: &|r| snapshot.may_lead(r, topic_id, *partition),
            election,
            leader_recovery_state: None,
        };
        if let Some(p) = image
            .topics
            .get_mut(&topic.name)
            .and_then(|t| t.partitions.get_mut(partition))
        {
            partition_change::apply(p, policy, &change);
        }
    }
}

/// `broker_id` can no longer lead (fenced, stopping, unregistered, or restarted after a
/// clean shutdown): it leaves every ISR (with ELR off, every ISR it is not the last member
/// of; with ELR on, below min ISR it joins the ELR), and partitions it led get another
/// leader by [`crate::partition_change`]'s order. The caller marks the broker inactive
/// first.
pub fn remove_broker(image: &mut MetadataImage, broker_id: i32) {
    remove(image, broker_id, None);
}

/// `broker_id` registered again after an unclean shutdown (no clean-shutdown record of its
/// previous epoch): with ELR on it leaves every ISR and ELR, since its log may have lost
/// records it had acknowledged (KIP-966); with ELR off as [`remove_broker`].
pub fn remove_uncleanly_shut_down_broker(image: &mut MetadataImage, broker_id: i32) {
    remove(image, broker_id, Some(broker_id));
}

fn remove(image: &mut MetadataImage, broker_id: i32, unclean_shutdown: Option<i32>) {
    let snapshot = image.clone();
    for topic in image.topics.values_mut() {
        let policy = Policy::of(&snapshot, topic);
        let topic_id = topic.topic_id;
        for (&index, p) in topic.partitions.iter_mut() {
            if !p.replicas.contains(&broker_id) {
                continue;
            }
            let acceptable = |r: i32| r != broker_id && snapshot.may_lead(r, &topic_id, index);
            let change = Change {
                target_isr: p.isr.iter().copied().filter(|&r| r != broker_id).collect(),
                unclean_shutdown,
                acceptable: &acceptable,
                election: Election::keeping_online(policy),
                leader_recovery_state: None,
            };
            partition_change::apply(p, policy, &change);
        }
    }
}

/// `broker_id` became active: leaderless partitions it is a replica of elect a leader by
/// [`crate::partition_change`]'s order (ISR; with ELR on and the ISR empty, the ELR; the
/// last known leader; with unclean election enabled, the first active replica, normally
/// `broker_id` itself, alone in the ISR). The broker is never added to an ISR otherwise: it
/// rejoins through an AlterPartition from the leader once caught up.
pub fn restore_broker(image: &mut MetadataImage, broker_id: i32) {
    let snapshot = image.clone();
    for topic in image.topics.values_mut() {
        let policy = Policy::of(&snapshot, topic);
        let topic_id = topic.topic_id;
        for (&index, p) in topic.partitions.iter_mut() {
            if p.leader != NO_LEADER || !p.replicas.contains(&broker_id) {
                continue;
            }
            let acceptable = |r: i32| snapshot.may_lead(r, &topic_id, index);
            let change = Change {
                target_isr: p.isr.clone(),
                unclean_shutdown: None,
                acceptable: &acceptable,
                election: Election::keeping_online(policy),
                leader_recovery_state: None,
            };
            partition_change::apply(p, policy, &change);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::*;
    use crate::image::{BrokerRegistration, TopicImage};

    fn broker(id: i32, fenced: bool) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: id,
            host: "h".into(),
            port: 1,
            listeners: Vec::new(),
            rack: None,
            incarnation_id: Uuid::nil(),
            broker_epoch: 1,
            fenced,
            in_controlled_shutdown: false,
        }
    }

    fn image(partitions: Vec<PartitionImage>) -> MetadataImage {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            image.brokers.insert(id, broker(id, false));
        }
        image.topics.insert(
            "t".into(),
            TopicImage {
                name: "t".into(),
                topic_id: Uuid::from_u128(1),
                partitions: partitions.into_iter().map(|p| (p.partition, p)).collect(),
                configs: BTreeMap::new(),
            },
        );
        image
            .topic_names_by_id
            .insert(Uuid::from_u128(1), "t".into());
        // These tests pin the rules without eligible leader replicas; `elr_*` tests below
        // turn them on.
        image.features.insert(
            crate::partition_change::ELIGIBLE_LEADER_REPLICAS_VERSION.into(),
            0,
        );
        image
    }

    /// Three brokers, ELR on, the topic's min ISR 2, one partition led by 1 with ISR [1,2,3].
    fn elr_image() -> MetadataImage {
        let mut img = image(vec![part(0, 1, &[1, 2, 3], &[1, 2, 3])]);
        img.features.clear();
        with_topic_config_named(img, crate::partition_change::MIN_IN_SYNC_REPLICAS, "2")
    }

    fn with_topic_config_named(mut img: MetadataImage, name: &str, value: &str) -> MetadataImage {
        if let Some(t) = img.topics.get_mut("t") {
            t.configs.insert(name.into(), value.into());
        }
        img
    }

    fn fence(img: &mut MetadataImage, id: i32) {
        img.brokers.insert(id, broker(id, true));
        remove_broker(img, id);
    }

    fn unfence(img: &mut MetadataImage, id: i32) {
        img.brokers.insert(id, broker(id, false));
        restore_broker(img, id);
    }

    fn elr_summary(img: &MetadataImage) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
        let p = p0(img);
        (p.leader, p.isr, p.elr, p.last_known_elr)
    }

    #[test]
    fn elr_stopping_the_leader_then_the_next_then_the_last_leaves_them_eligible() {
        let mut img = elr_image();
        fence(&mut img, 1);
        assert_eq!(elr_summary(&img), (2, vec![2, 3], vec![], vec![]));
        fence(&mut img, 2);
        assert_eq!(elr_summary(&img), (3, vec![3], vec![2], vec![]));
        fence(&mut img, 3);
        assert_eq!(elr_summary(&img), (NO_LEADER, vec![], vec![2, 3], vec![3]));
        // Broker 1 left the ISR while it was at min ISR: it may not lead.
        unfence(&mut img, 1);
        assert_eq!(elr_summary(&img), (NO_LEADER, vec![], vec![2, 3], vec![3]));
        // Broker 2 is in the ELR: it leads without an unclean election.
        unfence(&mut img, 2);
        assert_eq!(elr_summary(&img), (2, vec![2], vec![3], vec![]));
        let p = p0(&img);
        assert_eq!((p.leader_epoch, p.partition_epoch), (4, 4));
    }

    #[test]
    fn elr_a_broker_restarting_after_an_unclean_shutdown_leaves_the_elr() {
        let mut img = elr_image();
        for id in [1, 2, 3] {
            fence(&mut img, id);
        }
        // Broker 2 re-registers without a clean-shutdown record: out of the ELR.
        remove_uncleanly_shut_down_broker(&mut img, 2);
        assert_eq!(elr_summary(&img), (NO_LEADER, vec![], vec![3], vec![3]));
        unfence(&mut img, 2);
        assert_eq!(elr_summary(&img), (NO_LEADER, vec![], vec![3], vec![3]));
        unfence(&mut img, 3);
        assert_eq!(elr_summary(&img), (3, vec![3], vec![], vec![]));
    }

    #[test]
    fn elr_with_nothing_eligible_the_last_known_leader_leads_when_back() {
        let mut img = elr_image();
        for id in [1, 2, 3] {
            fence(&mut img, id);
        }
        for id in [2, 3] {
            remove_uncleanly_shut_down_broker(&mut img, id);
        }
        assert_eq!(elr_summary(&img), (NO_LEADER, vec![], vec![], vec![3]));
        unfence(&mut img, 2);
        assert_eq!(p0(&img).leader, NO_LEADER);
        unfence(&mut img, 3);
        assert_eq!(elr_summary(&img), (3, vec![3], vec![], vec![]));
    }

    #[test]
    fn elr_unclean_election_is_the_last_resort_and_clears_the_elr() {
        let mut img = with_topic_config(elr_image(), "true");
        for id in [1, 2, 3] {
            fence(&mut img, id);
        }
        // Fencing an unclean-enabled topic's last members: each time another replica was
        // active, so the partition never went leaderless until all three were fenced.
        assert_eq!(p0(&img).leader, NO_LEADER);
        remove_uncleanly_shut_down_broker(&mut img, 2);
        remove_uncleanly_shut_down_broker(&mut img, 3);
        assert_eq!(elr_summary(&img), (NO_LEADER, vec![], vec![], vec![3]));
        unfence(&mut img, 1);
        assert_eq!(elr_summary(&img), (1, vec![1], vec![], vec![]));
        assert_eq!(
            unclean_electable(&img, &p0(&img)),
            Err(ElectionRefusal::ElectionNotNeeded)
        );
    }

    #[test]
    fn elr_elections_report_an_elr_member_as_electable() {
        let mut img = elr_image();
        for id in [1, 2, 3] {
            fence(&mut img, id);
        }
        img.brokers.insert(3, broker(3, false));
        assert_eq!(unclean_electable(&img, &p0(&img)), Ok(3));
        assert_eq!(
            preferred_leader_electable(&img, &p0(&img)),
            Err(ElectionRefusal::PreferredLeaderNotAvailable)
        );
        elect_p0(&mut img, ElectionType::Unclean);
        assert_eq!(elr_summary(&img), (3, vec![3], vec![2], vec![]));
    }

    fn part(partition: i32, leader: i32, replicas: &[i32], isr: &[i32]) -> PartitionImage {
        PartitionImage {
            partition,
            leader,
            leader_epoch: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: crate::image::LeaderRecoveryState::Recovered,
        }
    }

    #[test]
    fn fencing_the_leader_elects_the_next_in_sync_replica_and_bumps_both_epochs() {
        let mut img = image(vec![part(0, 1, &[1, 2, 3], &[1, 2, 3])]);
        img.brokers.insert(1, broker(1, true));
        remove_broker(&mut img, 1);
        let p = &img.topics["t"].partitions[&0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 1));
        assert_eq!(p.isr, vec![2, 3]);
    }

    #[test]
    fn the_last_in_sync_replica_stays_in_the_isr_and_the_partition_waits_leaderless() {
        let mut img = image(vec![part(0, 1, &[1, 2], &[1])]);
        img.brokers.insert(1, broker(1, true));
        remove_broker(&mut img, 1);
        let p = img.topics["t"].partitions[&0].clone();
        assert_eq!((p.leader, p.leader_epoch), (NO_LEADER, 1));
        assert_eq!(p.isr, vec![1]);
        // Broker 2 is out of sync: it never becomes leader; broker 1 does when it returns.
        img.brokers.insert(1, broker(1, false));
        restore_broker(&mut img, 1);
        let p = &img.topics["t"].partitions[&0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 2, 2));
    }

    #[test]
    fn fencing_a_follower_shrinks_the_isr_without_touching_the_leader_epoch() {
        let mut img = image(vec![part(0, 1, &[1, 2], &[1, 2])]);
        img.brokers.insert(2, broker(2, true));
        remove_broker(&mut img, 2);
        let p = &img.topics["t"].partitions[&0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1));
        assert_eq!(p.isr, vec![1]);
    }

    #[test]
    fn partitions_without_the_broker_are_untouched() {
        let mut img = image(vec![part(0, 2, &[2, 3], &[2, 3])]);
        let before = img.clone();
        img.brokers.insert(1, broker(1, true));
        remove_broker(&mut img, 1);
        assert_eq!(img.topics, before.topics);
    }

    fn with_topic_config(mut img: MetadataImage, value: &str) -> MetadataImage {
        if let Some(t) = img.topics.get_mut("t") {
            t.configs
                .insert(UNCLEAN_LEADER_ELECTION_ENABLE.into(), value.into());
        }
        img
    }

    fn with_cluster_default(mut img: MetadataImage, value: &str) -> MetadataImage {
        img.broker_configs.insert(
            None,
            BTreeMap::from([(
                UNCLEAN_LEADER_ELECTION_ENABLE.to_string(),
                value.to_string(),
            )]),
        );
        img
    }

    fn p0(img: &MetadataImage) -> PartitionImage {
        img.topics["t"].partitions[&0].clone()
    }

    fn summary(p: &PartitionImage) -> (i32, i32, i32, Vec<i32>) {
        (p.leader, p.leader_epoch, p.partition_epoch, p.isr.clone())
    }

    fn elect_p0(img: &mut MetadataImage, kind: ElectionType) {
        elect_leaders(img, &[(Uuid::from_u128(1), 0)], kind);
    }

    #[test]
    fn a_preferred_election_moves_leadership_to_an_in_sync_active_first_replica() {
        let mut img = image(vec![part(0, 2, &[1, 2, 3], &[2, 3, 1])]);
        assert_eq!(preferred_leader_electable(&img, &p0(&img)), Ok(()));
        elect_p0(&mut img, ElectionType::Preferred);
        assert_eq!(summary(&p0(&img)), (1, 1, 1, vec![2, 3, 1]));
        // Already the leader.
        assert_eq!(
            preferred_leader_electable(&img, &p0(&img)),
            Err(ElectionRefusal::ElectionNotNeeded)
        );
        let before = img.clone();
        elect_p0(&mut img, ElectionType::Preferred);
        assert_eq!(img, before);
    }

    #[test]
    fn a_preferred_election_needs_the_first_replica_in_sync_and_active() {
        let mut img = image(vec![part(0, 2, &[1, 2, 3], &[2, 3])]);
        assert_eq!(
            preferred_leader_electable(&img, &p0(&img)),
            Err(ElectionRefusal::PreferredLeaderNotAvailable)
        );
        let before = img.clone();
        elect_p0(&mut img, ElectionType::Preferred);
        assert_eq!(img, before);

        let mut img = image(vec![part(0, 2, &[1, 2, 3], &[1, 2, 3])]);
        img.brokers.insert(1, broker(1, true));
        assert_eq!(
            preferred_leader_electable(&img, &p0(&img)),
            Err(ElectionRefusal::PreferredLeaderNotAvailable)
        );
        let before = img.clone();
        elect_p0(&mut img, ElectionType::Preferred);
        assert_eq!(img, before);

        // A leaderless partition gets its preferred leader if it may lead.
        let mut img = image(vec![part(0, NO_LEADER, &[1, 2], &[1])]);
        elect_p0(&mut img, ElectionType::Preferred);
        assert_eq!(summary(&p0(&img)), (1, 1, 1, vec![1]));
    }

    #[test]
    fn an_unclean_election_picks_an_active_isr_member_first_then_any_active_replica() {
        // An active ISR member exists: a clean choice, the ISR stays.
        let mut img = image(vec![part(0, NO_LEADER, &[1, 2, 3], &[1, 3])]);
        img.brokers.insert(1, broker(1, true));
        assert_eq!(unclean_electable(&img, &p0(&img)), Ok(3));
        elect_p0(&mut img, ElectionType::Unclean);
        assert_eq!(summary(&p0(&img)), (3, 1, 1, vec![1, 3]));

        // No ISR member is active: the first active replica, alone in the ISR.
        let mut img = image(vec![part(0, NO_LEADER, &[1, 2, 3], &[1])]);
        img.brokers.insert(1, broker(1, true));
        img.brokers.insert(2, broker(2, true));
        assert_eq!(unclean_electable(&img, &p0(&img)), Ok(3));
        elect_p0(&mut img, ElectionType::Unclean);
        assert_eq!(summary(&p0(&img)), (3, 1, 1, vec![3]));
    }

    #[test]
    fn an_unclean_election_leaves_led_or_hopeless_partitions_alone() {
        let mut img = image(vec![part(0, 2, &[1, 2], &[2])]);
        assert_eq!(
            unclean_electable(&img, &p0(&img)),
            Err(ElectionRefusal::ElectionNotNeeded)
        );
        let before = img.clone();
        elect_p0(&mut img, ElectionType::Unclean);
        assert_eq!(img, before);

        let mut img = image(vec![part(0, NO_LEADER, &[1, 2, 4], &[1])]);
        img.brokers.insert(1, broker(1, true));
        img.brokers.insert(2, broker(2, true));
        assert_eq!(
            unclean_electable(&img, &p0(&img)),
            Err(ElectionRefusal::EligibleLeadersNotAvailable)
        );
        let before = img.clone();
        elect_p0(&mut img, ElectionType::Unclean);
        assert_eq!(img, before);
    }

    #[test]
    fn elections_skip_unknown_topics_and_partitions() {
        let mut img = image(vec![part(0, 2, &[1, 2], &[1, 2])]);
        let before = img.clone();
        elect_leaders(
            &mut img,
            &[(Uuid::from_u128(9), 0), (Uuid::from_u128(1), 5)],
            ElectionType::Preferred,
        );
        assert_eq!(img, before);
    }

    #[test]
    fn the_topic_config_decides_unclean_election_before_the_cluster_default() {
        let img = image(vec![]);
        let t = |img: &MetadataImage| unclean_leader_election_enabled(img, &img.topics["t"]);
        assert!(!t(&img));
        assert!(t(&with_cluster_default(img.clone(), "true")));
        assert!(t(&with_topic_config(img.clone(), " TRUE")));
        assert!(!t(&with_topic_config(
            with_cluster_default(img.clone(), "true"),
            "false"
        )));
        assert!(t(&with_topic_config(
            with_cluster_default(img.clone(), "false"),
            "true"
        )));
        assert!(!t(&with_cluster_default(img, "yes")));
    }

    #[test]
    fn fencing_the_last_in_sync_replica_elects_an_out_of_sync_one_only_when_unclean_is_enabled() {
        let fence_1 = |mut img: MetadataImage| {
            img.brokers.insert(1, broker(1, true));
            remove_broker(&mut img, 1);
            p0(&img)
        };
        let base = image(vec![part(0, 1, &[1, 2, 3], &[1])]);
        assert_eq!(
            summary(&fence_1(base.clone())),
            (NO_LEADER, 1, 1, vec![1]),
            "without the config the partition waits for its ISR"
        );
        assert_eq!(
            summary(&fence_1(with_topic_config(base.clone(), "true"))),
            (2, 1, 1, vec![2])
        );
        assert_eq!(
            summary(&fence_1(with_cluster_default(base.clone(), "true"))),
            (2, 1, 1, vec![2])
        );
        assert_eq!(
            summary(&fence_1(with_topic_config(
                with_cluster_default(base.clone(), "true"),
                "false"
            ))),
            (NO_LEADER, 1, 1, vec![1])
        );
        // No other replica active: leaderless even with the config.
        let mut lonely = with_topic_config(base, "true");
        lonely.brokers.insert(2, broker(2, true));
        lonely.brokers.insert(3, broker(3, true));
        assert_eq!(summary(&fence_1(lonely)), (NO_LEADER, 1, 1, vec![1]));
    }

    #[test]
    fn fencing_a_follower_of_a_leaderless_partition_may_trigger_the_unclean_election() {
        // Leaderless, ISR [1] (fenced); broker 2 is fenced too and 3 is active.
        let mut img = with_topic_config(image(vec![part(0, NO_LEADER, &[1, 2, 3], &[1])]), "true");
        img.brokers.insert(1, broker(1, true));
        img.brokers.insert(2, broker(2, true));
        remove_broker(&mut img, 2);
        assert_eq!(summary(&p0(&img)), (3, 1, 1, vec![3]));
    }

    #[test]
    fn an_unfenced_replica_leads_a_partition_without_active_isr_members_only_when_unclean() {
        // Leaderless, ISR [1] (fenced); broker 2 was fenced and comes back.
        let base = {
            let mut img = image(vec![part(0, NO_LEADER, &[1, 2], &[1])]);
            img.brokers.insert(1, broker(1, true));
            img
        };
        let mut img = base.clone();
        restore_broker(&mut img, 2);
        assert_eq!(img, base, "without the config the partition keeps waiting");

        for mut img in [
            with_topic_config(base.clone(), "true"),
            with_cluster_default(base.clone(), "true"),
        ] {
            restore_broker(&mut img, 2);
            assert_eq!(summary(&p0(&img)), (2, 1, 1, vec![2]));
        }

        // Not a replica: nothing happens.
        let mut img = with_topic_config(base, "true");
        let before = img.clone();
        restore_broker(&mut img, 3);
        assert_eq!(img, before);
    }

    #[test]
    fn unfencing_never_adds_the_broker_to_an_isr() {
        // Led by 1 with ISR [1]; broker 2 returns: it rejoins through AlterPartition only.
        let mut img = with_topic_config(image(vec![part(0, 1, &[1, 2], &[1])]), "true");
        let before = img.clone();
        restore_broker(&mut img, 2);
        assert_eq!(img, before);
        // Leaderless with an ISR that holds it: it leads, the ISR is unchanged.
        let mut img = image(vec![part(0, NO_LEADER, &[1, 2], &[2, 1])]);
        img.brokers.insert(1, broker(1, true));
        restore_broker(&mut img, 2);
        assert_eq!(summary(&p0(&img)), (2, 1, 1, vec![2, 1]));
    }
}
