//! DescribeLogDirs (key 35; `kafka-log-dirs --describe`, `kafka-reassign-partitions`'
//! current assignment, the topic sizes web UIs show): this broker's log directories with
//! the replicas each holds, their size on disk and offset lag, and (v4+) the directory's
//! total and usable bytes. Without a topic list every replica; with one, the listed
//! partitions this broker holds. Every configured directory is listed, empty or not.
//!
//! As Kafka's `ReplicaManager.describeLogDirs`: the lag is how far the log end is behind
//! the high watermark (0 on a leader or a caught-up follower). A replica being moved to
//! another directory (AlterReplicaLogDirs) is also listed there as a future replica, with
//! the bytes copied so far and an offset lag of 0 (it is copied as files, not records, so
//! its log end is not known until it replaces the current one).
//!
//! A directory that failed is listed with KAFKA_STORAGE_ERROR and no replicas or sizes
//! (`kafka-log-dirs` prints `"error":"org.apache.kafka.common.errors.KafkaStorageException"`).
//!
//! Authorization (`KafkaApis.handleDescribeLogDirsRequest`): DESCRIBE on the cluster, else
//! CLUSTER_AUTHORIZATION_FAILED and no results.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use brook_protocol::kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use brook_protocol::kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::LogHandle;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

/// One replica as listed: its topic, partition, size and lag, and whether it is the future
/// replica of a move to another directory.
struct ReplicaDir {
    topic: String,
    partition: i32,
    size: i64,
    lag: i64,
    future: bool,
}

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    if !Access::new(broker, session).cluster(AclOperation::Describe) {
        return DescribeLogDirsResponse::default().with_error_code(Denied::Cluster.code().code());
    }
    let wanted: Option<BTreeSet<(String, i32)>> = req.topics.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect()
    });
    let logs: Vec<(LogHandle, Option<PathBuf>)> = broker
        .replicas
        .partitions()
        .iter()
        .filter(|p| {
            wanted
                .as_ref()
                .is_none_or(|w| w.contains(&(p.topic().to_string(), p.index())))
        })
        .map(|p| {
            let future = broker.replicas.future_log_dir(p.topic(), p.index());
            (p.log().clone(), future)
        })
        .collect();
    let dirs = broker.config.log_dirs.clone();
    let failures = broker.replicas.log_dir_failures();
    let failed: Vec<bool> = dirs.iter().map(|d| failures.failure(d).is_some()).collect();
    // Sizes come from each log's segment list under its lock, and free space from statvfs:
    // both off the runtime's worker threads.
    let listed = tokio::task::spawn_blocking(move || describe(&dirs, &failed, &logs)).await;
    match listed {
        Ok(results) => DescribeLogDirsResponse::default().with_results(results),
        Err(e) => DescribeLogDirsResponse::default().with_error_code(
            BrokerError::ServerFault(format!("describing log dirs: {e}"))
                .code()
                .code(),
        ),
    }
}

/// `failed[i]`: whether `dirs[i]` failed (it is listed with KAFKA_STORAGE_ERROR and
/// nothing else, as Kafka lists an offline directory).
fn describe(
    dirs: &[PathBuf],
    failed: &[bool],
    logs: &[(LogHandle, Option<PathBuf>)],
) -> Vec<DescribeLogDirsResult> {
    // Each configured directory resolved once; a replica's directory is one of them
    // (`<log dir>/<topic>-<partition>`), matched as written or resolved.
    let resolved: Vec<PathBuf> = dirs.iter().map(|d| absolute(d)).collect();
    let mut by_dir: Vec<Vec<ReplicaDir>> = dirs.iter().map(|_| Vec::new()).collect();
    for (log, future) in logs {
        let Ok(size) = log.with_log_blocking(|l| Ok(l.size_bytes())) else {
            continue;
        };
        if let Some(target) = future {
            let slot = dirs.iter().position(|d| d == target);
            if let Some(slot) = slot.and_then(|i| by_dir.get_mut(i)) {
                let copy = target.join(format!("{}-{}.future", log.topic(), log.partition()));
                slot.push(ReplicaDir {
                    topic: log.topic().to_string(),
                    partition: log.partition(),
                    size: dir_bytes(&copy),
                    lag: 0,
                    future: true,
                });
            }
        }
        let dir = log.dir();
        let parent = dir.parent().unwrap_or(&dir);
        let index = dirs.iter().position(|d| d == parent).or_else(|| {
            let parent = absolute(parent);
            resolved.iter().position(|d| *d == parent)
        });
        let Some(slot) = index.and_then(|i| by_dir.get_mut(i)) else {
            continue;
        };
        slot.push(ReplicaDir {
            topic: log.topic().to_string(),
            partition: log.partition(),
            size: i64::try_from(size).unwrap_or(i64::MAX),
            lag: (log.high_watermark() - log.log_end_offset()).max(0),
            future: false,
        });
    }
    resolved
        .iter()
        .zip(by_dir)
        .zip(failed)
        .map(|((dir, replicas), &failed)| {
            if failed {
                return DescribeLogDirsResult::default()
                    .with_log_dir(StrBytes::from_string(dir.display().to_string()))
                    .with_error_code(ResponseError::KafkaStorageError.code());
            }
            let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
            for r in replicas {
                topics.entry(r.topic).or_default().push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(r.partition)
                        .with_partition_size(r.size)
                        .with_offset_lag(r.lag)
                        .with_is_future_key(r.future),
                );
            }
            let (total, usable) = space(dir);
            DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_string(dir.display().to_string()))
                .with_total_bytes(total)
                .with_usable_bytes(usable)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(name, partitions)| {
                            DescribeLogDirsTopic::default()
                                .with_name(StrBytes::from_string(name).into())
                                .with_partitions(partitions)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// The bytes of the files in `dir` (a future replica being copied).
fn dir_bytes(dir: &Path) -> i64 {
    let total: u64 = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    i64::try_from(total).unwrap_or(i64::MAX)
}

/// Kafka reports a directory by its absolute path.
fn absolute(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// The file system's total and available bytes under `dir` (-1 each when unknown, as
/// Kafka answers).
fn space(dir: &Path) -> (i64, i64) {
    match rustix::fs::statvfs(dir) {
        Ok(s) => {
            let bytes =
                |blocks: u64| i64::try_from(blocks.saturating_mul(s.f_frsize)).unwrap_or(i64::MAX);
            (bytes(s.f_blocks), bytes(s.f_bavail))
        }
        Err(_) => (-1, -1),
    }
}
