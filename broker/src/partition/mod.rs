//! `ReplicaManager`: the partition replicas this broker holds, each a storage `LogHandle`.
//!
//! A partition's log is opened lazily, the first time a request needs it, once the
//! metadata image says this broker leads it (or, for the follower fetcher, holds a replica
//! of it). The leader of a partition also has a leader state per leader epoch
//! (`replication::leader`: followers' log end offsets, the high watermark, the ISR it
//! wants), created with the epoch and dropped when the image moves the leadership. Only the leader serves produce, fetch,
//! ListOffsets and DeleteRecords; any other broker answers NOT_LEADER_OR_FOLLOWER with the
//! leader it knows (KIP-951). `reconcile` applies each new image: logs of deleted topics,
//! or of partitions no longer assigned to this broker, are removed — a log is never
//! deleted while this broker is still one of the partition's replicas, whatever its role —
//! and changed topic configs are pushed into the open logs. Topic configs come from the
//! image (per-topic overrides) resolved against the broker's config.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use brook_raft::MetadataImage;
use brook_storage::{LogConfig, LogHandle, LogManager, TimestampType};
use tracing::{info, warn};

use crate::config::{self, BrokerConfig, TopicConfig};
use crate::error::BrokerError;
use crate::replication::leader::LeaderPartition;

pub mod cleaner_task;
pub mod compacted_keys;
pub mod delta;
pub mod retention_task;
pub mod timestamp_lookup;

/// The leader state of each partition this broker leads, by topic then partition (looked
/// up by `&str` on every produce and fetch, so no key is allocated on the hot path).
type LeaderStates = HashMap<String, HashMap<i32, Arc<LeaderPartition>>>;

/// Cheap to clone: clones share the log manager and the leader states (the group
/// coordinator holds one).
#[derive(Clone)]
pub struct ReplicaManager {
    logs: Arc<LogManager>,
    /// The partitions this broker leads, each at one leader epoch (`replication`).
    leaders: Arc<parking_lot::Mutex<LeaderStates>>,
    /// Wakes the ISR task (`replication::isr`) when a follower may have caught up.
    isr_wakeup: Arc<tokio::sync::Notify>,
}

impl ReplicaManager {
    pub fn new(logs: LogManager) -> Self {
        ReplicaManager {
            logs: Arc::new(logs),
            leaders: Arc::default(),
            isr_wakeup: Arc::default(),
        }
    }

    /// The leader state of a partition this broker leads at the image's leader epoch
    /// (created, with its log, the first time it is needed in that epoch; a new epoch
    /// records its start offset in the log's epoch cache). Errors as [`Self::partition`].
    pub async fn leader(
        &self,
        broker: impl FnOnce() -> BrokerConfig,
        image: &MetadataImage,
        node_id: i32,
        topic: &str,
        partition: i32,
        current_leader_epoch: Option<i32>,
    ) -> Result<Arc<LeaderPartition>, BrokerError> {
        let part = image.partition(topic, partition).ok_or_else(|| {
            BrokerError::UnknownTopicOrPartition {
                topic: topic.to_string(),
                partition,
            }
        })?;
        if part.leader == node_id {
            let found = self
                .leaders
                .lock()
                .get(topic)
                .and_then(|parts| parts.get(&partition))
                .cloned();
            if let Some(state) = found {
                if state.leader_epoch == part.leader_epoch {
                    if let Some(requested) = current_leader_epoch {
                        check_leader_epoch(part.leader_epoch, requested)?;
                    }
                    return Ok(state);
                }
            }
        }
        let config = broker();
        let log = self
            .partition(
                || config.clone(),
                image,
                node_id,
                topic,
                partition,
                current_leader_epoch,
            )
            .await?;
        let min_isr = image
            .topic(topic)
            .and_then(|t| TopicConfig::resolve(&config, &t.configs).ok())
            .map_or(1, |c| c.min_insync_replicas);
        log.assign_epoch_start(part.leader_epoch).await?;
        let now_ms = brook_storage::log_manager::now_ms();
        let state = Arc::new(LeaderPartition::new(
            log,
            part.leader_epoch,
            &part.replicas,
            node_id,
            min_isr,
            now_ms,
        ));
        let state = {
            let mut leaders = self.leaders.lock();
            let entry = leaders
                .entry(topic.to_string())
                .or_default()
                .entry(partition)
                .or_insert_with(|| state.clone());
            // Another request may have created it meanwhile; keep the newest epoch's.
            if entry.leader_epoch < state.leader_epoch {
                *entry = state.clone();
            }
            entry.clone()
        };
        state.maybe_advance_high_watermark(part, node_id);
        Ok(state)
    }

    /// Every partition this broker leads (as last seen by [`Self::leader`]).
    pub fn leaders(&self) -> Vec<Arc<LeaderPartition>> {
        self.leaders
            .lock()
            .values()
            .flat_map(|parts| parts.values().cloned())
            .collect()
    }

    /// Forgets leader states the image no longer backs (another leader, a new epoch, a
    /// deleted partition): waiting acks=all produces then answer from the image.
    pub fn retain_leaders(&self, image: &MetadataImage, node_id: i32) {
        self.leaders.lock().retain(|topic, parts| {
            parts.retain(|partition, state| {
                image
                    .partition(topic, *partition)
                    .is_some_and(|p| p.leader == node_id && p.leader_epoch == state.leader_epoch)
            });
            !parts.is_empty()
        });
    }

    /// Asks the ISR task to look at the partitions now (a follower may have caught up).
    pub fn wake_isr_task(&self) {
        self.isr_wakeup.notify_one();
    }

    pub fn isr_wakeup(&self) -> Arc<tokio::sync::Notify> {
        self.isr_wakeup.clone()
    }

    /// The log of a partition this broker holds a replica of (leader or follower),
    /// opened or created if needed: the follower fetcher's door.
    pub async fn replica_log(
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
        if !part.replicas.contains(&node_id) {
            return Err(unknown());
        }
        self.open_log(broker, &topic_image.configs, topic, partition)
            .await
    }

    /// The log of a partition this broker leads, opened (or created) if needed.
    /// `broker` is called only when the log must be opened: resolving the effective
    /// config is not free and the produce/fetch path almost always finds the log open.
    /// `current_leader_epoch` (Fetch, ListOffsets: KIP-320) is checked before anything is
    /// opened.
    pub async fn partition(
        &self,
        broker: impl FnOnce() -> BrokerConfig,
        image: &MetadataImage,
        node_id: i32,
        topic: &str,
        partition: i32,
        current_leader_epoch: Option<i32>,
    ) -> Result<LogHandle, BrokerError> {
        let unknown = || BrokerError::UnknownTopicOrPartition {
            topic: topic.to_string(),
            partition,
        };
        let topic_image = image.topic(topic).ok_or_else(unknown)?;
        let part = topic_image.partitions.get(&partition).ok_or_else(unknown)?;
        if part.leader != node_id {
            return Err(BrokerError::NotLeaderOrFollower {
                topic: topic.to_string(),
                partition,
                leader: part.leader,
                leader_epoch: part.leader_epoch,
            });
        }
        if let Some(requested) = current_leader_epoch {
            check_leader_epoch(part.leader_epoch, requested)?;
        }
        self.open_log(broker, &topic_image.configs, topic, partition)
            .await
    }

    /// The log of `topic`-`partition`, opened (or created with the topic's resolved
    /// config) on the blocking pool when it is not open yet.
    async fn open_log(
        &self,
        broker: impl FnOnce() -> BrokerConfig,
        overrides: &TopicOverrides,
        topic: &str,
        partition: i32,
    ) -> Result<LogHandle, BrokerError> {
        if let Some(log) = self.logs.get(topic, partition) {
            return Ok(log);
        }
        let config = log_config(&TopicConfig::resolve(&broker(), overrides)?);
        let logs = self.logs.clone();
        let topic = topic.to_string();
        tokio::task::spawn_blocking(move || logs.get_or_create(&topic, partition, config))
            .await
            .map_err(|e| BrokerError::InvalidRequest(format!("log open task failed: {e}")))?
            .map_err(BrokerError::from)
    }

    /// Whether this broker's log of the partition failed to open (storage's offline set):
    /// Metadata reports such a partition without a leader here, and requests for it get
    /// KAFKA_STORAGE_ERROR from `open_log`.
    pub fn is_offline(&self, topic: &str, partition: i32) -> bool {
        self.logs.is_offline(topic, partition)
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
        if let Some(parts) = self.leaders.lock().get_mut(&topic) {
            parts.remove(&partition);
        }
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
                Some(p) if p.replicas.contains(&node_id) => {}
                _ => {
                    self.delete_log(topic, partition).await;
                    continue;
                }
            }
            match TopicConfig::resolve(broker, &topic_image.configs) {
                Ok(resolved) => {
                    let state = self
                        .leaders
                        .lock()
                        .get(&topic)
                        .and_then(|parts| parts.get(&partition))
                        .cloned();
                    if let Some(state) = state {
                        state.set_min_isr(resolved.min_insync_replicas);
                    }
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
        self.checkpoint_blocking(LogManager::checkpoint_log_start_offsets)
            .await
    }

    /// Persists every log's high watermark (`replication-offset-checkpoint`).
    pub async fn checkpoint_high_watermarks(&self) -> Result<(), BrokerError> {
        self.checkpoint_blocking(LogManager::checkpoint_high_watermarks)
            .await
    }

    /// Persists every log's recovery point (`recovery-point-offset-checkpoint`, with a
    /// producer snapshot for each log whose point moved), on a blocking thread.
    pub async fn checkpoint_recovery_points(&self) -> Result<(), BrokerError> {
        self.checkpoint_blocking(LogManager::checkpoint_recovery_points)
            .await
    }

    /// Runs one of the log manager's checkpoint writers (file I/O) on a blocking thread.
    async fn checkpoint_blocking(
        &self,
        write: fn(&LogManager) -> brook_storage::Result<()>,
    ) -> Result<(), BrokerError> {
        let logs = self.logs.clone();
        tokio::task::spawn_blocking(move || write(&logs))
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

/// Checks a request's `current_leader_epoch` (Fetch v9+, ListOffsets v4+, KIP-320)
/// against the partition's: -1 skips the check, an older epoch is fenced, a newer one is
/// unknown to this broker (its metadata lags).
pub fn check_leader_epoch(current: i32, requested: i32) -> Result<(), BrokerError> {
    match requested {
        r if r < 0 || r == current => Ok(()),
        r if r < current => Err(BrokerError::FencedLeaderEpoch {
            requested: r,
            current,
        }),
        r => Err(BrokerError::UnknownLeaderEpoch {
            requested: r,
            current,
        }),
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

#[cfg(test)]
mod tests {
    use super::*;
    use brook_protocol::kafka_protocol::ResponseError;

    #[test]
    fn leader_epochs_older_than_the_partitions_are_fenced_and_newer_ones_unknown() {
        assert!(check_leader_epoch(3, -1).is_ok());
        assert!(check_leader_epoch(3, 3).is_ok());
        let code = |r| check_leader_epoch(3, r).map_err(|e| e.code()).err();
        assert_eq!(code(2), Some(ResponseError::FencedLeaderEpoch));
        assert_eq!(code(4), Some(ResponseError::UnknownLeaderEpoch));
    }
}
