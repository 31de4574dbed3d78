//! The broker key definitions: the shape of one key, lookups into the table in
//! [`super::keys_table`], and Kafka's broker synonym chains.
//!
//! Invariants: names are Kafka's verbatim; every default is the text Kafka prints for it
//! (so it is also a valid input); a key whose Kafka default is `null` has `default: None`.
//! Brook-only keys (`metrics.listener`, `cluster.id`) say so in their doc.

use super::keys_table::BROKER_KEYS;
use super::value::{ConfigType, Validator};

/// Kafka's `ConfigDef.Importance`, shown by documentation tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Importance {
    High,
    Medium,
    Low,
}

/// Whether and how a key can change at runtime (Kafka's `DynamicBrokerConfig`
/// update modes). DescribeConfigs reports `read_only` for `ReadOnly` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    /// Only in the properties file, env or `--override`; needs a restart.
    ReadOnly,
    /// Dynamically, for one broker only (`--entity-name <id>`).
    PerBroker,
    /// Dynamically, for one broker or as the cluster default (`--entity-default`).
    ClusterWide,
}

/// One broker configuration key.
#[derive(Clone, Copy, Debug)]
pub struct KeyDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    /// The default as Kafka prints it; `None` where Kafka's default is `null`.
    pub default: Option<&'static str>,
    pub validator: Validator,
    pub importance: Importance,
    pub update_mode: UpdateMode,
    pub doc: &'static str,
}

impl KeyDef {
    /// True when Kafka lists the key in `DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS`.
    pub fn is_dynamic(&self) -> bool {
        self.update_mode != UpdateMode::ReadOnly
    }
}

/// Every broker key Brook knows, sorted by name.
pub fn broker_keys() -> &'static [KeyDef] {
    BROKER_KEYS
}

/// The definition of a broker key, if Brook knows it.
pub fn broker_key(name: &str) -> Option<&'static KeyDef> {
    BROKER_KEYS
        .binary_search_by(|k| k.name.cmp(name))
        .ok()
        .and_then(|i| BROKER_KEYS.get(i))
}

/// A member of a synonym chain and how many milliseconds one of its units is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Synonym {
    pub name: &'static str,
    pub ms_per_unit: i64,
}

const fn syn(name: &'static str, ms_per_unit: i64) -> Synonym {
    Synonym { name, ms_per_unit }
}

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

/// Retention: `log.retention.ms` > `.minutes` > `.hours` (`KafkaConfig.logRetentionTimeMillis`).
const RETENTION: &[Synonym] = &[
    syn("log.retention.ms", 1),
    syn("log.retention.minutes", MINUTE_MS),
    syn("log.retention.hours", HOUR_MS),
];
const ROLL: &[Synonym] = &[syn("log.roll.ms", 1), syn("log.roll.hours", HOUR_MS)];
const ROLL_JITTER: &[Synonym] = &[
    syn("log.roll.jitter.ms", 1),
    syn("log.roll.jitter.hours", HOUR_MS),
];
/// `log.flush.interval.ms` falls back to the flusher's own period when unset.
const FLUSH_MS: &[Synonym] = &[
    syn("log.flush.interval.ms", 1),
    syn("log.flush.scheduler.interval.ms", 1),
];

/// Kafka's `DynamicBrokerConfig.brokerConfigSynonyms(name)`: the chain a key belongs to,
/// most specific first. Every member of the retention and roll chains reports the whole
/// chain; `log.flush.scheduler.interval.ms` alone is just itself, as in Kafka.
pub fn broker_synonyms(name: &str) -> Vec<Synonym> {
    for chain in [RETENTION, ROLL, ROLL_JITTER] {
        if chain.iter().any(|s| s.name == name) {
            return chain.to_vec();
        }
    }
    if name == "log.flush.interval.ms" {
        return FLUSH_MS.to_vec();
    }
    // A key without synonyms is its own chain; an unknown name has none.
    broker_key(name)
        .map(|k| vec![syn(k.name, 1)])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_has_no_duplicates() {
        let names: Vec<_> = broker_keys().iter().map(|k| k.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn every_default_is_a_valid_value_of_its_key() {
        for key in broker_keys() {
            if let Some(default) = key.default {
                let canonical = super::super::value::normalize(
                    key.name,
                    key.config_type,
                    key.validator,
                    default,
                );
                assert_eq!(
                    canonical.ok().as_deref(),
                    Some(default),
                    "default of {}",
                    key.name
                );
            }
        }
    }

    #[test]
    fn retention_synonyms_are_ms_then_minutes_then_hours_from_any_member() {
        let names: Vec<_> = broker_synonyms("log.retention.hours")
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
    }

    #[test]
    fn a_plain_key_is_its_own_only_synonym() {
        let names: Vec<_> = broker_synonyms("num.partitions")
            .iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["num.partitions"]);
        let names: Vec<_> = broker_synonyms("log.flush.scheduler.interval.ms")
            .iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["log.flush.scheduler.interval.ms"]);
    }

    #[test]
    fn lookups_find_known_keys_only() {
        assert_eq!(broker_key("log.dirs").map(|k| k.name), Some("log.dirs"));
        assert!(broker_key("log.dirz").is_none());
    }
}
