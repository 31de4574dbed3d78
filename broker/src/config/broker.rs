//! `BrokerConfig`: the typed broker configuration, built from layered key/value maps.
//!
//! Layers, highest first, as in Kafka's `DynamicBrokerConfig`: per-broker dynamic
//! (`--entity-name <id>`), cluster-default dynamic (`--entity-default`), static (file,
//! env and `--override`, already merged by [`super::load`]), then the table's default.
//! Every value in a layer is canonical and valid for its key (see
//! [`super::value::normalize`]), so typed getters here only fail on cross-key rules.
//! Limits that Kafka spells `-1` or `Long.MAX_VALUE` are `None` here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use super::alter::{normalize_broker_update, BrokerScope};
use super::authorizer::AuthorizerSettings;
use super::error::ConfigError;
use super::inter_broker::InterBrokerClient;
use super::keys::broker_key;
use super::listener::{
    parse_listeners, parse_metrics_listener, parse_protocol_map, parse_quorum_voters,
};
use super::listener::{Listener, QuorumVoter};
use super::sasl::SaslSettings;
use super::tls::ListenerTls;
use super::topic_config::TopicConfig;
use super::value::split_list;

/// Where a broker value came from; see [`super::describe::ConfigSource`] for the wire ids.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Layers {
    pub(crate) per_broker: BTreeMap<String, String>,
    pub(crate) cluster_default: BTreeMap<String, String>,
    pub(crate) static_props: BTreeMap<String, String>,
}

#[cfg(test)]
impl Layers {
    /// Layers holding only these static properties (config unit tests).
    pub(crate) fn from_static(pairs: &[(&str, &str)]) -> Layers {
        Layers {
            static_props: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Layers::default()
        }
    }
}

/// What this process does (`process.roles`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessRole {
    Broker,
    Controller,
}

/// The broker's configuration, typed. Built by [`BrokerConfig::load`] and
/// [`BrokerConfig::with_dynamic`]; never constructed field by field outside tests.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub process_roles: Vec<ProcessRole>,
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    /// Listener name → security protocol (`PLAINTEXT`, `SASL_PLAINTEXT`, …).
    pub listener_security_protocol_map: BTreeMap<String, String>,
    pub controller_listener_names: Vec<String>,
    /// The TLS settings of each client listener whose protocol is SSL, by listener name.
    pub listener_tls: BTreeMap<String, ListenerTls>,
    pub controller_quorum_voters: Vec<QuorumVoter>,
    /// `controller.quorum.bootstrap.servers` as `host:port` strings.
    pub controller_quorum_bootstrap_servers: Vec<String>,
    pub controller_quorum_election_timeout_ms: u64,
    pub controller_quorum_fetch_timeout_ms: u64,
    /// `metadata.log.max.record.bytes.between.snapshots`: how much applied metadata makes a
    /// node snapshot its image.
    pub metadata_log_max_record_bytes_between_snapshots: u64,
    pub broker_rack: Option<String>,
    pub broker_session_timeout_ms: u64,
    pub broker_heartbeat_interval_ms: u64,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms`: a follower's long-poll wait at the leader.
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.max.bytes`: a follower fetch's bytes per partition.
    pub replica_fetch_max_bytes: i32,
    /// `auto.leader.rebalance.enable`: the controller moves leadership back to preferred
    /// replicas every `leader.imbalance.check.interval.seconds`.
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval_seconds: u64,
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub socket_request_max_bytes: usize,
    /// The request memory pool's size (`queued.max.request.bytes`; Brook's bound for -1:
    /// [`super::connections::request_pool_bytes`]).
    pub queued_max_request_bytes: u64,
    /// `max.connections`, `max.connections.per.ip` (+ overrides), `connections.max.idle.ms`.
    pub connection_limits: super::connections::ConnectionLimits,
    /// `socket.send.buffer.bytes` / `socket.receive.buffer.bytes` of the client listeners'
    /// sockets; `None` keeps the OS default (-1).
    pub socket_send_buffer_bytes: Option<usize>,
    pub socket_receive_buffer_bytes: Option<usize>,
    pub message_max_bytes: u32,
    pub log_retention_check_interval_ms: u64,
    /// `log.cleaner.enable`: run the compaction task.
    pub log_cleaner_enable: bool,
    /// `brook.fetch.zero.copy`: fetched record sets sent with `sendfile`.
    pub fetch_zero_copy: bool,
    /// `brook.log.open.files.max`: the log file pool's size; `None` derives it from the
    /// open files limit (storage's `file_pool`).
    pub log_open_files_max: Option<usize>,
    /// `log.cleaner.backoff.ms`: the cleaner's sleep when no log needs cleaning.
    pub log_cleaner_backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: the cleaner's key-map budget in bytes.
    pub log_cleaner_dedupe_buffer_size: u64,
    pub num_network_threads: usize,
    pub num_io_threads: usize,
    pub group_initial_rebalance_delay_ms: u64,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    /// `group.consumer.session.timeout.ms` (KIP-848 consumer groups).
    pub group_consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`.
    pub group_consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.assignors` (Brook serves `uniform` and `range`).
    pub group_consumer_assignors: Vec<String>,
    /// `group.consumer.migration.policy` (KIP-848 online migration).
    pub group_consumer_migration_policy: crate::coordinator::consumer_group::MigrationPolicy,
    /// `group.consumer.max.size` (checked when a classic group is upgraded).
    pub group_consumer_max_size: i32,
    /// `group.max.size` (checked when a consumer group is downgraded).
    pub group_max_size: i32,
    /// `consumer` is in `group.coordinator.rebalance.protocols`: ConsumerGroupHeartbeat and
    /// ConsumerGroupDescribe are advertised and served (KIP-848).
    pub group_consumer_protocol_enabled: bool,
    /// `offsets.retention.minutes` in milliseconds.
    /// `offsets.retention.minutes` in ms, or `brook.offsets.retention.ms` when set.
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
    pub offsets_topic_segment_bytes: i32,
    pub offsets_topic_num_partitions: i32,
    pub offsets_topic_replication_factor: i16,
    pub transaction_state_log_num_partitions: i32,
    pub transaction_state_log_replication_factor: i16,
    pub transaction_state_log_min_isr: i32,
    pub transaction_state_log_segment_bytes: i32,
    /// `transaction.max.timeout.ms`: InitProducerId refuses a longer `transaction.timeout.ms`.
    pub transaction_max_timeout_ms: i32,
    /// `brook.transaction.version`: the `transaction.version` feature level ApiVersions
    /// advertises as finalized (2: Transactions V2).
    pub transaction_version: i16,
    /// `transactional.id.expiration.ms`: an idle transactional id is forgotten after this.
    pub transactional_id_expiration_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub transaction_abort_timed_out_interval_ms: i32,
    /// `add.partitions.to.txn.retry.backoff.ms` / `.max.ms`: a leader's retries of a
    /// Transactions V2 add-partition answered CONCURRENT_TRANSACTIONS.
    pub add_partitions_to_txn_retry_backoff_ms: i32,
    pub add_partitions_to_txn_retry_backoff_max_ms: i32,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub transaction_remove_expired_interval_ms: i32,
    /// The Prometheus endpoint; `None` when `metrics.listener` is empty.
    pub metrics_listener: Option<SocketAddr>,
    pub cluster_id: Option<String>,
    /// What a topic without overrides gets (the `log.*` keys, resolved).
    pub topic_defaults: TopicConfig,
    /// The SASL listeners' mechanisms and users.
    pub sasl: SaslSettings,
    /// The ACL authorizer (`authorizer.class.name`), `None` when none is configured.
    pub authorizer: Option<AuthorizerSettings>,
    /// How this broker reaches its peers; `None` where it has none (a lone node).
    pub inter_broker: Option<InterBrokerClient>,
    /// SASL on the controller listener; `None` when it is PLAINTEXT or SSL.
    pub controller_sasl: Option<super::controller_sasl::ControllerSasl>,
    pub(crate) layers: Layers,
}

impl BrokerConfig {
    /// The advertised listener other brokers reach this one on (and that its registration
    /// names first): `inter.broker.listener.name`, else the listener named after
    /// `security.inter.broker.protocol` (Kafka's default), else the first client listener.
    pub fn inter_broker_listener(&self) -> Option<&Listener> {
        let client = || {
            self.advertised_listeners
                .iter()
                .filter(|l| !self.is_controller_listener(&l.name))
        };
        let named = self
            .effective_value("inter.broker.listener.name")
            .or_else(|| self.effective_value("security.inter.broker.protocol"))
            .map(str::to_ascii_uppercase);
        named
            .and_then(|name| client().find(|l| l.name == name))
            .or_else(|| client().next())
    }

    /// The effective text of a broker key: per-broker dynamic > cluster default >
    /// static > the table's default. `None` for unknown keys and `null` defaults.
    pub fn effective_value(&self, name: &str) -> Option<&str> {
        self.layers.effective(name)
    }

    /// The static layer (file, env, overrides) as loaded, canonical values.
    pub fn static_config(&self) -> &BTreeMap<String, String> {
        &self.layers.static_props
    }

    /// The same broker with new dynamic layers (from the metadata image). Entries that
    /// are unknown, read-only or invalid are skipped, as Kafka skips them when it
    /// reloads dynamic configs; they were refused when proposed anyway.
    pub fn with_dynamic(
        &self,
        cluster_default: &BTreeMap<String, String>,
        per_broker: &BTreeMap<String, String>,
    ) -> BrokerConfig {
        let keep = |map: &BTreeMap<String, String>| -> BTreeMap<String, String> {
            map.iter()
                .filter_map(|(k, v)| normalize_broker_dynamic(k, v).ok().map(|v| (k.clone(), v)))
                .collect()
        };
        let layers = Layers {
            per_broker: keep(per_broker),
            cluster_default: keep(cluster_default),
            static_props: self.layers.static_props.clone(),
        };
        // Only dynamic log/limit keys can differ from a config that built before, and
        // each is valid alone; should a cross-key rule still fail, keep the old config.
        BrokerConfig::build(layers).unwrap_or_else(|_| self.clone())
    }

    /// Builds the typed config from validated layers.
    pub(crate) fn build(layers: Layers) -> Result<BrokerConfig, ConfigError> {
        let g = Getter { layers: &layers };
        let protocol_map = parse_protocol_map(g.text("listener.security.protocol.map"))
            .map_err(|r| g.invalid("listener.security.protocol.map", r))?;
        let listeners =
            parse_listeners(g.text("listeners")).map_err(|r| g.invalid("listeners", r))?;
        for listener in &listeners {
            if !protocol_map.contains_key(&listener.name) {
                let reason = format!(
                    "No security protocol defined for listener {}",
                    listener.name
                );
                return Err(g.invalid("listeners", reason));
            }
        }
        let controller_listener_names: Vec<String> =
            split_list(g.text("controller.listener.names"))
                .iter()
                .map(|n| n.to_ascii_uppercase())
                .collect();
        let advertised_listeners = match g.opt("advertised.listeners") {
            Some(text) => {
                parse_listeners(text).map_err(|r| g.invalid("advertised.listeners", r))?
            }
            // Kafka advertises every non-controller listener when this is unset.
            None => listeners
                .iter()
                .filter(|l| !controller_listener_names.contains(&l.name))
                .map(Listener::advertised)
                .collect(),
        };
        let mut listener_tls = BTreeMap::new();
        for listener in &listeners {
            let Some(protocol) = protocol_map.get(&listener.name) else {
                continue;
            };
            let tls = protocol == "SSL" || protocol == "SASL_SSL";
            if tls && !controller_listener_names.contains(&listener.name) {
                let resolved = ListenerTls::resolve(&layers, &listener.name, protocol)?;
                listener_tls.insert(listener.name.clone(), resolved);
            }
        }
        let log_dirs: Vec<PathBuf> = split_list(g.opt("log.dirs").unwrap_or(g.text("log.dir")))
            .into_iter()
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect();
        if log_dirs.is_empty() {
            return Err(g.invalid(
                "log.dirs",
                "At least one log directory must be defined via log.dirs or log.dir.",
            ));
        }
        let mut process_roles: Vec<ProcessRole> = split_list(g.text("process.roles"))
            .iter()
            .map(|r| {
                if r == "controller" {
                    ProcessRole::Controller
                } else {
                    ProcessRole::Broker
                }
            })
            .collect();
        process_roles.dedup();
        let connection_limits = connection_limits(&g, &listeners)?;
        let mut config = BrokerConfig {
            node_id: g.int("node.id")?,
            process_roles,
            listeners,
            advertised_listeners,
            listener_security_protocol_map: protocol_map,
            controller_listener_names,
            listener_tls,
            controller_quorum_voters: parse_quorum_voters(g.text("controller.quorum.voters"))
                .map_err(|r| g.invalid("controller.quorum.voters", r))?,
            controller_quorum_bootstrap_servers: split_list(
                g.text("controller.quorum.bootstrap.servers"),
            )
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect(),
            controller_quorum_election_timeout_ms: g
                .narrow("controller.quorum.election.timeout.ms")?,
            controller_quorum_fetch_timeout_ms: g.narrow("controller.quorum.fetch.timeout.ms")?,
            metadata_log_max_record_bytes_between_snapshots: g
                .narrow("metadata.log.max.record.bytes.between.snapshots")?,
            broker_rack: g
                .opt("broker.rack")
                .filter(|r| !r.is_empty())
                .map(str::to_owned),
            broker_session_timeout_ms: g.narrow("broker.session.timeout.ms")?,
            broker_heartbeat_interval_ms: g.narrow("broker.heartbeat.interval.ms")?,
            replica_lag_time_max_ms: g.narrow("replica.lag.time.max.ms")?,
            replica_fetch_wait_max_ms: g.int("replica.fetch.wait.max.ms")?,
            replica_fetch_max_bytes: g.int("replica.fetch.max.bytes")?,
            auto_leader_rebalance_enable: g.text("auto.leader.rebalance.enable") == "true",
            leader_imbalance_check_interval_seconds: g
                .narrow("leader.imbalance.check.interval.seconds")?,
            log_dirs,
            num_partitions: g.int("num.partitions")?,
            default_replication_factor: g.narrow("default.replication.factor")?,
            auto_create_topics_enable: g.text("auto.create.topics.enable") == "true",
            delete_topic_enable: g.text("delete.topic.enable") == "true",
            socket_request_max_bytes: g.narrow("socket.request.max.bytes")?,
            queued_max_request_bytes: super::connections::request_pool_bytes(
                g.narrow("queued.max.request.bytes")?,
                g.narrow("socket.request.max.bytes")?,
            )
            .map_err(|why| g.invalid("queued.max.request.bytes", why))?,
            connection_limits,
            socket_send_buffer_bytes: g.socket_buffer("socket.send.buffer.bytes")?,
            socket_receive_buffer_bytes: g.socket_buffer("socket.receive.buffer.bytes")?,
            message_max_bytes: g.narrow("message.max.bytes")?,
            log_retention_check_interval_ms: g.narrow("log.retention.check.interval.ms")?,
            log_cleaner_enable: g.text("log.cleaner.enable") == "true",
            fetch_zero_copy: g.text("brook.fetch.zero.copy") == "true",
            log_open_files_max: match g.opt("brook.log.open.files.max") {
                Some(_) => Some(g.narrow("brook.log.open.files.max")?),
                None => None,
            },
            log_cleaner_backoff_ms: g.narrow("log.cleaner.backoff.ms")?,
            log_cleaner_dedupe_buffer_size: g.narrow("log.cleaner.dedupe.buffer.size")?,
            num_network_threads: g.narrow("num.network.threads")?,
            num_io_threads: g.narrow("num.io.threads")?,
            group_initial_rebalance_delay_ms: g.narrow("group.initial.rebalance.delay.ms")?,
            group_min_session_timeout_ms: g.int("group.min.session.timeout.ms")?,
            group_max_session_timeout_ms: g.int("group.max.session.timeout.ms")?,
            group_consumer_session_timeout_ms: g.int("group.consumer.session.timeout.ms")?,
            group_consumer_heartbeat_interval_ms: g.int("group.consumer.heartbeat.interval.ms")?,
            group_consumer_max_size: g.int("group.consumer.max.size")?,
            group_max_size: g.int("group.max.size")?,
            group_consumer_protocol_enabled: g
                .text("group.coordinator.rebalance.protocols")
                .split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("consumer")),
            // Validated (case-insensitively) by the key table; the default if unreadable.
            group_consumer_migration_policy:
                crate::coordinator::consumer_group::MigrationPolicy::parse(
                    g.text("group.consumer.migration.policy"),
                )
                .unwrap_or_default(),
            group_consumer_assignors: g
                .text("group.consumer.assignors")
                .split(',')
                .map(|a| a.trim().to_owned())
                .filter(|a| !a.is_empty())
                .collect(),
            offsets_retention_ms: match g.opt("brook.offsets.retention.ms") {
                Some(_) => g.narrow("brook.offsets.retention.ms")?,
                None => i64::from(g.int("offsets.retention.minutes")?) * 60_000,
            },
            offsets_retention_check_interval_ms: g.narrow("offsets.retention.check.interval.ms")?,
            offsets_topic_segment_bytes: g.int("offsets.topic.segment.bytes")?,
            offsets_topic_num_partitions: g.int("offsets.topic.num.partitions")?,
            offsets_topic_replication_factor: g.narrow("offsets.topic.replication.factor")?,
            transaction_state_log_num_partitions: g.int("transaction.state.log.num.partitions")?,
            transaction_state_log_replication_factor: g
                .narrow("transaction.state.log.replication.factor")?,
            transaction_state_log_min_isr: g.int("transaction.state.log.min.isr")?,
            transaction_state_log_segment_bytes: g.int("transaction.state.log.segment.bytes")?,
            transaction_max_timeout_ms: g.int("transaction.max.timeout.ms")?,
            transaction_version: i16::try_from(g.int("brook.transaction.version")?).unwrap_or(0),
            transactional_id_expiration_ms: g.int("transactional.id.expiration.ms")?,
            add_partitions_to_txn_retry_backoff_ms: g
                .int("add.partitions.to.txn.retry.backoff.ms")?,
            add_partitions_to_txn_retry_backoff_max_ms: g
                .int("add.partitions.to.txn.retry.backoff.max.ms")?,
            transaction_abort_timed_out_interval_ms: g
                .int("transaction.abort.timed.out.transaction.cleanup.interval.ms")?,
            transaction_remove_expired_interval_ms: g
                .int("transaction.remove.expired.transaction.cleanup.interval.ms")?,
            metrics_listener: parse_metrics_listener(g.text("metrics.listener"))
                .map_err(|r| g.invalid("metrics.listener", r))?,
            cluster_id: g
                .opt("cluster.id")
                .filter(|id| !id.is_empty())
                .map(str::to_owned),
            topic_defaults: TopicConfig::default(),
            sasl: SaslSettings::default(),
            authorizer: None,
            inter_broker: None,
            controller_sasl: None,
            layers: layers.clone(),
        };
        // Kafka's KafkaConfig: broker.id is node.id's synonym (filled from it at load).
        if let Some(broker_id) = g.opt("broker.id").filter(|id| *id != "-1") {
            if broker_id != config.node_id.to_string() {
                return Err(ConfigError::Contradiction {
                    keys: "broker.id, node.id".to_owned(),
                    reason: "You must set `node.id` to the same value as `broker.id`.".to_owned(),
                });
            }
        }
        config.topic_defaults = TopicConfig::resolve(&config, &BTreeMap::new())?;
        super::roles::check(&config)?;
        config.sasl = super::sasl::resolve(
            &config.listeners,
            &config.listener_security_protocol_map,
            &layers,
        )?;
        config.controller_sasl = super::controller_sasl::resolve(&config, &layers)?;
        config.authorizer = super::authorizer::resolve(&layers)?;
        config.inter_broker = super::inter_broker::resolve(&config, &layers)?;
        Ok(config)
    }
}

impl Layers {
    pub(crate) fn effective(&self, name: &str) -> Option<&str> {
        [&self.per_broker, &self.cluster_default, &self.static_props]
            .into_iter()
            .find_map(|layer| layer.get(name).map(String::as_str))
            .or_else(|| broker_key(name).and_then(|k| k.default))
    }
}

/// The socket limits, with `max.connection.creation.rate` broker-wide and per listener
/// (`listener.name.<listener>.max.connection.creation.rate`, read at start).
fn connection_limits(
    g: &Getter<'_>,
    listeners: &[Listener],
) -> Result<super::connections::ConnectionLimits, ConfigError> {
    use super::connections::{creation_rate, ConnectionLimits};
    let mut limits = ConnectionLimits::parse(
        g.narrow("max.connections")?,
        g.narrow("max.connections.per.ip")?,
        g.text("max.connections.per.ip.overrides"),
        g.narrow("connections.max.idle.ms")?,
    )
    .map_err(|(key, why)| g.invalid(key, why))?;
    limits.max_connection_creation_rate = creation_rate(g.narrow("max.connection.creation.rate")?);
    for listener in listeners {
        let key = format!(
            "listener.name.{}.max.connection.creation.rate",
            listener.name.to_ascii_lowercase()
        );
        let Some(text) = g.opt(&key) else { continue };
        let rate: i64 = text
            .parse()
            .ok()
            .filter(|r| *r >= 0)
            .ok_or_else(|| ConfigError::invalid(&key, text, "Value must be at least 0"))?;
        if let Some(rate) = creation_rate(rate) {
            limits
                .listener_creation_rates
                .insert(listener.name.clone(), rate);
        }
    }
    Ok(limits)
}

/// Typed reads of effective values; errors name the key and its value.
struct Getter<'a> {
    layers: &'a Layers,
}

impl Getter<'_> {
    fn opt(&self, name: &str) -> Option<&str> {
        self.layers.effective(name)
    }

    /// A key the table gives a default, so it always has a value.
    fn text(&self, name: &str) -> &str {
        self.opt(name).unwrap_or("")
    }

    fn invalid(&self, name: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::invalid(name, self.text(name), reason)
    }

    fn int(&self, name: &str) -> Result<i32, ConfigError> {
        self.text(name)
            .parse()
            .map_err(|_| self.invalid(name, "Not a number of type INT"))
    }

    /// A socket buffer size: `None` for -1 (the OS default).
    fn socket_buffer(&self, name: &str) -> Result<Option<usize>, ConfigError> {
        super::listener::parse_socket_buffer(self.text(name)).map_err(|why| self.invalid(name, why))
    }

    /// A number converted to the Rust type the broker uses; negative or too large
    /// values are refused here rather than wrapped.
    fn narrow<N: TryFrom<i64>>(&self, name: &str) -> Result<N, ConfigError> {
        let wide: i64 = self
            .text(name)
            .parse()
            .map_err(|_| self.invalid(name, "Not a number"))?;
        N::try_from(wide).map_err(|_| self.invalid(name, "Value out of range"))
    }
}

/// Checks one dynamic per-broker value as [`normalize_broker_update`] does and returns
/// the canonical value to store.
pub fn normalize_broker_dynamic(key: &str, value: &str) -> Result<String, ConfigError> {
    let one = BTreeMap::from([(key.to_owned(), value.to_owned())]);
    normalize_broker_update(&one, BrokerScope::PerBroker)?
        .remove(key)
        .ok_or_else(|| ConfigError::UnknownBrokerKey {
            key: key.to_owned(),
        })
}

/// [`normalize_broker_dynamic`] without the result.
pub fn validate_broker_dynamic(key: &str, value: &str) -> Result<(), ConfigError> {
    normalize_broker_dynamic(key, value).map(|_| ())
}
