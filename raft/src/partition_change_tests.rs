use std::collections::BTreeMap;

use uuid::Uuid;

use super::*;

const ELR_ON: Policy = Policy {
    elr: true,
    min_isr: 2,
    unclean: false,
};

fn part(leader: i32, isr: &[i32], elr: &[i32], last_known: &[i32]) -> PartitionImage {
    PartitionImage {
        partition: 0,
        leader,
        leader_epoch: 5,
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
        partition_epoch: 7,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
        elr: elr.to_vec(),
        last_known_elr: last_known.to_vec(),
        leader_recovery_state: crate::image::LeaderRecoveryState::Recovered,
    }
}

/// (leader, leader epoch, partition epoch, isr, elr, last known elr)
type Summary = (i32, i32, i32, Vec<i32>, Vec<i32>, Vec<i32>);

fn summary(p: &PartitionImage) -> Summary {
    (
        p.leader,
        p.leader_epoch,
        p.partition_epoch,
        p.isr.clone(),
        p.elr.clone(),
        p.last_known_elr.clone(),
    )
}

/// Applies an `election` that targets `isr` with only `active` brokers able to lead.
fn run(
    p: &mut PartitionImage,
    policy: Policy,
    isr: &[i32],
    active: &[i32],
    election: Election,
    unclean_shutdown: Option<i32>,
) -> bool {
    apply(
        p,
        policy,
        &Change {
            target_isr: isr.to_vec(),
            unclean_shutdown,
            acceptable: &|r| active.contains(&r),
            election,
            leader_recovery_state: None,
        },
    )
}

#[test]
fn an_isr_at_min_isr_keeps_no_elr_and_one_below_it_moves_the_leavers_into_the_elr() {
    let mut p = part(1, &[1, 2, 3], &[], &[]);
    run(&mut p, ELR_ON, &[2, 3], &[2, 3], Election::Online, None);
    assert_eq!(summary(&p), (2, 6, 8, vec![2, 3], vec![], vec![]));
    run(&mut p, ELR_ON, &[3], &[3], Election::Online, None);
    assert_eq!(summary(&p), (3, 7, 9, vec![3], vec![2], vec![]));
}

#[test]
fn the_isr_empties_the_last_leader_is_remembered_and_an_elr_member_leads_cleanly() {
    let mut p = part(3, &[3], &[2], &[]);
    run(&mut p, ELR_ON, &[], &[], Election::Online, None);
    assert_eq!(summary(&p), (NO_LEADER, 6, 8, vec![], vec![2, 3], vec![3]));
    // Broker 2 is back (unfenced): it leads from the ELR, alone in the ISR, without an
    // unclean election; the last known leader is cleared.
    run(&mut p, ELR_ON, &[], &[2], Election::Online, None);
    assert_eq!(summary(&p), (2, 7, 9, vec![2], vec![3], vec![]));
    // Broker 3 catches up and rejoins: the ISR is at min ISR again, the ELR empties.
    run(&mut p, ELR_ON, &[2, 3], &[2, 3], Election::Online, None);
    assert_eq!(summary(&p), (2, 7, 10, vec![2, 3], vec![], vec![]));
}

#[test]
fn a_member_rejoining_below_min_isr_leaves_the_elr() {
    let policy = Policy {
        min_isr: 3,
        ..ELR_ON
    };
    let mut p = part(1, &[1], &[2, 3], &[]);
    run(&mut p, policy, &[1, 3], &[1, 2, 3], Election::Online, None);
    assert_eq!(summary(&p), (1, 5, 8, vec![1, 3], vec![2], vec![]));
}

#[test]
fn a_broker_that_shut_down_uncleanly_leaves_the_elr_and_cannot_lead_from_it() {
    let mut p = part(NO_LEADER, &[], &[2, 3], &[3]);
    run(&mut p, ELR_ON, &[], &[1], Election::Online, Some(2));
    assert_eq!(summary(&p), (NO_LEADER, 5, 8, vec![], vec![3], vec![3]));
    // Broker 2 unfenced: not eligible, so the partition waits for broker 3.
    assert!(!run(&mut p, ELR_ON, &[], &[1, 2], Election::Online, None));
    assert_eq!(p.leader, NO_LEADER);
}

#[test]
fn with_isr_and_elr_empty_the_last_known_leader_leads_again_when_back() {
    let mut p = part(NO_LEADER, &[], &[], &[3]);
    assert!(!run(&mut p, ELR_ON, &[], &[1, 2], Election::Online, None));
    run(&mut p, ELR_ON, &[], &[1, 2, 3], Election::Online, None);
    assert_eq!(summary(&p), (3, 6, 8, vec![3], vec![], vec![]));
}

#[test]
fn an_unclean_election_takes_any_active_replica_and_clears_the_elr() {
    let mut p = part(NO_LEADER, &[], &[2, 3], &[3]);
    run(&mut p, ELR_ON, &[], &[1], Election::Unclean, None);
    assert_eq!(summary(&p), (1, 6, 8, vec![1], vec![], vec![]));
}

#[test]
fn a_preferred_election_may_pick_the_first_replica_from_the_elr_when_the_isr_is_empty() {
    let mut p = part(NO_LEADER, &[], &[1, 3], &[]);
    run(&mut p, ELR_ON, &[], &[1, 3], Election::Preferred, None);
    assert_eq!(summary(&p), (1, 6, 8, vec![1], vec![3], vec![]));
}

#[test]
fn without_elr_the_isr_keeps_its_last_member_and_no_elr_is_kept() {
    let off = Policy {
        elr: false,
        ..ELR_ON
    };
    let mut p = part(3, &[3], &[2], &[3]);
    run(&mut p, off, &[], &[], Election::Online, None);
    assert_eq!(summary(&p), (NO_LEADER, 6, 8, vec![3], vec![], vec![3]));
    assert!(!run(&mut p, off, &[3], &[1, 2], Election::Online, None));
    run(&mut p, off, &[3], &[1, 2, 3], Election::Online, None);
    assert_eq!(summary(&p), (3, 7, 9, vec![3], vec![], vec![3]));
}

#[test]
fn nothing_changes_when_the_target_is_the_current_state() {
    let mut p = part(1, &[1, 2], &[], &[]);
    let before = p.clone();
    assert!(!run(
        &mut p,
        ELR_ON,
        &[1, 2],
        &[1, 2, 3],
        Election::Online,
        None
    ));
    assert_eq!(p, before);
}

fn topic(configs: &[(&str, &str)]) -> TopicImage {
    TopicImage {
        name: "t".into(),
        topic_id: Uuid::from_u128(1),
        partitions: BTreeMap::from([(0, part(1, &[1, 2, 3], &[], &[]))]),
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn min_isr_is_the_topics_else_the_cluster_default_else_one_capped_at_the_replication_factor() {
    let mut image = MetadataImage::default();
    assert_eq!(effective_min_isr(&image, &topic(&[])), 1);
    image.broker_configs.insert(
        None,
        BTreeMap::from([(MIN_IN_SYNC_REPLICAS.to_string(), "2".to_string())]),
    );
    // A broker's own value is not the cluster's (Kafka 4.4 refuses it while ELR is on).
    image.broker_configs.insert(
        Some(1),
        BTreeMap::from([(MIN_IN_SYNC_REPLICAS.to_string(), "3".to_string())]),
    );
    assert_eq!(effective_min_isr(&image, &topic(&[])), 2);
    assert_eq!(
        effective_min_isr(&image, &topic(&[(MIN_IN_SYNC_REPLICAS, "3")])),
        3
    );
    assert_eq!(
        effective_min_isr(&image, &topic(&[(MIN_IN_SYNC_REPLICAS, "5")])),
        3
    );
}

#[test]
fn elr_is_on_unless_the_feature_is_finalized_at_zero() {
    let mut image = MetadataImage::default();
    assert!(elr_enabled(&image));
    image
        .features
        .insert(ELIGIBLE_LEADER_REPLICAS_VERSION.into(), 0);
    assert!(!elr_enabled(&image));
    image
        .features
        .insert(ELIGIBLE_LEADER_REPLICAS_VERSION.into(), 1);
    assert!(elr_enabled(&image));
}

#[test]
fn clearing_elrs_empties_one_topic_or_all_and_bumps_only_the_partitions_it_changes() {
    let mut image = MetadataImage::default();
    for (name, id, elr) in [("a", 1u128, vec![2]), ("b", 2, vec![3]), ("c", 3, vec![])] {
        let mut t = topic(&[]);
        t.name = name.into();
        t.topic_id = Uuid::from_u128(id);
        t.partitions.insert(0, part(1, &[1], &elr, &[]));
        image.topic_names_by_id.insert(t.topic_id, name.into());
        image.topics.insert(name.into(), t);
    }
    let state = |img: &MetadataImage, t: &str| {
        let p = &img.topics[t].partitions[&0];
        (p.elr.clone(), p.partition_epoch)
    };
    clear_elrs(&mut image, Some(&Uuid::from_u128(1)));
    assert_eq!(state(&image, "a"), (vec![], 8));
    assert_eq!(state(&image, "b"), (vec![3], 7));
    clear_elrs(&mut image, None);
    assert_eq!(state(&image, "b"), (vec![], 8));
    assert_eq!(state(&image, "c"), (vec![], 7));
}

#[test]
fn an_unclean_election_marks_the_leader_recovering_and_a_clean_one_keeps_the_state() {
    let mut p = part(NO_LEADER, &[], &[], &[]);
    run(&mut p, ELR_ON, &[], &[2], Election::Unclean, None);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
    // Its ISR shrinks to nothing, the ELR keeps it, and it leads again from there: a clean
    // election does not end the recovery (only the leader's AlterPartition does).
    run(&mut p, ELR_ON, &[], &[], Election::Online, None);
    assert_eq!((p.leader, p.elr.clone()), (NO_LEADER, vec![2]));
    run(&mut p, ELR_ON, &[], &[2], Election::Online, None);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
}

#[test]
fn the_last_known_leader_elected_with_isr_and_elr_empty_is_recovering_too() {
    // Kafka's builder counts this election as unclean (it may lack acknowledged records).
    let mut p = part(NO_LEADER, &[], &[], &[3]);
    run(&mut p, ELR_ON, &[], &[3], Election::Online, None);
    assert_eq!((p.leader, p.isr.clone()), (3, vec![3]));
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
}

#[test]
fn an_elr_member_or_isr_member_leads_without_recovering() {
    let mut p = part(NO_LEADER, &[], &[2, 3], &[3]);
    run(&mut p, ELR_ON, &[], &[2], Election::Unclean, None);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovered);
    let mut p = part(1, &[1, 2], &[], &[]);
    run(&mut p, ELR_ON, &[2], &[2], Election::Unclean, None);
    assert_eq!(
        (p.leader, p.leader_recovery_state),
        (2, LeaderRecoveryState::Recovered)
    );
}

#[test]
fn a_reported_recovery_state_replaces_the_partitions_and_counts_as_a_change() {
    let mut p = part(2, &[2], &[], &[]);
    p.leader_recovery_state = LeaderRecoveryState::Recovering;
    let report = |p: &mut PartitionImage, isr: &[i32], state| {
        apply(
            p,
            ELR_ON,
            &Change {
                target_isr: isr.to_vec(),
                unclean_shutdown: None,
                acceptable: &|_| true,
                election: Election::Online,
                leader_recovery_state: state,
            },
        )
    };
    assert!(!report(&mut p, &[2], None));
    assert!(!report(&mut p, &[2], Some(LeaderRecoveryState::Recovering)));
    assert!(report(&mut p, &[2], Some(LeaderRecoveryState::Recovered)));
    assert_eq!(
        (p.leader_epoch, p.partition_epoch, p.leader_recovery_state),
        (5, 8, LeaderRecoveryState::Recovered)
    );
}
