//! AlterPartitionReassignments (key 45; `kafka-reassign-partitions --execute / --cancel`,
//! `Admin.alterPartitionReassignments`, KIP-455): moves partitions' replicas. Any broker
//! answers: the reassignments that pass the checks go through the quorum as one
//! `Command::AlterPartitionReassignments`; the replicas then follow the image (new ones
//! start fetching, the leader adds them to the ISR once caught up, and that ISR change
//! completes the move, see `brook_raft::reassignment`). A partition with a null replica
//! list cancels its reassignment.
//!
//! Per partition, as Kafka's controller answers: UNKNOWN_TOPIC_OR_PARTITION,
//! INVALID_REPLICA_ASSIGNMENT (empty, duplicate or unregistered brokers; a cancel needing
//! an unclean election), NO_REASSIGNMENT_IN_PROGRESS (a cancel with nothing to cancel),
//! INVALID_REPLICATION_FACTOR (v1 with `allow_replication_factor_change` false, KIP-860).
//!
//! Authorization (`ControllerApis.handleAlterPartitionReassignments`): ALTER on the
//! cluster, else CLUSTER_AUTHORIZATION_FAILED at the top and on every partition.

use brook_protocol::kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use brook_protocol::kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::{reassignment, Command, MetadataImage, Reassignment};
use tracing::info;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied, ReassignmentError};
use crate::server::session::Session;

/// One partition's index and outcome, answered once the accepted ones are proposed.
type PartitionAnswer = (i32, Result<(), ReassignmentError>);

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let allow_rf_change = version < 1 || req.allow_replication_factor_change;
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change);
    if !Access::new(broker, session).cluster(AclOperation::Alter) {
        let denied = Denied::Cluster;
        let results = req
            .topics
            .into_iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        partition_result(
                            p.partition_index,
                            Err((denied.code().code(), denied.to_string())),
                        )
                    })
                    .collect();
                ReassignableTopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(partitions)
            })
            .collect();
        return response
            .with_error_code(denied.code().code())
            .with_error_message(Some(StrBytes::from_string(denied.to_string())))
            .with_responses(results);
    }
    let image = broker.image();
    let mut accepted = Vec::new();
    let mut answers: Vec<(String, Vec<PartitionAnswer>)> = Vec::new();
    for topic in &req.topics {
        let name = topic.name.to_string();
        let mut results = Vec::new();
        for p in &topic.partitions {
            let target: Option<Vec<i32>> =
                p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
            let result = check(
                &image,
                &name,
                p.partition_index,
                target.as_deref(),
                allow_rf_change,
            );
            if result.is_ok() {
                if let Some(t) = image.topic(&name) {
                    accepted.push(Reassignment {
                        topic_id: t.topic_id,
                        partition: p.partition_index,
                        target,
                    });
                }
            }
            results.push((p.partition_index, result));
        }
        answers.push((name, results));
    }
    if !accepted.is_empty() {
        let count = accepted.len();
        if let Err(e) = broker
            .quorum
            .propose(Command::AlterPartitionReassignments {
                reassignments: accepted,
            })
            .await
        {
            let e = BrokerError::from(e);
            return response
                .with_error_code(e.code().code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
        }
        info!(partitions = count, "partition reassignments altered");
    }
    let responses = answers
        .into_iter()
        .map(|(name, results)| {
            ReassignableTopicResponse::default()
                .with_name(StrBytes::from_string(name).into())
                .with_partitions(
                    results
                        .into_iter()
                        .map(|(partition, result)| {
                            partition_result(
                                partition,
                                result.map_err(|e| (e.code().code(), e.to_string())),
                            )
                        })
                        .collect(),
                )
        })
        .collect();
    response.with_responses(responses)
}

fn partition_result(
    partition: i32,
    result: Result<(), (i16, String)>,
) -> ReassignablePartitionResponse {
    let entry = ReassignablePartitionResponse::default().with_partition_index(partition);
    match result {
        Ok(()) => entry,
        Err((code, message)) => entry
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message))),
    }
}

/// One partition's checks, in Kafka's order: the topic, the partition and target
/// (`brook_raft::reassignment::check`), then KIP-860's replication factor.
fn check(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    target: Option<&[i32]>,
    allow_rf_change: bool,
) -> Result<(), ReassignmentError> {
    let t = image
        .topic(topic)
        .ok_or_else(|| ReassignmentError::UnknownTopic(topic.to_string()))?;
    reassignment::check(image, &t.topic_id, partition, target)
        .map_err(ReassignmentError::Refused)?;
    if let (Some(target), false) = (target, allow_rf_change) {
        let original = t
            .partitions
            .get(&partition)
            .map_or(0, |p| p.replicas.len() - p.adding_replicas.len());
        if original != target.len() {
            return Err(ReassignmentError::ReplicationFactorChange {
                from: original,
                to: target.len(),
            });
        }
    }
    Ok(())
}
