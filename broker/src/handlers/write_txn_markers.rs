//! WriteTxnMarkers, the partition leader's side: for each marker, append the COMMIT or
//! ABORT control batch to every listed partition this broker leads (through
//! `coordinator::txn::markers::write_local`, the same code the local coordinator uses) and
//! answer once it is replicated. Sent by other brokers' transaction coordinators and by
//! `kafka-transactions.sh abort`. Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION,
//! NOT_LEADER_OR_FOLLOWER, the storage's refusal, or the replication wait's.

use brook_protocol::kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use brook_protocol::kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use crate::broker::Broker;
use crate::coordinator::txn::markers::{write_local, Marker};

pub async fn handle(
    broker: &Broker,
    req: WriteTxnMarkersRequest,
    _version: i16,
) -> WriteTxnMarkersResponse {
    let mut results = Vec::with_capacity(req.markers.len());
    for m in &req.markers {
        let marker = Marker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for topic in &m.topics {
            let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
            for &partition in &topic.partition_indexes {
                let code = match write_local(broker, &topic.name, partition, &marker).await {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::debug!(topic = %topic.name.0, partition, error = %e, "transaction marker not written");
                        e.code().code()
                    }
                };
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(partition)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions),
            );
        }
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(results)
}
