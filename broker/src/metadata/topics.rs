//! Topic creation shared by CreateTopics and auto-creation: name validation as Kafka
//! does it, partition assignment (this single broker leads every partition for now;
//! replicas come with the cluster work), config validation, then a proposal to the
//! metadata quorum.

use std::collections::BTreeMap;

use base64::Engine;
use brook_raft::{Command, PartitionAssignment};
use uuid::Uuid;

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
    let brokers = broker.image().brokers.len().max(1);
    if topic.replication_factor <= 0 || topic.replication_factor as usize > brokers {
        return Err(BrokerError::InvalidReplicationFactor {
            requested: topic.replication_factor,
            brokers,
        });
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
    let leader = broker.node_id;
    let partitions = (0..topic.partitions)
        .map(|partition| PartitionAssignment {
            partition,
            replicas: vec![leader],
            leader,
        })
        .collect();
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

/// Auto-creates `name` with the broker's defaults when `auto.create.topics.enable`.
/// Returns whether the topic exists afterwards.
pub async fn auto_create(broker: &Broker, name: &str) -> Result<bool, BrokerError> {
    if broker.image().topic(name).is_some() {
        return Ok(true);
    }
    // Kafka creates its internal topic with its own settings whoever asks first.
    if name == crate::coordinator::group::records::OFFSETS_TOPIC {
        return super::offsets_topic::ensure(broker).await.map(|()| true);
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
        },
    )
    .await;
    match result {
        Ok(_) => Ok(true),
        // Two clients racing to auto-create the same topic: the loser sees it exist.
        Err(e) if e.code() == brook_protocol::kafka_protocol::ResponseError::TopicAlreadyExists => {
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// Kafka prints UUIDs (cluster ids, topic ids) as URL-safe base64 without padding.
pub fn uuid_to_kafka_string(id: Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
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

    #[test]
    fn uuids_print_as_22_base64_characters() {
        assert_eq!(uuid_to_kafka_string(Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
    }
}
