//! The broker key definitions: the shape of one key, lookups into the table in
//! [`super::keys_table`], and Kafka's broker synonym chains.
//!
//! Invariants: names are Kafka's verbatim; every default is the text Kafka prints for it
//! (so it is also a valid input); a key whose Kafka default is `null` has `default: None`.
//! Brook-only keys (`metrics.listener`, `cluster.id`) say so in their doc.

use std::sync::LazyLock;

use super::keys_table::{BROKER_KEYS, DYNAMIC_ONLY_BROKER_KEYS};
use super::keys_table_kafka::KAFKA_ONLY_BROKER_KEYS;
use super::support::Gap;
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
    /// Why Brook does not act on the key; `None` for the keys Brook implements.
    pub gap: Option<Gap>,
}

impl KeyDef {
    /// True when Kafka lists the key in `DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS`.
    pub fn is_dynamic(&self) -> bool {
        self.update_mode != UpdateMode::ReadOnly
    }

    /// False for Kafka's internal keys, which DescribeConfigs leaves out.
    pub fn is_described(&self) -> bool {
        self.gap != Some(Gap::Internal)
    }
}

/// Both tables merged, sorted by name: Brook's own keys and the Kafka keys it only accepts.
static ALL_BROKER_KEYS: LazyLock<Vec<&'static KeyDef>> = LazyLock::new(|| {
    let mut all: Vec<&'static KeyDef> = BROKER_KEYS.iter().chain(KAFKA_ONLY_BROKER_KEYS).collect();
    all.sort_unstable_by_key(|k| k.name);
    all
});

/// Every broker key Brook knows, sorted by name: the ones it implements and the Kafka
/// 4.4 keys it accepts without acting on them (see [`super::support`]).
pub fn broker_keys() -> &'static [&'static KeyDef] {
    &ALL_BROKER_KEYS
}

/// The definition of a broker key, if Brook knows it.
pub fn broker_key(name: &str) -> Option<&'static KeyDef> {
    [BROKER_KEYS, KAFKA_ONLY_BROKER_KEYS]
        .into_iter()
        .find_map(|table| {
            table
                .binary_search_by(|k| k.name.cmp(name))
                .ok()
                .and_then(|i| table.get(i))
        })
}

/// A broker key that exists only as a dynamic config (the replication throttles): accepted
/// by the config APIs, described where set, not a properties-file key.
pub fn dynamic_only_broker_key(name: &str) -> Option<&'static KeyDef> {
    DYNAMIC_ONLY_BROKER_KEYS.iter().find(|k| k.name == name)
}

/// Every dynamic-only broker key (see [`dynamic_only_broker_key`]).
pub fn dynamic_only_broker_keys() -> &'static [KeyDef] {
    DYNAMIC_ONLY_BROKER_KEYS
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
        .or_else(|| dynamic_only_broker_key(name))
        .map(|k| vec![syn(k.name, 1)])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_table_is_sorted_and_no_name_is_in_both() {
        for table in [BROKER_KEYS, KAFKA_ONLY_BROKER_KEYS] {
            let names: Vec<_> = table.iter().map(|k| k.name).collect();
            let mut sorted = names.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(names, sorted);
        }
        let all: Vec<_> = broker_keys().iter().map(|k| k.name).collect();
        let mut unique = all.clone();
        unique.dedup();
        assert_eq!(all, unique);
        assert_eq!(all.len(), BROKER_KEYS.len() + KAFKA_ONLY_BROKER_KEYS.len());
    }

    #[test]
    fn brooks_own_keys_have_no_gap_and_the_kafka_only_ones_have_one() {
        assert!(BROKER_KEYS.iter().all(|k| k.gap.is_none()));
        assert!(KAFKA_ONLY_BROKER_KEYS.iter().all(|k| k.gap.is_some()));
        for key in KAFKA_ONLY_BROKER_KEYS {
            assert_eq!(Some(key.doc), key.gap.map(Gap::doc), "{}", key.name);
        }
    }

    #[test]
    fn kafka_only_keys_carry_kafkas_facts() {
        let relogin = broker_key("sasl.kerberos.min.time.before.relogin");
        assert_eq!(relogin.and_then(|k| k.default), Some("60000"));
        assert_eq!(relogin.map(|k| k.update_mode), Some(UpdateMode::PerBroker));
        let jaas = broker_key("sasl.jaas.config");
        assert_eq!(jaas.map(|k| k.config_type), Some(ConfigType::Password));
        assert_eq!(jaas.and_then(|k| k.default), None);
        let zstd = broker_key("compression.zstd.level");
        assert_eq!(zstd.and_then(|k| k.default), Some("3"));
        assert_eq!(zstd.map(|k| k.update_mode), Some(UpdateMode::ClusterWide));
        let authorizer = broker_key("authorizer.class.name");
        assert_eq!(
            authorizer.map(|k| k.update_mode),
            Some(UpdateMode::ReadOnly)
        );
        let internal = broker_key("unstable.api.versions.enable");
        assert_eq!(internal.map(|k| k.is_described()), Some(false));
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
