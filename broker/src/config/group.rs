//! The group-level keys (KIP-848 group configs, Kafka's `GroupConfig`, ConfigResource type
//! GROUP) and the checks of a group's configs on IncrementalAlterConfigs / AlterConfigs.
//!
//! Facts from Apache Kafka 4.4 (`GroupConfig.CONFIG_DEF`, `ALL_GROUP_CONFIG_SYNONYMS`,
//! `GroupConfig.validate`, checked against a Kafka 4.4 broker): 27 keys, six of them
//! internal (accepted, described only when set). A key with a broker synonym defaults to
//! the broker's effective value of it (`consumer.session.timeout.ms` ←
//! `group.consumer.session.timeout.ms`); the others to Kafka's own default.
//!
//! Validation of the whole resulting set, in Kafka's order: names ("Unknown group config
//! name"), duplicate rack tags, then each value's type and `ConfigDef` validator in
//! definition order, then the broker-bounded ranges (`group.consumer.min.session.timeout.ms`
//! ..), the assignor name, session above heartbeat, the DLQ topic name. Every refusal is
//! Kafka's `InvalidConfigurationException` (INVALID_CONFIG) with Kafka's wording. Pure.

use std::collections::BTreeMap;

use super::error::ConfigError;
use super::value::{normalize, split_list, ConfigType as T, Validator as V};
use super::BrokerConfig;

/// One group configuration key.
#[derive(Clone, Copy, Debug)]
pub struct GroupKeyDef {
    pub name: &'static str,
    pub config_type: T,
    /// Kafka's `GroupConfig` default, as printed (`None`: Kafka's `null`); the broker
    /// synonym decides instead when there is one.
    pub default: Option<&'static str>,
    pub validator: V,
    /// The broker key this group key defaults from.
    pub broker_synonym: Option<&'static str>,
    /// Kafka's internal keys: settable, left out of DescribeConfigs unless set.
    pub internal: bool,
    pub doc: &'static str,
}

const fn g(
    name: &'static str,
    config_type: T,
    default: Option<&'static str>,
    validator: V,
    broker_synonym: Option<&'static str>,
    doc: &'static str,
) -> GroupKeyDef {
    GroupKeyDef {
        name,
        config_type,
        default,
        validator,
        broker_synonym,
        internal: false,
        doc,
    }
}

const fn internal(key: GroupKeyDef) -> GroupKeyDef {
    GroupKeyDef {
        internal: true,
        ..key
    }
}

/// Kafka's definition order, which is the order values are checked in.
#[rustfmt::skip]
static GROUP_KEYS: &[GroupKeyDef] = &[
    g("consumer.session.timeout.ms", T::Int, Some("45000"), V::AtLeast(1), Some("group.consumer.session.timeout.ms"),
      "The timeout to detect client failures when using the consumer group protocol."),
    g("consumer.heartbeat.interval.ms", T::Int, Some("5000"), V::AtLeast(1), Some("group.consumer.heartbeat.interval.ms"),
      "The heartbeat interval given to the members of a consumer group."),
    g("consumer.assignment.interval.ms", T::Int, Some("1000"), V::AtLeast(0), Some("group.consumer.assignment.interval.ms"),
      "The interval between assignment updates for a consumer group."),
    internal(g("consumer.assignor.offload.enable", T::Boolean, Some("true"), V::None, Some("group.consumer.assignor.offload.enable"),
      "Whether to offload consumer group assignment to a group coordinator background thread.")),
    g("share.session.timeout.ms", T::Int, Some("45000"), V::AtLeast(1), Some("group.share.session.timeout.ms"),
      "The timeout to detect client failures when using the share group protocol."),
    g("share.heartbeat.interval.ms", T::Int, Some("5000"), V::AtLeast(1), Some("group.share.heartbeat.interval.ms"),
      "The heartbeat interval given to the members of a share group."),
    g("share.record.lock.duration.ms", T::Int, Some("30000"), V::AtLeast(1000), Some("group.share.record.lock.duration.ms"),
      "The record acquisition lock duration in milliseconds for share groups."),
    g("share.delivery.count.limit", T::Int, Some("5"), V::AtLeast(2), Some("group.share.delivery.count.limit"),
      "The maximum number of delivery attempts for a record delivered to a share group."),
    g("share.partition.max.record.locks", T::Int, Some("2000"), V::AtLeast(100), Some("group.share.partition.max.record.locks"),
      "Share-group record lock limit per share-partition."),
    g("share.auto.offset.reset", T::String, Some("latest"), V::Custom(check_share_auto_offset_reset), None,
      "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the offset to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li><li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration from the current timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>"),
    g("share.isolation.level", T::String, Some("read_uncommitted"), V::OneOf(&["read_committed", "read_uncommitted"]), None,
      "Controls how to read records written transactionally. If set to \"read_committed\", the share group will only deliver transactional records which have been committed. If set to \"read_uncommitted\", the share group will return all messages, even transactional messages which have been aborted. Non-transactional records will be returned unconditionally in either mode."),
    g("share.renew.acknowledge.enable", T::Boolean, Some("true"), V::None, None,
      "Whether the renew acknowledge type is enabled for the share group."),
    g("share.assignment.interval.ms", T::Int, Some("1000"), V::AtLeast(0), Some("group.share.assignment.interval.ms"),
      "The interval between assignment updates for a share group."),
    internal(g("share.assignor.offload.enable", T::Boolean, Some("true"), V::None, Some("group.share.assignor.offload.enable"),
      "Whether to offload share group assignment to a group coordinator background thread.")),
    g("streams.session.timeout.ms", T::Int, Some("45000"), V::AtLeast(1), Some("group.streams.session.timeout.ms"),
      "The timeout to detect client failures when using the streams group protocol."),
    g("streams.heartbeat.interval.ms", T::Int, Some("5000"), V::AtLeast(1), Some("group.streams.heartbeat.interval.ms"),
      "The heartbeat interval given to the members."),
    g("streams.num.standby.replicas", T::Int, Some("0"), V::AtLeast(0), Some("group.streams.num.standby.replicas"),
      "The number of standby replicas for each task."),
    g("streams.initial.rebalance.delay.ms", T::Int, Some("3000"), V::AtLeast(0), Some("group.streams.initial.rebalance.delay.ms"),
      "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the first rebalance. A longer delay means potentially fewer rebalances."),
    g("streams.assignment.interval.ms", T::Int, Some("1000"), V::AtLeast(0), Some("group.streams.assignment.interval.ms"),
      "The interval between assignment updates for a streams group."),
    internal(g("streams.assignor.offload.enable", T::Boolean, Some("true"), V::None, Some("group.streams.assignor.offload.enable"),
      "Whether to offload streams group assignment to a group coordinator background thread.")),
    internal(g("streams.task.offset.interval.ms", T::Int, Some("60000"), V::AtLeast(1), Some("group.streams.task.offset.interval.ms"),
      "The interval in which the warmup task changelog offsets on a client are updated on the broker. The offsets are sent with the next heartbeat after this time has passed.")),
    internal(g("streams.num.warmup.replicas", T::Int, Some("2"), V::AtLeast(0), Some("group.streams.num.warmup.replicas"),
      "The maximum number of warmup task replicas.")),
    g("streams.rack.aware.assignment.tags", T::List, Some(""), V::Items { allow_empty: true }, Some("group.streams.rack.aware.assignment.tags"),
      "List of client tag keys used to distribute standby replicas across Kafka Streams instances. When configured, and the used broker-side assignor supports it, it will make a best-effort to distribute standby tasks over each client tag dimension."),
    internal(g("streams.acceptable.recovery.lag", T::Long, Some("10000"), V::AtLeast(0), Some("group.streams.acceptable.recovery.lag"),
      "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough to receive an active task assignment.")),
    g("streams.assignor.name", T::String, None, V::None, Some("group.streams.assignors"),
      "The task assignor to use for this streams group, selected by short name from the assignors registered via the broker configuration group.streams.assignors. When unset, the group defaults to the first assignor configured in the broker's group.streams.assignors setting. Changing the assignor does not trigger a rebalance for the group; the new assignor takes effect on the next rebalance."),
    g("errors.deadletterqueue.topic.name", T::String, Some(""), V::None, None,
      "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the default), the group does not have a DLQ topic."),
    g("errors.deadletterqueue.copy.record.enable", T::Boolean, Some("false"), V::None, None,
      "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or just write a record containing the context information headers."),
];

/// Every group key, in Kafka's definition order.
pub fn group_keys() -> &'static [GroupKeyDef] {
    GROUP_KEYS
}

/// The definition of a group key, if Kafka has it.
pub fn group_key(name: &str) -> Option<&'static GroupKeyDef> {
    GROUP_KEYS.iter().find(|k| k.name == name)
}

/// The value a group key takes when the group does not set it (Kafka's
/// `GroupCoordinatorConfig.extractGroupConfigMap`): the broker's effective value of its
/// synonym (the first of `group.streams.assignors` for `streams.assignor.name`), else
/// Kafka's default.
pub fn group_default(broker: &BrokerConfig, key: &GroupKeyDef) -> Option<String> {
    let Some(synonym) = key.broker_synonym else {
        return key.default.map(str::to_owned);
    };
    let value = broker.effective_value(synonym)?;
    if key.name == "streams.assignor.name" {
        return split_list(value).into_iter().next();
    }
    Some(value.to_owned())
}

/// A bound of [`normalize_group_configs`]'s range checks, named by the broker keys that
/// hold it (`GroupConfig.validateValues`).
enum Bound {
    Range(&'static str, &'static str),
    Max(&'static str),
    Min(&'static str),
}

/// `GroupConfig.validateValues`' range checks, in its order.
const BOUNDS: &[(&str, Bound)] = &[
    (
        "consumer.heartbeat.interval.ms",
        Bound::Range(
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
    ),
    (
        "consumer.session.timeout.ms",
        Bound::Range(
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
    ),
    (
        "consumer.assignment.interval.ms",
        Bound::Range(
            "group.consumer.min.assignment.interval.ms",
            "group.consumer.max.assignment.interval.ms",
        ),
    ),
    (
        "share.heartbeat.interval.ms",
        Bound::Range(
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
        ),
    ),
    (
        "share.session.timeout.ms",
        Bound::Range(
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
        ),
    ),
    (
        "share.record.lock.duration.ms",
        Bound::Range(
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
        ),
    ),
    (
        "share.delivery.count.limit",
        Bound::Range(
            "group.share.min.delivery.count.limit",
            "group.share.max.delivery.count.limit",
        ),
    ),
    (
        "share.partition.max.record.locks",
        Bound::Range(
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
        ),
    ),
    (
        "share.assignment.interval.ms",
        Bound::Range(
            "group.share.min.assignment.interval.ms",
            "group.share.max.assignment.interval.ms",
        ),
    ),
    (
        "streams.heartbeat.interval.ms",
        Bound::Range(
            "group.streams.min.heartbeat.interval.ms",
            "group.streams.max.heartbeat.interval.ms",
        ),
    ),
    (
        "streams.session.timeout.ms",
        Bound::Range(
            "group.streams.min.session.timeout.ms",
            "group.streams.max.session.timeout.ms",
        ),
    ),
    (
        "streams.num.standby.replicas",
        Bound::Max("group.streams.max.standby.replicas"),
    ),
    (
        "streams.assignment.interval.ms",
        Bound::Range(
            "group.streams.min.assignment.interval.ms",
            "group.streams.max.assignment.interval.ms",
        ),
    ),
    (
        "streams.task.offset.interval.ms",
        Bound::Min("group.streams.min.task.offset.interval.ms"),
    ),
    (
        "streams.num.warmup.replicas",
        Bound::Max("group.streams.max.warmup.replicas"),
    ),
];

/// (session key, its broker default, heartbeat key, its broker default) per group type.
const SESSION_ABOVE_HEARTBEAT: &[(&str, &str, &str, &str)] = &[
    (
        "consumer.session.timeout.ms",
        "group.consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "group.consumer.heartbeat.interval.ms",
    ),
    (
        "share.session.timeout.ms",
        "group.share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "group.share.heartbeat.interval.ms",
    ),
    (
        "streams.session.timeout.ms",
        "group.streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
        "group.streams.heartbeat.interval.ms",
    ),
];

/// Checks a group's whole config set (what it holds once an update is applied) as Kafka's
/// `GroupConfig.validate` does, against this broker's bounds; returns the canonical values.
pub fn normalize_group_configs(
    configs: &BTreeMap<String, String>,
    broker: &BrokerConfig,
) -> Result<BTreeMap<String, String>, ConfigError> {
    if let Some(name) = configs.keys().find(|name| group_key(name).is_none()) {
        return Err(ConfigError::UnknownGroupKey { key: name.clone() });
    }
    if let Some(tags) = configs.get("streams.rack.aware.assignment.tags") {
        check_distinct_rack_tags(tags)?;
    }
    let mut out = BTreeMap::new();
    for key in GROUP_KEYS {
        if let Some(value) = configs.get(key.name) {
            let canonical = normalize(key.name, key.config_type, key.validator, value)?;
            out.insert(key.name.to_owned(), canonical);
        }
    }
    let refuse = |key: &str, reason: String| ConfigError::InvalidGroupValue {
        key: key.to_owned(),
        reason,
    };
    let int = |name: &str| out.get(name).and_then(|v| v.parse::<i64>().ok());
    let broker_int = |name: &str| {
        broker
            .effective_value(name)
            .and_then(|v| v.parse::<i64>().ok())
    };
    for (name, bound) in BOUNDS {
        let Some(value) = int(name) else { continue };
        match *bound {
            Bound::Range(min, max) => {
                let (Some(min), Some(max)) = (broker_int(min), broker_int(max)) else {
                    continue;
                };
                if value < min || value > max {
                    return Err(refuse(
                        name,
                        format!("{name} must be in the range {min} to {max} inclusive."),
                    ));
                }
            }
            Bound::Max(max) => {
                if let Some(max) = broker_int(max).filter(|max| value > *max) {
                    return Err(refuse(
                        name,
                        format!("{name} must be less than or equal to {max}"),
                    ));
                }
            }
            Bound::Min(min) => {
                if let Some(min) = broker_int(min).filter(|min| value < *min) {
                    return Err(refuse(
                        name,
                        format!("{name} must be greater than or equal to {min}"),
                    ));
                }
            }
        }
    }
    if let Some(assignor) = out.get("streams.assignor.name") {
        let registered = split_list(
            broker
                .effective_value("group.streams.assignors")
                .unwrap_or(""),
        );
        if !registered.contains(assignor) {
            return Err(refuse(
                "streams.assignor.name",
                format!(
                    "streams.assignor.name '{assignor}' is not a registered task assignor. \
                     Registered assignors are: [{}].",
                    registered.join(", ")
                ),
            ));
        }
    }
    for (session, session_default, heartbeat, heartbeat_default) in SESSION_ABOVE_HEARTBEAT {
        if !out.contains_key(*session) && !out.contains_key(*heartbeat) {
            continue;
        }
        let session_ms = int(session).or_else(|| broker_int(session_default));
        let heartbeat_ms = int(heartbeat).or_else(|| broker_int(heartbeat_default));
        if let (Some(s), Some(h)) = (session_ms, heartbeat_ms) {
            if s <= h {
                return Err(refuse(
                    session,
                    format!("{session} must be greater than {heartbeat}"),
                ));
            }
        }
    }
    if out
        .get("errors.deadletterqueue.topic.name")
        .is_some_and(|name| name.starts_with("__"))
    {
        return Err(refuse(
            "errors.deadletterqueue.topic.name",
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'".to_owned(),
        ));
    }
    Ok(out)
}

/// `GroupConfig.validateNoDuplicateRackAwareAssignmentTags`, on the raw value before it is
/// parsed: items split at commas and the blanks around them.
fn check_distinct_rack_tags(raw: &str) -> Result<(), ConfigError> {
    if raw.trim().is_empty() {
        return Ok(());
    }
    let parts: Vec<&str> = raw.split(',').collect();
    let last = parts.len().saturating_sub(1);
    let items: Vec<&str> = parts
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let item = if i > 0 { item.trim_start() } else { item };
            if i < last {
                item.trim_end()
            } else {
                item
            }
        })
        .collect();
    let duplicated = items
        .iter()
        .enumerate()
        .any(|(i, item)| items[..i].contains(item));
    if duplicated {
        return Err(ConfigError::InvalidGroupValue {
            key: "streams.rack.aware.assignment.tags".to_owned(),
            reason: "streams.rack.aware.assignment.tags must not contain duplicate tag keys."
                .to_owned(),
        });
    }
    Ok(())
}

/// `ShareGroupAutoOffsetResetStrategy.Validator`: `earliest`, `latest` (any case) or
/// `by_duration:` and a non-negative ISO-8601 duration (`PnDTnHnMn.nS`).
fn check_share_auto_offset_reset(value: &str) -> Result<(), String> {
    let lower = value.to_ascii_lowercase();
    let valid = match lower.strip_prefix("by_duration:") {
        Some(duration) => is_iso_duration(duration),
        None => lower == "earliest" || lower == "latest",
    };
    if valid {
        Ok(())
    } else {
        Err(format!(
            "Invalid value `{value}` for configuration share.auto.offset.reset. The value must \
             be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
        ))
    }
}

/// A non-negative `java.time.Duration` text (lower case): `p[nd][t[nh][nm][n[.n]s]]`
/// with at least one part.
fn is_iso_duration(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('p') else {
        return false;
    };
    let (days, time) = match rest.split_once('t') {
        Some((days, time)) => (days, Some(time)),
        None => (rest, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let days_ok = days.is_empty() || days.strip_suffix('d').is_some_and(digits);
    let time_ok = match time {
        None => !days.is_empty(),
        Some(time) => {
            let mut rest = time;
            let mut parts = 0;
            for unit in ['h', 'm'] {
                if let Some((n, tail)) = rest.split_once(unit) {
                    if !digits(n) {
                        return false;
                    }
                    rest = tail;
                    parts += 1;
                }
            }
            if let Some(n) = rest.strip_suffix('s') {
                let (whole, fraction) = n.split_once('.').unwrap_or((n, "0"));
                if !digits(whole) || !digits(fraction) {
                    return false;
                }
                rest = "";
                parts += 1;
            }
            rest.is_empty() && parts > 0
        }
    };
    days_ok && time_ok
}

/// The consumer-group timeouts a group sets for itself (stored, canonical values); `None`
/// where it takes the broker's `group.consumer.*` value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerGroupOverrides {
    pub session_timeout_ms: Option<i32>,
    pub heartbeat_interval_ms: Option<i32>,
}

impl ConsumerGroupOverrides {
    pub fn from_stored(configs: &BTreeMap<String, String>) -> Self {
        let int = |name: &str| configs.get(name).and_then(|v| v.parse::<i32>().ok());
        ConsumerGroupOverrides {
            session_timeout_ms: int("consumer.session.timeout.ms"),
            heartbeat_interval_ms: int("consumer.heartbeat.interval.ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn broker(pairs: &[(&str, &str)]) -> BrokerConfig {
        let overrides: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        BrokerConfig::load(None, Vec::new(), &overrides)
            .expect("valid broker config")
            .0
    }

    fn refusal(configs: &[(&str, &str)]) -> String {
        normalize_group_configs(&map(configs), &broker(&[]))
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn kafka_describes_twenty_one_group_keys_and_hides_six_internal_ones() {
        assert_eq!(group_keys().len(), 27);
        assert_eq!(group_keys().iter().filter(|k| !k.internal).count(), 21);
        assert!(group_key("streams.num.warmup.replicas").is_some_and(|k| k.internal));
        assert!(group_key("group.consumer.session.timeout.ms").is_none());
    }

    #[test]
    fn unset_keys_default_to_the_broker_synonym_or_kafkas_default() {
        let b = broker(&[
            ("group.consumer.session.timeout.ms", "50000"),
            ("group.streams.assignors", "sticky,other"),
        ]);
        let default = |name| group_key(name).and_then(|k| group_default(&b, k));
        assert_eq!(
            default("consumer.session.timeout.ms").as_deref(),
            Some("50000")
        );
        assert_eq!(
            default("consumer.heartbeat.interval.ms").as_deref(),
            Some("5000")
        );
        assert_eq!(default("streams.assignor.name").as_deref(), Some("sticky"));
        assert_eq!(
            default("share.auto.offset.reset").as_deref(),
            Some("latest")
        );
        assert_eq!(
            default("errors.deadletterqueue.topic.name").as_deref(),
            Some("")
        );
    }

    #[test]
    fn valid_values_are_stored_canonical() {
        let out = normalize_group_configs(
            &map(&[
                ("consumer.session.timeout.ms", " 50000 "),
                ("share.renew.acknowledge.enable", "FALSE"),
                ("share.auto.offset.reset", "by_duration:PT1H30M"),
                ("streams.rack.aware.assignment.tags", "zone , rack"),
                ("streams.assignor.name", "sticky"),
            ]),
            &broker(&[]),
        )
        .expect("valid");
        assert_eq!(out["consumer.session.timeout.ms"], "50000");
        assert_eq!(out["share.renew.acknowledge.enable"], "false");
        assert_eq!(out["streams.rack.aware.assignment.tags"], "zone,rack");
    }

    #[test]
    fn unknown_names_and_unparsable_values_are_refused_with_kafkas_words() {
        assert_eq!(
            refusal(&[("no.such.config", "1")]),
            "Unknown group config name: no.such.config"
        );
        assert_eq!(
            refusal(&[("consumer.session.timeout.ms", "abc")]),
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"
        );
        assert_eq!(
            refusal(&[("share.record.lock.duration.ms", "999")]),
            "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"
        );
        assert_eq!(
            refusal(&[("share.auto.offset.reset", "none")]),
            "Invalid value none for configuration share.auto.offset.reset: Invalid value `none` for \
             configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or \
             of the format 'by_duration:<PnDTnHnMn.nS>'."
        );
        assert_eq!(
            refusal(&[("streams.rack.aware.assignment.tags", "zone, zone")]),
            "streams.rack.aware.assignment.tags must not contain duplicate tag keys."
        );
    }

    #[test]
    fn values_outside_the_brokers_bounds_are_refused() {
        assert_eq!(
            refusal(&[("consumer.session.timeout.ms", "1000")]),
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        );
        assert_eq!(
            refusal(&[("consumer.heartbeat.interval.ms", "50000")]),
            "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."
        );
        assert_eq!(
            refusal(&[("streams.num.standby.replicas", "3")]),
            "streams.num.standby.replicas must be less than or equal to 2"
        );
        assert_eq!(
            refusal(&[("streams.task.offset.interval.ms", "1000")]),
            "streams.task.offset.interval.ms must be greater than or equal to 15000"
        );
        assert_eq!(
            refusal(&[("streams.assignor.name", "nope")]),
            "streams.assignor.name 'nope' is not a registered task assignor. Registered assignors are: [sticky]."
        );
        assert_eq!(
            refusal(&[("errors.deadletterqueue.topic.name", "__dlq")]),
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
        );
        // The bounds are the broker's: a wider range admits more.
        let wide = broker(&[("group.consumer.min.session.timeout.ms", "1000")]);
        assert!(
            normalize_group_configs(&map(&[("consumer.session.timeout.ms", "6000")]), &wide)
                .is_ok()
        );
    }

    #[test]
    fn the_session_must_exceed_the_heartbeat_counting_the_brokers_defaults() {
        let b = broker(&[
            ("group.consumer.min.session.timeout.ms", "1000"),
            ("group.consumer.max.heartbeat.interval.ms", "60000"),
        ]);
        let check = |pairs: &[(&str, &str)]| {
            normalize_group_configs(&map(pairs), &b).map_err(|e| e.to_string())
        };
        let refused = Err(
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
                .to_owned(),
        );
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "5000")]).map(|_| ()),
            refused
        );
        assert_eq!(
            check(&[("consumer.heartbeat.interval.ms", "45000")]).map(|_| ()),
            refused
        );
        assert!(check(&[("consumer.heartbeat.interval.ms", "44999")]).is_ok());
    }

    #[test]
    fn iso_durations_follow_java_time_duration() {
        for ok in ["p1d", "pt1h", "pt0.5s", "p1dt2h3m4.5s", "pt15m"] {
            assert!(is_iso_duration(ok), "{ok}");
        }
        for bad in ["", "p", "pt", "1h", "-pt1h", "pt1x", "p1h", "pt1.s"] {
            assert!(!is_iso_duration(bad), "{bad}");
        }
    }

    #[test]
    fn a_group_is_described_as_kafka_4_4_describes_it() {
        use crate::config::describe::{describe_group, ConfigSource, DescribeOptions};
        let options = DescribeOptions {
            include_synonyms: true,
            include_documentation: false,
        };
        let b = broker(&[("group.consumer.heartbeat.interval.ms", "6000")]);
        let stored = map(&[
            ("consumer.session.timeout.ms", "50000"),
            ("streams.num.warmup.replicas", "3"),
        ]);
        let described = describe_group(&b, &stored, options);
        let names: Vec<&str> = described.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names.len(),
            22,
            "21 keys and the internal one set: {names:?}"
        );
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted by name");
        let find = |name: &str| {
            described
                .iter()
                .find(|c| c.name == name)
                .map(|c| {
                    let synonyms: Vec<String> = c
                        .synonyms
                        .iter()
                        .map(|s| {
                            format!(
                                "{:?}:{}={}",
                                s.source,
                                s.name,
                                s.value.as_deref().unwrap_or("null")
                            )
                        })
                        .collect();
                    (
                        c.value.clone().unwrap_or_default(),
                        c.source,
                        synonyms.join(", "),
                    )
                })
                .expect("described")
        };
        assert_eq!(
            find("consumer.session.timeout.ms"),
            (
                "50000".to_owned(),
                ConfigSource::GroupConfig,
                "GroupConfig:consumer.session.timeout.ms=50000, \
                 DefaultConfig:group.consumer.session.timeout.ms=45000"
                    .to_owned()
            )
        );
        assert_eq!(
            find("consumer.heartbeat.interval.ms"),
            (
                "6000".to_owned(),
                ConfigSource::StaticBrokerConfig,
                "StaticBrokerConfig:group.consumer.heartbeat.interval.ms=6000, \
                 DefaultConfig:group.consumer.heartbeat.interval.ms=5000"
                    .to_owned()
            )
        );
        assert_eq!(
            find("share.auto.offset.reset"),
            (
                "latest".to_owned(),
                ConfigSource::DefaultConfig,
                "DefaultConfig:share.auto.offset.reset=latest".to_owned()
            )
        );
        assert_eq!(
            find("streams.assignor.name"),
            (
                "sticky".to_owned(),
                ConfigSource::DefaultConfig,
                "DefaultConfig:group.streams.assignors=sticky".to_owned()
            )
        );
        assert_eq!(
            find("streams.num.warmup.replicas").1,
            ConfigSource::GroupConfig
        );
        let entry = described
            .iter()
            .find(|c| c.name == "errors.deadletterqueue.topic.name")
            .expect("described");
        assert_eq!(
            (entry.value.as_deref(), entry.read_only, entry.is_sensitive),
            (Some(""), false, false)
        );
    }

    #[test]
    fn a_groups_consumer_timeouts_are_read_from_its_stored_configs() {
        let stored = map(&[("consumer.session.timeout.ms", "50000")]);
        assert_eq!(
            ConsumerGroupOverrides::from_stored(&stored),
            ConsumerGroupOverrides {
                session_timeout_ms: Some(50000),
                heartbeat_interval_ms: None,
            }
        );
    }
}
