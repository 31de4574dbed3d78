//! WriteTxnMarkers, the partition leader's side: for each marker, append the COMMIT or
//! ABORT control batch to every listed partition this broker leads (through
//! `coordinator::txn::markers::write_local`, the same code the local coordinator uses) and
//! answer once they are replicated (all partitions at once, each waiting for its own
//! replication). Sent by other brokers' transaction coordinators and by
//! `kafka-transactions.sh abort`. Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION,
//! NOT_LEADER_OR_FOLLOWER, the storage's refusal, or the replication wait's.
//!
//! Authorization (Kafka's `handleWriteTxnMarkersRequest`): ALTER on the cluster (an
//! operator's `kafka-transactions.sh abort`) or CLUSTER_ACTION (a broker), else every
//! partition is `CLUSTER_AUTHORIZATION_FAILED` and no marker is written.

use brook_protocol::kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use brook_protocol::kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use futures_util::future::join_all;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::handles::CoordinatorHost;
use crate::coordinator::txn::markers::{write_local, Marker};
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: WriteTxnMarkersRequest,
    _version: i16,
) -> WriteTxnMarkersResponse {
    let access = Access::new(broker, session);
    if !access.cluster(AclOperation::Alter) && !access.cluster(AclOperation::ClusterAction) {
        return refused(&req, Denied::Cluster);
    }
    let mut results = Vec::with_capacity(req.markers.len());
    for m in &req.markers {
        let marker = Marker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        // Every partition's marker at once: each waits for its own replication.
        let codes = join_all(m.topics.iter().flat_map(|topic| {
            topic.partition_indexes.iter().map(move |&partition| async move {
                match write_local(&broker.coordinator_handles(), &topic.name, partition, &marker).await {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::debug!(topic = %topic.name.0, partition, error = %e, "transaction marker not written");
                        e.code().code()
                    }
                }
            })
        }))
        .await;
        // One code per partition, in request order; a missing one is never success.
        let missing = BrokerError::ServerFault("no result for a marker's partition".into());
        let missing = missing.code().code();
        let mut codes = codes.into_iter();
        let topics = m
            .topics
            .iter()
            .map(|topic| {
                let partitions = topic
                    .partition_indexes
                    .iter()
                    .map(|&partition| {
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(partition)
                            .with_error_code(codes.next().unwrap_or(missing))
                    })
                    .collect();
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions)
            })
            .collect::<Vec<_>>();
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(results)
}

/// Kafka's `WriteTxnMarkersRequest.getErrorResponse`: the refusal on every partition.
fn refused(req: &WriteTxnMarkersRequest, denied: Denied) -> WriteTxnMarkersResponse {
    let code = denied.code().code();
    let markers = req
        .markers
        .iter()
        .map(|m| {
            let topics = m
                .topics
                .iter()
                .map(|topic| {
                    WritableTxnMarkerTopicResult::default()
                        .with_name(topic.name.clone())
                        .with_partitions(
                            topic
                                .partition_indexes
                                .iter()
                                .map(|&partition| {
                                    WritableTxnMarkerPartitionResult::default()
                                        .with_partition_index(partition)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}
