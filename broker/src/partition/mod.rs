//! The partitions this broker holds: `Partition` (`replica`: one replica, its log and
//! role; `append`, `read`: what requests do on it), `ReplicaManager` (`manager`: the map
//! of them, filled by metadata images through `delta`), the waiting of delayed operations
//! (`delayed`), and the background tasks over the logs (creation of new ones, retention,
//! cleaner).

use std::collections::BTreeMap;

use brook_storage::{LogConfig, TimestampType};

use crate::config::{self, TopicConfig};
use crate::error::BrokerError;

pub mod append;
pub mod cleaner_task;
pub mod compacted_keys;
pub mod delayed;
pub mod delta;
pub mod log_creator;
pub mod log_dir_task;
pub mod manager;
pub mod read;
pub mod replica;
pub mod retention_task;
#[cfg(test)]
pub mod testing;
pub mod timestamp_lookup;

pub use manager::ReplicaManager;
pub use replica::{Partition, Role};

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
