//! `LogConfig`: the typed topic-level settings a partition log obeys, with Kafka's
//! defaults. The broker turns property strings (`segment.bytes`, …) into this struct;
//! storage never parses strings. An absent limit is `None`, never `-1`.

pub use crate::batch::TimestampType;

/// Milliseconds in 7 days, Kafka's default `segment.ms` and `retention.ms`.
const SEVEN_DAYS_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// Topic-level log settings (Kafka's names in snake case).
/// Not `Eq`: `min_cleanable_dirty_ratio` is a float, as Kafka's.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment is older than this.
    pub segment_ms: Option<i64>,
    /// `index.interval.bytes`: bytes of log between two index entries.
    pub index_interval_bytes: u64,
    /// `segment.index.bytes`: maximum size of each index file; a full index rolls.
    pub segment_index_bytes: u64,
    /// `max.message.bytes`: largest batch accepted.
    pub max_message_bytes: u64,
    /// `flush.messages`: fsync after this many appended messages (`None` = never).
    pub flush_messages: Option<u64>,
    /// `flush.ms`: fsync when the last fsync is older than this (`None` = never).
    pub flush_ms: Option<i64>,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `retention.ms`: a closed segment whose largest timestamp is older goes.
    pub retention_ms: Option<i64>,
    /// `retention.bytes`: oldest closed segments go while the log stays at least this big.
    pub retention_bytes: Option<u64>,
    /// `cleanup.policy` contains `delete`: time and size retention apply (deleting
    /// segments below the log start offset applies whatever the policy, as in Kafka).
    pub cleanup_delete: bool,
    /// `file.delete.delay.ms`: how long a deleted segment's renamed `.deleted` files
    /// stay on disk before they are unlinked.
    pub file_delete_delay_ms: i64,
    /// `cleanup.policy` contains `compact`: the cleaner keeps the latest record per key.
    pub cleanup_compact: bool,
    /// `delete.retention.ms`: how long a tombstone survives once the cleaner has seen it
    /// (the batch's delete horizon, KIP-534).
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are never compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this forces a clean (`None` =
    /// no bound).
    pub max_compaction_lag_ms: Option<i64>,
    /// `min.cleanable.dirty.ratio`: clean when dirty / (clean + dirty) reaches it.
    pub min_cleanable_dirty_ratio: f64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: Some(SEVEN_DAYS_MS),
            index_interval_bytes: 4096,
            segment_index_bytes: 10 * 1024 * 1024,
            max_message_bytes: 1_048_588,
            flush_messages: None,
            flush_ms: None,
            message_timestamp_type: TimestampType::CreateTime,
            retention_ms: Some(SEVEN_DAYS_MS),
            retention_bytes: None,
            cleanup_delete: true,
            file_delete_delay_ms: 60_000,
            cleanup_compact: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: None,
            min_cleanable_dirty_ratio: 0.5,
        }
    }
}
