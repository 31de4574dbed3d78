//! The topic-level keys (Kafka's `TopicConfig`/`LogConfig`), each with the broker key it
//! defaults from, and the checks applied to a topic's overrides on create and alter.
//!
//! Facts from Apache Kafka 4.4 (`LogConfig.configKeys`,
//! `ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS`). Kafka 4 removed
//! `message.downconversion.enable` (KIP-724) and raised the minimum `segment.bytes` to
//! 1 MiB (KIP-1030); Brook follows. Kafka 4.4's tiered-storage, throttling,
//! compression-level and share-group keys are accepted, stored and described without
//! effect (their [`Gap`] says why), so that MirrorMaker 2 and admin tools can copy a Kafka
//! topic's configuration; `remote.storage.enable=true` is refused as a Kafka broker
//! without tiered storage refuses it. A name Kafka does not know is `INVALID_CONFIG`.

use std::collections::BTreeMap;

use super::error::ConfigError;
use super::keys::{broker_synonyms, Synonym};
use super::support::Gap;
use super::value::{
    check_follower_throttled_replicas, check_gzip_level, check_leader_throttled_replicas,
    normalize, ConfigType as T, Validator as V,
};
use super::BrokerConfig;

const LONG_MAX: &str = "9223372036854775807";

/// One topic configuration key.
#[derive(Clone, Copy, Debug)]
pub struct TopicKeyDef {
    pub name: &'static str,
    pub config_type: T,
    /// Kafka's `LogConfig` default, as printed (`None`: Kafka's `null`); the broker key
    /// usually decides instead.
    pub default: Option<&'static str>,
    pub validator: V,
    /// The broker key this topic key defaults from (head of its synonym chain).
    pub broker_synonym: Option<&'static str>,
    pub doc: &'static str,
    /// Why Brook does not act on the key; `None` for the keys Brook implements.
    pub gap: Option<Gap>,
}

impl TopicKeyDef {
    /// False for Kafka's internal keys, which DescribeConfigs leaves out.
    pub fn is_described(&self) -> bool {
        self.gap != Some(Gap::Internal)
    }
}

const fn t(
    name: &'static str,
    config_type: T,
    default: &'static str,
    validator: V,
    broker_synonym: &'static str,
    doc: &'static str,
) -> TopicKeyDef {
    TopicKeyDef {
        name,
        config_type,
        default: Some(default),
        validator,
        broker_synonym: Some(broker_synonym),
        doc,
        gap: None,
    }
}

/// A `*.replication.throttled.replicas` key: a list, empty by default, no broker synonym.
const fn throttled_replicas(name: &'static str, validator: V, doc: &'static str) -> TopicKeyDef {
    TopicKeyDef {
        name,
        config_type: T::List,
        default: Some(""),
        validator,
        broker_synonym: None,
        doc,
        gap: None,
    }
}

/// A Kafka 4.4 topic key Brook accepts without acting on it; `broker_synonym` as in
/// Kafka's `ServerTopicConfigSynonyms` (empty: none).
const fn kafka_only(
    name: &'static str,
    config_type: T,
    default: Option<&'static str>,
    validator: V,
    broker_synonym: &'static str,
    gap: Gap,
) -> TopicKeyDef {
    TopicKeyDef {
        name,
        config_type,
        default,
        validator,
        broker_synonym: if broker_synonym.is_empty() {
            None
        } else {
            Some(broker_synonym)
        },
        doc: gap.doc(),
        gap: Some(gap),
    }
}

#[rustfmt::skip]
static TOPIC_KEYS: &[TopicKeyDef] = &[
    t("cleanup.policy", T::List, "delete", V::EachOneOf(&["compact", "delete"]), "log.cleanup.policy",
      "This config designates the retention policy to use on log segments. The \"delete\" policy (which is the default) will discard old segments when their retention time or size limit has been reached. The \"compact\" policy will enable log compaction, which retains the latest value for each key. It is also possible to specify both policies in a comma-separated list (e.g. \"delete,compact\"). An empty list means infinite retention."),
    kafka_only("compression.gzip.level", T::Int, Some("-1"), V::Custom(check_gzip_level), "compression.gzip.level", Gap::Compression),
    kafka_only("compression.lz4.level", T::Int, Some("9"), V::Between(1, 17), "compression.lz4.level", Gap::Compression),
    t("compression.type", T::String, "producer", V::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), "compression.type",
      "Specify the final compression type for a given topic. This configuration accepts the standard compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts 'uncompressed' which is equivalent to no compression; and 'producer' which means retain the original compression codec set by the producer."),
    kafka_only("compression.zstd.level", T::Int, Some("3"), V::Between(-131_072, 22), "compression.zstd.level", Gap::Compression),
    t("delete.retention.ms", T::Long, "86400000", V::AtLeast(0), "log.cleaner.delete.retention.ms",
      "The amount of time to retain delete tombstone markers for log compacted topics."),
    kafka_only("errors.deadletterqueue.group.enable", T::Boolean, Some("false"), V::None, "", Gap::ShareGroups),
    t("file.delete.delay.ms", T::Long, "60000", V::AtLeast(0), "log.segment.delete.delay.ms",
      "The time to wait before deleting a file from the filesystem."),
    t("flush.messages", T::Long, LONG_MAX, V::AtLeast(1), "log.flush.interval.messages",
      "This setting allows specifying an interval at which we will force an fsync of data written to the log."),
    t("flush.ms", T::Long, LONG_MAX, V::AtLeast(0), "log.flush.interval.ms",
      "This setting allows specifying a time interval at which we will force an fsync of data written to the log."),
    throttled_replicas("follower.replication.throttled.replicas", V::Custom(check_follower_throttled_replicas),
      "A list of replicas for which log replication should be throttled on the follower side, as [PartitionId]:[BrokerId],... or the wildcard '*'. A listed replica that is not in the ISR is fetched within its broker's follower.replication.throttled.rate."),
    t("index.interval.bytes", T::Int, "4096", V::AtLeast(0), "log.index.interval.bytes",
      "This setting controls how frequently Kafka adds entries to its offset index and, conditionally, to its time index."),
    kafka_only("internal.segment.bytes", T::Int, None, V::None, "", Gap::Internal),
    throttled_replicas("leader.replication.throttled.replicas", V::Custom(check_leader_throttled_replicas),
      "A list of replicas for which log replication should be throttled on the leader side, as [PartitionId]:[BrokerId],... or the wildcard '*'. A listed leader serves followers outside the ISR within its broker's leader.replication.throttled.rate."),
    kafka_only("local.retention.bytes", T::Long, Some("-2"), V::AtLeast(-2), "log.local.retention.bytes", Gap::TieredStorage),
    kafka_only("local.retention.ms", T::Long, Some("-2"), V::AtLeast(-2), "log.local.retention.ms", Gap::TieredStorage),
    t("max.compaction.lag.ms", T::Long, LONG_MAX, V::AtLeast(1), "log.cleaner.max.compaction.lag.ms",
      "The maximum time a message will remain ineligible for compaction in the log."),
    kafka_only("max.decompressed.message.bytes", T::Int, Some("2147483639"), V::Between(1, 2_147_483_639), "max.decompressed.message.bytes", Gap::Compression),
    t("max.message.bytes", T::Int, "1048588", V::AtLeast(0), "message.max.bytes",
      "The largest record batch size allowed by Kafka (after compression if compression is enabled)."),
    t("message.timestamp.after.max.ms", T::Long, "3600000", V::AtLeast(0), "log.message.timestamp.after.max.ms",
      "This configuration sets the allowable timestamp difference between the message timestamp and the broker's timestamp."),
    t("message.timestamp.before.max.ms", T::Long, LONG_MAX, V::AtLeast(0), "log.message.timestamp.before.max.ms",
      "This configuration sets the allowable timestamp difference between the broker's timestamp and the message timestamp."),
    t("message.timestamp.type", T::String, "CreateTime", V::OneOf(&["CreateTime", "LogAppendTime"]), "log.message.timestamp.type",
      "Define whether the timestamp in the message is message create time or log append time."),
    t("min.cleanable.dirty.ratio", T::Double, "0.5", V::DoubleBetween(0.0, 1.0), "log.cleaner.min.cleanable.ratio",
      "This configuration controls how frequently the log compactor will attempt to clean the log (assuming log compaction is enabled)."),
    t("min.compaction.lag.ms", T::Long, "0", V::AtLeast(0), "log.cleaner.min.compaction.lag.ms",
      "The minimum time a message will remain uncompacted in the log."),
    t("min.insync.replicas", T::Int, "1", V::AtLeast(1), "min.insync.replicas",
      "Specifies the minimum number of in-sync replicas (including the leader) required for a write to succeed when a producer sets acks to \"all\" (or \"-1\")."),
    t("preallocate", T::Boolean, "false", V::None, "log.preallocate",
      "True if we should preallocate the file on disk when creating a new log segment."),
    kafka_only("remote.copy.lag.bytes", T::Long, Some("-1"), V::AtLeast(-1), "log.remote.copy.lag.bytes", Gap::TieredStorage),
    kafka_only("remote.copy.lag.ms", T::Long, Some("0"), V::AtLeast(-1), "log.remote.copy.lag.ms", Gap::TieredStorage),
    kafka_only("remote.log.copy.disable", T::Boolean, Some("false"), V::None, "", Gap::TieredStorage),
    kafka_only("remote.log.delete.on.disable", T::Boolean, Some("false"), V::None, "", Gap::TieredStorage),
    kafka_only("remote.storage.enable", T::Boolean, Some("false"), V::None, "", Gap::TieredStorage),
    t("retention.bytes", T::Long, "-1", V::None, "log.retention.bytes",
      "This configuration controls the maximum size a partition (which consists of log segments) can grow to before we will discard old log segments to free up space if we are using the \"delete\" retention policy."),
    t("retention.ms", T::Long, "604800000", V::AtLeast(-1), "log.retention.ms",
      "This configuration controls the maximum time we will retain a log before we will discard old log segments to free up space if we are using the \"delete\" retention policy. If set to -1, no time limit is applied."),
    t("segment.bytes", T::Int, "1073741824", V::AtLeast(1_048_576), "log.segment.bytes",
      "This configuration controls the segment file size for the log."),
    t("segment.index.bytes", T::Int, "10485760", V::AtLeast(4), "log.index.size.max.bytes",
      "This configuration controls the size of the index that maps offsets to file positions."),
    t("segment.jitter.ms", T::Long, "0", V::AtLeast(0), "log.roll.jitter.ms",
      "The maximum random jitter subtracted from the scheduled segment roll time to avoid thundering herds of segment rolling."),
    t("segment.ms", T::Long, "604800000", V::AtLeast(1), "log.roll.ms",
      "This configuration controls the period of time after which Kafka will force the log to roll even if the segment file isn't full to ensure that retention can delete or compact old data."),
    t("unclean.leader.election.enable", T::Boolean, "false", V::None, "unclean.leader.election.enable",
      "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last resort, even though doing so may result in data loss."),
];

/// Every topic key, sorted by name.
pub fn topic_keys() -> &'static [TopicKeyDef] {
    TOPIC_KEYS
}

/// The definition of a topic key, if Kafka (and Brook) has it.
pub fn topic_key(name: &str) -> Option<&'static TopicKeyDef> {
    TOPIC_KEYS
        .binary_search_by(|k| k.name.cmp(name))
        .ok()
        .and_then(|i| TOPIC_KEYS.get(i))
}

/// The broker synonym chain of a topic key, in Kafka's order (`retention.ms` →
/// `log.retention.ms`, `log.retention.minutes`, `log.retention.hours`).
pub fn topic_synonyms(name: &str) -> Vec<Synonym> {
    topic_key(name)
        .and_then(|k| k.broker_synonym)
        .map(broker_synonyms)
        .unwrap_or_default()
}

/// Checks a topic's overrides as CreateTopics / AlterConfigs would: every name known
/// (Kafka's "Unknown topic config name"), every value valid; returns the canonical
/// values. The broker maps any error to `INVALID_CONFIG`.
pub fn normalize_topic_overrides(
    overrides: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, value) in overrides {
        let key =
            topic_key(name).ok_or_else(|| ConfigError::UnknownTopicKey { key: name.clone() })?;
        out.insert(
            name.clone(),
            normalize(key.name, key.config_type, key.validator, value)?,
        );
    }
    // LogConfig.validateRemoteStorageOnlyIfSystemEnabled: Brook's answer is that of a Kafka
    // broker with remote.log.storage.system.enable=false, the only tiered storage it has.
    if out.get("remote.storage.enable").map(String::as_str) == Some("true") {
        return Err(ConfigError::Unsupported {
            key: "remote.storage.enable".to_owned(),
            reason: "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.".to_owned(),
        });
    }
    Ok(out)
}

/// [`normalize_topic_overrides`] without the result.
pub fn validate_topic_overrides(overrides: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    normalize_topic_overrides(overrides).map(|_| ())
}

/// The value a topic key takes when the topic does not override it: the broker's
/// effective value of its synonym chain, converted to milliseconds where the chain
/// has units (`log.retention.hours=1` → `3600000`). Kafka's `LogConfig` default if the
/// broker has none.
pub fn broker_default_for(broker: &BrokerConfig, key: &TopicKeyDef) -> Option<String> {
    let Some(primary) = key.broker_synonym else {
        return key.default.map(str::to_owned);
    };
    for synonym in broker_synonyms(primary) {
        let Some(value) = broker.effective_value(synonym.name) else {
            continue;
        };
        let Ok(units) = value.parse::<i64>() else {
            return Some(value.to_owned());
        };
        let ms = units.saturating_mul(synonym.ms_per_unit);
        // KafkaConfig.logRetentionTimeMillis: any negative retention means unlimited.
        if key.name == "retention.ms" && ms < 0 {
            return Some("-1".to_owned());
        }
        return Some(ms.to_string());
    }
    key.default.map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_table_is_sorted_and_every_default_is_valid() {
        let names: Vec<_> = topic_keys().iter().map(|k| k.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        for key in topic_keys() {
            let Some(default) = key.default else {
                assert_eq!(key.gap, Some(Gap::Internal), "{} has no default", key.name);
                continue;
            };
            let canonical = normalize(key.name, key.config_type, key.validator, default);
            assert_eq!(canonical.ok().as_deref(), Some(default), "{}", key.name);
            if let Some(b) = key.broker_synonym {
                assert!(
                    super::super::keys::broker_key(b).is_some(),
                    "{b} missing from broker table"
                );
            }
        }
    }

    #[test]
    fn an_unknown_topic_key_is_refused_with_kafkas_message() {
        let err = validate_topic_overrides(&map(&[("retention.msec", "1")]))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Unknown topic config name: retention.msec")
        );
        let err = validate_topic_overrides(&map(&[("message.downconversion.enable", "true")]));
        assert!(matches!(err, Err(ConfigError::UnknownTopicKey { .. })));
    }

    #[test]
    fn kafka_only_topic_keys_are_accepted_with_kafkas_validators() {
        let out = normalize_topic_overrides(&map(&[
            ("compression.zstd.level", " 5 "),
            ("remote.log.copy.disable", "TRUE"),
            ("leader.replication.throttled.replicas", "0:1, 1:1"),
            ("errors.deadletterqueue.group.enable", "false"),
            ("local.retention.ms", "-2"),
        ]));
        assert_eq!(
            out.ok(),
            Some(map(&[
                ("compression.zstd.level", "5"),
                ("errors.deadletterqueue.group.enable", "false"),
                ("leader.replication.throttled.replicas", "0:1,1:1"),
                ("local.retention.ms", "-2"),
                ("remote.log.copy.disable", "true"),
            ]))
        );
        let err = validate_topic_overrides(&map(&[("compression.zstd.level", "99")]))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Invalid value 99 for configuration compression.zstd.level: Value must be no more than 22")
        );
        assert!(validate_topic_overrides(&map(&[("compression.gzip.level", "0")])).is_err());
        assert!(
            validate_topic_overrides(&map(&[("max.decompressed.message.bytes", "0")])).is_err()
        );
    }

    #[test]
    fn remote_storage_is_refused_as_kafka_refuses_it_without_tiered_storage() {
        let err = validate_topic_overrides(&map(&[("remote.storage.enable", "true")]))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
        );
        assert!(validate_topic_overrides(&map(&[("remote.storage.enable", "false")])).is_ok());
    }

    #[test]
    fn kafka_only_topic_keys_default_from_their_broker_synonyms() {
        let names: Vec<_> = topic_synonyms("local.retention.ms")
            .iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["log.local.retention.ms"]);
        assert!(topic_synonyms("remote.storage.enable").is_empty());
        assert_eq!(
            topic_key("internal.segment.bytes").map(TopicKeyDef::is_described),
            Some(false)
        );
    }

    #[test]
    fn invalid_topic_values_name_key_and_value() {
        let err = validate_topic_overrides(&map(&[("cleanup.policy", "delete,purge")]))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Invalid value delete,purge for configuration cleanup.policy: String must be one of: compact, delete")
        );
        assert!(validate_topic_overrides(&map(&[("segment.bytes", "1048575")])).is_err());
        assert!(validate_topic_overrides(&map(&[("message.timestamp.type", "Now")])).is_err());
        assert!(validate_topic_overrides(&map(&[("retention.ms", "-2")])).is_err());
    }

    #[test]
    fn valid_overrides_come_back_canonical() {
        let out = normalize_topic_overrides(&map(&[
            ("retention.ms", " -1 "),
            ("cleanup.policy", "compact , delete"),
        ]));
        assert_eq!(
            out.ok(),
            Some(map(&[
                ("cleanup.policy", "compact,delete"),
                ("retention.ms", "-1")
            ]))
        );
    }

    #[test]
    fn topic_synonyms_follow_kafkas_order() {
        let names: Vec<_> = topic_synonyms("retention.ms")
            .iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(
            names,
            [
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours"
            ]
        );
        let names: Vec<_> = topic_synonyms("flush.ms").iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
        );
    }
}
