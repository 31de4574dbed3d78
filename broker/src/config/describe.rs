//! DescribeConfigs semantics, pure: which value, source, flags and synonyms Kafka
//! reports for each key of a topic, group or broker resource. The broker converts the plain
//! structs here into the wire response.
//!
//! Rules reproduced from Kafka's `ConfigHelper` (checked against Kafka 4.4 output):
//! synonyms are listed source by source (per-broker dynamic, cluster default dynamic,
//! static, default) and within a source in chain order; then everything before the
//! first entry for the key itself is dropped. So with only `log.retention.hours=1` set,
//! topic `retention.ms` reports `3600000` with source DEFAULT_CONFIG and no synonyms,
//! exactly as Kafka does. A topic override comes first as DYNAMIC_TOPIC_CONFIG.
//! Every Kafka 4.4 key is described, implemented or not (the documentation of the ones
//! Brook does not act on says so); Kafka's internal keys are not, as in Kafka.

use std::collections::BTreeMap;

use super::broker::{BrokerConfig, Layers};
use super::error::ConfigError;
use super::group::{group_default, group_keys};
use super::keys::{
    broker_key, broker_keys, broker_synonyms, dynamic_only_broker_key, dynamic_only_broker_keys,
    KeyDef, Synonym,
};
use super::security::listener_store_key;
use super::topic::topic_keys;
use super::topic_config::effective_topic_values;
use super::value::ConfigType;

/// Kafka's `DescribeConfigsResponse.ConfigSource` ids, as sent on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    Unknown = 0,
    DynamicTopicConfig = 1,
    DynamicBrokerConfig = 2,
    DynamicDefaultBrokerConfig = 3,
    StaticBrokerConfig = 4,
    DefaultConfig = 5,
    DynamicBrokerLoggerConfig = 6,
    ClientMetricsConfig = 7,
    GroupConfig = 8,
}

impl ConfigSource {
    /// The wire id.
    pub fn id(self) -> i8 {
        self as i8
    }
}

/// One synonym of a described key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedSynonym {
    pub name: String,
    /// `None` for sensitive keys.
    pub value: Option<String>,
    pub source: ConfigSource,
}

/// One key of a described resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedConfig {
    pub name: String,
    /// `None` for sensitive keys and for keys whose value is Kafka's `null`.
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub is_sensitive: bool,
    pub config_type: ConfigType,
    /// Present when documentation was asked for.
    pub documentation: Option<&'static str>,
    /// Empty unless synonyms were asked for.
    pub synonyms: Vec<DescribedSynonym>,
}

/// What the request asked to include (DescribeConfigs v1+ / v3+ flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DescribeOptions {
    pub include_synonyms: bool,
    pub include_documentation: bool,
}

/// Every topic key of a topic with these overrides (as stored in metadata), sorted by
/// name. Fails only if the stored overrides are no longer valid.
pub fn describe_topic(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    options: DescribeOptions,
) -> Result<Vec<DescribedConfig>, ConfigError> {
    let values = effective_topic_values(broker, overrides)?;
    let mut out = Vec::new();
    for key in topic_keys().iter().filter(|k| k.is_described()) {
        let value = values.get(key.name).cloned();
        let mut synonyms = Vec::new();
        if let Some(own) = overrides.get(key.name) {
            synonyms.push(DescribedSynonym {
                name: key.name.to_owned(),
                value: value.clone().or_else(|| Some(own.clone())),
                source: ConfigSource::DynamicTopicConfig,
            });
        }
        if let Some(primary) = key.broker_synonym {
            synonyms.extend(broker_chain(broker, primary));
        }
        out.push(entry(
            key.name,
            value,
            false,
            key.config_type,
            key.doc,
            synonyms,
            options,
        ));
    }
    Ok(out)
}

/// Every group key of a group with these configs (as stored; any group name, existing
/// or not, as in Kafka), sorted by name: Kafka's `ConfigHelper.createGroupConfigEntry`.
/// A key the group sets comes first as GROUP_CONFIG; then the broker synonym's chain
/// (`group.consumer.session.timeout.ms`), or for a key without one its Kafka default.
/// Internal keys are described only when the group sets them.
pub fn describe_group(
    broker: &BrokerConfig,
    configs: &BTreeMap<String, String>,
    options: DescribeOptions,
) -> Vec<DescribedConfig> {
    let mut out: Vec<DescribedConfig> = group_keys()
        .iter()
        .filter(|key| !key.internal || configs.contains_key(key.name))
        .map(|key| {
            let own = configs.get(key.name);
            let value = own.cloned().or_else(|| group_default(broker, key));
            let mut synonyms = Vec::new();
            if own.is_some() {
                synonyms.push(DescribedSynonym {
                    name: key.name.to_owned(),
                    value: value.clone(),
                    source: ConfigSource::GroupConfig,
                });
            }
            match key.broker_synonym {
                Some(primary) => synonyms.extend(broker_chain(broker, primary)),
                None => synonyms.extend(key.default.map(|default| DescribedSynonym {
                    name: key.name.to_owned(),
                    value: Some(default.to_owned()),
                    source: ConfigSource::DefaultConfig,
                })),
            }
            entry(
                key.name,
                value,
                false,
                key.config_type,
                key.doc,
                synonyms,
                options,
            )
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every broker key of this broker (`--entity-name <id>`), sorted by name, and the
/// listeners' store keys set for it (`listener.name.<l>.ssl.keystore.location`), as Kafka
/// lists the listener keys among the broker's.
pub fn describe_broker(broker: &BrokerConfig, options: DescribeOptions) -> Vec<DescribedConfig> {
    let mut out: Vec<DescribedConfig> = broker_keys()
        .iter()
        .filter(|key| key.is_described())
        .map(|key| broker_entry(&broker.layers, key, None, options))
        .collect();
    let layers = &broker.layers;
    let names: std::collections::BTreeSet<&String> = layers
        .per_broker
        .keys()
        .chain(layers.static_props.keys())
        .filter(|name| listener_store_key(name).is_some())
        .collect();
    for name in names {
        let Some(key) = listener_store_key(name).and_then(|(_, base)| broker_key(base)) else {
            continue;
        };
        let sensitive = key.config_type.is_sensitive();
        let synonyms: Vec<DescribedSynonym> = [
            (&layers.per_broker, ConfigSource::DynamicBrokerConfig),
            (&layers.static_props, ConfigSource::StaticBrokerConfig),
        ]
        .into_iter()
        .filter_map(|(layer, source)| {
            layer.get(name).map(|value| DescribedSynonym {
                name: name.clone(),
                value: (!sensitive).then(|| value.clone()),
                source,
            })
        })
        .collect();
        let value = layers.effective(name).map(str::to_owned);
        out.push(entry(
            name,
            value,
            false,
            key.config_type,
            key.doc,
            synonyms,
            options,
        ));
    }
    // The dynamic-only keys (replication throttles) exist where set, as in Kafka.
    for key in dynamic_only_broker_keys() {
        if layers.per_broker.contains_key(key.name) || layers.cluster_default.contains_key(key.name)
        {
            out.push(broker_entry(layers, key, None, options));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The cluster-default broker resource (`--entity-default`, empty resource name):
/// only the keys set as cluster defaults, with only cluster-default synonyms.
pub fn describe_broker_defaults(
    broker: &BrokerConfig,
    options: DescribeOptions,
) -> Vec<DescribedConfig> {
    broker
        .layers
        .cluster_default
        .iter()
        .filter_map(|(name, value)| {
            let key = broker_key(name)
                .filter(|k| k.is_described())
                .or_else(|| dynamic_only_broker_key(name))?;
            Some(broker_entry(
                &broker.layers,
                key,
                Some(value.clone()),
                options,
            ))
        })
        .collect()
}

/// `default_value`: set for the cluster-default resource, whose value is the stored
/// default rather than this broker's effective value.
fn broker_entry(
    layers: &Layers,
    key: &KeyDef,
    default_value: Option<String>,
    options: DescribeOptions,
) -> DescribedConfig {
    let sensitive = key.config_type.is_sensitive();
    let mut synonyms = layered_synonyms(layers, key.name, &broker_synonyms(key.name), sensitive);
    let value = match default_value {
        Some(v) => {
            synonyms.retain(|s| s.source == ConfigSource::DynamicDefaultBrokerConfig);
            Some(v)
        }
        None => layers.effective(key.name).map(str::to_owned),
    };
    entry(
        key.name,
        value,
        !key.is_dynamic(),
        key.config_type,
        key.doc,
        synonyms,
        options,
    )
}

fn entry(
    name: &str,
    value: Option<String>,
    read_only: bool,
    config_type: ConfigType,
    doc: &'static str,
    synonyms: Vec<DescribedSynonym>,
    options: DescribeOptions,
) -> DescribedConfig {
    let is_sensitive = config_type.is_sensitive();
    DescribedConfig {
        name: name.to_owned(),
        value: if is_sensitive { None } else { value },
        source: synonyms
            .first()
            .map_or(ConfigSource::DefaultConfig, |s| s.source),
        read_only,
        is_sensitive,
        config_type,
        documentation: options.include_documentation.then_some(doc),
        synonyms: if options.include_synonyms {
            synonyms
        } else {
            Vec::new()
        },
    }
}

/// The synonyms a topic or group key inherits from its broker key `primary` (e.g.
/// `group.consumer.session.timeout.ms`): that key's whole chain, as layered on this broker.
fn broker_chain(broker: &BrokerConfig, primary: &str) -> Vec<DescribedSynonym> {
    layered_synonyms(&broker.layers, primary, &broker_synonyms(primary), false)
}

/// Kafka's `configSynonyms(name, chain)`: source-major, chain-minor, then drop what
/// precedes the first entry named `name`.
fn layered_synonyms(
    layers: &Layers,
    name: &str,
    chain: &[Synonym],
    sensitive: bool,
) -> Vec<DescribedSynonym> {
    let defaults: BTreeMap<String, String> = chain
        .iter()
        .filter_map(|s| {
            broker_key(s.name)
                .and_then(|k| k.default)
                .map(|d| (s.name.to_owned(), d.to_owned()))
        })
        .collect();
    let sources = [
        (&layers.per_broker, ConfigSource::DynamicBrokerConfig),
        (
            &layers.cluster_default,
            ConfigSource::DynamicDefaultBrokerConfig,
        ),
        (&layers.static_props, ConfigSource::StaticBrokerConfig),
        (&defaults, ConfigSource::DefaultConfig),
    ];
    let mut all = Vec::new();
    for (map, source) in sources {
        for synonym in chain {
            if let Some(value) = map.get(synonym.name) {
                all.push(DescribedSynonym {
                    name: synonym.name.to_owned(),
                    value: (!sensitive).then(|| value.clone()),
                    source,
                });
            }
        }
    }
    let first_own = all.iter().position(|s| s.name == name).unwrap_or(all.len());
    all.split_off(first_own)
}
