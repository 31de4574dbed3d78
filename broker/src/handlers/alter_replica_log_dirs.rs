//! AlterReplicaLogDirs (key 34; `kafka-reassign-partitions --execute` with `log_dirs` in its
//! plan, `Admin.alterReplicaLogDirs`): moves this broker's replicas to the named log
//! directories. Each move runs in the background (`brook_storage` `log_move.rs`: a future
//! copy in the target directory, then a swap under the partition lock, the partition
//! serving throughout); the answer says only whether it started. DescribeLogDirs lists the
//! future replica in its target directory until it is done.
//!
//! Per partition, as Kafka's `ReplicaManager.alterReplicaLogDirs`: LOG_DIR_NOT_FOUND for a
//! path that is not one of `log.dirs`, KAFKA_STORAGE_ERROR when that directory (or the
//! replica's) is offline, REPLICA_NOT_AVAILABLE when this broker holds no replica of the
//! partition (the tool retries until it does), else NONE (a replica already there, or
//! already moving there, included). Unlike Kafka, a replica not created yet is not
//! remembered for later, and a move under way is not redirected to a third directory.
//!
//! Authorization (`KafkaApis.handleAlterReplicaLogDirsRequest`): ALTER on the cluster, else
//! CLUSTER_AUTHORIZATION_FAILED for every partition.

use std::path::{Path, PathBuf};

use brook_protocol::kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use brook_protocol::kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
};
use brook_protocol::kafka_protocol::ResponseError;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::Denied;
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let allowed = Access::new(broker, session).cluster(AclOperation::Alter);
    let configured: Vec<(PathBuf, PathBuf)> = broker
        .config
        .log_dirs
        .iter()
        .map(|d| (absolute(d), d.clone()))
        .collect();
    let failures = broker.replicas.log_dir_failures();
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for dir in req.dirs {
        let target = configured
            .iter()
            .find(|(resolved, _)| *resolved == absolute(Path::new(dir.path.as_str())))
            .map(|(_, as_configured)| as_configured.clone());
        for topic in dir.topics {
            let name = topic.name.to_string();
            let partitions = topic
                .partitions
                .into_iter()
                .map(|partition| {
                    let error = if !allowed {
                        Some(Denied::Cluster.code())
                    } else {
                        start_move(broker, &failures, target.as_deref(), &name, partition)
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(partition)
                        .with_error_code(error.map_or(0, |e| e.code()))
                })
                .collect::<Vec<_>>();
            match results.iter_mut().find(|r| r.topic_name == topic.name) {
                Some(r) => r.partitions.extend(partitions),
                None => results.push(
                    AlterReplicaLogDirTopicResult::default()
                        .with_topic_name(topic.name)
                        .with_partitions(partitions),
                ),
            }
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}

/// Checks one replica's move and starts it; the partition's error, if any.
fn start_move(
    broker: &Broker,
    failures: &brook_storage::log_dir_failure::LogDirFailures,
    target: Option<&Path>,
    topic: &str,
    partition: i32,
) -> Option<ResponseError> {
    let Some(target) = target else {
        return Some(ResponseError::LogDirNotFound);
    };
    if failures.failure(target).is_some() || broker.replicas.is_offline(topic, partition) {
        return Some(ResponseError::KafkaStorageError);
    }
    if broker.replicas.existing(topic, partition).is_none() {
        return Some(ResponseError::ReplicaNotAvailable);
    }
    broker
        .replicas
        .move_log(topic, partition, target.to_path_buf());
    None
}

/// Kafka compares directories by absolute path.
fn absolute(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}
