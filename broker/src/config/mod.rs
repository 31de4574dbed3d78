//! Broker and topic configuration with Kafka's names, types, defaults, synonyms and
//! DescribeConfigs semantics, so that an operator's Kafka knowledge carries over.
//!
//! Layout: [`keys_table`] is THE table of the broker keys Brook implements and
//! [`keys_table_kafka`] that of Kafka 4.4's other broker keys, accepted without effect
//! ([`support`] says why; [`keys`] holds their types, lookups and synonym chains);
//! [`topic`] the topic keys; [`group`] the group keys (KIP-848 group configs); [`value`] types and validators; [`alter`] the
//! (Incremental)AlterConfigs rules; [`security`] the security settings refused until
//! Brook serves them; [`controller_sasl`] SASL on the controller listener; [`authorizer`] the ACL authorizer's settings;
//! [`properties`] + [`load`] read `server.properties`, `BROOK_*` env and
//! `--override`; [`broker`] builds the typed [`BrokerConfig`]; [`topic_config`] the typed
//! [`TopicConfig`]; [`describe`] answers DescribeConfigs. Everything but
//! [`BrokerConfig::load`]'s file read is pure. Below this module, code sees typed
//! structs, never key strings.

pub mod alter;
pub mod authorizer;
pub mod broker;
pub mod connections;
pub mod controller_sasl;
pub mod describe;
pub mod error;
pub mod group;
pub mod inter_broker;
pub mod jaas;
pub mod keys;
mod keys_table;
mod keys_table_kafka;
pub mod listener;
pub mod load;
pub mod properties;
pub mod roles;
pub mod sasl;
pub mod sasl_oauthbearer;
pub mod security;
pub mod support;
pub mod tls;
pub mod topic;
pub mod topic_config;
pub mod value;

#[cfg(test)]
mod tests;

pub use alter::{
    incremental_broker, incremental_group, incremental_topic, AlterOp, BrokerScope, ConfigChange,
};
pub use authorizer::AuthorizerSettings;
pub use broker::{normalize_broker_dynamic, validate_broker_dynamic, BrokerConfig, ProcessRole};
pub use describe::{
    describe_broker, describe_broker_defaults, describe_group, describe_topic, ConfigSource,
    DescribeOptions, DescribedConfig, DescribedSynonym,
};
pub use error::ConfigError;
pub use listener::{Listener, QuorumVoter};
pub use roles::{ClusterMode, QuorumRole};
pub use topic::{normalize_topic_overrides, validate_topic_overrides};
pub use topic_config::{CleanupPolicy, CompressionType, TimestampType, TopicConfig};
pub use value::ConfigType;
