//! Metadata: brokers, cluster id, controller, and topics with their partitions. Asking
//! for an unknown topic auto-creates it when both the request and
//! `auto.create.topics.enable` allow (then it reports `LEADER_NOT_AVAILABLE` once, as
//! Kafka does, unless the topic is already usable). With an authorizer, as Kafka's
//! `handleTopicMetadataRequest`: an all-topics request lists only the topics the session
//! may DESCRIBE; a named one it may not is TOPIC_AUTHORIZATION_FAILED (existing or not);
//! auto-creation needs CREATE on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED);
//! the KIP-430 bitfields hold the operations the session may perform.

use brook_protocol::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use brook_protocol::kafka_protocol::messages::{
    BrokerId, MetadataRequest, MetadataResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::{MetadataImage, TopicImage};
use tracing::warn;

use crate::auth::acl::{AclOperation, ResourceType};
use crate::auth::{authorized, Access};
use crate::broker::Broker;
use crate::error::{BrokerError, Denied, PartitionError};
use crate::logging::sites;
use crate::metadata::topics;
use crate::server::session::Session;

/// Brokers are listed at their addresses on the listener the request came in on.
pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let mut image = broker.image();
    let access = Access::new(broker, session);
    let topic_ops = version >= 8 && req.include_topic_authorized_operations;
    // v0 had no null array: an empty list meant every topic.
    let all_topics = match &req.topics {
        None => true,
        Some(list) => version == 0 && list.is_empty(),
    };
    let topics: Vec<MetadataResponseTopic> = match req.topics {
        _ if all_topics => image
            .topics
            .values()
            .filter(|t| access.topic(AclOperation::Describe, &t.name))
            .map(|t| topic_entry(broker, &image, t))
            .collect(),
        None => Vec::new(),
        Some(requested) => {
            let mut entries = Vec::with_capacity(requested.len());
            for t in requested {
                // A topic id, when given, wins over the name, as in Kafka's KafkaApis: the Java
                // consumer asks for topics it was assigned by id (KIP-848 regex subscriptions)
                // with the name "".
                let name = match (&t.name, t.topic_id.is_nil()) {
                    (Some(name), true) => name.to_string(),
                    (_, false) => match image.topic_name(&t.topic_id) {
                        Some(name) => name.to_string(),
                        None => {
                            entries.push(
                                MetadataResponseTopic::default()
                                    .with_topic_id(t.topic_id)
                                    .with_error_code(PartitionError::UnknownTopicId.code().code()),
                            );
                            continue;
                        }
                    },
                    (None, true) => {
                        let nameless =
                            BrokerError::InvalidRequest("a topic without name or id".into());
                        entries.push(error_topic("", nameless.code()));
                        continue;
                    }
                };
                if !access.topic(AclOperation::Describe, &name) {
                    entries.push(error_topic(&name, Denied::Topic.code()));
                    continue;
                }
                // Metadata v0-v3 had no flag: auto-creation was implied.
                let allow_auto = req.allow_auto_topic_creation || version < 4;
                if image.topic(&name).is_none() && allow_auto {
                    let may_create = access.cluster(AclOperation::Create)
                        || access.topic(AclOperation::Create, &name);
                    if broker.config.auto_create_topics_enable && !may_create {
                        entries.push(error_topic(&name, Denied::Topic.code()));
                        continue;
                    }
                    match topics::auto_create(broker, &name).await {
                        Ok(_) => image = broker.image(),
                        Err(e) => {
                            // A client can ask for any name, as often as it likes.
                            if sites::AUTO_CREATION_FAILED.allow() {
                                warn!(topic = %name, error = %e, "auto-creation failed");
                            }
                            entries.push(error_topic(&name, e.code()));
                            continue;
                        }
                    }
                }
                match image.topic(&name) {
                    Some(topic) => entries.push(topic_entry(broker, &image, topic)),
                    None => {
                        let unknown = match topics::validate_name(&name) {
                            Err(invalid) => invalid.code(),
                            Ok(()) => PartitionError::UnknownTopicOrPartition.code(),
                        };
                        entries.push(error_topic(&name, unknown))
                    }
                }
            }
            entries
        }
    };
    let topics = if topic_ops {
        topics
            .into_iter()
            .map(|t| {
                if t.error_code == 0 {
                    let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                    let ops = access.authorized_operations(
                        ResourceType::Topic,
                        &name,
                        authorized::TOPIC_OPERATIONS,
                    );
                    t.with_topic_authorized_operations(ops)
                } else {
                    t
                }
            })
            .collect()
    } else {
        topics
    };
    let cluster_ops = if (8..=10).contains(&version) && req.include_cluster_authorized_operations {
        access.cluster_operations()
    } else {
        i32::MIN
    };
    MetadataResponse::default()
        .with_cluster_authorized_operations(cluster_ops)
        .with_brokers(brokers(&image, &session.listener_name))
        .with_cluster_id(Some(StrBytes::from_string(broker.cluster_id.clone())))
        .with_controller_id(BrokerId(controller_id(broker)))
        .with_topics(topics)
}

/// The controller as clients see it: the metadata quorum's leader when it is an active
/// broker (clients can reach it), else this broker, which forwards what needs the leader.
pub fn controller_id(broker: &Broker) -> i32 {
    let image = broker.image();
    broker
        .quorum
        .leader()
        .and_then(|id| i32::try_from(id).ok())
        .filter(|&id| image.is_active(id))
        .unwrap_or(broker.node_id)
}

/// Only active brokers: a fenced or stopping broker leaves Metadata (KRaft does the same).
/// Each at its address on `listener`, the one the request came in on; a broker without
/// that listener is left out, as Kafka leaves it out.
fn brokers(image: &MetadataImage, listener: &str) -> Vec<MetadataResponseBroker> {
    image
        .active_brokers()
        .filter_map(|b| {
            let (host, port) = b.endpoint(listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.broker_id))
                    .with_host(StrBytes::from_string(host.to_owned()))
                    .with_port(i32::from(port))
                    .with_rack(b.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect()
}

fn error_topic(name: &str, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_error_code(error.code())
}

/// A topic's partitions; a leaderless partition carries LEADER_NOT_AVAILABLE and leader -1,
/// and replicas on inactive brokers are listed as offline (v5+). A replica of this broker
/// whose log failed to open is offline too, and never advertised as the leader: Kafka's
/// controller moves leadership off a failed log directory, leaving leader -1 and
/// LEADER_NOT_AVAILABLE when no other replica can lead.
fn topic_entry(
    broker: &Broker,
    image: &MetadataImage,
    topic: &TopicImage,
) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .values()
        .map(|p| {
            let mut offline = super::leader_hint::offline_replicas(image, &topic.topic_id, p);
            let log_offline = p.replicas.contains(&broker.node_id)
                && broker.replicas.is_offline(&topic.name, p.partition);
            if log_offline && !offline.contains(&BrokerId(broker.node_id)) {
                offline.push(BrokerId(broker.node_id));
            }
            let leader = if log_offline && p.leader == broker.node_id {
                -1
            } else {
                p.leader
            };
            let error = if p.has_leader() && leader >= 0 {
                0
            } else {
                PartitionError::LeaderNotAvailable.code().code()
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replicas.iter().copied().map(BrokerId).collect())
                .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())
                .with_offline_replicas(offline)
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.topic_id)
        .with_is_internal(topic.name.starts_with("__"))
        .with_partitions(partitions)
}
