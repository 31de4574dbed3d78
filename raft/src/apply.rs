//! Pure application of one [`Command`] to a [`MetadataImage`]: no I/O, no clock.
//!
//! Invariant: a command either applies whole or returns an [`ApplyError`] with the image
//! untouched (every check runs before the first mutation). Because apply is deterministic,
//! all voters that apply the same log reach identical images and identical errors.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::command::{ApplyError, ApplyResult, Command, PartitionAssignment};
use crate::image::{BrokerRegistration, MetadataImage, PartitionImage, TopicImage};

/// Apply `cmd` to `image`. On `Err`, `image` is unchanged.
pub fn apply(image: &mut MetadataImage, cmd: &Command) -> ApplyResult {
    match cmd {
        Command::CreateTopic {
            name,
            topic_id,
            partitions,
            configs,
        } => create_topic(image, name, *topic_id, partitions, configs),
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
            let topic = topic_mut(image, topic_id)?;
            let next = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
            let new = check_assignments(&topic.name, next, partitions)?;
            topic.partitions.extend(new);
            Ok(())
        }
        Command::AlterTopicConfigs {
            topic_id,
            set,
            delete,
        } => {
            alter(&mut topic_mut(image, topic_id)?.configs, set, delete);
            Ok(())
        }
        Command::ReplaceTopicConfigs { topic_id, configs } => {
            topic_mut(image, topic_id)?.configs = configs.clone();
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
            Ok(())
        }
        Command::ReplaceBrokerConfigs { broker_id, configs } => {
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
        } => {
            let registration = BrokerRegistration {
                broker_id: *broker_id,
                host: host.clone(),
                port: *port,
                rack: rack.clone(),
            };
            image.brokers.insert(*broker_id, registration);
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
            Ok(())
        }
    }
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
    let partitions = check_assignments(name, 0, partitions)?;
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

/// Checks that `assignments` number partitions `first..first + n` (in any order), each with
/// distinct replicas, non-negative broker ids and a leader among them; returns the images.
fn check_assignments(
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
        let image = PartitionImage {
            partition: a.partition,
            leader: a.leader,
            leader_epoch: 0,
            replicas: a.replicas.clone(),
            // A new partition has no data yet, so every replica is in sync.
            isr: a.replicas.clone(),
        };
        if out.insert(a.partition, image).is_some() {
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
        assert_eq!(apply(&mut image, &create("t", 1, 3)), Ok(()));
        let t = image.topic_by_id(&Uuid::from_u128(1)).expect("created");
        assert_eq!(t.name, "t");
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(t.partitions[&2].isr, vec![1]);
    }

    #[test]
    fn duplicate_names_and_ids_are_rejected_without_change() {
        let mut image = MetadataImage::default();
        apply(&mut image, &create("t", 1, 1)).expect("first create");
        let before = image.clone();
        assert_eq!(
            apply(&mut image, &create("t", 2, 1)),
            Err(ApplyError::TopicAlreadyExists { name: "t".into() })
        );
        assert!(matches!(
            apply(&mut image, &create("u", 1, 1)),
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
            apply(&mut image, &cmd),
            Err(ApplyError::InvalidPartitions { .. })
        ));
        apply(&mut image, &create("t", 1, 2)).expect("create");
        let more = Command::CreatePartitions {
            topic_id: Uuid::from_u128(1),
            partitions: vec![assignment(2, &[1, 2]), assignment(3, &[2, 1])],
        };
        assert_eq!(apply(&mut image, &more), Ok(()));
        assert_eq!(image.partition("t", 3).map(|p| p.leader), Some(2));
        let gap = Command::CreatePartitions {
            topic_id: Uuid::from_u128(1),
            partitions: vec![assignment(5, &[1])],
        };
        assert!(matches!(
            apply(&mut image, &gap),
            Err(ApplyError::InvalidPartitions { .. })
        ));
    }

    #[test]
    fn leader_changes_bump_the_leader_epoch_but_isr_changes_do_not() {
        let mut image = MetadataImage::default();
        apply(&mut image, &create("t", 1, 1)).expect("create");
        let change = |leader, isr: &[i32]| Command::SetPartitionLeaderIsr {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            leader,
            isr: isr.to_vec(),
        };
        apply(&mut image, &change(1, &[1])).expect("isr only");
        assert_eq!(image.partition("t", 0).map(|p| p.leader_epoch), Some(0));
        apply(&mut image, &change(2, &[2])).expect("new leader");
        assert_eq!(
            image.partition("t", 0).map(|p| (p.leader, p.leader_epoch)),
            Some((2, 1))
        );
    }

    #[test]
    fn configs_are_set_then_deleted_and_empty_broker_maps_vanish() {
        let mut image = MetadataImage::default();
        apply(&mut image, &create("t", 1, 1)).expect("create");
        let alter_topic = Command::AlterTopicConfigs {
            topic_id: Uuid::from_u128(1),
            set: BTreeMap::from([("a".into(), "1".into()), ("b".into(), "2".into())]),
            delete: vec!["b".into()],
        };
        apply(&mut image, &alter_topic).expect("alter");
        assert_eq!(
            image.topics["t"].configs,
            BTreeMap::from([("a".into(), "1".into())])
        );

        let set = Command::AlterBrokerConfigs {
            broker_id: None,
            set: BTreeMap::from([("x".into(), "1".into())]),
            delete: vec![],
        };
        apply(&mut image, &set).expect("set default");
        assert_eq!(image.broker_configs(None).map(|c| c.len()), Some(1));
        let clear = Command::AlterBrokerConfigs {
            broker_id: None,
            set: BTreeMap::new(),
            delete: vec!["x".into()],
        };
        apply(&mut image, &clear).expect("delete default");
        assert!(image.broker_configs.is_empty());
    }

    #[test]
    fn commands_on_unknown_topic_ids_fail() {
        let mut image = MetadataImage::default();
        let id = Uuid::from_u128(9);
        assert_eq!(
            apply(&mut image, &Command::DeleteTopic { topic_id: id }),
            Err(ApplyError::UnknownTopic { topic_id: id })
        );
    }
}
