//! Topic creation shared by CreateTopics and auto-creation: name validation as Kafka
//! does it, replica placement over the active brokers (`cluster::placement`, or the
//! request's explicit assignments), config validation, then a proposal to the metadata
//! quorum (forwarded to its leader from any node).

use std::collections::BTreeMap;

use brook_raft::{Command, MetadataImage, PartitionAssignment};
use uuid::Uuid;

use crate::cluster::placement::{self, Candidate};

use crate::broker::Broker;
use crate::config::validate_topic_overrides;
use crate::error::BrokerError;

/// Kafka's limit on topic name length.
const MAX_NAME_LENGTH: usize = 249;

/// Validates a topic name as Kafka's `Topic.validate` does.
pub fn validate_name(name: &str) -> Result<(), BrokerError> {
    let invalid = |reason: &str| BrokerError::InvalidTopic {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(invalid("the empty string is not allowed"));
    }
    if name == "." || name == ".." {
        return Err(invalid("'.' and '..' are not allowed"));
    }
    if name.len() > MAX_NAME_LENGTH {
        return Err(invalid("longer than 249 characters"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
    {
        return Err(invalid(
            "contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        ));
    }
    Ok(())
}

/// What a topic creation asks for, after defaults are applied.
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// Explicit replica lists, partition 0 first (CreateTopics `assignments`); empty:
    /// placed by Brook.
    pub assignments: Vec<Vec<i32>>,
}

/// Places `count` new partitions starting at `first` with `replication_factor` replicas
/// each over the active brokers; INVALID_REPLICATION_FACTOR when there are too few.
pub fn place(
    image: &MetadataImage,
    first: i32,
    count: i32,
    replication_factor: i16,
) -> Result<Vec<PartitionAssignment>, BrokerError> {
    let brokers: Vec<Candidate> = image
        .active_brokers()
        .map(|b| Candidate {
            broker_id: b.broker_id,
            rack: b.rack.clone(),
        })
        .collect();
    let random = Uuid::new_v4().as_u64_pair().0;
    let placed =
        placement::place(&brokers, first, count, replication_factor, random).map_err(|e| {
            BrokerError::InvalidReplicationFactor {
                requested: e.requested,
                brokers: e.available,
            }
        })?;
    Ok(assignments_from(first, placed))
}

/// Checks explicit replica lists: non-empty, distinct, registered brokers, one size.
pub fn check_explicit(
    image: &MetadataImage,
    first: i32,
    lists: &[Vec<i32>],
) -> Result<Vec<PartitionAssignment>, BrokerError> {
    let size = lists.first().map_or(0, Vec::len);
    for (i, replicas) in lists.iter().enumerate() {
        let bad = |why: &str| {
            BrokerError::InvalidReplicaAssignment(format!(
                "partition {}: {why} ({replicas:?})",
                i64::from(first) + i as i64
            ))
        };
        if replicas.is_empty() {
            return Err(bad("no replicas"));
        }
        if replicas.len() != size {
            return Err(bad("every partition must have the same number of replicas"));
        }
        let distinct: std::collections::BTreeSet<_> = replicas.iter().collect();
        if distinct.len() != replicas.len() {
            return Err(bad("a broker is listed twice"));
        }
        if let Some(unknown) = replicas.iter().find(|&&b| image.broker(b).is_none()) {
            return Err(bad(&format!("broker {unknown} is not registered")));
        }
    }
    Ok(assignments_from(first, lists.to_vec()))
}

fn assignments_from(first: i32, lists: Vec<Vec<i32>>) -> Vec<PartitionAssignment> {
    lists
        .into_iter()
        .zip(first..)
        .map(|(replicas, partition)| PartitionAssignment {
            partition,
            leader: replicas.first().copied().unwrap_or(-1),
            replicas,
        })
        .collect()
}

/// Checks a creation without proposing it (CreateTopics `validate_only` uses this too).
pub fn validate(broker: &Broker, topic: &NewTopic) -> Result<(), BrokerError> {
    validate_name(&topic.name)?;
    if topic.partitions <= 0 {
        return Err(BrokerError::Propose(brook_raft::ProposeError::Apply(
            brook_raft::ApplyError::InvalidPartitions {
                topic: topic.name.clone(),
                reason: "number of partitions must be larger than 0".into(),
            },
        )));
    }
    if topic.assignments.is_empty() {
        let brokers = broker.image().active_brokers().count().max(1);
        if topic.replication_factor <= 0 || topic.replication_factor as usize > brokers {
            return Err(BrokerError::InvalidReplicationFactor {
                requested: topic.replication_factor,
                brokers,
            });
        }
    } else {
        check_explicit(&broker.image(), 0, &topic.assignments)?;
    }
    validate_topic_overrides(&topic.configs)?;
    if broker.image().topic(&topic.name).is_some() {
        return Err(BrokerError::Propose(brook_raft::ProposeError::Apply(
            brook_raft::ApplyError::TopicAlreadyExists {
                name: topic.name.clone(),
            },
        )));
    }
    Ok(())
}

/// Validates and creates a topic; returns its id.
pub async fn create(broker: &Broker, topic: NewTopic) -> Result<Uuid, BrokerError> {
    validate(broker, &topic)?;
    let topic_id = Uuid::new_v4();
    let image = broker.image();
    let partitions = if topic.assignments.is_empty() {
        place(&image, 0, topic.partitions, topic.replication_factor)?
    } else {
        check_explicit(&image, 0, &topic.assignments)?
    };
    broker
        .quorum
        .propose(Command::CreateTopic {
            name: topic.name,
            topic_id,
            partitions,
            configs: topic.configs,
        })
        .await?;
    Ok(topic_id)
}

/// Creates the internal topic `name` (`__consumer_offsets`, `__transaction_state`, with
/// Kafka's settings for it, whoever asks first) unless it exists; losing a creation race
/// is success. `Ok(true)`: it did not exist when asked, so its partitions are only now
/// being led and loaded: FindCoordinator answers COORDINATOR_NOT_AVAILABLE then, as
/// Kafka's `getCoordinator` does for an internal topic its request creates.
/// `settings` builds the topic's definition, only when the topic is missing.
pub async fn ensure_internal(
    broker: &Broker,
    name: &str,
    settings: impl FnOnce(&Broker) -> NewTopic,
) -> Result<bool, BrokerError> {
    if broker.image().topic(name).is_some() {
        return Ok(false);
    }
    let topic = settings(broker);
    let (partitions, replication_factor) = (topic.partitions, topic.replication_factor);
    match create(broker, topic).await {
        Ok(_) => {
            tracing::info!(
                topic = %name,
                partitions,
                replication_factor,
                "created an internal topic"
            );
            Ok(true)
        }
        Err(e) if e.is_topic_already_exists() => Ok(true),
        Err(e) => Err(e),
    }
}

/// Auto-creates `name` with the broker's defaults when `auto.create.topics.enable`.
/// Returns whether the topic exists afterwards.
pub async fn auto_create(broker: &Broker, name: &str) -> Result<bool, BrokerError> {
    if broker.image().topic(name).is_some() {
        return Ok(true);
    }
    // Kafka creates its internal topic with its own settings whoever asks first.
    if name == crate::coordinator::group::records::OFFSETS_TOPIC {
        return super::offsets_topic::ensure(broker).await.map(|_| true);
    }
    if name == crate::coordinator::txn::records::TXN_STATE_TOPIC {
        return super::txn_state_topic::ensure(broker).await.map(|_| true);
    }
    if !broker.config.auto_create_topics_enable {
        return Ok(false);
    }
    let result = create(
        broker,
        NewTopic {
            name: name.to_string(),
            partitions: broker.config.num_partitions,
            replication_factor: broker.config.default_replication_factor,
            configs: BTreeMap::new(),
            assignments: Vec::new(),
        },
    )
    .await;
    match result {
        Ok(_) => Ok(true),
        // Two clients racing to auto-create the same topic: the loser sees it exist.
        Err(e) if e.is_topic_already_exists() => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(validate_name("orders.v1_a-b").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_name(bad).is_err(), "{bad:?} should be invalid");
        }
        assert!(validate_name(&"x".repeat(249)).is_ok());
    }
}
