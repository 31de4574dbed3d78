//! CreateTopics: validate each topic (name, partitions, replication factor, configs),
//! then propose it to the metadata quorum unless `validate_only`. Defaults: -1
//! partitions → `num.partitions`, -1 replication factor → `default.replication.factor`.
//! A valid topic's partitions are then counted against the client's
//! `controller_mutation_rate` (`quota::mutation`; validate-only requests too, as Kafka's
//! controller counts them) before it is created.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use brook_protocol::kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::config::{describe_topic, DescribeOptions};
use crate::error::{BrokerError, Denied};
use crate::metadata::topics::{self, NewTopic};
use crate::quota::mutation::MutationQuota;
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: CreateTopicsRequest,
    version: i16,
    quota: &mut MutationQuota,
) -> CreateTopicsResponse {
    // Kafka's createTopics: CREATE on the cluster, else CREATE on each topic.
    let access = Access::new(broker, session);
    let may_create_any = access.cluster(AclOperation::Create);
    let mut results = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.name.to_string();
        let mut configs = BTreeMap::new();
        for c in &topic.configs {
            if let Some(value) = &c.value {
                configs.insert(c.name.to_string(), value.to_string());
            }
        }
        let mut explicit: Vec<(i32, Vec<i32>)> = topic
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect();
        explicit.sort_by_key(|(p, _)| *p);
        let numbered = explicit
            .iter()
            .map(|(p, _)| *p)
            .eq(0..explicit.len() as i32);
        let assignments: Vec<Vec<i32>> = explicit.into_iter().map(|(_, r)| r).collect();
        let new_topic = NewTopic {
            name: name.clone(),
            partitions: if !assignments.is_empty() {
                assignments.len() as i32
            } else if topic.num_partitions == -1 {
                broker.config.num_partitions
            } else {
                topic.num_partitions
            },
            replication_factor: if !assignments.is_empty() {
                assignments[0].len() as i16
            } else if topic.replication_factor == -1 {
                broker.config.default_replication_factor
            } else {
                topic.replication_factor
            },
            configs: configs.clone(),
            assignments,
        };
        let (partitions, replication_factor) = (new_topic.partitions, new_topic.replication_factor);
        // Kafka: assignments exclude numPartitions/replicationFactor, and must number the
        // partitions 0..n.
        let outcome = if !may_create_any && !access.topic(AclOperation::Create, &name) {
            Err(BrokerError::NotAuthorized(Denied::Topic))
        } else if !topic.assignments.is_empty()
            && (topic.num_partitions != -1 || topic.replication_factor != -1)
        {
            Err(BrokerError::InvalidRequest(
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
            ))
        } else if !numbered {
            Err(BrokerError::InvalidReplicaAssignment(
                "partitions should be a consecutive 0-based integer sequence".into(),
            ))
        } else if let Err(e) = topics::validate(broker, &new_topic) {
            Err(e)
        } else if quota.apply(partitions.max(0) as usize).is_err() {
            Err(BrokerError::ThrottlingQuotaExceeded)
        } else if req.validate_only {
            Ok(None)
        } else {
            topics::create(broker, new_topic).await.map(Some)
        };
        let mut result = CreatableTopicResult::default().with_name(topic.name.clone());
        match outcome {
            Ok(topic_id) => {
                result = result
                    .with_error_message(None)
                    .with_topic_id(topic_id.unwrap_or_default())
                    .with_num_partitions(partitions)
                    .with_replication_factor(replication_factor);
                // v5+ echoes the topic's effective configs (KIP-525).
                if version >= 5 {
                    result = result.with_configs(Some(effective_configs(broker, &configs)));
                }
            }
            Err(e) => {
                // Kafka's controller answers a throttled topic without a message.
                let message = match e {
                    BrokerError::ThrottlingQuotaExceeded => None,
                    ref e => Some(StrBytes::from_string(e.to_string())),
                };
                result = result
                    .with_error_code(e.code().code())
                    .with_error_message(message)
                    .with_num_partitions(-1)
                    .with_replication_factor(-1);
            }
        }
        results.push(result);
    }
    CreateTopicsResponse::default().with_topics(results)
}

fn effective_configs(
    broker: &Broker,
    overrides: &BTreeMap<String, String>,
) -> Vec<CreatableTopicConfigs> {
    describe_topic(&broker.config, overrides, DescribeOptions::default())
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_string(c.name))
                .with_value(c.value.map(StrBytes::from_string))
                .with_read_only(c.read_only)
                .with_config_source(c.source.id())
                .with_is_sensitive(c.is_sensitive)
        })
        .collect()
}
