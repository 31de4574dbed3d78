//! The rules of AlterConfigs and IncrementalAlterConfigs, pure: how operations merge
//! into a resource's stored configs and which updates are refused, with Kafka 4.4's
//! answers (checked against a Kafka 4.4 broker).
//!
//! Merging (`ConfigurationControlManager.incrementalAlterConfigResource` for topics,
//! `ConfigAdminManager.prepareIncrementalConfigs` for brokers): SET stores the value;
//! DELETE removes the key if it is set and is otherwise a no-op, whatever the name
//! (MirrorMaker 2 deletes every source config left at its default); APPEND / SUBTRACT
//! edit the stored list, or the key's default when nothing is stored.
//!
//! Broker updates are checked in `DynamicBrokerConfig.validateConfigs`' order: read-only
//! keys, keystore keys without a listener prefix, values, then per-broker keys sent to
//! the cluster default. Brook adds two refusals of its own: a name Kafka does not define
//! (Kafka stores it for plugins, Brook has none to read it) and the security settings it
//! cannot serve yet ([`super::security`]).

use std::collections::{BTreeMap, BTreeSet};

use super::error::ConfigError;
use super::group::{group_key, normalize_group_configs};
use super::keys::{broker_key, dynamic_only_broker_key, KeyDef, UpdateMode};
use super::security::{
    dynamic_refusal, listener_store_key, refused_dynamically, PER_LISTENER_ONLY,
};
use super::topic::{normalize_topic_overrides, topic_key};
use super::value::{normalize, ConfigType};

/// One IncrementalAlterConfigs operation on a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterOp {
    Set(String),
    Delete,
    Append(String),
    Subtract(String),
}

/// Which broker resource an update is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerScope {
    /// `--entity-name <id>`.
    PerBroker,
    /// `--entity-default` (the empty resource name).
    ClusterDefault,
}

/// What to store: keys to set (canonical values) and keys to remove (each one set now).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigChange {
    pub set: BTreeMap<String, String>,
    pub delete: Vec<String>,
}

/// An incremental update of a topic's overrides (`current`, as stored).
pub fn incremental_topic(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp)],
) -> Result<ConfigChange, ConfigError> {
    let list_default = |key: &str| {
        topic_key(key)
            .filter(|k| k.config_type == ConfigType::List)
            .map(|k| k.default.unwrap_or(""))
    };
    // The whole resulting set is checked, as Kafka's LogConfig.validate does.
    incremental_checked_whole(current, ops, list_default, normalize_topic_overrides)
}

/// An incremental update of a group's configs (`current`, as stored), checked as a whole
/// against this broker's bounds (Kafka's `ConfigurationControlManager` with
/// `GroupConfig.validate`).
pub fn incremental_group(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp)],
    broker: &super::BrokerConfig,
) -> Result<ConfigChange, ConfigError> {
    let list_default = |key: &str| {
        group_key(key)
            .filter(|k| k.config_type == ConfigType::List)
            .map(|k| k.default.unwrap_or(""))
    };
    incremental_checked_whole(current, ops, list_default, |after| {
        normalize_group_configs(after, broker)
    })
}

/// The operations merged into `current`, the resulting whole set checked by `normalize`,
/// and the canonical values of what is set. `list_default`: a LIST key's default (APPEND /
/// SUBTRACT start from it), `None` for a key that is not a LIST.
fn incremental_checked_whole(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp)],
    list_default: impl Fn(&str) -> Option<&'static str>,
    normalize: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ConfigError>,
) -> Result<ConfigChange, ConfigError> {
    let merged = merge(current, ops, |key, op| {
        list_default(key).ok_or_else(|| ConfigError::BadListOperation {
            key: key.to_owned(),
            message: format!("Can't {op} to key {key} because its type is not LIST."),
        })
    })?;
    let mut after = current.clone();
    after.retain(|k, _| !merged.delete.contains(k));
    after.extend(merged.set.clone());
    let canonical = normalize(&after)?;
    Ok(ConfigChange {
        set: merged
            .set
            .keys()
            .filter_map(|k| canonical.get(k).map(|v| (k.clone(), v.clone())))
            .collect(),
        delete: merged.delete,
    })
}

/// An incremental update of a broker resource's dynamic configs (`current`, as stored).
pub fn incremental_broker(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp)],
    scope: BrokerScope,
) -> Result<ConfigChange, ConfigError> {
    let merged = merge(current, ops, |key, op| {
        let def = broker_key(key).ok_or_else(|| ConfigError::BadListOperation {
            key: key.to_owned(),
            message: format!("Unknown config name: {key}"),
        })?;
        if def.config_type != ConfigType::List {
            return Err(ConfigError::BadListOperation {
                key: key.to_owned(),
                message: format!(
                    "Config value {} is not allowed for config key: {key}",
                    op.to_ascii_lowercase()
                ),
            });
        }
        Ok(def.default.unwrap_or(""))
    })?;
    Ok(ConfigChange {
        set: normalize_broker_update(&merged.set, scope)?,
        delete: merged.delete,
    })
}

/// Applies the operations in order; `list_default` answers an APPEND / SUBTRACT on a key
/// with the default to edit when nothing is stored, or the refusal.
fn merge(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp)],
    list_default: impl Fn(&str, &str) -> Result<&'static str, ConfigError>,
) -> Result<ConfigChange, ConfigError> {
    let mut values: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (key, op) in ops {
        let stored = values
            .get(key)
            .cloned()
            .unwrap_or_else(|| current.get(key).cloned());
        let new = match op {
            AlterOp::Set(value) => Some(value.clone()),
            AlterOp::Delete => None,
            AlterOp::Append(value) | AlterOp::Subtract(value) => {
                let name = if matches!(op, AlterOp::Append(_)) {
                    "APPEND"
                } else {
                    "SUBTRACT"
                };
                let default = list_default(key, name)?;
                let old = stored.as_deref().unwrap_or(default);
                let mut items: Vec<&str> = old.split(',').filter(|i| !i.is_empty()).collect();
                for item in value.split(',') {
                    if matches!(op, AlterOp::Append(_)) {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    } else {
                        items.retain(|i| *i != item);
                    }
                }
                Some(items.join(","))
            }
        };
        values.insert(key.clone(), new);
    }
    let mut change = ConfigChange::default();
    for (key, value) in values {
        match value {
            Some(v) => {
                change.set.insert(key, v);
            }
            // Deleting what is not stored changes nothing, whatever the name.
            None if current.contains_key(&key) => change.delete.push(key),
            None => {}
        }
    }
    Ok(change)
}

/// Checks the values a broker update would store (IncrementalAlterConfigs' SET values or
/// AlterConfigs' whole set) and returns them canonical.
pub fn normalize_broker_update(
    set: &BTreeMap<String, String>,
    scope: BrokerScope,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let names = |pick: &dyn Fn(&str) -> bool| -> Option<String> {
        let picked: BTreeSet<&str> = set.keys().map(String::as_str).filter(|k| pick(k)).collect();
        (!picked.is_empty()).then(|| picked.into_iter().collect::<Vec<_>>().join(", "))
    };
    if let Some(key) = set
        .keys()
        .find(|k| k.starts_with("listener.name.") && listener_store_key(k).is_none())
    {
        return Err(dynamic_refusal(key));
    }
    if let Some(key) = set.keys().find(|k| definition(k).is_none()) {
        return Err(ConfigError::UnknownBrokerKey { key: key.clone() });
    }
    let mode = |k: &str| definition(k).map(|d| d.update_mode);
    if let Some(key) = names(&|k| mode(k) == Some(UpdateMode::ReadOnly)) {
        return Err(ConfigError::ReadOnly { key });
    }
    if let Some(key) = names(&|k| PER_LISTENER_ONLY.contains(&k)) {
        return Err(ConfigError::PerListenerOnly { key });
    }
    let mut out = BTreeMap::new();
    for (key, value) in set {
        let Some(def) = definition(key) else { continue };
        let canonical =
            normalize(key, def.config_type, def.validator, value).map_err(|e| match e {
                ConfigError::InvalidValue { key, value, reason } => {
                    ConfigError::InvalidBrokerValue { key, value, reason }
                }
                other => other,
            })?;
        out.insert(key.clone(), canonical);
    }
    if scope == BrokerScope::ClusterDefault {
        if let Some(key) = names(&|k| mode(k) == Some(UpdateMode::PerBroker)) {
            return Err(ConfigError::PerBrokerOnly { key });
        }
    }
    if let Some(key) = set.keys().find(|k| refused_dynamically(k)) {
        return Err(dynamic_refusal(key));
    }
    Ok(out)
}

/// A broker key's definition; a listener's store key (`listener.name.<l>.ssl.keystore.location`)
/// has the definition of its key.
fn definition(key: &str) -> Option<&'static KeyDef> {
    broker_key(key)
        .or_else(|| dynamic_only_broker_key(key))
        .or_else(|| listener_store_key(key).and_then(|(_, base)| broker_key(base)))
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

    fn ops(list: &[(&str, AlterOp)]) -> Vec<(String, AlterOp)> {
        list.iter()
            .map(|(k, op)| ((*k).to_owned(), op.clone()))
            .collect()
    }

    fn set(v: &str) -> AlterOp {
        AlterOp::Set(v.to_owned())
    }

    fn default_broker() -> crate::config::BrokerConfig {
        crate::config::BrokerConfig::load(None, Vec::new(), &[])
            .expect("defaults load")
            .0
    }

    #[test]
    fn a_group_update_is_checked_whole_and_stored_canonical() {
        let broker = default_broker();
        let current = map(&[("consumer.heartbeat.interval.ms", "6000")]);
        let change = incremental_group(
            &current,
            &ops(&[
                ("consumer.session.timeout.ms", set(" 50000")),
                ("consumer.heartbeat.interval.ms", AlterOp::Delete),
                ("no.such.config", AlterOp::Delete),
            ]),
            &broker,
        );
        assert_eq!(
            change.ok(),
            Some(ConfigChange {
                set: map(&[("consumer.session.timeout.ms", "50000")]),
                delete: vec!["consumer.heartbeat.interval.ms".to_owned()],
            })
        );
        let refused = |op: (&str, AlterOp)| {
            incremental_group(&current, &ops(&[op]), &broker)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(
            refused(("no.such.config", set("1"))).as_deref(),
            Some("Unknown group config name: no.such.config")
        );
        assert_eq!(
            refused(("consumer.session.timeout.ms", set("70000"))).as_deref(),
            Some("consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
        );
        assert_eq!(
            refused((
                "consumer.session.timeout.ms",
                AlterOp::Append("1".to_owned())
            ))
            .as_deref(),
            Some("Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.")
        );
        let tags = incremental_group(
            &BTreeMap::new(),
            &ops(&[(
                "streams.rack.aware.assignment.tags",
                AlterOp::Append("zone".to_owned()),
            )]),
            &broker,
        );
        assert_eq!(
            tags.map(|c| c.set).ok(),
            Some(map(&[("streams.rack.aware.assignment.tags", "zone")]))
        );
    }

    #[test]
    fn deleting_an_unset_or_unknown_topic_key_changes_nothing() {
        let current = map(&[("retention.ms", "1000")]);
        let change = incremental_topic(
            &current,
            &ops(&[
                ("errors.deadletterqueue.group.enable", AlterOp::Delete),
                ("made.up.name", AlterOp::Delete),
                ("segment.ms", AlterOp::Delete),
            ]),
        );
        assert_eq!(change.ok(), Some(ConfigChange::default()));
        let change = incremental_topic(&current, &ops(&[("retention.ms", AlterOp::Delete)]));
        assert_eq!(
            change.map(|c| c.delete).ok(),
            Some(vec!["retention.ms".to_owned()])
        );
    }

    #[test]
    fn a_made_up_topic_key_is_refused_and_a_kafka_only_one_stored_canonical() {
        let err = incremental_topic(&BTreeMap::new(), &ops(&[("made.up.name", set("1"))]))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Unknown topic config name: made.up.name")
        );
        let change = incremental_topic(
            &BTreeMap::new(),
            &ops(&[("remote.log.copy.disable", set("TRUE"))]),
        );
        assert_eq!(
            change.map(|c| c.set).ok(),
            Some(map(&[("remote.log.copy.disable", "true")]))
        );
    }

    #[test]
    fn append_edits_the_stored_list_or_kafkas_default() {
        let change = incremental_topic(
            &BTreeMap::new(),
            &ops(&[("cleanup.policy", AlterOp::Append("compact".into()))]),
        );
        assert_eq!(
            change.map(|c| c.set).ok(),
            Some(map(&[("cleanup.policy", "delete,compact")]))
        );
        let change = incremental_topic(
            &map(&[("cleanup.policy", "compact,delete")]),
            &ops(&[("cleanup.policy", AlterOp::Subtract("delete".into()))]),
        );
        assert_eq!(
            change.map(|c| c.set).ok(),
            Some(map(&[("cleanup.policy", "compact")]))
        );
        let err = incremental_topic(
            &BTreeMap::new(),
            &ops(&[("retention.ms", AlterOp::Append("1".into()))]),
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Can't APPEND to key retention.ms because its type is not LIST.")
        );
    }

    #[test]
    fn broker_appends_follow_kafkas_broker_side_rules() {
        let scope = BrokerScope::PerBroker;
        let append = |key: &str| ops(&[(key, AlterOp::Append("x".into()))]);
        let msg = |r: Result<ConfigChange, ConfigError>| r.err().map(|e| e.to_string());
        assert_eq!(
            msg(incremental_broker(
                &BTreeMap::new(),
                &append("made.up"),
                scope
            ))
            .as_deref(),
            Some("Unknown config name: made.up")
        );
        assert_eq!(
            msg(incremental_broker(
                &BTreeMap::new(),
                &append("num.partitions"),
                scope
            ))
            .as_deref(),
            Some("Config value append is not allowed for config key: num.partitions")
        );
        let change = incremental_broker(
            &BTreeMap::new(),
            &ops(&[(
                "sasl.kerberos.principal.to.local.rules",
                AlterOp::Append("RULE:x".into()),
            )]),
            scope,
        );
        assert_eq!(
            change.map(|c| c.set).ok(),
            Some(map(&[(
                "sasl.kerberos.principal.to.local.rules",
                "DEFAULT,RULE:x"
            )]))
        );
    }

    #[test]
    fn broker_updates_are_refused_in_kafkas_order_with_kafkas_words() {
        let check = |pairs: &[(&str, &str)], scope| {
            normalize_broker_update(&map(pairs), scope)
                .err()
                .map(|e| e.to_string())
        };
        let per_broker = BrokerScope::PerBroker;
        let default = BrokerScope::ClusterDefault;
        assert_eq!(
            check(&[("num.partitions", "3"), ("log.dirs", "x")], per_broker).as_deref(),
            Some("Cannot update these configs dynamically: [log.dirs, num.partitions]")
        );
        assert_eq!(
            check(&[("authorizer.class.name", "x")], per_broker).as_deref(),
            Some("Cannot update these configs dynamically: [authorizer.class.name]")
        );
        assert_eq!(
            check(&[("ssl.keystore.location", "/x")], per_broker).as_deref(),
            Some("These security configs can be dynamically updated only per-listener using the listener prefix: [ssl.keystore.location]")
        );
        assert_eq!(
            check(&[("log.retention.ms", "abc")], per_broker).as_deref(),
            Some("Invalid value abc for configuration log.retention.ms: Not a number of type LONG")
        );
        assert_eq!(
            check(&[("sasl.kerberos.min.time.before.relogin", "58000")], default).as_deref(),
            Some("Cannot update these configs at default cluster level, broker id must be specified: [sasl.kerberos.min.time.before.relogin]")
        );
        assert_eq!(
            check(
                &[("sasl.kerberos.min.time.before.relogin", "58000")],
                per_broker
            ),
            None
        );
        assert_eq!(check(&[("compression.zstd.level", "6")], default), None);
        assert_eq!(
            check(&[("made.up.broker", "1")], per_broker).as_deref(),
            Some("Unknown broker config name: made.up.broker")
        );
        assert!(matches!(
            normalize_broker_update(&map(&[("sasl.enabled.mechanisms", "PLAIN")]), per_broker),
            Err(ConfigError::Unsupported { .. })
        ));
        assert!(matches!(
            normalize_broker_update(
                &map(&[("listener.name.ssl.ssl.client.auth", "required")]),
                per_broker
            ),
            Err(ConfigError::Unsupported { .. })
        ));
        assert_eq!(
            normalize_broker_update(
                &map(&[("listener.name.ssl.ssl.keystore.location", "/x")]),
                per_broker
            )
            .ok(),
            Some(map(&[("listener.name.ssl.ssl.keystore.location", "/x")]))
        );
        assert!(matches!(
            normalize_broker_update(
                &map(&[("listener.name.ssl.ssl.keystore.location", "/x")]),
                BrokerScope::ClusterDefault
            ),
            Err(ConfigError::PerBrokerOnly { .. })
        ));
    }

    #[test]
    fn broker_deletes_of_anything_unset_change_nothing() {
        let change = incremental_broker(
            &BTreeMap::new(),
            &ops(&[
                ("made.up", AlterOp::Delete),
                ("num.partitions", AlterOp::Delete),
            ]),
            BrokerScope::PerBroker,
        );
        assert_eq!(change.ok(), Some(ConfigChange::default()));
    }
}
