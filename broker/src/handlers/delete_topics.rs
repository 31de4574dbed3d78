//! DeleteTopics, by name (all versions) or by topic id (v6+): remove the topic from the
//! metadata, then its local logs, before answering — so a topic re-created with the
//! same name right after never sees the old data. A topic's partitions count against the
//! client's `controller_mutation_rate` (`quota::mutation`) before it is deleted.

use brook_protocol::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use brook_protocol::kafka_protocol::messages::{
    DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::Command;
use uuid::Uuid;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied, PartitionError};
use crate::quota::mutation::MutationQuota;
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: DeleteTopicsRequest,
    _version: i16,
    quota: &mut MutationQuota,
) -> DeleteTopicsResponse {
    // Kafka's deleteTopics: a named topic the session may not DESCRIBE is refused whether
    // it exists or not; an existing one needs DELETE.
    let access = Access::new(broker, session);
    // v0-v5 send names; v6+ send (name or id) pairs.
    let mut targets: Vec<(Option<String>, Uuid)> = req
        .topic_names
        .iter()
        .map(|n| (Some(n.to_string()), Uuid::nil()))
        .collect();
    targets.extend(
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.topic_id)),
    );
    let mut responses = Vec::with_capacity(targets.len());
    for (name, topic_id) in targets {
        let image = broker.image();
        let found = match (&name, topic_id.is_nil()) {
            (Some(name), _) => image.topic(name),
            (None, false) => image.topic_by_id(&topic_id),
            (None, true) => None,
        }
        .map(|t| (t.name.clone(), t.topic_id, t.partitions.len()));
        let mut result = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(StrBytes::from_string(n))))
            .with_topic_id(topic_id);
        let named_undescribable = name
            .as_deref()
            .is_some_and(|n| !access.topic(AclOperation::Describe, n));
        let outcome = match found {
            _ if named_undescribable => Err(Denied::Topic.code()),
            Some((ref n, _, _)) if !access.topic(AclOperation::Delete, n) => {
                Err(Denied::Topic.code())
            }
            None if name.is_some() => Err(PartitionError::UnknownTopicOrPartition.code()),
            None => Err(PartitionError::UnknownTopicId.code()),
            Some(_) if !broker.config.delete_topic_enable => {
                Err(BrokerError::TopicDeletionDisabled.code())
            }
            // Kafka answers it without a message.
            Some((_, _, partitions)) if quota.apply(partitions).is_err() => {
                Err(BrokerError::ThrottlingQuotaExceeded.code())
            }
            Some((found_name, found_id, _)) => {
                result = result
                    .with_name(Some(TopicName(StrBytes::from_string(found_name.clone()))))
                    .with_topic_id(found_id);
                match broker
                    .quorum
                    .propose(Command::DeleteTopic { topic_id: found_id })
                    .await
                {
                    Ok(()) => {
                        broker.replicas.delete_topic(&found_name).await;
                        Ok(())
                    }
                    Err(e) => Err(BrokerError::from(e).code()),
                }
            }
        };
        if let Err(code) = outcome {
            result = result.with_error_code(code.code());
        }
        responses.push(result);
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
