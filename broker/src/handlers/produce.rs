//! Produce: each partition's record batches go to its log as bytes — storage validates
//! the batch headers and CRCs, checks idempotent sequences, stamps offsets and writes;
//! no record is decoded here, except on compacted topics, whose records must all have a
//! key (`partition::compacted_keys`, INVALID_RECORD). On a single broker the high
//! watermark is the log end, so acks=1 and acks=all complete when the append does; acks=0
//! sends no response.

use brook_protocol::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use brook_protocol::kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use brook_protocol::kafka_protocol::ResponseError;
use bytes::BytesMut;
use tracing::debug;

use crate::broker::Broker;
use crate::coordinator::group::records::OFFSETS_TOPIC;
use crate::error::BrokerError;
use crate::metadata::topics;
use crate::metrics;
use crate::partition::compacted_keys::{reject_keyless, KeylessRecords};

pub async fn handle(
    broker: &Broker,
    req: ProduceRequest,
    _version: i16,
) -> Option<ProduceResponse> {
    let acks = req.acks;
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for topic in req.topic_data {
        let name = resolve_name(broker, &topic.name, &topic.topic_id).await;
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let response = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            let result = if !matches!(acks, -1..=1) {
                Err(ResponseError::InvalidRequiredAcks.into())
            } else if req.transactional_id.is_some() {
                // Transactions are not served yet; Kafka answers this for a transactional
                // produce it cannot authorise against a transaction coordinator.
                Err(ResponseError::TransactionalIdAuthorizationFailed.into())
            } else {
                match &name {
                    // Kafka's ReplicaManager: "Cannot append to internal topic".
                    Some(name) if name == OFFSETS_TOPIC => {
                        Err(ResponseError::InvalidTopicException.into())
                    }
                    Some(name) => append(broker, name, data.index, data.records).await,
                    None => Err(ResponseError::UnknownTopicOrPartition.into()),
                }
            };
            partitions.push(match result {
                Ok(ok) => response
                    .with_base_offset(ok.base_offset)
                    .with_log_append_time_ms(ok.log_append_time.unwrap_or(-1))
                    .with_log_start_offset(ok.log_start_offset),
                Err(Refused::Code(code)) => response.with_error_code(code.code()),
                Err(Refused::Keyless(keyless)) => keyless.response(response),
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    (acks != 0).then(|| ProduceResponse::default().with_responses(responses))
}

/// The topic a produce names (v13+ by id), auto-creating a named topic when allowed.
async fn resolve_name(broker: &Broker, name: &TopicName, topic_id: &uuid::Uuid) -> Option<String> {
    if !topic_id.is_nil() {
        return broker.image().topic_name(topic_id).map(str::to_string);
    }
    let name = name.to_string();
    match topics::auto_create(broker, &name).await {
        Ok(true) => Some(name),
        Ok(false) => None,
        Err(e) => {
            debug!(topic = %name, error = %e, "auto-creation on produce failed");
            None
        }
    }
}

/// Why a partition's records were not appended.
enum Refused {
    Code(ResponseError),
    /// A compacted topic's batch holds key-less records (INVALID_RECORD with details).
    Keyless(KeylessRecords),
}

impl From<ResponseError> for Refused {
    fn from(code: ResponseError) -> Self {
        Refused::Code(code)
    }
}

async fn append(
    broker: &Broker,
    topic: &str,
    partition: i32,
    records: Option<bytes::Bytes>,
) -> Result<brook_storage::AppendInfo, Refused> {
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Err(ResponseError::CorruptMessage.into());
    };
    let image = broker.image();
    let leader_epoch = image
        .partition(topic, partition)
        .map(|p| p.leader_epoch)
        .unwrap_or(0);
    let log = broker
        .replicas
        .partition(
            || broker.effective_config(),
            &image,
            broker.node_id,
            topic,
            partition,
        )
        .await
        .map_err(|e| e.code())?;
    if log.is_compacted() {
        reject_keyless(topic, partition, &records)
            .await
            .map_err(Refused::Keyless)?;
    }
    let size = records.len();
    // One copy: the batch header is stamped in place (base offset, leader epoch).
    let buf = BytesMut::from(&records[..]);
    let now_ms = brook_storage::log_manager::now_ms();
    let info = log
        .append(buf, leader_epoch, now_ms)
        .await
        .map_err(|e| BrokerError::from(e).code())?;
    if !info.duplicate {
        metrics::record_produce(
            topic,
            size,
            (info.last_offset - info.base_offset + 1) as u64,
        );
    }
    metrics::set_log_end_offset(topic, partition, log.log_end_offset());
    Ok(info)
}
