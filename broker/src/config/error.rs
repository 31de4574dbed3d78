//! `ConfigError`: every way a configuration key or value can be refused.
//!
//! Messages follow Apache Kafka's wording (`ConfigException`,
//! `InvalidConfigurationException`) so that operators and client tools see the text they
//! know. `crate::error` maps them to Kafka's codes: what Kafka's broker-side dynamic
//! config checks refuse (`ReadOnly`, `PerBrokerOnly`, `PerListenerOnly`,
//! `InvalidBrokerValue`) to `INVALID_REQUEST`, everything else to `INVALID_CONFIG`. The
//! node refuses to start on any error while loading.

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
    /// A group config name Kafka does not know (Kafka's `GroupConfig.validateNames`).
    #[error("Unknown group config name: {key}")]
    UnknownGroupKey { key: String },
    /// A group config value outside what Kafka's `GroupConfig.validate` admits; the
    /// reason is Kafka's whole message.
    #[error("{reason}")]
    InvalidGroupValue { key: String, reason: String },
    /// A broker config name Brook does not know, in a dynamic update.
    #[error("Unknown broker config name: {key}")]
    UnknownBrokerKey { key: String },
    /// Keys that cannot be changed while the broker runs (Kafka lists them: `[a, b]`).
    #[error("Cannot update these configs dynamically: [{key}]")]
    ReadOnly { key: String },
    /// Per-broker keys sent for the cluster-default broker resource.
    #[error("Cannot update these configs at default cluster level, broker id must be specified: [{key}]")]
    PerBrokerOnly { key: String },
    /// Keystore / truststore keys sent without a `listener.name.<listener>.` prefix.
    #[error("These security configs can be dynamically updated only per-listener using the listener prefix: [{key}]")]
    PerListenerOnly { key: String },
    /// A dynamic broker value that does not parse or validate (Kafka answers these with
    /// `INVALID_REQUEST`, topic values with `INVALID_CONFIG`).
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidBrokerValue {
        key: String,
        value: String,
        reason: String,
    },
    /// APPEND / SUBTRACT on an unknown or non-list key (Kafka words it per resource type).
    #[error("{message}")]
    BadListOperation { key: String, message: String },
    /// Something Brook does not support (yet), refused rather than silently ignored; the
    /// reason is the whole message.
    #[error("{reason}")]
    Unsupported { key: String, reason: String },
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
            | ConfigError::UnknownGroupKey { key }
            | ConfigError::InvalidGroupValue { key, .. }
            | ConfigError::UnknownBrokerKey { key }
            | ConfigError::ReadOnly { key }
            | ConfigError::PerBrokerOnly { key }
            | ConfigError::PerListenerOnly { key }
            | ConfigError::InvalidBrokerValue { key, .. }
            | ConfigError::BadListOperation { key, .. }
            | ConfigError::Unsupported { key, .. }
            | ConfigError::Missing { key } => Some(key),
            ConfigError::Contradiction { keys, .. } => Some(keys),
            ConfigError::BadOverride { .. } | ConfigError::Io { .. } => None,
        }
    }
}
