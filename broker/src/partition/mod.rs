//! `ReplicaManager`: the partitions this broker leads, each a storage `LogHandle`.
//!
//! A partition's log is opened lazily, the first time a request needs it, once the
//! metadata image says this broker leads it; `reconcile` removes logs of deleted topics
//! and pushes changed topic configs into the logs. Topic configs come from the image
//! (per-topic overrides) resolved against the broker's config.

use std::collections::BTreeMap;
use std::sync::Arc;

use brook_raft::MetadataImage;
use brook_storage::{LogConfig, LogHandle, LogManager, TimestampType};
use tracing::{info, warn};

use crate::config::{self, BrokerConfig, TopicConfig};
use crate::error::BrokerError;

pub mod cleaner_task;
pub mod compacted_keys;
pub mod retention_task;
pub mod timestamp_lookup;

/// Cheap to clone: clones share the log manager (the group coordinator holds one).
#[derive(Clone)]
pub struct ReplicaManager {
    logs: Arc<LogManager>,
}

impl ReplicaManager {
    pub fn new(logs: LogManager) -> Self {
        ReplicaManager {
            logs: Arc::new(logs),
        }
    }

    /// The log of a partition this broker leads, opened (or created) if needed.
    /// `broker` is called only when the log must be opened: resolving the effective
    /// config is not free and the produce/fetch path almost always finds the log open.
    pub async fn partition(
        &self,
        broker: impl FnOnce() -> BrokerConfig,
        image: &MetadataImage,
        node_id: i32,
        topic: &str,
        partition: i32,
    ) -> Result<LogHandle, BrokerError> {
        let unknown = || BrokerError::UnknownTopicOrPartition {
            topic: topic.to_string(),
            partition,
        };
        let topic_image = image.topic(topic).ok_or_else(unknown)?;
        let part = topic_image.partitions.get(&partition).ok_or_else(unknown)?;
        if part.leader != node_id {
            return Err(unknown());
        }
        if let Some(log) = self.logs.get(topic, partition) {
            return Ok(log);
        }
        let config = log_config(&TopicConfig::resolve(&broker(), &topic_image.configs)?);
        let logs = self.logs.clone();
        let topic = topic.to_string();
        let handle =
            tokio::task::spawn_blocking(move || logs.get_or_create(&topic, partition, config))
                .await
                .map_err(|e| BrokerError::InvalidRequest(format!("log open task failed: {e}")))??;
        Ok(handle)
    }

    /// The log of a partition if it is open (no creation).
    pub fn existing(&self, topic: &str, partition: i32) -> Option<LogHandle> {
        self.logs.get(topic, partition)
    }

    /// Deletes the local logs of `topic` (all partitions).
    pub async fn delete_topic(&self, topic: &str) {
        let victims: Vec<i32> = self
            .logs
            .logs()
            .into_iter()
            .filter(|log| log.topic() == topic)
            .map(|log| log.partition())
            .collect();
        for partition in victims {
            self.delete_log(topic.to_string(), partition).await;
        }
    }

    async fn delete_log(&self, topic: String, partition: i32) {
        let logs = self.logs.clone();
        let t = topic.clone();
        match tokio::task::spawn_blocking(move || logs.delete_log(&t, partition)).await {
            Ok(Ok(_)) => info!(%topic, partition, "log deleted"),
            Ok(Err(e)) => warn!(%topic, partition, error = %e, "log deletion failed"),
            Err(e) => warn!(%topic, partition, error = %e, "log deletion task failed"),
        }
    }

    /// Brings local logs in line with the image: logs of topics (or partitions) that no
    /// longer exist are deleted, open logs get their topic's current config.
    pub async fn reconcile(&self, broker: &BrokerConfig, image: &MetadataImage, node_id: i32) {
        for log in self.logs.logs() {
            let topic = log.topic().to_string();
            let partition = log.partition();
            let Some(topic_image) = image.topic(&topic) else {
                self.delete_log(topic, partition).await;
                continue;
            };
            match topic_image.partitions.get(&partition) {
                Some(p) if p.leader == node_id => {}
                _ => {
                    self.delete_log(topic, partition).await;
                    continue;
                }
            }
            match TopicConfig::resolve(broker, &topic_image.configs) {
                Ok(resolved) => {
                    if let Err(e) = log.set_config(log_config(&resolved)).await {
                        warn!(%topic, partition, error = %e, "applying topic config failed");
                    }
                }
                Err(e) => warn!(%topic, error = %e, "topic config does not resolve"),
            }
        }
    }

    /// Persists every log directory's log start offsets (after retention or
    /// DeleteRecords moved one), on a blocking thread.
    pub async fn checkpoint_log_start_offsets(&self) -> Result<(), BrokerError> {
        let logs = self.logs.clone();
        tokio::task::spawn_blocking(move || logs.checkpoint_log_start_offsets())
            .await
            .map_err(|e| BrokerError::InvalidRequest(format!("checkpoint task failed: {e}")))??;
        Ok(())
    }

    /// Every open log, for metrics and shutdown.
    pub fn logs(&self) -> Vec<LogHandle> {
        self.logs.logs()
    }

    /// Flushes and closes every log (clean shutdown).
    pub async fn shutdown(&self) {
        let logs = self.logs.clone();
        match tokio::task::spawn_blocking(move || logs.shutdown()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "flushing logs at shutdown failed"),
            Err(e) => warn!(error = %e, "shutdown task failed"),
        }
    }
}

/// The storage view of a resolved topic config.
pub fn log_config(topic: &TopicConfig) -> LogConfig {
    LogConfig {
        segment_bytes: u64::from(topic.segment_bytes),
        segment_ms: Some(topic.segment_ms),
        index_interval_bytes: u64::from(topic.index_interval_bytes),
        segment_index_bytes: u64::from(topic.segment_index_bytes),
        max_message_bytes: u64::from(topic.max_message_bytes),
        flush_messages: topic.flush_messages,
        flush_ms: topic.flush_ms.map(|ms| ms as i64),
        message_timestamp_type: match topic.message_timestamp_type {
            config::TimestampType::CreateTime => TimestampType::CreateTime,
            config::TimestampType::LogAppendTime => TimestampType::LogAppendTime,
        },
        retention_ms: topic.retention_ms,
        retention_bytes: topic.retention_bytes.map(|b| b.max(0) as u64),
        cleanup_delete: topic.cleanup_policy.delete,
        file_delete_delay_ms: topic.file_delete_delay_ms.max(0),
        cleanup_compact: topic.cleanup_policy.compact,
        delete_retention_ms: topic.delete_retention_ms.max(0),
        min_compaction_lag_ms: topic.min_compaction_lag_ms.max(0),
        max_compaction_lag_ms: topic.max_compaction_lag_ms,
        min_cleanable_dirty_ratio: topic.min_cleanable_dirty_ratio,
    }
}

/// Topic overrides as stored in the metadata image.
pub type TopicOverrides = BTreeMap<String, String>;
