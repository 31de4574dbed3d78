//! Pure application of one [`Command`] to a [`MetadataImage`]: no I/O, no clock.
//!
//! Invariant: a command either applies whole or returns an [`ApplyError`] with the image
//! untouched (every check runs before the first mutation). Because apply is deterministic,
//! all voters that apply the same log reach identical images and identical errors.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::command::{ApplyError, ApplyResult, Command, FenceReason, PartitionAssignment};
use crate::election;
use crate::image::{
    BrokerRegistration, LeaderRecoveryState, MetadataImage, PartitionImage, ProducerIdBlock,
    TopicImage, NO_LEADER,
};
use crate::offline_replicas;
use crate::partition_change::{self, Change, Election, Policy, MIN_IN_SYNC_REPLICAS};
use crate::reassignment;

/// Apply `cmd`, the entry at raft log `index`, to `image`. On `Err`, `image` is unchanged.
pub fn apply(image: &mut MetadataImage, cmd: &Command, index: u64) -> ApplyResult {
    match cmd {
        Command::CreateTopic {
            name,
            topic_id,
            partitions,
            configs,
        } => create_topic(image, name, *topic_id, partitions, configs),
        Command::FenceBroker {
            broker_id,
            broker_epoch,
            reason,
        } => fence_broker(image, *broker_id, *broker_epoch, *reason),
        Command::UnfenceBroker {
            broker_id,
            broker_epoch,
        } => {
            let b = current_broker(image, *broker_id, *broker_epoch)?;
            if b.in_controlled_shutdown || !b.fenced {
                return Ok(());
            }
            b.fenced = false;
            election::restore_broker(image, *broker_id);
            Ok(())
        }
        Command::SetClusterId { cluster_id } => {
            if image.cluster_id.is_none() {
                image.cluster_id = Some(cluster_id.clone());
            }
            Ok(())
        }
        Command::AllocateProducerIds {
            broker_id,
            block_size,
        } => {
            if !(1..=1_000_000).contains(block_size) {
                return Err(ApplyError::InvalidProducerIdBlock {
                    block_size: *block_size,
                });
            }
            let first = image.next_producer_id;
            image.next_producer_id = first.saturating_add(*block_size);
            image.producer_id_blocks.insert(
                *broker_id,
                ProducerIdBlock {
                    first,
                    len: *block_size,
                },
            );
            Ok(())
        }
        Command::DeleteTopic { topic_id } => {
            let name = topic_name(image, topic_id)?;
            image.topics.remove(&name);
            image.topic_names_by_id.remove(topic_id);
            Ok(())
        }
        Command::CreatePartitions {
            topic_id,
            partitions,
        } => {
            let name = topic_name(image, topic_id)?;
            let next = image
                .topics
                .get(&name)
                .map_or(0, |t| i32::try_from(t.partitions.len()).unwrap_or(i32::MAX));
            let new = check_assignments(image, &name, next, partitions)?;
            topic_mut(image, topic_id)?.partitions.extend(new);
            Ok(())
        }
        Command::AlterTopicConfigs {
            topic_id,
            set,
            delete,
        } => {
            alter(&mut topic_mut(image, topic_id)?.configs, set, delete);
            if touches_min_isr(set, delete) {
                partition_change::clear_elrs(image, Some(topic_id));
            }
            Ok(())
        }
        Command::ReplaceTopicConfigs { topic_id, configs } => {
            let topic = topic_mut(image, topic_id)?;
            let min_isr_written = configs.contains_key(MIN_IN_SYNC_REPLICAS)
                || topic.configs.contains_key(MIN_IN_SYNC_REPLICAS);
            topic.configs = configs.clone();
            if min_isr_written {
                partition_change::clear_elrs(image, Some(topic_id));
            }
            Ok(())
        }
        Command::AlterBrokerConfigs {
            broker_id,
            set,
            delete,
        } => {
            let entry = image.broker_configs.entry(*broker_id).or_default();
            alter(entry, set, delete);
            if entry.is_empty() {
                image.broker_configs.remove(broker_id);
            }
            if touches_min_isr(set, delete) {
                partition_change::clear_elrs(image, None);
            }
            Ok(())
        }
        Command::AlterGroupConfigs {
            group_id,
            set,
            delete,
        } => {
            let entry = image.group_configs.entry(group_id.clone()).or_default();
            alter(entry, set, delete);
            if entry.is_empty() {
                image.group_configs.remove(group_id);
            }
            Ok(())
        }
        Command::ReplaceGroupConfigs { group_id, configs } => {
            if configs.is_empty() {
                image.group_configs.remove(group_id);
            } else {
                image
                    .group_configs
                    .insert(group_id.clone(), configs.clone());
            }
            Ok(())
        }
        Command::AlterUserScramCredentials {
            upsertions,
            deletions,
        } => {
            for (user, mechanism) in deletions {
                if let Some(by_mechanism) = image.scram_credentials.get_mut(user) {
                    by_mechanism.remove(mechanism);
                    if by_mechanism.is_empty() {
                        image.scram_credentials.remove(user);
                    }
                }
            }
            for upsertion in upsertions {
                image
                    .scram_credentials
                    .entry(upsertion.user.clone())
                    .or_default()
                    .insert(upsertion.mechanism, upsertion.credential.clone());
            }
            Ok(())
        }
        Command::Bootstrap { records } => bootstrap(image, records, index),
        Command::UpdateFeatures { levels } => {
            image.features.extend(levels.iter().cloned());
            Ok(())
        }
        Command::AlterClientQuotas { alterations } => {
            image.client_quotas.alter(alterations);
            Ok(())
        }
        Command::CreateAcls { bindings } => {
            for binding in bindings {
                image.acls.insert(binding);
            }
            Ok(())
        }
        Command::DeleteAcls { bindings } => {
            for binding in bindings {
                image.acls.remove(binding);
            }
            Ok(())
        }
        Command::ReplaceBrokerConfigs { broker_id, configs } => {
            let min_isr_written = configs.contains_key(MIN_IN_SYNC_REPLICAS)
                || image
                    .broker_configs(*broker_id)
                    .is_some_and(|c| c.contains_key(MIN_IN_SYNC_REPLICAS));
            if min_isr_written {
                partition_change::clear_elrs(image, None);
            }
            if configs.is_empty() {
                image.broker_configs.remove(broker_id);
            } else {
                image.broker_configs.insert(*broker_id, configs.clone());
            }
            Ok(())
        }
        Command::RegisterBroker {
            broker_id,
            host,
            port,
            rack,
            incarnation_id,
            listeners,
            previous_broker_epoch,
        } => {
            // A retried proposal of the same incarnation (its first answer was lost)
            // changes nothing: the epoch the broker learned stays valid.
            if let Some(existing) = image.brokers.get(broker_id) {
                if !incarnation_id.is_nil()
                    && existing.incarnation_id == *incarnation_id
                    && existing.host == *host
                    && existing.port == *port
                    && existing.rack == *rack
                    && existing.listeners == *listeners
                {
                    return Ok(());
                }
            }
            // Kafka's clean-shutdown detection: the previous epoch the broker recorded at
            // its clean shutdown must be the registration's current one.
            let clean_shutdown = match previous_broker_epoch {
                None => true,
                Some(previous) => image.brokers.get(broker_id).is_some_and(|existing| {
                    i64::try_from(existing.broker_epoch).is_ok_and(|e| e == *previous)
                }),
            };
            let registration = BrokerRegistration {
                broker_id: *broker_id,
                host: host.clone(),
                port: *port,
                listeners: listeners.clone(),
                rack: rack.clone(),
                incarnation_id: *incarnation_id,
                broker_epoch: index,
                fenced: true,
                in_controlled_shutdown: false,
            };
            // A new incarnation: whatever the old one led, it leads no more (a restart
            // may have lost an unflushed tail); the unfence elects it again, with a new
            // leader epoch that fences requests aimed at the old process.
            image.brokers.insert(*broker_id, registration);
            if clean_shutdown {
                election::remove_broker(image, *broker_id);
            } else {
                election::remove_uncleanly_shut_down_broker(image, *broker_id);
            }
            Ok(())
        }
        Command::SetPartitionLeaderIsr {
            topic_id,
            partition,
            leader,
            isr,
        } => {
            let topic = topic_mut(image, topic_id)?;
            let Some(p) = topic.partitions.get_mut(partition) else {
                return Err(ApplyError::UnknownPartition {
                    topic: topic.name.clone(),
                    partition: *partition,
                });
            };
            if p.leader != *leader {
                p.leader_epoch = p.leader_epoch.saturating_add(1);
                p.leader = *leader;
            }
            p.isr = isr.clone();
            p.partition_epoch = p.partition_epoch.saturating_add(1);
            Ok(())
        }
        Command::AlterPartition {
            topic_id,
            partition,
            broker_id,
            broker_epoch,
            leader_epoch,
            partition_epoch,
            isr,
            leader_recovery_state,
        } => alter_partition(
            image,
            topic_id,
            *partition,
            AlterPartitionRequest {
                broker_id: *broker_id,
                broker_epoch: *broker_epoch,
                leader_epoch: *leader_epoch,
                partition_epoch: *partition_epoch,
                isr,
                leader_recovery_state: *leader_recovery_state,
            },
        ),
        Command::MarkReplicasOffline {
            broker_id,
            broker_epoch,
            partitions,
        } => offline_replicas::mark_offline(image, *broker_id, *broker_epoch, partitions),
        Command::ElectLeaders {
            partitions,
            election,
        } => {
            election::elect_leaders(image, partitions, *election);
            Ok(())
        }
        Command::UnregisterBroker { broker_id } => {
            let b = image
                .brokers
                .get_mut(broker_id)
                .ok_or(ApplyError::BrokerNotRegistered {
                    broker_id: *broker_id,
                })?;
            let was_active = b.is_active();
            b.fenced = true;
            if was_active {
                election::remove_broker(image, *broker_id);
            }
            image.brokers.remove(broker_id);
            Ok(())
        }
        Command::AlterPartitionReassignments { reassignments } => {
            reassignment::apply(image, reassignments);
            Ok(())
        }
    }
}

/// Whether a config change writes `min.insync.replicas` (Kafka then clears ELRs).
fn touches_min_isr(set: &BTreeMap<String, String>, delete: &[String]) -> bool {
    set.contains_key(MIN_IN_SYNC_REPLICAS) || delete.iter().any(|k| k == MIN_IN_SYNC_REPLICAS)
}

/// The sender's side of an AlterPartition.
struct AlterPartitionRequest<'a> {
    broker_id: i32,
    broker_epoch: u64,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: &'a [i32],
    leader_recovery_state: LeaderRecoveryState,
}

/// AlterPartition as a compare-and-set: every check of [`Command::AlterPartition`]'s doc,
/// in that order, then the new ISR and a partition epoch bump, or nothing at all when the
/// request asks for the state the partition has.
/// [`Command::Bootstrap`]: the first one applies its records and marks the image; later
/// ones change nothing (every node formatted alike proposes the same records; a node
/// formatted differently loses to the first, as Kafka uses the first active controller's
/// bootstrap metadata). Records other than SCRAM credentials are refused whole.
fn bootstrap(image: &mut MetadataImage, records: &[Command], index: u64) -> ApplyResult {
    if image.bootstrapped {
        return Ok(());
    }
    if let Some(other) = records.iter().find(|r| {
        !matches!(
            r,
            Command::AlterUserScramCredentials { .. } | Command::UpdateFeatures { .. }
        )
    }) {
        return Err(ApplyError::InvalidRequest {
            reason: format!(
                "a bootstrap record must be a SCRAM credential or feature levels, not {}",
                other.kind()
            ),
        });
    }
    for record in records {
        apply(image, record, index)?; // SCRAM upserts cannot fail
    }
    image.bootstrapped = true;
    Ok(())
}

fn alter_partition(
    image: &mut MetadataImage,
    topic_id: &Uuid,
    partition: i32,
    req: AlterPartitionRequest<'_>,
) -> ApplyResult {
    check_alter_partition(image, topic_id, partition, &req)?;
    // Only a partition being reassigned can complete here; others skip the broker scan.
    let reassigning = image
        .topic_by_id(topic_id)
        .and_then(|t| t.partitions.get(&partition))
        .is_some_and(reassignment::in_progress);
    let active = reassigning.then(|| reassignment::Active::of(image));
    let policy = image
        .topic_by_id(topic_id)
        .map(|t| Policy::of(image, t))
        .ok_or(ApplyError::UnknownTopic {
            topic_id: *topic_id,
        })?;
    let active_brokers: BTreeSet<i32> = image.active_brokers().map(|b| b.broker_id).collect();
    let topic = topic_mut(image, topic_id)?;
    let Some(p) = topic.partitions.get_mut(&partition) else {
        return Err(ApplyError::UnknownPartition {
            topic: topic.name.clone(),
            partition,
        });
    };
    // The leader stays (it sent the change and is in the new ISR); the ELR follows the
    // ISR: members that rejoin leave it, and it empties once the ISR reaches min ISR
    // (KIP-966), or gains the members a shrink below min ISR drops.
    let leader = p.leader;
    let acceptable = |r: i32| r == leader || active_brokers.contains(&r);
    // Bumps the partition epoch only if something changed: Kafka's PartitionChangeBuilder
    // writes no record for a request that asks for the partition's own state, and the
    // leader is answered with that state, epoch unchanged.
    partition_change::apply(
        p,
        policy,
        &Change {
            target_isr: req.isr.to_vec(),
            unclean_shutdown: None,
            acceptable: &acceptable,
            election: Election::Online,
            leader_recovery_state: Some(req.leader_recovery_state),
        },
    );
    // A new replica joining the ISR may complete a reassignment (and move the leader
    // away from a removed one), in the same change, as KRaft's PartitionChangeBuilder.
    if let Some(active) = &active {
        reassignment::complete_if_ready(active, p);
    }
    Ok(())
}

fn check_alter_partition(
    image: &MetadataImage,
    topic_id: &Uuid,
    partition: i32,
    req: &AlterPartitionRequest<'_>,
) -> ApplyResult {
    let topic = image
        .topic_by_id(topic_id)
        .ok_or(ApplyError::UnknownTopic {
            topic_id: *topic_id,
        })?;
    let Some(p) = topic.partitions.get(&partition) else {
        return Err(ApplyError::UnknownPartition {
            topic: topic.name.clone(),
            partition,
        });
    };
    let tp = format!("{}-{partition}", topic.name);
    let registered_epoch = image.broker(req.broker_id).map(|b| b.broker_epoch);
    if registered_epoch != Some(req.broker_epoch) {
        return Err(ApplyError::StaleBrokerEpoch {
            broker_id: req.broker_id,
            given: req.broker_epoch,
            current: registered_epoch.unwrap_or(0),
        });
    }
    if req.leader_epoch < p.leader_epoch {
        return Err(ApplyError::FencedLeaderEpoch {
            given: req.leader_epoch,
            current: p.leader_epoch,
        });
    }
    let invalid = |reason: String| Err(ApplyError::InvalidRequest { reason });
    if req.leader_epoch > p.leader_epoch {
        return invalid(format!(
            "leader epoch {} of {tp} is newer than the controller's {}",
            req.leader_epoch, p.leader_epoch
        ));
    }
    if p.leader != req.broker_id {
        return invalid(format!(
            "broker {} is not the leader of {tp} (leader {})",
            req.broker_id, p.leader
        ));
    }
    if req.partition_epoch != p.partition_epoch {
        return Err(ApplyError::InvalidUpdateVersion {
            given: req.partition_epoch,
            current: p.partition_epoch,
        });
    }
    if req.isr.is_empty() {
        return invalid(format!("the new ISR of {tp} is empty"));
    }
    if !req.isr.contains(&p.leader) {
        return invalid(format!(
            "the new ISR {:?} of {tp} does not contain the leader {}",
            req.isr, p.leader
        ));
    }
    let distinct: BTreeSet<i32> = req.isr.iter().copied().collect();
    if distinct.len() != req.isr.len() {
        return invalid(format!("the new ISR {:?} of {tp} has duplicates", req.isr));
    }
    if let Some(b) = req.isr.iter().find(|b| !p.replicas.contains(b)) {
        return invalid(format!(
            "broker {b} in the new ISR {:?} of {tp} is not a replica (replicas {:?})",
            req.isr, p.replicas
        ));
    }
    // KIP-704, Kafka's two checks: a leader still recovering from an unclean election may
    // not grow its ISR, and a recovered partition does not become recovering again.
    if req.leader_recovery_state == LeaderRecoveryState::Recovering && req.isr.len() > 1 {
        return invalid(format!(
            "the new ISR {:?} of {tp} has more than the leader while it is still recovering \
             from an unclean leader election",
            req.isr
        ));
    }
    if p.leader_recovery_state == LeaderRecoveryState::Recovered
        && req.leader_recovery_state == LeaderRecoveryState::Recovering
    {
        return invalid(format!(
            "the leader recovery state of {tp} cannot change from recovered to recovering"
        ));
    }
    if let Some(&broker_id) = req.isr.iter().find(|b| {
        !p.isr.contains(b)
            && (!image.is_active(**b) || image.is_replica_offline(**b, topic_id, partition))
    }) {
        return Err(ApplyError::IneligibleReplica { broker_id });
    }
    Ok(())
}

fn create_topic(
    image: &mut MetadataImage,
    name: &str,
    topic_id: Uuid,
    partitions: &[PartitionAssignment],
    configs: &BTreeMap<String, String>,
) -> ApplyResult {
    if image.topics.contains_key(name) {
        return Err(ApplyError::TopicAlreadyExists {
            name: name.to_string(),
        });
    }
    if let Some(existing) = image.topic_names_by_id.get(&topic_id) {
        return Err(ApplyError::TopicIdAlreadyExists {
            topic_id,
            existing: existing.clone(),
        });
    }
    if partitions.is_empty() {
        return Err(ApplyError::InvalidPartitions {
            topic: name.to_string(),
            reason: "a topic needs at least one partition".into(),
        });
    }
    let partitions = check_assignments(image, name, 0, partitions)?;
    image.topics.insert(
        name.to_string(),
        TopicImage {
            name: name.to_string(),
            topic_id,
            partitions,
            configs: configs.clone(),
        },
    );
    image.topic_names_by_id.insert(topic_id, name.to_string());
    Ok(())
}

/// The registration `broker_epoch` names, for change.
fn current_broker(
    image: &mut MetadataImage,
    broker_id: i32,
    broker_epoch: u64,
) -> Result<&mut BrokerRegistration, ApplyError> {
    let b = image
        .brokers
        .get_mut(&broker_id)
        .ok_or(ApplyError::UnknownBroker { broker_id })?;
    if b.broker_epoch != broker_epoch {
        return Err(ApplyError::StaleBrokerEpoch {
            broker_id,
            given: broker_epoch,
            current: b.broker_epoch,
        });
    }
    Ok(b)
}

fn fence_broker(
    image: &mut MetadataImage,
    broker_id: i32,
    broker_epoch: u64,
    reason: FenceReason,
) -> ApplyResult {
    let b = current_broker(image, broker_id, broker_epoch)?;
    let was_active = b.is_active();
    b.fenced = true;
    if reason == FenceReason::ControlledShutdown {
        b.in_controlled_shutdown = true;
    }
    if was_active {
        election::remove_broker(image, broker_id);
    }
    Ok(())
}

/// The leader a new partition starts with: the proposed one if it may serve (active, or
/// not registered at all: a single node before its first registration, and tests), else
/// the first active replica, else none. Its ISR is every replica that may serve, in replica
/// order (so it holds the leader): a new partition is empty, so every such replica is in
/// sync (as in Kafka). With no replica able to serve the ISR is the proposed leader alone
/// (it never empties) and the partition waits leaderless for it.
fn initial_leader_and_isr(image: &MetadataImage, a: &PartitionAssignment) -> (i32, Vec<i32>) {
    let usable = |b: i32| image.broker(b).is_none_or(|r| r.is_active());
    let leader = if usable(a.leader) {
        a.leader
    } else {
        a.replicas
            .iter()
            .copied()
            .find(|&r| image.is_active(r))
            .unwrap_or(NO_LEADER)
    };
    // The leader is usable (proposed and usable, or active), so it is in here.
    let mut isr: Vec<i32> = a.replicas.iter().copied().filter(|&r| usable(r)).collect();
    if isr.is_empty() {
        isr.push(a.leader);
    }
    (leader, isr)
}

/// Checks that `assignments` number partitions `first..first + n` (in any order), each with
/// distinct replicas, non-negative broker ids and a leader among them; returns the images.
fn check_assignments(
    image: &MetadataImage,
    topic: &str,
    first: i32,
    assignments: &[PartitionAssignment],
) -> Result<BTreeMap<i32, PartitionImage>, ApplyError> {
    let invalid = |reason: String| ApplyError::InvalidPartitions {
        topic: topic.to_string(),
        reason,
    };
    let mut out = BTreeMap::new();
    for a in assignments {
        if a.replicas.is_empty() {
            return Err(invalid(format!(
                "partition {} has no replicas",
                a.partition
            )));
        }
        let distinct: BTreeSet<i32> = a.replicas.iter().copied().collect();
        if distinct.len() != a.replicas.len() || distinct.iter().any(|&b| b < 0) {
            return Err(invalid(format!(
                "partition {} has duplicate or negative replicas {:?}",
                a.partition, a.replicas
            )));
        }
        if !distinct.contains(&a.leader) {
            return Err(invalid(format!(
                "partition {} leader {} is not a replica",
                a.partition, a.leader
            )));
        }
        let (leader, isr) = initial_leader_and_isr(image, a);
        let partition = PartitionImage {
            partition: a.partition,
            leader,
            leader_epoch: 0,
            replicas: a.replicas.clone(),
            isr,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: crate::image::LeaderRecoveryState::Recovered,
        };
        if out.insert(a.partition, partition).is_some() {
            return Err(invalid(format!("partition {} given twice", a.partition)));
        }
    }
    let expected = (0..assignments.len()).map(|i| i64::from(first) + i as i64);
    if !out.keys().map(|&p| i64::from(p)).eq(expected) {
        return Err(invalid(format!(
            "partition numbers must be {first}..{}, got {:?}",
            i64::from(first) + assignments.len() as i64,
            out.keys().collect::<Vec<_>>()
        )));
    }
    Ok(out)
}

fn alter(
    configs: &mut BTreeMap<String, String>,
    set: &BTreeMap<String, String>,
    delete: &[String],
) {
    configs.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
    for key in delete {
        configs.remove(key);
    }
}

fn topic_name(image: &MetadataImage, topic_id: &Uuid) -> Result<String, ApplyError> {
    image
        .topic_name(topic_id)
        .map(str::to_string)
        .ok_or(ApplyError::UnknownTopic {
            topic_id: *topic_id,
        })
}

fn topic_mut<'a>(
    image: &'a mut MetadataImage,
    topic_id: &Uuid,
) -> Result<&'a mut TopicImage, ApplyError> {
    let unknown = || ApplyError::UnknownTopic {
        topic_id: *topic_id,
    };
    // Disjoint field borrows: the index is read while the topic map is borrowed mutably.
    let name = image.topic_names_by_id.get(topic_id).ok_or_else(unknown)?;
    image.topics.get_mut(name).ok_or_else(unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_at(image: &mut MetadataImage, cmd: &Command) -> ApplyResult {
        apply(image, cmd, 7)
    }

    fn register(id: i32, incarnation: u128) -> Command {
        Command::RegisterBroker {
            broker_id: id,
            host: "localhost".into(),
            port: 9092,
            rack: None,
            incarnation_id: Uuid::from_u128(incarnation),
            listeners: Vec::new(),
            previous_broker_epoch: None,
        }
    }

    #[test]
    fn a_registration_starts_fenced_with_its_log_index_as_epoch_and_a_restart_replaces_it() {
        let mut image = MetadataImage::default();
        apply(&mut image, &register(1, 1), 5).expect("register");
        let b = image.broker(1).expect("registered").clone();
        assert!(b.fenced && b.broker_epoch == 5);
        apply(
            &mut image,
            &Command::UnfenceBroker {
                broker_id: 1,
                broker_epoch: 5,
            },
            6,
        )
        .expect("unfence");
        apply(&mut image, &create("t", 1, 1), 7).expect("create");
        assert_eq!(image.partition("t", 0).map(|p| p.leader), Some(1));
        // The restarted process: new incarnation, new epoch, fenced, its partitions leaderless.
        apply(&mut image, &register(1, 2), 8).expect("re-register");
        assert_eq!(
            image.broker(1).map(|b| (b.broker_epoch, b.fenced)),
            Some((8, true))
        );
        assert_eq!(
            image.partition("t", 0).map(|p| (p.leader, p.leader_epoch)),
            Some((NO_LEADER, 1))
        );
        // A fence or unfence naming the old epoch is refused and changes nothing.
        let stale = Command::UnfenceBroker {
            broker_id: 1,
            broker_epoch: 5,
        };
        assert!(matches!(
            apply(&mut image, &stale, 9),
            Err(ApplyError::StaleBrokerEpoch { .. })
        ));
        apply(
            &mut image,
            &Command::UnfenceBroker {
                broker_id: 1,
                broker_epoch: 8,
            },
            10,
        )
        .expect("unfence");
        assert_eq!(
            image.partition("t", 0).map(|p| (p.leader, p.leader_epoch)),
            Some((1, 2))
        );
    }

    #[test]
    fn a_controlled_shutdown_is_not_undone_by_a_late_unfence() {
        let mut image = MetadataImage::default();
        apply(&mut image, &register(1, 1), 3).expect("register");
        let fence = Command::FenceBroker {
            broker_id: 1,
            broker_epoch: 3,
            reason: FenceReason::ControlledShutdown,
        };
        apply(&mut image, &fence, 4).expect("shutdown");
        apply(
            &mut image,
            &Command::UnfenceBroker {
                broker_id: 1,
                broker_epoch: 3,
            },
            5,
        )
        .expect("ignored");
        assert!(image
            .broker(1)
            .is_some_and(|b| b.fenced && b.in_controlled_shutdown));
    }

    #[test]
    fn producer_id_blocks_never_overlap_and_the_cluster_id_is_set_once() {
        let mut image = MetadataImage::default();
        for broker_id in [1, 2, 1] {
            apply_at(
                &mut image,
                &Command::AllocateProducerIds {
                    broker_id,
                    block_size: 1000,
                },
            )
            .expect("allocate");
        }
        assert_eq!(
            image.producer_id_blocks[&2],
            ProducerIdBlock {
                first: 1000,
                len: 1000
            }
        );
        assert_eq!(
            image.producer_id_blocks[&1],
            ProducerIdBlock {
                first: 2000,
                len: 1000
            }
        );
        for id in ["a", "b"] {
            apply_at(
                &mut image,
                &Command::SetClusterId {
                    cluster_id: id.into(),
                },
            )
            .expect("set");
        }
        assert_eq!(image.cluster_id.as_deref(), Some("a"));
    }

    fn assignment(partition: i32, replicas: &[i32]) -> PartitionAssignment {
        PartitionAssignment {
            partition,
            replicas: replicas.to_vec(),
            leader: replicas[0],
        }
    }

    fn create(name: &str, id: u128, n: i32) -> Command {
        Command::CreateTopic {
            name: name.into(),
            topic_id: Uuid::from_u128(id),
            partitions: (0..n).map(|p| assignment(p, &[1])).collect(),
            configs: BTreeMap::new(),
        }
    }

    #[test]
    fn a_created_topic_is_found_by_name_and_id() {
        let mut image = MetadataImage::default();
        assert_eq!(apply_at(&mut image, &create("t", 1, 3)), Ok(()));
        let t = image.topic_by_id(&Uuid::from_u128(1)).expect("created");
        assert_eq!(t.name, "t");
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(t.partitions[&2].isr, vec![1]);
    }

    #[test]
    fn duplicate_names_and_ids_are_rejected_without_change() {
        let mut image = MetadataImage::default();
        apply_at(&mut image, &create("t", 1, 1)).expect("first create");
        let before = image.clone();
        assert_eq!(
            apply_at(&mut image, &create("t", 2, 1)),
            Err(ApplyError::TopicAlreadyExists { name: "t".into() })
        );
        assert!(matches!(
            apply_at(&mut image, &create("u", 1, 1)),
            Err(ApplyError::TopicIdAlreadyExists { .. })
        ));
        assert_eq!(image, before);
    }

    #[test]
    fn partitions_must_be_numbered_contiguously() {
        let mut image = MetadataImage::default();
        let cmd = Command::CreateTopic {
            name: "t".into(),
            topic_id: Uuid::from_u128(1),
            partitions: vec![assignment(0, &[1]), assignment(2, &[1])],
            configs: BTreeMap::new(),
        };
        assert!(matches!(
            apply_at(&mut image, &cmd),
            Err(ApplyError::InvalidPartitions { .. })
        ));
        apply_at(&mut image, &create("t", 1, 2)).expect("create");
        let more = Command::CreatePartitions {
            topic_id: Uuid::from_u128(1),
            partitions: vec![assignment(2, &[1, 2]), assignment(3, &[2, 1])],
        };
        assert_eq!(apply_at(&mut image, &more), Ok(()));
        assert_eq!(image.partition("t", 3).map(|p| p.leader), Some(2));
        let gap = Command::CreatePartitions {
            topic_id: Uuid::from_u128(1),
            partitions: vec![assignment(5, &[1])],
        };
        assert!(matches!(
            apply_at(&mut image, &gap),
            Err(ApplyError::InvalidPartitions { .. })
        ));
    }

    #[test]
    fn leader_changes_bump_the_leader_epoch_but_isr_changes_do_not() {
        let mut image = MetadataImage::default();
        apply_at(&mut image, &create("t", 1, 1)).expect("create");
        let change = |leader, isr: &[i32]| Command::SetPartitionLeaderIsr {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            leader,
            isr: isr.to_vec(),
        };
        apply_at(&mut image, &change(1, &[1])).expect("isr only");
        assert_eq!(image.partition("t", 0).map(|p| p.leader_epoch), Some(0));
        apply_at(&mut image, &change(2, &[2])).expect("new leader");
        assert_eq!(
            image.partition("t", 0).map(|p| (p.leader, p.leader_epoch)),
            Some((2, 1))
        );
    }

    #[test]
    fn configs_are_set_then_deleted_and_empty_broker_maps_vanish() {
        let mut image = MetadataImage::default();
        apply_at(&mut image, &create("t", 1, 1)).expect("create");
        let alter_topic = Command::AlterTopicConfigs {
            topic_id: Uuid::from_u128(1),
            set: BTreeMap::from([("a".into(), "1".into()), ("b".into(), "2".into())]),
            delete: vec!["b".into()],
        };
        apply_at(&mut image, &alter_topic).expect("alter");
        assert_eq!(
            image.topics["t"].configs,
            BTreeMap::from([("a".into(), "1".into())])
        );

        let set = Command::AlterBrokerConfigs {
            broker_id: None,
            set: BTreeMap::from([("x".into(), "1".into())]),
            delete: vec![],
        };
        apply_at(&mut image, &set).expect("set default");
        assert_eq!(image.broker_configs(None).map(|c| c.len()), Some(1));
        let clear = Command::AlterBrokerConfigs {
            broker_id: None,
            set: BTreeMap::new(),
            delete: vec!["x".into()],
        };
        apply_at(&mut image, &clear).expect("delete default");
        assert!(image.broker_configs.is_empty());
    }

    #[test]
    fn group_configs_need_no_group_and_an_emptied_group_entry_vanishes() {
        let mut image = MetadataImage::default();
        let set = Command::AlterGroupConfigs {
            group_id: "g".into(),
            set: BTreeMap::from([("consumer.session.timeout.ms".into(), "50000".into())]),
            delete: vec![],
        };
        apply_at(&mut image, &set).expect("set");
        assert_eq!(
            image.group_configs("g"),
            Some(&BTreeMap::from([(
                "consumer.session.timeout.ms".into(),
                "50000".into()
            )]))
        );
        let replace = Command::ReplaceGroupConfigs {
            group_id: "g".into(),
            configs: BTreeMap::from([("consumer.heartbeat.interval.ms".into(), "6000".into())]),
        };
        apply_at(&mut image, &replace).expect("replace");
        assert_eq!(image.group_configs("g").map(|c| c.len()), Some(1));
        let clear = Command::AlterGroupConfigs {
            group_id: "g".into(),
            set: BTreeMap::new(),
            delete: vec!["consumer.heartbeat.interval.ms".into()],
        };
        apply_at(&mut image, &clear).expect("delete");
        assert!(image.group_configs.is_empty());
    }

    #[test]
    fn commands_on_unknown_topic_ids_fail() {
        let mut image = MetadataImage::default();
        let id = Uuid::from_u128(9);
        assert_eq!(
            apply_at(&mut image, &Command::DeleteTopic { topic_id: id }),
            Err(ApplyError::UnknownTopic { topic_id: id })
        );
    }

    /// Brokers `ids` registered (epoch = 10 * id) and unfenced.
    fn cluster(ids: &[i32]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for &id in ids {
            let epoch = 10 * u64::try_from(id).expect("positive id");
            apply(&mut image, &register(id, 1), epoch).expect("register");
            let unfence = Command::UnfenceBroker {
                broker_id: id,
                broker_epoch: epoch,
            };
            apply(&mut image, &unfence, epoch + 1).expect("unfence");
        }
        image
    }

    fn create_with(replicas: &[i32]) -> Command {
        Command::CreateTopic {
            name: "t".into(),
            topic_id: Uuid::from_u128(1),
            partitions: vec![assignment(0, replicas)],
            configs: BTreeMap::new(),
        }
    }

    fn fence(image: &mut MetadataImage, id: i32, reason: FenceReason) {
        let broker_epoch = image
            .broker(id)
            .map(|b| b.broker_epoch)
            .expect("registered");
        let cmd = Command::FenceBroker {
            broker_id: id,
            broker_epoch,
            reason,
        };
        apply_at(image, &cmd).expect("fence");
    }

    fn leader_isr(image: &MetadataImage) -> (i32, Vec<i32>) {
        let p = image.partition("t", 0).expect("partition");
        (p.leader, p.isr.clone())
    }

    #[test]
    fn a_new_partition_starts_with_every_replica_that_may_serve_in_its_isr() {
        // All active: everyone is in sync with an empty log.
        let mut image = cluster(&[1, 2, 3]);
        apply_at(&mut image, &create_with(&[2, 3, 1])).expect("create");
        assert_eq!(leader_isr(&image), (2, vec![2, 3, 1]));
        assert_eq!(
            image
                .partition("t", 0)
                .map(|p| (p.leader_epoch, p.partition_epoch)),
            Some((0, 0))
        );

        // Fenced and shutting-down replicas are left out; unregistered ones are usable.
        let mut image = cluster(&[1, 2, 3]);
        fence(&mut image, 2, FenceReason::SessionExpired);
        fence(&mut image, 3, FenceReason::ControlledShutdown);
        apply_at(&mut image, &create_with(&[1, 2, 3, 4])).expect("create");
        assert_eq!(leader_isr(&image), (1, vec![1, 4]));

        // The proposed leader is fenced: the first active replica leads, and is in the ISR.
        let mut image = cluster(&[1, 2, 3]);
        fence(&mut image, 1, FenceReason::SessionExpired);
        apply_at(&mut image, &create_with(&[1, 2, 3])).expect("create");
        assert_eq!(leader_isr(&image), (2, vec![2, 3]));

        // Nobody may serve: leaderless, the ISR is the proposed leader alone.
        let mut image = cluster(&[1, 2]);
        fence(&mut image, 1, FenceReason::SessionExpired);
        fence(&mut image, 2, FenceReason::SessionExpired);
        apply_at(&mut image, &create_with(&[1, 2])).expect("create");
        assert_eq!(leader_isr(&image), (NO_LEADER, vec![1]));

        // The same rule for CreatePartitions.
        let mut image = cluster(&[1, 2, 3]);
        apply_at(&mut image, &create_with(&[1])).expect("create");
        fence(&mut image, 3, FenceReason::SessionExpired);
        let more = Command::CreatePartitions {
            topic_id: Uuid::from_u128(1),
            partitions: vec![assignment(1, &[3, 2, 1])],
        };
        apply_at(&mut image, &more).expect("create partitions");
        let p = image.partition("t", 1).expect("partition 1");
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 1]));
    }

    /// Brokers 1..=3 active, "t"-0 on [1, 2, 3] led by 1, ISR [1, 2, 3], epochs 0.
    fn replicated() -> MetadataImage {
        let mut image = cluster(&[1, 2, 3]);
        apply_at(&mut image, &create_with(&[1, 2, 3])).expect("create");
        image
    }

    /// An AlterPartition from broker 1 (epoch 10) at leader epoch 0, partition epoch 0.
    fn alter(isr: &[i32]) -> Command {
        alter_at(isr, 0)
    }

    /// An AlterPartition from broker 1 (epoch 10) at leader epoch 0.
    fn alter_at(isr: &[i32], partition_epoch: i32) -> Command {
        Command::AlterPartition {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            broker_id: 1,
            broker_epoch: 10,
            leader_epoch: 0,
            partition_epoch,
            isr: isr.to_vec(),
            leader_recovery_state: LeaderRecoveryState::Recovered,
        }
    }

    /// `cmd` with one field of the AlterPartition changed by `edit`.
    fn edited(mut cmd: Command, edit: impl FnOnce(&mut Command)) -> Command {
        edit(&mut cmd);
        cmd
    }

    /// Applies `cmd`, expecting an error and an untouched image.
    fn refused(image: &mut MetadataImage, cmd: &Command) -> ApplyError {
        let before = image.clone();
        let err = apply_at(image, cmd).expect_err("refused");
        assert_eq!(*image, before, "a refused command changes nothing");
        err
    }

    fn invalid_reason(err: ApplyError) -> String {
        match err {
            ApplyError::InvalidRequest { reason } => reason,
            other => panic!("expected InvalidRequest, got {other:?}"),
        }
    }

    #[test]
    fn the_leaders_isr_expansion_completes_a_reassignment_and_moves_the_leader_off_a_removed_replica(
    ) {
        let mut image = cluster(&[1, 2, 3, 4]);
        apply_at(&mut image, &create_with(&[1, 2, 3])).expect("create");
        let move_to = Command::AlterPartitionReassignments {
            reassignments: vec![crate::reassignment::Reassignment {
                topic_id: Uuid::from_u128(1),
                partition: 0,
                target: Some(vec![2, 3, 4]),
            }],
        };
        apply_at(&mut image, &move_to).expect("reassign");
        let p = image.partition("t", 0).expect("partition").clone();
        assert_eq!((p.replicas, p.partition_epoch), (vec![2, 3, 4, 1], 1));
        apply_at(&mut image, &alter_at(&[1, 2, 3, 4], 1)).expect("4 caught up");
        let p = image.partition("t", 0).expect("partition");
        assert_eq!(
            (p.leader, p.leader_epoch, p.replicas.clone(), p.isr.clone()),
            (2, 1, vec![2, 3, 4], vec![2, 3, 4])
        );
        assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
        assert_eq!(
            p.partition_epoch, 3,
            "the ISR change and the completion each count"
        );
    }

    #[test]
    fn alter_partition_shrinks_and_expands_the_isr_bumping_only_the_partition_epoch() {
        let mut image = replicated();
        apply_at(&mut image, &alter(&[1, 3])).expect("shrink");
        let p = image.partition("t", 0).expect("partition").clone();
        assert_eq!(
            (p.leader, p.leader_epoch, p.partition_epoch, p.isr),
            (1, 0, 1, vec![1, 3])
        );
        let expand = alter_at(&[1, 3, 2], 1);
        apply_at(&mut image, &expand).expect("expand");
        let p = image.partition("t", 0).expect("partition");
        assert_eq!(
            (p.leader, p.leader_epoch, p.partition_epoch, p.isr.clone()),
            (1, 0, 2, vec![1, 3, 2])
        );
        // The same request again is now stale.
        assert_eq!(
            refused(&mut image, &expand),
            ApplyError::InvalidUpdateVersion {
                given: 1,
                current: 2
            }
        );
    }

    #[test]
    fn an_alter_partition_asking_for_the_partitions_own_state_succeeds_and_changes_nothing() {
        let mut image = replicated();
        apply_at(&mut image, &alter(&[1, 3])).expect("shrink");
        let before = image.clone();
        // The ISR it has, recovered as it is: no partition epoch bump (Kafka writes no
        // PartitionChangeRecord), so the same request succeeds again.
        for _ in 0..2 {
            apply_at(&mut image, &alter_at(&[1, 3], 1)).expect("no change");
            assert_eq!(image, before);
        }
        // The compare-and-set still holds: a stale partition epoch is refused.
        assert_eq!(
            refused(&mut image, &alter_at(&[1, 3], 0)),
            ApplyError::InvalidUpdateVersion {
                given: 0,
                current: 1
            }
        );
        // A real change after it is numbered from the unchanged epoch.
        apply_at(&mut image, &alter_at(&[1, 3, 2], 1)).expect("expand");
        let p = image.partition("t", 0).expect("partition");
        assert_eq!((p.partition_epoch, p.isr.clone()), (2, vec![1, 3, 2]));
    }

    #[test]
    fn alter_partition_on_unknown_topics_and_partitions_fails() {
        let mut image = replicated();
        let unknown_topic = edited(alter(&[1]), |c| {
            if let Command::AlterPartition { topic_id, .. } = c {
                *topic_id = Uuid::from_u128(9);
            }
        });
        assert_eq!(
            refused(&mut image, &unknown_topic),
            ApplyError::UnknownTopic {
                topic_id: Uuid::from_u128(9)
            }
        );
        let unknown_partition = edited(alter(&[1]), |c| {
            if let Command::AlterPartition { partition, .. } = c {
                *partition = 1;
            }
        });
        assert_eq!(
            refused(&mut image, &unknown_partition),
            ApplyError::UnknownPartition {
                topic: "t".into(),
                partition: 1
            }
        );
    }

    #[test]
    fn alter_partition_from_an_unregistered_or_stale_broker_is_a_stale_broker_epoch() {
        let mut image = replicated();
        let stale = edited(alter(&[1]), |c| {
            if let Command::AlterPartition { broker_epoch, .. } = c {
                *broker_epoch = 9;
            }
        });
        assert_eq!(
            refused(&mut image, &stale),
            ApplyError::StaleBrokerEpoch {
                broker_id: 1,
                given: 9,
                current: 10
            }
        );
        let unregistered = edited(alter(&[1]), |c| {
            if let Command::AlterPartition { broker_id, .. } = c {
                *broker_id = 7;
            }
        });
        assert_eq!(
            refused(&mut image, &unregistered),
            ApplyError::StaleBrokerEpoch {
                broker_id: 7,
                given: 10,
                current: 0
            }
        );
    }

    #[test]
    fn alter_partition_checks_the_leader_epoch_then_the_sender_then_the_partition_epoch() {
        let mut image = replicated();
        // Broker 1 is fenced: 2 leads at leader epoch 1, partition epoch 1, ISR [2, 3].
        fence(&mut image, 1, FenceReason::SessionExpired);
        assert_eq!(
            image
                .partition("t", 0)
                .map(|p| (p.leader, p.leader_epoch, p.partition_epoch)),
            Some((2, 1, 1))
        );
        let from_2 = |leader_epoch: i32, partition_epoch: i32| Command::AlterPartition {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            broker_id: 2,
            broker_epoch: 20,
            leader_epoch,
            partition_epoch,
            isr: vec![2],
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        assert_eq!(
            refused(&mut image, &from_2(0, 1)),
            ApplyError::FencedLeaderEpoch {
                given: 0,
                current: 1
            }
        );
        let newer = invalid_reason(refused(&mut image, &from_2(2, 1)));
        assert!(newer.contains("newer"), "{newer}");
        // Broker 3 is registered and current but does not lead.
        let from_3 = Command::AlterPartition {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            broker_id: 3,
            broker_epoch: 30,
            leader_epoch: 1,
            partition_epoch: 1,
            isr: vec![3],
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        let not_leader = invalid_reason(refused(&mut image, &from_3));
        assert!(not_leader.contains("not the leader"), "{not_leader}");
        // A stale leader epoch wins over a stale partition epoch.
        assert!(matches!(
            refused(&mut image, &from_2(0, 0)),
            ApplyError::FencedLeaderEpoch { .. }
        ));
        assert_eq!(
            refused(&mut image, &from_2(1, 0)),
            ApplyError::InvalidUpdateVersion {
                given: 0,
                current: 1
            }
        );
        apply_at(&mut image, &from_2(1, 1)).expect("current epochs");
        assert_eq!(leader_isr(&image), (2, vec![2]));
    }

    #[test]
    fn alter_partition_refuses_malformed_isrs() {
        let mut image = replicated();
        for (isr, needle) in [
            (&[][..], "empty"),
            (&[2, 3][..], "does not contain the leader"),
            (&[1, 2, 1][..], "duplicates"),
            (&[1, 4][..], "not a replica"),
        ] {
            let reason = invalid_reason(refused(&mut image, &alter(isr)));
            assert!(reason.contains(needle), "{isr:?}: {reason}");
        }
        // The partition epoch is checked before the ISR.
        let stale = alter_at(&[], 5);
        assert!(matches!(
            refused(&mut image, &stale),
            ApplyError::InvalidUpdateVersion { .. }
        ));
    }

    #[test]
    fn alter_partition_refuses_to_add_brokers_that_may_not_serve() {
        // Replica 4 is not registered, so it is in the ISR from creation on.
        let mut image = cluster(&[1, 2, 3]);
        apply_at(&mut image, &create_with(&[1, 2, 3, 4])).expect("create");
        assert_eq!(leader_isr(&image), (1, vec![1, 2, 3, 4]));
        apply_at(&mut image, &alter(&[1, 4])).expect("a member that stays needs no check");
        apply_at(&mut image, &alter_at(&[1], 1)).expect("shrink to the leader");
        let epoch_2 = |isr: &[i32]| alter_at(isr, 2);
        assert_eq!(
            refused(&mut image, &epoch_2(&[1, 4])),
            ApplyError::IneligibleReplica { broker_id: 4 }
        );
        fence(&mut image, 2, FenceReason::SessionExpired);
        fence(&mut image, 3, FenceReason::ControlledShutdown);
        assert_eq!(
            refused(&mut image, &epoch_2(&[1, 2])),
            ApplyError::IneligibleReplica { broker_id: 2 }
        );
        assert_eq!(
            refused(&mut image, &epoch_2(&[1, 3])),
            ApplyError::IneligibleReplica { broker_id: 3 }
        );
        // Unfenced again, broker 2 may rejoin.
        let unfence = Command::UnfenceBroker {
            broker_id: 2,
            broker_epoch: 20,
        };
        apply_at(&mut image, &unfence).expect("unfence");
        assert_eq!(
            leader_isr(&image),
            (1, vec![1]),
            "unfencing adds no ISR member"
        );
        apply_at(&mut image, &epoch_2(&[1, 2])).expect("rejoin");
        assert_eq!(leader_isr(&image), (1, vec![1, 2]));
    }

    #[test]
    fn a_restarted_broker_leaves_the_isr_and_rejoins_only_through_alter_partition() {
        let mut image = replicated();
        // Broker 2 restarts: a new incarnation at log index 50.
        apply(&mut image, &register(2, 2), 50).expect("re-register");
        assert_eq!(leader_isr(&image), (1, vec![1, 3]));
        // The restarted leader 1 stops leading too.
        apply(&mut image, &register(1, 2), 51).expect("re-register");
        let p = image.partition("t", 0).expect("partition").clone();
        assert_eq!((p.leader, p.leader_epoch, p.isr), (3, 1, vec![3]));
        for (id, epoch) in [(1, 51), (2, 50)] {
            let unfence = Command::UnfenceBroker {
                broker_id: id,
                broker_epoch: epoch,
            };
            apply(&mut image, &unfence, 60).expect("unfence");
        }
        assert_eq!(leader_isr(&image), (3, vec![3]));
        let rejoin = Command::AlterPartition {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            broker_id: 3,
            broker_epoch: 30,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: vec![3, 1, 2],
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        apply_at(&mut image, &rejoin).expect("rejoin");
        assert_eq!(leader_isr(&image), (3, vec![3, 1, 2]));
    }

    /// "t"-0 after an unclean election: brokers 1..=3 fenced one after the other (1, the
    /// last, stays in the ELR but fenced), 3 unfenced and elected uncleanly, 2 unfenced.
    fn uncleanly_led_by_3() -> MetadataImage {
        let mut image = replicated();
        for id in [3, 2, 1] {
            fence(&mut image, id, FenceReason::SessionExpired);
        }
        for (id, epoch) in [(3, 30), (2, 20)] {
            let unfence = Command::UnfenceBroker {
                broker_id: id,
                broker_epoch: epoch,
            };
            apply_at(&mut image, &unfence).expect("unfence");
            if id == 3 {
                // Out of ISR and ELR: not elected by the unfence (unclean election is off).
                assert_eq!(leader_isr(&image), (NO_LEADER, vec![]));
                let elect = Command::ElectLeaders {
                    partitions: vec![(Uuid::from_u128(1), 0)],
                    election: crate::command::ElectionType::Unclean,
                };
                apply_at(&mut image, &elect).expect("elect");
            }
        }
        image
    }

    fn alter_from_3(p: &PartitionImage, isr: &[i32], state: LeaderRecoveryState) -> Command {
        Command::AlterPartition {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            broker_id: 3,
            broker_epoch: 30,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: isr.to_vec(),
            leader_recovery_state: state,
        }
    }

    #[test]
    fn an_unclean_leader_recovers_through_its_alter_partition_and_only_then_grows_the_isr() {
        use LeaderRecoveryState::{Recovered, Recovering};
        let mut image = uncleanly_led_by_3();
        let p = image.partition("t", 0).expect("partition").clone();
        assert_eq!(
            (
                p.leader,
                p.isr.clone(),
                p.elr.clone(),
                p.leader_recovery_state
            ),
            (3, vec![3], vec![], Recovering)
        );
        // Recovering, the ISR may not grow: Kafka's INVALID_REQUEST, checked before the
        // ineligible replica (1 is fenced).
        for isr in [&[3, 2][..], &[3, 1]] {
            let reason = invalid_reason(refused(&mut image, &alter_from_3(&p, isr, Recovering)));
            assert!(reason.contains("still recovering"), "{reason}");
        }
        // Still recovering, the leader alone: taken, nothing but the partition epoch moves.
        apply_at(&mut image, &alter_from_3(&p, &[3], Recovering)).expect("same state");
        let p = image.partition("t", 0).expect("partition").clone();
        assert_eq!(
            (p.isr.clone(), p.leader_recovery_state),
            (vec![3], Recovering)
        );
        // The leader reports it has recovered: the ISR grows in the same change.
        apply_at(&mut image, &alter_from_3(&p, &[3, 2], Recovered)).expect("recovered");
        let p = image.partition("t", 0).expect("partition").clone();
        assert_eq!(
            (
                p.leader,
                p.leader_epoch,
                p.isr.clone(),
                p.leader_recovery_state
            ),
            (3, 2, vec![3, 2], Recovered)
        );
        // A recovered partition never becomes recovering again through AlterPartition.
        let reason = invalid_reason(refused(&mut image, &alter_from_3(&p, &[3], Recovering)));
        assert!(reason.contains("recovered to recovering"), "{reason}");
    }

    #[test]
    fn a_recovering_leader_may_report_recovered_without_growing_the_isr() {
        let mut image = uncleanly_led_by_3();
        let p = image.partition("t", 0).expect("partition").clone();
        apply_at(
            &mut image,
            &alter_from_3(&p, &[3], LeaderRecoveryState::Recovered),
        )
        .expect("recovered");
        let after = image.partition("t", 0).expect("partition");
        assert_eq!(
            (
                after.isr.clone(),
                after.leader_recovery_state,
                after.partition_epoch
            ),
            (
                vec![3],
                LeaderRecoveryState::Recovered,
                p.partition_epoch + 1
            )
        );
    }

    #[test]
    fn an_alter_partition_without_a_recovery_state_reads_as_recovered() {
        // An entry an older build wrote: no `leader_recovery_state`.
        let json = format!(
            "{{\"AlterPartition\":{{\"topic_id\":\"{}\",\"partition\":0,\"broker_id\":3,\
             \"broker_epoch\":30,\"leader_epoch\":1,\"partition_epoch\":2,\"isr\":[3]}}}}",
            Uuid::from_u128(1)
        );
        let cmd: Command = serde_json::from_str(&json).expect("parses");
        assert!(matches!(
            cmd,
            Command::AlterPartition {
                leader_recovery_state: LeaderRecoveryState::Recovered,
                ..
            }
        ));
    }

    #[test]
    fn elect_leaders_applies_per_partition_and_skips_unknown_ones() {
        let mut image = replicated();
        fence(&mut image, 1, FenceReason::SessionExpired);
        assert_eq!(leader_isr(&image), (2, vec![2, 3]));
        let unfence = Command::UnfenceBroker {
            broker_id: 1,
            broker_epoch: 10,
        };
        apply_at(&mut image, &unfence).expect("unfence");
        let p = image.partition("t", 0).expect("partition").clone();
        apply_at(&mut image, &alter_from_2(&p, &[2, 3, 1])).expect("1 rejoins");
        let elect = Command::ElectLeaders {
            partitions: vec![
                (Uuid::from_u128(9), 0),
                (Uuid::from_u128(1), 7),
                (Uuid::from_u128(1), 0),
            ],
            election: crate::command::ElectionType::Preferred,
        };
        apply_at(&mut image, &elect).expect("elect");
        let p = image.partition("t", 0).expect("partition");
        assert_eq!(
            (p.leader, p.leader_epoch, p.partition_epoch, p.isr.clone()),
            (1, 2, 3, vec![2, 3, 1])
        );
        // Again: nothing to do.
        let before = image.clone();
        apply_at(&mut image, &elect).expect("no-op");
        assert_eq!(image, before);
    }

    fn alter_from_2(p: &PartitionImage, isr: &[i32]) -> Command {
        Command::AlterPartition {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            broker_id: 2,
            broker_epoch: 20,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: isr.to_vec(),
            leader_recovery_state: LeaderRecoveryState::Recovered,
        }
    }

    fn scram(user: &str, salt: u8) -> Command {
        Command::AlterUserScramCredentials {
            upsertions: vec![crate::command::ScramUpsertion {
                user: user.into(),
                mechanism: 2,
                credential: crate::image::ScramCredentialImage {
                    salt: vec![salt],
                    stored_key: vec![1],
                    server_key: vec![2],
                    iterations: 4096,
                },
            }],
            deletions: Vec::new(),
        }
    }

    #[test]
    fn the_first_bootstrap_applies_its_records_and_every_later_one_is_ignored() {
        let mut image = MetadataImage::default();
        let first = Command::Bootstrap {
            records: vec![scram("admin", 1), scram("broker", 1)],
        };
        apply_at(&mut image, &first).expect("bootstrap");
        assert!(image.bootstrapped);
        assert_eq!(
            image.scram_credentials.keys().collect::<Vec<_>>(),
            ["admin", "broker"]
        );
        // Another node's records (formatted with other salts, or other users) change nothing.
        let second = Command::Bootstrap {
            records: vec![scram("admin", 9), scram("mallory", 9)],
        };
        let before = image.clone();
        apply_at(&mut image, &second).expect("no-op");
        assert_eq!(image, before);
    }

    #[test]
    fn an_empty_bootstrap_marks_the_image_so_no_later_records_apply() {
        let mut image = MetadataImage::default();
        apply_at(&mut image, &Command::Bootstrap { records: vec![] }).expect("mark");
        apply_at(
            &mut image,
            &Command::Bootstrap {
                records: vec![scram("admin", 1)],
            },
        )
        .expect("no-op");
        assert!(image.bootstrapped && image.scram_credentials.is_empty());
    }

    #[test]
    fn a_bootstrap_record_other_than_a_scram_credential_is_refused_whole() {
        let mut image = MetadataImage::default();
        let cmd = Command::Bootstrap {
            records: vec![scram("admin", 1), register(1, 1)],
        };
        let err = apply_at(&mut image, &cmd).expect_err("refused");
        assert!(matches!(err, ApplyError::InvalidRequest { .. }), "{err:?}");
        assert_eq!(image, MetadataImage::default());
    }
}
