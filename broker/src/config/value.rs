//! Kafka's config types and validators, and the canonical text form of a value.
//!
//! Kafka (`ConfigDef.parseType`) trims every value, parses it as the key's type and
//! then runs the key's validator; DescribeConfigs prints the parsed value back with
//! `ConfigDef.convertToString`. [`normalize`] does the same in one step, so every
//! value stored in a [`super::BrokerConfig`] layer is already valid and canonical
//! (`" 1000 "` → `"1000"`, `"TRUE"` → `"true"`, `"delete , compact"` →
//! `"delete,compact"`). Pure functions, no state.

use super::error::ConfigError;

/// Kafka's `DescribeConfigsResponse.ConfigType` codes (KIP-569), as sent on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

impl ConfigType {
    /// The wire code of this type.
    pub fn code(self) -> i8 {
        self as i8
    }

    /// Kafka's name of the type, used in "Not a number of type LONG".
    pub fn kafka_name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Short => "SHORT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::List => "LIST",
            ConfigType::Class => "CLASS",
            ConfigType::Password => "PASSWORD",
        }
    }

    /// Kafka hides the values of PASSWORD keys (`KafkaConfig.maybeSensitive`).
    pub fn is_sensitive(self) -> bool {
        self == ConfigType::Password
    }
}

/// A key's validator, mirroring `ConfigDef.Range`, `ValidString`, `ValidList`.
#[derive(Clone, Copy, Debug)]
pub enum Validator {
    /// Anything of the right type.
    None,
    /// An integer at least this (`Range.atLeast`).
    AtLeast(i64),
    /// An integer in this closed range (`Range.between`).
    Between(i64, i64),
    /// A double in this closed range (`Range.between(0, 1)` for ratios).
    DoubleBetween(f64, f64),
    /// A string equal to one of these (`ValidString.in`, case-sensitive as in Kafka).
    OneOf(&'static [&'static str]),
    /// A list whose every item is one of these (`ValidList.in`); may be empty.
    EachOneOf(&'static [&'static str]),
    /// A string equal to one of these ignoring ASCII case (`CaseInsensitiveValidString`).
    OneOfIgnoreCase(&'static [&'static str]),
    /// A list of non-empty, distinct items (`ValidList.anyNonDuplicateValues`);
    /// `allow_empty`: whether the list itself may be empty.
    Items { allow_empty: bool },
    /// A Brook-specific check; the error string is the reason.
    Custom(fn(&str) -> Result<(), String>),
}

/// Parses `raw` as `ty`, checks `validator`, and returns the canonical text Kafka would
/// print for the value. Errors name the key and the value, like Kafka's `ConfigException`.
pub fn normalize(
    key: &str,
    ty: ConfigType,
    validator: Validator,
    raw: &str,
) -> Result<String, ConfigError> {
    let trimmed = raw.trim();
    let not_number = || {
        ConfigError::invalid(
            key,
            trimmed,
            format!("Not a number of type {}", ty.kafka_name()),
        )
    };
    let canonical = match ty {
        ConfigType::Boolean => {
            if trimmed.eq_ignore_ascii_case("true") {
                "true".to_owned()
            } else if trimmed.eq_ignore_ascii_case("false") {
                "false".to_owned()
            } else {
                return Err(ConfigError::invalid(
                    key,
                    trimmed,
                    "Expected value to be either true or false",
                ));
            }
        }
        ConfigType::Int => trimmed
            .parse::<i32>()
            .map_err(|_| not_number())?
            .to_string(),
        ConfigType::Short => trimmed
            .parse::<i16>()
            .map_err(|_| not_number())?
            .to_string(),
        ConfigType::Long => trimmed
            .parse::<i64>()
            .map_err(|_| not_number())?
            .to_string(),
        ConfigType::Double => {
            let v = trimmed.parse::<f64>().map_err(|_| not_number())?;
            if !v.is_finite() {
                return Err(not_number());
            }
            java_double(v)
        }
        ConfigType::List => split_list(trimmed).join(","),
        ConfigType::String | ConfigType::Class | ConfigType::Password => trimmed.to_owned(),
    };
    check(key, &canonical, validator)?;
    Ok(canonical)
}

/// Splits a Kafka LIST value: items separated by commas, each trimmed; `""` is empty.
pub fn split_list(value: &str) -> Vec<String> {
    let value = value.trim();
    if value.is_empty() {
        return Vec::new();
    }
    value
        .split(',')
        .map(|item| item.trim().to_owned())
        .collect()
}

/// Java's `Double.toString`: plain decimals from 10^-3 up to 10^7 (`0.5`, `1.0`, `0.25`),
/// computerized scientific notation outside (`1.0E7`, `1.7976931348623157E308`), always
/// with a digit after the point. Rust's shortest round-trip digits are Java's here.
fn java_double(v: f64) -> String {
    let magnitude = v.abs();
    if v == 0.0 || (1e-3..1e7).contains(&magnitude) {
        if v.fract() == 0.0 {
            format!("{v:.1}")
        } else {
            format!("{v}")
        }
    } else {
        let sci = format!("{v:e}");
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
        if mantissa.contains('.') {
            format!("{mantissa}E{exponent}")
        } else {
            format!("{mantissa}.0E{exponent}")
        }
    }
}

fn check(key: &str, value: &str, validator: Validator) -> Result<(), ConfigError> {
    match validator {
        Validator::None => Ok(()),
        Validator::AtLeast(min) => {
            let n = value
                .parse::<i64>()
                .map_err(|_| ConfigError::invalid(key, value, "Not a number"))?;
            if n < min {
                return Err(ConfigError::invalid(
                    key,
                    value,
                    format!("Value must be at least {min}"),
                ));
            }
            Ok(())
        }
        Validator::Between(min, max) => {
            let n = value
                .parse::<i64>()
                .map_err(|_| ConfigError::invalid(key, value, "Not a number"))?;
            if n < min {
                return Err(ConfigError::invalid(
                    key,
                    value,
                    format!("Value must be at least {min}"),
                ));
            }
            if n > max {
                return Err(ConfigError::invalid(
                    key,
                    value,
                    format!("Value must be no more than {max}"),
                ));
            }
            Ok(())
        }
        Validator::DoubleBetween(min, max) => {
            let n = value
                .parse::<f64>()
                .map_err(|_| ConfigError::invalid(key, value, "Not a number"))?;
            if n < min {
                return Err(ConfigError::invalid(
                    key,
                    value,
                    format!("Value must be at least {}", java_double(min)),
                ));
            }
            if n > max {
                return Err(ConfigError::invalid(
                    key,
                    value,
                    format!("Value must be no more than {}", java_double(max)),
                ));
            }
            Ok(())
        }
        Validator::OneOf(allowed) => {
            if allowed.contains(&value) {
                Ok(())
            } else {
                Err(ConfigError::invalid(
                    key,
                    value,
                    format!("String must be one of: {}", allowed.join(", ")),
                ))
            }
        }
        Validator::EachOneOf(allowed) => {
            let items = split_list(value);
            for item in &items {
                if !allowed.contains(&item.as_str()) {
                    return Err(ConfigError::invalid(
                        key,
                        value,
                        format!("String must be one of: {}", allowed.join(", ")),
                    ));
                }
            }
            // Kafka's ValidList rejects duplicates (KAFKA-13817 era, 4.x wording).
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    return Err(ConfigError::invalid(
                        key,
                        value,
                        format!("Configuration '{key}' values must not be duplicated."),
                    ));
                }
            }
            Ok(())
        }
        Validator::OneOfIgnoreCase(allowed) => {
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
                Ok(())
            } else {
                Err(ConfigError::invalid(
                    key,
                    value,
                    format!(
                        "String must be one of (case insensitive): {}",
                        allowed.join(", ")
                    ),
                ))
            }
        }
        Validator::Items { allow_empty } => {
            let items = split_list(value);
            let refuse = |why: String| Err(ConfigError::invalid(key, value, why));
            if items.is_empty() && !allow_empty {
                return refuse(format!(
                    "Configuration '{key}' must not be empty. Valid values include: any non-empty value"
                ));
            }
            if items.iter().any(String::is_empty) {
                return refuse(format!("Configuration '{key}' values must not be empty."));
            }
            if items
                .iter()
                .enumerate()
                .any(|(i, item)| items[..i].contains(item))
            {
                return refuse(format!(
                    "Configuration '{key}' values must not be duplicated."
                ));
            }
            Ok(())
        }
        Validator::Custom(f) => f(value).map_err(|reason| ConfigError::invalid(key, value, reason)),
    }
}

/// `compression.gzip.level`: Kafka's `GzipCompression.LEVEL_VALIDATOR`.
pub fn check_gzip_level(value: &str) -> Result<(), String> {
    match value.parse::<i32>() {
        Ok(-1 | 1..=9) => Ok(()),
        _ => Err("Value must be between 1 and 9 or equal to -1".to_owned()),
    }
}

/// Kafka's `ThrottledReplicaListValidator`: `*`, or `partition:broker` pairs.
fn check_throttled_replicas(key: &str, value: &str) -> Result<(), String> {
    let items = split_list(value);
    let pair = |item: &str| {
        item.is_empty()
            || item.split_once(':').is_some_and(|(p, b)| {
                [p, b]
                    .iter()
                    .all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
            })
    };
    if items.concat() == "*" || items.iter().all(|i| pair(i)) {
        Ok(())
    } else {
        Err(format!("{key} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."))
    }
}

/// `leader.replication.throttled.replicas`.
pub fn check_leader_throttled_replicas(value: &str) -> Result<(), String> {
    check_throttled_replicas("leader.replication.throttled.replicas", value)
}

/// `follower.replication.throttled.replicas`.
pub fn check_follower_throttled_replicas(value: &str) -> Result<(), String> {
    check_throttled_replicas("follower.replication.throttled.replicas", value)
}

/// Kafka's `ConfigDef.NonEmptyString`.
pub fn check_non_empty_string(value: &str) -> Result<(), String> {
    if value.is_empty() {
        Err("String must be non-empty".to_owned())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_trimmed_and_printed_canonically() {
        let v = normalize(
            "retention.ms",
            ConfigType::Long,
            Validator::AtLeast(-1),
            " +1000 ",
        );
        assert_eq!(v.ok().as_deref(), Some("1000"));
    }

    #[test]
    fn a_number_below_the_minimum_names_key_value_and_bound() {
        let err = normalize(
            "segment.bytes",
            ConfigType::Int,
            Validator::AtLeast(1_048_576),
            "14",
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "Invalid value 14 for configuration segment.bytes: Value must be at least 1048576"
            )
        );
    }

    #[test]
    fn a_non_number_is_refused_with_kafkas_wording() {
        let err = normalize(
            "num.partitions",
            ConfigType::Int,
            Validator::AtLeast(1),
            "many",
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Invalid value many for configuration num.partitions: Not a number of type INT")
        );
    }

    #[test]
    fn an_int_that_overflows_is_refused() {
        assert!(normalize("k", ConfigType::Int, Validator::None, "2147483648").is_err());
        assert!(normalize("k", ConfigType::Short, Validator::None, "40000").is_err());
    }

    #[test]
    fn booleans_ignore_case() {
        assert_eq!(
            normalize("k", ConfigType::Boolean, Validator::None, "TRUE")
                .ok()
                .as_deref(),
            Some("true")
        );
        assert!(normalize("k", ConfigType::Boolean, Validator::None, "yes").is_err());
    }

    #[test]
    fn doubles_print_like_java() {
        let r = Validator::DoubleBetween(0.0, 1.0);
        assert_eq!(
            normalize("k", ConfigType::Double, r, "1").ok().as_deref(),
            Some("1.0")
        );
        assert_eq!(
            normalize("k", ConfigType::Double, r, "0.25")
                .ok()
                .as_deref(),
            Some("0.25")
        );
        assert!(normalize("k", ConfigType::Double, r, "1.5").is_err());
    }

    #[test]
    fn lists_are_trimmed_items_and_checked_one_by_one() {
        let v = Validator::EachOneOf(&["compact", "delete"]);
        assert_eq!(
            normalize("k", ConfigType::List, v, " delete , compact ")
                .ok()
                .as_deref(),
            Some("delete,compact")
        );
        assert_eq!(
            normalize("k", ConfigType::List, v, "").ok().as_deref(),
            Some("")
        );
        assert!(normalize("k", ConfigType::List, v, "delete,remove").is_err());
        assert!(normalize("k", ConfigType::List, v, "delete,delete").is_err());
    }

    #[test]
    fn one_of_is_case_sensitive_like_kafka() {
        let v = Validator::OneOf(&["CreateTime", "LogAppendTime"]);
        assert!(normalize("k", ConfigType::String, v, "LogAppendTime").is_ok());
        assert!(normalize("k", ConfigType::String, v, "logappendtime").is_err());
    }

    #[test]
    fn doubles_outside_plain_range_print_in_javas_scientific_form() {
        let none = Validator::None;
        let print = |raw: &str| normalize("k", ConfigType::Double, none, raw).ok();
        assert_eq!(
            print("1.7976931348623157E308").as_deref(),
            Some("1.7976931348623157E308")
        );
        assert_eq!(print("1e7").as_deref(), Some("1.0E7"));
        assert_eq!(print("0.0001").as_deref(), Some("1.0E-4"));
        assert_eq!(print("0.05").as_deref(), Some("0.05"));
        assert_eq!(print("0").as_deref(), Some("0.0"));
    }

    #[test]
    fn case_insensitive_choices_keep_the_value_as_given() {
        let v = Validator::OneOfIgnoreCase(&["ES256", "RS256"]);
        assert_eq!(
            normalize("k", ConfigType::String, v, "rs256")
                .ok()
                .as_deref(),
            Some("rs256")
        );
        let err = normalize("k", ConfigType::String, v, "HS256")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Invalid value HS256 for configuration k: String must be one of (case insensitive): ES256, RS256")
        );
    }

    #[test]
    fn item_lists_refuse_blank_and_duplicate_items_and_maybe_emptiness() {
        let may_be_empty = Validator::Items { allow_empty: true };
        let not_empty = Validator::Items { allow_empty: false };
        assert!(normalize("k", ConfigType::List, may_be_empty, "").is_ok());
        assert!(normalize("k", ConfigType::List, not_empty, "").is_err());
        assert!(normalize("k", ConfigType::List, may_be_empty, "a,,b").is_err());
        assert!(normalize("k", ConfigType::List, may_be_empty, "a,a").is_err());
        assert_eq!(
            normalize("k", ConfigType::List, not_empty, " a , b ")
                .ok()
                .as_deref(),
            Some("a,b")
        );
    }

    #[test]
    fn kafkas_special_validators_accept_and_refuse_what_kafka_does() {
        assert!(check_gzip_level("-1").is_ok() && check_gzip_level("9").is_ok());
        assert!(check_gzip_level("0").is_err() && check_gzip_level("10").is_err());
        assert!(check_leader_throttled_replicas("*").is_ok());
        assert!(check_leader_throttled_replicas("0:1, 1:2").is_ok());
        assert!(check_leader_throttled_replicas("").is_ok());
        assert_eq!(
            check_follower_throttled_replicas("bogus"),
            Err("follower.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...".to_owned())
        );
        assert!(check_non_empty_string("").is_err());
    }

    #[test]
    fn config_type_codes_match_kafka() {
        assert_eq!(ConfigType::Boolean.code(), 1);
        assert_eq!(ConfigType::List.code(), 7);
        assert_eq!(ConfigType::Password.code(), 9);
    }
}
