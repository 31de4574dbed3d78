//! CreatePartitions: grow a topic to `count` partitions (never shrink: Kafka answers
//! `INVALID_PARTITIONS`), placed over the active brokers like a new topic's (with the
//! replication factor of partition 0), or where the request's `assignments` say. The
//! partitions added count against the client's `controller_mutation_rate` (`quota::mutation`).

use brook_protocol::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use brook_protocol::kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::Command;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::metadata::topics;
use crate::quota::mutation::MutationQuota;
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: CreatePartitionsRequest,
    _version: i16,
    quota: &mut MutationQuota,
) -> CreatePartitionsResponse {
    // Kafka's createPartitions: ALTER on each topic.
    let access = Access::new(broker, session);
    let mut results = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.name.to_string();
        let image = broker.image();
        let outcome: Result<(), BrokerError> = match image.topic(&name) {
            _ if !access.topic(AclOperation::Alter, &name) => {
                Err(BrokerError::NotAuthorized(Denied::Topic))
            }
            None => Err(BrokerError::UnknownTopic { name }),
            Some(existing) => {
                let current = existing.partitions.len() as i32;
                if topic.count <= current {
                    Err(BrokerError::PartitionsNotIncreased {
                        current,
                        requested: topic.count,
                    })
                } else {
                    let rf = existing
                        .partitions
                        .values()
                        .next()
                        .map_or(1, |p| p.replicas.len() as i16);
                    let explicit: Vec<Vec<i32>> = topic
                        .assignments
                        .iter()
                        .flatten()
                        .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                        .collect();
                    let placed = if topic.assignments.is_none() {
                        topics::place(&image, current, topic.count - current, rf)
                    } else if explicit.len() as i32 != topic.count - current {
                        Err(BrokerError::InvalidReplicaAssignment(format!(
                            "{} assignments given for {} new partitions",
                            explicit.len(),
                            topic.count - current
                        )))
                    } else {
                        topics::check_explicit(&image, current, &explicit)
                    };
                    let added = (topic.count - current) as usize; // > 0: checked above
                    match placed {
                        Err(e) => Err(e),
                        Ok(_) if quota.apply(added).is_err() => {
                            Err(BrokerError::ThrottlingQuotaExceeded)
                        }
                        Ok(_) if req.validate_only => Ok(()),
                        Ok(partitions) => broker
                            .quorum
                            .propose(Command::CreatePartitions {
                                topic_id: existing.topic_id,
                                partitions,
                            })
                            .await
                            .map_err(BrokerError::from),
                    }
                }
            }
        };
        let mut result = CreatePartitionsTopicResult::default().with_name(topic.name);
        if let Err(e) = outcome {
            // Kafka's controller answers a throttled topic without a message.
            let message = match e {
                BrokerError::ThrottlingQuotaExceeded => None,
                ref e => Some(StrBytes::from_string(e.to_string())),
            };
            result = result
                .with_error_code(e.code().code())
                .with_error_message(message);
        }
        results.push(result);
    }
    CreatePartitionsResponse::default().with_results(results)
}
