//! DescribeProducers (key 61, KIP-664; `kafka-transactions.sh describe-producers` and
//! `find-hanging`): the active producers of each requested partition this broker leads,
//! as Kafka's `ReplicaManager.activeProducerState` answers them.
//!
//! Per partition: UNKNOWN_TOPIC_OR_PARTITION when the metadata does not know it,
//! NOT_LEADER_OR_FOLLOWER when another broker leads it (the admin client then asks the
//! leader), KAFKA_STORAGE_ERROR when the log cannot be read; each error carries Kafka's
//! message. Per producer: id, epoch, last sequence and timestamp (-1 when none),
//! coordinator epoch (-1 before any marker) and the first offset of its open
//! transaction (-1 when none), the offset `abort --start-offset` needs.
//!
//! Authorization (Kafka's `handleDescribeProducersRequest`): READ on the topic, checked
//! before whether it exists; a refused topic's partitions are `TOPIC_AUTHORIZATION_FAILED`.

use brook_protocol::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use brook_protocol::kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_storage::ActiveProducer;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

/// The wire's "none": Kafka's `RecordBatch.NO_SEQUENCE`, `RecordBatch.NO_TIMESTAMP`,
/// and the `-1` of an absent `currentTxnFirstOffset`.
const NO_SEQUENCE: i32 = -1;
const NO_TIMESTAMP: i64 = -1;
const NO_OFFSET: i64 = -1;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeProducersRequest,
    _version: i16,
) -> DescribeProducersResponse {
    let access = Access::new(broker, session);
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.name.to_string();
        let readable = access.topic(AclOperation::Read, &name);
        let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
        for index in topic.partition_indexes {
            if !readable {
                // Kafka's `ApiError(TOPIC_AUTHORIZATION_FAILED)`: the error's default message.
                partitions.push(
                    PartitionResponse::default()
                        .with_partition_index(index)
                        .with_error_code(Denied::Topic.code().code())
                        .with_error_message(Some(StrBytes::from_string(Denied::Topic.to_string()))),
                );
                continue;
            }
            let log = broker
                .replicas
                .leader_partition(&name, index, None)
                .await
                .map(|p| p.log().clone());
            let producers = match log {
                Ok(log) => log.active_producers().await.map_err(BrokerError::from),
                Err(e) => Err(e),
            };
            let base = PartitionResponse::default().with_partition_index(index);
            partitions.push(match producers {
                Ok(producers) => {
                    base.with_active_producers(producers.iter().map(producer_state).collect())
                }
                Err(e) => {
                    let code = e.code();
                    if e.is_storage_fault() {
                        tracing::error!(topic = %name, partition = index, error = %e, "describe producers failed");
                    }
                    // Kafka's wording, so admin tools print the same line.
                    let message = format!("Unable to describe producer state for partition {name}-{index}");
                    base.with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(message)))
                }
            });
        }
        topics.push(
            TopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DescribeProducersResponse::default().with_topics(topics)
}

fn producer_state(p: &ActiveProducer) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(i32::from(p.producer_epoch))
        .with_last_sequence(p.last_sequence.unwrap_or(NO_SEQUENCE))
        .with_last_timestamp(p.last_timestamp.unwrap_or(NO_TIMESTAMP))
        .with_coordinator_epoch(p.coordinator_epoch)
        .with_current_txn_start_offset(p.current_txn_start_offset.unwrap_or(NO_OFFSET))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer(open: bool) -> ActiveProducer {
        ActiveProducer {
            producer_id: 7,
            producer_epoch: 2,
            last_sequence: open.then_some(4),
            last_timestamp: open.then_some(1_700),
            coordinator_epoch: 3,
            current_txn_start_offset: open.then_some(12),
        }
    }

    #[test]
    fn absent_sequence_timestamp_and_transaction_are_minus_one_on_the_wire() {
        let s = producer_state(&producer(false));
        assert_eq!((s.producer_id, s.producer_epoch), (ProducerId(7), 2));
        assert_eq!((s.last_sequence, s.last_timestamp), (-1, -1));
        assert_eq!((s.coordinator_epoch, s.current_txn_start_offset), (3, -1));
    }

    #[test]
    fn an_open_transaction_shows_its_first_offset() {
        let s = producer_state(&producer(true));
        assert_eq!((s.last_sequence, s.last_timestamp), (4, 1_700));
        assert_eq!(s.current_txn_start_offset, 12);
    }
}
