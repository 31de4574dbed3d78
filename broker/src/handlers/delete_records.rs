//! DeleteRecords (key 21; `kafka-delete-records`, `AdminClient.deleteRecords`): moves
//! each partition's log start offset forward (Kafka's `maybeIncrementLogStartOffset`).
//!
//! Per partition: `offset` -1 means the high watermark; an offset above the high
//! watermark is `OFFSET_OUT_OF_RANGE`; a topic whose `cleanup.policy` lacks `delete` is
//! `POLICY_VIOLATION` (Kafka's `Partition.deleteRecordsOnLeader`); an offset below the current start leaves it (the
//! start never moves back). Whole segments below the new start are deleted (their files
//! renamed `.deleted`, unlinked after `file.delete.delay.ms`), and the new start is
//! persisted in the log-start-offset checkpoint before the answer, so a restart never
//! resurrects the records. `low_watermark` is the new log start offset; the high watermark
//! bounds it (followers apply the new start when their next fetch reports it); the answer
//! does not wait for them (`timeout_ms` is moot).
//!
//! Authorization (Kafka's `handleDeleteRecordsRequest`): DELETE on the topic, checked before
//! anything else, so a refused partition is `TOPIC_AUTHORIZATION_FAILED` whether it exists
//! or not and its log is never touched.

use brook_protocol::kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use brook_protocol::kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::MetadataImage;
use brook_storage::log_manager::now_ms;
use brook_storage::StorageError;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::config::{BrokerConfig, TopicConfig};
use crate::error::{BrokerError, Denied, PartitionError};
use crate::server::session::Session;

/// The wire's "delete up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    let image = broker.image();
    let config = broker.effective_config();
    let access = Access::new(broker, session);
    let mut topics = Vec::with_capacity(req.topics.len());
    let mut moved = false;
    for topic in req.topics {
        let name = topic.name.to_string();
        let may_delete = access.topic(AclOperation::Delete, &name);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let result = if !may_delete {
                Err(Denied::Topic.code())
            } else {
                delete_up_to(broker, &config, &image, &name, p.partition_index, p.offset)
                    .await
                    .map(|(start, advanced)| {
                        moved |= advanced;
                        start
                    })
            };
            let base = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            partitions.push(match result {
                Ok(low_watermark) => base.with_low_watermark(low_watermark),
                Err(code) => base.with_error_code(code.code()),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    if moved {
        if let Err(e) = broker.replicas.checkpoint_log_start_offsets().await {
            tracing::error!(error = %e, "persisting log start offsets failed");
        }
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Moves one partition's log start offset up to `offset` (-1: the high watermark); the new
/// start, and whether it moved.
async fn delete_up_to(
    broker: &Broker,
    config: &BrokerConfig,
    image: &MetadataImage,
    name: &str,
    partition: i32,
    offset: i64,
) -> Result<(i64, bool), ResponseError> {
    match broker
        .replicas
        .leader_partition(name, partition, None)
        .await
        .map(|p| p.log().clone())
    {
        Err(e) => Err(e.code()),
        Ok(_) if !deletes(config, image, name) => Err(PartitionError::PolicyViolation.code()),
        Ok(log) => {
            let before = log.log_start_offset();
            let high_watermark = log.high_watermark();
            let target = if offset == HIGH_WATERMARK {
                high_watermark
            } else {
                offset
            };
            if target < 0 || target > high_watermark {
                return Err(PartitionError::OffsetOutOfRange.code());
            }
            match log.increment_log_start_offset(target, now_ms()).await {
                Ok(start) => Ok((start, start != before)),
                Err(e) => Err(storage_failure(name, partition, e)),
            }
        }
    }
}

/// Kafka refuses DeleteRecords on a topic whose `cleanup.policy` lacks `delete`.
fn deletes(config: &BrokerConfig, image: &MetadataImage, topic: &str) -> bool {
    image
        .topic(topic)
        .and_then(|t| TopicConfig::resolve(config, &t.configs).ok())
        .is_some_and(|c| c.cleanup_policy.delete)
}

fn storage_failure(topic: &str, partition: i32, e: StorageError) -> ResponseError {
    let e = BrokerError::from(e);
    if e.is_storage_fault() {
        tracing::error!(topic, partition, error = %e, "delete records failed");
    }
    e.code()
}
