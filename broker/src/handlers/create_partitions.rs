//! CreatePartitions: grow a topic to `count` partitions (never shrink: Kafka answers
//! `INVALID_PARTITIONS`), led by this broker until replica placement arrives.

use brook_protocol::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use brook_protocol::kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::{Command, PartitionAssignment};

use crate::broker::Broker;
use crate::error::BrokerError;

pub async fn handle(
    broker: &Broker,
    req: CreatePartitionsRequest,
    _version: i16,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.name.to_string();
        let image = broker.image();
        let outcome: Result<(), (ResponseError, String)> = match image.topic(&name) {
            None => Err((
                ResponseError::UnknownTopicOrPartition,
                format!("topic {name} does not exist"),
            )),
            Some(existing) => {
                let current = existing.partitions.len() as i32;
                if topic.count <= current {
                    Err((
                        ResponseError::InvalidPartitions,
                        format!(
                            "topic currently has {current} partitions, {} would not be an increase",
                            topic.count
                        ),
                    ))
                } else if req.validate_only {
                    Ok(())
                } else {
                    let leader = broker.node_id;
                    let partitions = (current..topic.count)
                        .map(|partition| PartitionAssignment {
                            partition,
                            replicas: vec![leader],
                            leader,
                        })
                        .collect();
                    broker
                        .quorum
                        .propose(Command::CreatePartitions {
                            topic_id: existing.topic_id,
                            partitions,
                        })
                        .await
                        .map_err(|e| {
                            let e = BrokerError::from(e);
                            (e.code(), e.to_string())
                        })
                }
            }
        };
        let mut result = CreatePartitionsTopicResult::default().with_name(topic.name);
        if let Err((code, message)) = outcome {
            result = result
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message)));
        }
        results.push(result);
    }
    CreatePartitionsResponse::default().with_results(results)
}
