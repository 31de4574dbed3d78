//! `ConfigError`: every way a configuration key or value can be refused.
//!
//! Messages follow Apache Kafka's wording (`ConfigException`,
//! `InvalidConfigurationException`) so that operators and client tools see the text they
//! know. The broker maps `UnknownKey`/`InvalidValue` on CreateTopics, AlterConfigs and
//! IncrementalAlterConfigs to `INVALID_CONFIG`, `ReadOnly` to `INVALID_REQUEST`, and
//! refuses to start on any error while loading.

use std::path::PathBuf;

/// A configuration key or value that was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The value does not parse as the key's type or fails its validator.
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidValue {
        key: String,
        value: String,
        reason: String,
    },
    /// A topic config name Kafka does not know (Kafka's `LogConfig.validateNames`).
    #[error("Unknown topic config name: {key}")]
    UnknownTopicKey { key: String },
    /// A broker config name Brook does not know, in a dynamic update.
    #[error("Unknown broker config name: {key}")]
    UnknownBrokerKey { key: String },
    /// A key that cannot be changed while the broker runs.
    #[error("Cannot update these configs dynamically: {key}")]
    ReadOnly { key: String },
    /// A required key (no default) was not set.
    #[error("Missing required configuration \"{key}\" which has no default value.")]
    Missing { key: String },
    /// Keys that are valid alone but contradict each other (roles, voters, listeners).
    #[error("Invalid configuration ({keys}): {reason}")]
    Contradiction { keys: String, reason: String },
    /// A `--override` argument without `=`.
    #[error("invalid --override '{arg}': expected key=value")]
    BadOverride { arg: String },
    /// The properties file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ConfigError {
    /// Shorthand for [`ConfigError::InvalidValue`].
    pub fn invalid(key: &str, value: &str, reason: impl Into<String>) -> Self {
        ConfigError::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        }
    }

    /// The key this error is about, when there is one (for per-resource error messages).
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::InvalidValue { key, .. }
            | ConfigError::UnknownTopicKey { key }
            | ConfigError::UnknownBrokerKey { key }
            | ConfigError::ReadOnly { key }
            | ConfigError::Missing { key } => Some(key),
            ConfigError::Contradiction { keys, .. } => Some(keys),
            ConfigError::BadOverride { .. } | ConfigError::Io { .. } => None,
        }
    }
}
