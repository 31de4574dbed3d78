//! `TopicConfig`: a topic's effective log settings, typed, resolved from the broker's
//! configuration (static + dynamic) and the topic's own overrides.
//!
//! Resolution per key (Kafka's `LogConfig.fromProps(brokerDefaults, topicOverrides)`):
//! the topic override if set, else the broker's synonym chain, else Kafka's default.
//! Kafka's sentinels become `None`: `retention.ms`/`retention.bytes` of `-1` (any
//! negative) mean no limit; `Long.MAX_VALUE` in `flush.*`, `max.compaction.lag.ms` and
//! `message.timestamp.*.max.ms` means never / unbounded.

use std::collections::BTreeMap;

use super::error::ConfigError;
use super::topic::{broker_default_for, normalize_topic_overrides, topic_keys};
use super::value::{normalize, split_list};
use super::BrokerConfig;

/// `cleanup.policy`: both may be set; neither means keep everything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

/// `compression.type` of a topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionType {
    /// Keep whatever the producer sent.
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// A topic's effective log configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    pub cleanup_policy: CleanupPolicy,
    pub compression_type: CompressionType,
    pub delete_retention_ms: i64,
    pub file_delete_delay_ms: i64,
    /// Fsync after this many messages; `None` = leave it to the OS.
    pub flush_messages: Option<u64>,
    /// Fsync after this long; `None` = leave it to the OS.
    pub flush_ms: Option<u64>,
    pub index_interval_bytes: u32,
    /// `None` = no maximum compaction lag.
    pub max_compaction_lag_ms: Option<i64>,
    pub max_message_bytes: u32,
    /// `None` = no bound on how old a record's timestamp may be.
    pub message_timestamp_before_max_ms: Option<i64>,
    /// `None` = no bound on how far in the future a record's timestamp may be.
    pub message_timestamp_after_max_ms: Option<i64>,
    pub message_timestamp_type: TimestampType,
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub min_insync_replicas: i32,
    pub preallocate: bool,
    /// `None` = no size limit.
    pub retention_bytes: Option<i64>,
    /// `None` = no time limit.
    pub retention_ms: Option<i64>,
    pub segment_bytes: u32,
    pub segment_index_bytes: u32,
    pub segment_jitter_ms: i64,
    pub segment_ms: i64,
    pub unclean_leader_election_enable: bool,
}

impl Default for TopicConfig {
    /// Kafka's `LogConfig` defaults (a broker with no `log.*` settings).
    fn default() -> Self {
        TopicConfig {
            cleanup_policy: CleanupPolicy {
                delete: true,
                compact: false,
            },
            compression_type: CompressionType::Producer,
            delete_retention_ms: 86_400_000,
            file_delete_delay_ms: 60_000,
            flush_messages: None,
            flush_ms: None,
            index_interval_bytes: 4096,
            max_compaction_lag_ms: None,
            max_message_bytes: 1_048_588,
            message_timestamp_before_max_ms: None,
            message_timestamp_after_max_ms: Some(3_600_000),
            message_timestamp_type: TimestampType::CreateTime,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            min_insync_replicas: 1,
            preallocate: false,
            retention_bytes: None,
            retention_ms: Some(604_800_000),
            segment_bytes: 1_073_741_824,
            segment_index_bytes: 10_485_760,
            segment_jitter_ms: 0,
            segment_ms: 604_800_000,
            unclean_leader_election_enable: false,
        }
    }
}

impl TopicConfig {
    /// Resolves a topic's configuration from the broker and the topic's overrides (as
    /// stored in metadata). Unknown or invalid overrides are errors (`INVALID_CONFIG`).
    pub fn resolve(
        broker: &BrokerConfig,
        overrides: &BTreeMap<String, String>,
    ) -> Result<TopicConfig, ConfigError> {
        let values = effective_topic_values(broker, overrides)?;
        let get = |name: &str| values.get(name).map(String::as_str).unwrap_or("");
        let long = |name: &str| -> Result<i64, ConfigError> {
            get(name)
                .parse()
                .map_err(|_| ConfigError::invalid(name, get(name), "Not a number of type LONG"))
        };
        let narrow = |name: &str| -> Result<u32, ConfigError> {
            let wide = long(name)?;
            u32::try_from(wide)
                .map_err(|_| ConfigError::invalid(name, get(name), "Value out of range"))
        };
        // Kafka's "never" is Long.MAX_VALUE.
        let unless_max = |v: i64| (v != i64::MAX).then_some(v);
        let unless_max_u = |v: i64| (v != i64::MAX).then(|| u64::try_from(v).ok()).flatten();
        let policies = split_list(get("cleanup.policy"));
        let config = TopicConfig {
            cleanup_policy: CleanupPolicy {
                delete: policies.iter().any(|p| p == "delete"),
                compact: policies.iter().any(|p| p == "compact"),
            },
            compression_type: match get("compression.type") {
                "uncompressed" => CompressionType::Uncompressed,
                "gzip" => CompressionType::Gzip,
                "snappy" => CompressionType::Snappy,
                "lz4" => CompressionType::Lz4,
                "zstd" => CompressionType::Zstd,
                _ => CompressionType::Producer,
            },
            delete_retention_ms: long("delete.retention.ms")?,
            file_delete_delay_ms: long("file.delete.delay.ms")?,
            flush_messages: unless_max_u(long("flush.messages")?),
            flush_ms: unless_max_u(long("flush.ms")?),
            index_interval_bytes: narrow("index.interval.bytes")?,
            max_compaction_lag_ms: unless_max(long("max.compaction.lag.ms")?),
            max_message_bytes: narrow("max.message.bytes")?,
            message_timestamp_before_max_ms: unless_max(long("message.timestamp.before.max.ms")?),
            message_timestamp_after_max_ms: unless_max(long("message.timestamp.after.max.ms")?),
            message_timestamp_type: if get("message.timestamp.type") == "LogAppendTime" {
                TimestampType::LogAppendTime
            } else {
                TimestampType::CreateTime
            },
            min_cleanable_dirty_ratio: get("min.cleanable.dirty.ratio").parse().map_err(|_| {
                ConfigError::invalid(
                    "min.cleanable.dirty.ratio",
                    get("min.cleanable.dirty.ratio"),
                    "Not a number of type DOUBLE",
                )
            })?,
            min_compaction_lag_ms: long("min.compaction.lag.ms")?,
            min_insync_replicas: i32::try_from(long("min.insync.replicas")?).map_err(|_| {
                ConfigError::invalid(
                    "min.insync.replicas",
                    get("min.insync.replicas"),
                    "Value out of range",
                )
            })?,
            preallocate: get("preallocate") == "true",
            retention_bytes: Some(long("retention.bytes")?).filter(|v| *v >= 0),
            retention_ms: Some(long("retention.ms")?).filter(|v| *v >= 0),
            segment_bytes: narrow("segment.bytes")?,
            segment_index_bytes: narrow("segment.index.bytes")?,
            segment_jitter_ms: long("segment.jitter.ms")?,
            segment_ms: long("segment.ms")?,
            unclean_leader_election_enable: get("unclean.leader.election.enable") == "true",
        };
        // Kafka's LogConfig.validate cross-check (KIP-354).
        let max_lag = config.max_compaction_lag_ms.unwrap_or(i64::MAX);
        if config.min_compaction_lag_ms > max_lag {
            return Err(ConfigError::invalid(
                "min.compaction.lag.ms",
                get("min.compaction.lag.ms"),
                format!("conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({max_lag})", config.min_compaction_lag_ms),
            ));
        }
        Ok(config)
    }
}

/// The effective text of every topic key: override, else the broker's value, each
/// canonical and checked with the topic key's validator (a broker value such as
/// `log.roll.ms=0` that no topic could hold is refused naming the topic key).
pub fn effective_topic_values(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<BTreeMap<&'static str, String>, ConfigError> {
    let overrides = normalize_topic_overrides(overrides)?;
    let mut out = BTreeMap::new();
    for key in topic_keys() {
        let value = match overrides.get(key.name) {
            Some(v) => v.clone(),
            // A key whose default is Kafka's `null` (internal.segment.bytes) has no value.
            None => match broker_default_for(broker, key) {
                Some(default) => normalize(key.name, key.config_type, key.validator, &default)?,
                None => continue,
            },
        };
        out.insert(key.name, value);
    }
    Ok(out)
}
