//! Tests across the config modules: loading and precedence, synonyms, typed results,
//! dynamic layers, topic resolution and DescribeConfigs sources and synonyms.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn no_env() -> Vec<(String, String)> {
    Vec::new()
}

fn overrides(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// Loads from overrides only; panics in tests are the assertion.
fn with(args: &[&str]) -> BrokerConfig {
    match BrokerConfig::load(None, no_env(), &overrides(args)) {
        Ok((config, _)) => config,
        Err(e) => panic!("load failed: {e}"),
    }
}

fn options() -> DescribeOptions {
    DescribeOptions {
        include_synonyms: true,
        include_documentation: false,
    }
}

fn find<'a>(entries: &'a [DescribedConfig], name: &str) -> &'a DescribedConfig {
    match entries.iter().find(|e| e.name == name) {
        Some(e) => e,
        None => panic!("{name} not described"),
    }
}

fn syn(name: &str, value: &str, source: ConfigSource) -> DescribedSynonym {
    DescribedSynonym {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        source,
    }
}

#[test]
fn defaults_give_a_runnable_single_node_broker() {
    let config = with(&[]);
    assert_eq!(config.node_id, 1);
    assert_eq!(
        config.listeners,
        vec![Listener {
            name: "PLAINTEXT".into(),
            host: String::new(),
            port: 9092
        }]
    );
    assert_eq!(
        config.advertised_listeners[0].to_string(),
        "PLAINTEXT://localhost:9092"
    );
    assert_eq!(config.log_dirs, vec![PathBuf::from("./data")]);
    assert_eq!(config.num_partitions, 1);
    assert_eq!(config.default_replication_factor, 1);
    assert!(config.auto_create_topics_enable && config.delete_topic_enable);
    assert_eq!(config.socket_request_max_bytes, 104_857_600);
    assert_eq!(config.socket_send_buffer_bytes, Some(262_144));
    assert_eq!(config.socket_receive_buffer_bytes, Some(102_400));
    assert_eq!(config.message_max_bytes, 1_048_588);
    assert_eq!(config.offsets_topic_num_partitions, 50);
    assert_eq!(config.offsets_retention_ms, 10_080 * 60_000);
    assert_eq!(
        config.metrics_listener.map(|a| a.to_string()).as_deref(),
        Some("0.0.0.0:9644")
    );
    assert_eq!(config.cluster_id, None);
    assert_eq!(config.topic_defaults, TopicConfig::default());
}

#[test]
fn a_properties_file_is_read_and_unknown_keys_warn_once_each() {
    let mut file = match tempfile::NamedTempFile::new() {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    };
    let text = "# broker\nnode.id=7\nlisteners=PLAINTEXT://127.0.0.1:19092,\\\n  CONTROLLER://127.0.0.1:19093\n\
                controller.listener.names=CONTROLLER\n\
                listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
                log.dirs = /var/brook/a, /var/brook/b\nno.such.key=PLAIN\n";
    assert!(file.write_all(text.as_bytes()).is_ok());
    let loaded = BrokerConfig::load(Some(file.path()), no_env(), &[]);
    let (config, warnings) = match loaded {
        Ok(x) => x,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(config.node_id, 7);
    assert_eq!(
        config.log_dirs,
        vec![PathBuf::from("/var/brook/a"), PathBuf::from("/var/brook/b")]
    );
    // The controller listener is not advertised to clients.
    let advertised: Vec<String> = config
        .advertised_listeners
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(advertised, ["PLAINTEXT://127.0.0.1:19092"]);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("no.such.key"), "{warnings:?}");
}

#[test]
fn an_unknown_brook_key_stops_the_node_naming_it_wherever_it_is_set() {
    let file = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(file.path(), "brook.log.open.files.maximum=10\n").expect("write");
    let env = vec![("BROOK_BROOK_FETCH_ZEROCOPY".to_owned(), "false".to_owned())];
    let refused = [
        BrokerConfig::load(Some(file.path()), no_env(), &[]),
        BrokerConfig::load(None, env, &[]),
        BrokerConfig::load(
            None,
            no_env(),
            &overrides(&["brook.transaction.versions=2"]),
        ),
    ];
    let messages: Vec<String> = refused
        .into_iter()
        .map(|r| r.err().map(|e| e.to_string()).unwrap_or_default())
        .collect();
    assert_eq!(
        messages,
        [
            "Unknown broker config name: brook.log.open.files.maximum",
            "Unknown broker config name: brook.fetch.zerocopy",
            "Unknown broker config name: brook.transaction.versions",
        ]
    );
    // Brook's known keys load.
    with(&[
        "brook.log.open.files.max=100",
        "brook.fetch.zero.copy=false",
    ]);
}

#[test]
fn a_missing_file_is_an_error_naming_the_path() {
    let err = BrokerConfig::load(
        Some(std::path::Path::new("/nonexistent/server.properties")),
        no_env(),
        &[],
    );
    let message = err.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("/nonexistent/server.properties"),
        "{message}"
    );
}

#[test]
fn override_beats_env_beats_file_beats_default() {
    let mut file = match tempfile::NamedTempFile::new() {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    };
    assert!(file
        .write_all(b"num.partitions=2\ndefault.replication.factor=2\nmessage.max.bytes=2000\n")
        .is_ok());
    let env = vec![
        ("BROOK_NUM_PARTITIONS".to_owned(), "3".to_owned()),
        (
            "BROOK_DEFAULT_REPLICATION_FACTOR".to_owned(),
            "3".to_owned(),
        ),
        ("PATH".to_owned(), "/bin".to_owned()),
    ];
    let loaded = BrokerConfig::load(Some(file.path()), env, &overrides(&["num.partitions=4"]));
    let (config, warnings) = match loaded {
        Ok(x) => x,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(config.num_partitions, 4);
    assert_eq!(config.default_replication_factor, 3);
    assert_eq!(config.message_max_bytes, 2000);
    assert_eq!(config.group_min_session_timeout_ms, 6000);
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn env_vars_map_to_keys_and_unknown_brook_vars_warn() {
    let env = vec![
        ("BROOK_LOG_DIRS".to_owned(), "/data/x".to_owned()),
        ("BROOK_NO_SUCH_THING".to_owned(), "1".to_owned()),
        ("HOME".to_owned(), "/root".to_owned()),
    ];
    let (config, warnings) = match BrokerConfig::load(None, env, &[]) {
        Ok(x) => x,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(config.log_dirs, vec![PathBuf::from("/data/x")]);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("BROOK_NO_SUCH_THING"), "{warnings:?}");
}

#[test]
fn socket_buffers_take_a_size_or_minus_one_for_the_os_default() {
    let config = with(&[
        "socket.send.buffer.bytes=-1",
        "socket.receive.buffer.bytes=65536",
    ]);
    assert_eq!(config.socket_send_buffer_bytes, None);
    assert_eq!(config.socket_receive_buffer_bytes, Some(65_536));
    for bad in [
        "socket.send.buffer.bytes=0",
        "socket.receive.buffer.bytes=-2",
    ] {
        let message = BrokerConfig::load(None, no_env(), &overrides(&[bad]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let key = bad.split('=').next().unwrap_or_default();
        assert!(
            message.contains(key) && message.contains("-1 for the OS default"),
            "{bad}: {message}"
        );
    }
}

#[test]
fn an_invalid_value_refuses_to_load_naming_key_and_value() {
    let err = BrokerConfig::load(None, no_env(), &overrides(&["num.partitions=0"]));
    let message = err.err().map(|e| e.to_string());
    assert_eq!(
        message.as_deref(),
        Some("Invalid value 0 for configuration num.partitions: Value must be at least 1")
    );
    assert!(BrokerConfig::load(
        None,
        no_env(),
        &overrides(&["auto.create.topics.enable=maybe"])
    )
    .is_err());
    assert!(BrokerConfig::load(None, no_env(), &overrides(&["listeners=FOO://:9092"])).is_err());
    assert!(BrokerConfig::load(
        None,
        no_env(),
        &overrides(&["default.replication.factor=40000"])
    )
    .is_err());
    assert!(matches!(
        BrokerConfig::load(None, no_env(), &overrides(&["num.partitions"])),
        Err(ConfigError::BadOverride { .. })
    ));
}

#[test]
fn log_dirs_wins_over_log_dir() {
    assert_eq!(with(&["log.dir=/a"]).log_dirs, vec![PathBuf::from("/a")]);
    assert_eq!(
        with(&["log.dir=/a", "log.dirs=/b,/c"]).log_dirs,
        vec![PathBuf::from("/b"), PathBuf::from("/c")]
    );
}

#[test]
fn an_empty_metrics_listener_disables_the_endpoint() {
    assert_eq!(with(&["metrics.listener="]).metrics_listener, None);
    assert_eq!(
        with(&["metrics.listener=127.0.0.1:9999"])
            .metrics_listener
            .map(|a| a.port()),
        Some(9999)
    );
}

#[test]
fn retention_hours_minutes_and_ms_follow_kafkas_precedence() {
    assert_eq!(
        with(&["log.retention.hours=1"]).topic_defaults.retention_ms,
        Some(3_600_000)
    );
    assert_eq!(
        with(&["log.retention.hours=1", "log.retention.minutes=2"])
            .topic_defaults
            .retention_ms,
        Some(120_000)
    );
    let all = with(&[
        "log.retention.hours=1",
        "log.retention.minutes=2",
        "log.retention.ms=5",
    ]);
    assert_eq!(all.topic_defaults.retention_ms, Some(5));
    assert_eq!(with(&[]).topic_defaults.retention_ms, Some(604_800_000));
}

#[test]
fn minus_one_and_long_max_become_none() {
    let config = with(&["log.retention.ms=-1", "log.retention.bytes=-1"]);
    assert_eq!(config.topic_defaults.retention_ms, None);
    assert_eq!(config.topic_defaults.retention_bytes, None);
    assert_eq!(config.topic_defaults.flush_messages, None);
    assert_eq!(config.topic_defaults.flush_ms, None);
    // Kafka treats any negative broker retention as unlimited.
    assert_eq!(
        with(&["log.retention.minutes=-5"])
            .topic_defaults
            .retention_ms,
        None
    );
    let flushing = with(&[
        "log.flush.interval.messages=1000",
        "log.flush.interval.ms=50",
    ]);
    assert_eq!(flushing.topic_defaults.flush_messages, Some(1000));
    assert_eq!(flushing.topic_defaults.flush_ms, Some(50));
}

#[test]
fn roll_hours_convert_and_roll_ms_wins() {
    assert_eq!(
        with(&["log.roll.hours=2"]).topic_defaults.segment_ms,
        7_200_000
    );
    assert_eq!(
        with(&["log.roll.hours=2", "log.roll.ms=1000"])
            .topic_defaults
            .segment_ms,
        1000
    );
}

#[test]
fn a_topic_resolves_overrides_over_broker_defaults() {
    let broker = with(&[
        "log.segment.bytes=2097152",
        "log.cleanup.policy=compact",
        "log.retention.hours=1",
    ]);
    let topic = TopicConfig::resolve(
        &broker,
        &map(&[
            ("retention.ms", "-1"),
            ("max.message.bytes", "5000"),
            ("message.timestamp.type", "LogAppendTime"),
        ]),
    );
    let topic = match topic {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(topic.retention_ms, None);
    assert_eq!(topic.max_message_bytes, 5000);
    assert_eq!(topic.message_timestamp_type, TimestampType::LogAppendTime);
    assert_eq!(topic.segment_bytes, 2_097_152);
    assert_eq!(
        topic.cleanup_policy,
        CleanupPolicy {
            delete: false,
            compact: true
        }
    );
}

#[test]
fn a_topic_with_an_unknown_or_invalid_override_does_not_resolve() {
    let broker = with(&[]);
    assert!(matches!(
        TopicConfig::resolve(&broker, &map(&[("bogus", "1")])),
        Err(ConfigError::UnknownTopicKey { .. })
    ));
    assert!(matches!(
        TopicConfig::resolve(&broker, &map(&[("segment.bytes", "100")])),
        Err(ConfigError::InvalidValue { .. })
    ));
    let conflict = map(&[
        ("min.compaction.lag.ms", "10"),
        ("max.compaction.lag.ms", "5"),
    ]);
    assert!(TopicConfig::resolve(&broker, &conflict).is_err());
}

#[test]
fn dynamic_layers_override_static_and_skip_read_only_keys() {
    let broker = with(&["message.max.bytes=2000", "num.partitions=2"]);
    let updated = broker.with_dynamic(
        &map(&[("message.max.bytes", "3000"), ("log.retention.ms", "100")]),
        &map(&[("message.max.bytes", "4000"), ("num.partitions", "9")]),
    );
    assert_eq!(updated.message_max_bytes, 4000);
    assert_eq!(updated.topic_defaults.retention_ms, Some(100));
    assert_eq!(updated.num_partitions, 2, "num.partitions is read-only");
    assert_eq!(
        updated
            .static_config()
            .get("message.max.bytes")
            .map(String::as_str),
        Some("2000")
    );
}

#[test]
fn dynamic_updates_are_validated() {
    assert_eq!(
        normalize_broker_dynamic("log.retention.ms", " 100 ")
            .ok()
            .as_deref(),
        Some("100")
    );
    assert!(matches!(
        validate_broker_dynamic("node.id", "2"),
        Err(ConfigError::ReadOnly { .. })
    ));
    assert!(matches!(
        validate_broker_dynamic("nope", "2"),
        Err(ConfigError::UnknownBrokerKey { .. })
    ));
    assert!(matches!(
        validate_broker_dynamic("log.segment.bytes", "10"),
        Err(ConfigError::InvalidBrokerValue { .. })
    ));
}

#[test]
fn describe_topic_reports_kafkas_values_and_sources() {
    let broker = with(&["log.roll.ms=100000"]);
    let entries = match describe_topic(&broker, &map(&[("retention.ms", "1000")]), options()) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    // Every Kafka 4.4 topic key but the internal internal.segment.bytes.
    assert_eq!(entries.len(), super::topic::topic_keys().len() - 1);
    assert!(entries.iter().all(|e| e.name != "internal.segment.bytes"));
    let retention = find(&entries, "retention.ms");
    assert_eq!(retention.value.as_deref(), Some("1000"));
    assert_eq!(retention.source, ConfigSource::DynamicTopicConfig);
    assert_eq!(
        retention.synonyms,
        vec![syn(
            "retention.ms",
            "1000",
            ConfigSource::DynamicTopicConfig
        )]
    );
    assert!(!retention.read_only);
    assert_eq!(retention.config_type, ConfigType::Long);

    let segment_ms = find(&entries, "segment.ms");
    assert_eq!(segment_ms.value.as_deref(), Some("100000"));
    assert_eq!(segment_ms.source, ConfigSource::StaticBrokerConfig);
    assert_eq!(
        segment_ms.synonyms,
        vec![
            syn("log.roll.ms", "100000", ConfigSource::StaticBrokerConfig),
            syn("log.roll.hours", "168", ConfigSource::DefaultConfig),
        ]
    );

    let flush = find(&entries, "flush.messages");
    assert_eq!(flush.value.as_deref(), Some("9223372036854775807"));
    assert_eq!(flush.source, ConfigSource::DefaultConfig);
    assert_eq!(
        flush.synonyms,
        vec![syn(
            "log.flush.interval.messages",
            "9223372036854775807",
            ConfigSource::DefaultConfig
        )]
    );
    assert_eq!(
        find(&entries, "cleanup.policy").config_type,
        ConfigType::List
    );
    assert_eq!(
        find(&entries, "min.cleanable.dirty.ratio").value.as_deref(),
        Some("0.5")
    );
}

#[test]
fn describe_topic_keeps_kafkas_quirk_for_hours_only_retention() {
    // Kafka 4.4 prints `retention.ms=3600000 synonyms={}` here: the synonym list is cut
    // before the first `log.retention.ms` entry, and there is none.
    let entries = match describe_topic(
        &with(&["log.retention.hours=1"]),
        &BTreeMap::new(),
        options(),
    ) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    let retention = find(&entries, "retention.ms");
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    assert_eq!(retention.source, ConfigSource::DefaultConfig);
    assert!(retention.synonyms.is_empty());
}

#[test]
fn describe_topic_shows_dynamic_broker_layers_in_order() {
    let broker = with(&["log.retention.ms=5000"]).with_dynamic(
        &map(&[("log.retention.ms", "6000")]),
        &map(&[("log.retention.ms", "7000")]),
    );
    let entries = match describe_topic(&broker, &BTreeMap::new(), options()) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    let retention = find(&entries, "retention.ms");
    assert_eq!(retention.value.as_deref(), Some("7000"));
    assert_eq!(retention.source, ConfigSource::DynamicBrokerConfig);
    assert_eq!(
        retention.synonyms,
        vec![
            syn(
                "log.retention.ms",
                "7000",
                ConfigSource::DynamicBrokerConfig
            ),
            syn(
                "log.retention.ms",
                "6000",
                ConfigSource::DynamicDefaultBrokerConfig
            ),
            syn("log.retention.ms", "5000", ConfigSource::StaticBrokerConfig),
            syn("log.retention.hours", "168", ConfigSource::DefaultConfig),
        ]
    );
}

#[test]
fn describe_broker_reports_every_key_with_flags() {
    let broker = with(&["num.partitions=3", "log.retention.hours=1"]);
    let with_docs = DescribeOptions {
        include_synonyms: true,
        include_documentation: true,
    };
    let entries = describe_broker(&broker, with_docs);
    let described = super::keys::broker_keys()
        .iter()
        .filter(|k| k.is_described())
        .count();
    assert_eq!(entries.len(), described);
    let partitions = find(&entries, "num.partitions");
    assert_eq!(partitions.value.as_deref(), Some("3"));
    assert_eq!(partitions.source, ConfigSource::StaticBrokerConfig);
    assert!(partitions.read_only);
    assert_eq!(
        partitions.synonyms,
        vec![
            syn("num.partitions", "3", ConfigSource::StaticBrokerConfig),
            syn("num.partitions", "1", ConfigSource::DefaultConfig)
        ]
    );
    assert!(partitions
        .documentation
        .is_some_and(|d| d.contains("partitions")));
    let hours = find(&entries, "log.retention.hours");
    assert_eq!(hours.source, ConfigSource::StaticBrokerConfig);
    let ms = find(&entries, "log.retention.ms");
    assert_eq!(ms.value, None);
    assert_eq!(ms.source, ConfigSource::DefaultConfig);
    assert!(ms.synonyms.is_empty());
    assert!(!ms.read_only);
    assert!(find(&entries, "message.max.bytes")
        .synonyms
        .iter()
        .all(|s| s.name == "message.max.bytes"));
    let bare = describe_broker(&broker, DescribeOptions::default());
    assert!(bare
        .iter()
        .all(|e| e.synonyms.is_empty() && e.documentation.is_none()));
}

#[test]
fn describe_broker_defaults_lists_only_cluster_defaults() {
    let broker = with(&["message.max.bytes=2000"])
        .with_dynamic(&map(&[("message.max.bytes", "3000")]), &BTreeMap::new());
    let entries = describe_broker_defaults(&broker, options());
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].value.as_deref(), Some("3000"));
    assert_eq!(entries[0].source, ConfigSource::DynamicDefaultBrokerConfig);
    assert_eq!(
        entries[0].synonyms,
        vec![syn(
            "message.max.bytes",
            "3000",
            ConfigSource::DynamicDefaultBrokerConfig
        )]
    );
}

#[test]
fn config_source_ids_match_kafka() {
    assert_eq!(ConfigSource::Unknown.id(), 0);
    assert_eq!(ConfigSource::DynamicTopicConfig.id(), 1);
    assert_eq!(ConfigSource::DynamicBrokerConfig.id(), 2);
    assert_eq!(ConfigSource::DynamicDefaultBrokerConfig.id(), 3);
    assert_eq!(ConfigSource::StaticBrokerConfig.id(), 4);
    assert_eq!(ConfigSource::DefaultConfig.id(), 5);
    assert_eq!(ConfigSource::GroupConfig.id(), 8);
}

#[test]
fn kafka_only_keys_load_with_a_warning_and_are_described_with_kafkas_facts() {
    let loaded = BrokerConfig::load(
        None,
        no_env(),
        &overrides(&["compression.zstd.level=7", "ssl.keystore.password=secret"]),
    );
    let (broker, warnings) = match loaded {
        Ok(x) => x,
        Err(e) => panic!("{e}"),
    };
    // ssl.keystore.password is served (TLS listeners), so only the zstd level warns.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings
        .iter()
        .any(|w| w.contains("compression.zstd.level") && w.contains("does not act on")));
    let with_docs = DescribeOptions {
        include_synonyms: false,
        include_documentation: true,
    };
    let entries = describe_broker(&broker, with_docs);
    let zstd = find(&entries, "compression.zstd.level");
    assert_eq!(zstd.value.as_deref(), Some("7"));
    assert_eq!(zstd.source, ConfigSource::StaticBrokerConfig);
    assert!(!zstd.read_only);
    assert!(zstd.documentation.is_some_and(|d| d.contains("no effect")));
    let password = find(&entries, "ssl.keystore.password");
    assert_eq!(password.value, None);
    assert!(password.is_sensitive);
    assert_eq!(password.config_type, ConfigType::Password);
    let relogin = find(&entries, "sasl.kerberos.min.time.before.relogin");
    assert_eq!(relogin.value.as_deref(), Some("60000"));
    assert_eq!(relogin.source, ConfigSource::DefaultConfig);
    assert!(!relogin.read_only);
    let authorizer = find(&entries, "authorizer.class.name");
    assert_eq!(authorizer.value.as_deref(), Some(""));
    assert!(authorizer.read_only);
    assert!(entries
        .iter()
        .all(|e| e.name != "unstable.api.versions.enable"));
}

#[test]
fn broker_id_follows_node_id_and_must_equal_it_when_set() {
    let broker = with(&["node.id=4"]);
    assert_eq!(broker.effective_value("broker.id"), Some("4"));
    assert!(matches!(
        BrokerConfig::load(None, no_env(), &overrides(&["node.id=4", "broker.id=5"])),
        Err(ConfigError::Contradiction { .. })
    ));
    assert!(BrokerConfig::load(None, no_env(), &overrides(&["node.id=4", "broker.id=4"])).is_ok());
}

#[test]
fn a_kafka_only_topic_key_is_described_from_its_override_or_broker_synonym() {
    let broker = with(&["log.local.retention.ms=5000"]);
    let entries = match describe_topic(
        &broker,
        &map(&[("remote.log.copy.disable", "true")]),
        options(),
    ) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    let copy = find(&entries, "remote.log.copy.disable");
    assert_eq!(copy.value.as_deref(), Some("true"));
    assert_eq!(copy.source, ConfigSource::DynamicTopicConfig);
    let local = find(&entries, "local.retention.ms");
    assert_eq!(local.value.as_deref(), Some("5000"));
    assert_eq!(local.source, ConfigSource::StaticBrokerConfig);
    let zstd = find(&entries, "compression.zstd.level");
    assert_eq!(zstd.value.as_deref(), Some("3"));
    assert_eq!(zstd.source, ConfigSource::DefaultConfig);
}

fn refusal(args: &[&str]) -> (Option<String>, String) {
    match BrokerConfig::load(None, no_env(), &overrides(args)) {
        Ok(_) => (None, String::new()),
        Err(e) => (e.key().map(str::to_owned), e.to_string()),
    }
}

#[test]
fn listeners_of_every_protocol_load_and_what_brook_cannot_secure_stops_the_node() {
    // SSL and SASL_SSL client listeners are served (their key stores are read at start).
    assert_eq!(
        refusal(&[
            "listeners=PLAINTEXT://:9092,CLIENT://:9093,SECURE://:9094",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:SSL,SECURE:SASL_SSL",
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.secure.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
        ])
        .0,
        None
    );
    // A single combined node has no inter-broker traffic: its one listener may be secured.
    assert_eq!(
        refusal(&[
            "listeners=CLIENT://:9092",
            "listener.security.protocol.map=CLIENT:SSL"
        ])
        .0,
        None
    );
    // In a cluster, brokers reach each other on a secured listener too (config::inter_broker).
    assert_eq!(
        refusal(&[
            "listeners=CLIENT://:9092,CONTROLLER://:9093",
            "controller.listener.names=CONTROLLER",
            "controller.quorum.voters=1@localhost:9093,2@localhost:9095,3@localhost:9097",
            "listener.security.protocol.map=CLIENT:SSL,CONTROLLER:PLAINTEXT",
        ])
        .0,
        None
    );
    // The raft transport runs over TLS, and over SASL (config::controller_sasl) with PLAIN or SCRAM, but
    // a SASL controller listener left with Kafka's default GSSAPI stops the node naming it.
    assert_eq!(
        refusal(&[
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        ])
        .0,
        None
    );
    let (key, message) = refusal(&[
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
    ]);
    assert_eq!(key.as_deref(), Some("sasl.enabled.mechanisms"));
    assert!(
        message.contains("CONTROLLER://:9093 (SASL_SSL)") && message.contains("GSSAPI"),
        "{message}"
    );
    let (key, message) = refusal(&[
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
        "sasl.enabled.mechanisms=PLAIN",
        "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"c\" password=\"c-secret\" user_c=\"c-secret\";",
    ]);
    assert_eq!(key.as_deref(), Some("sasl.mechanism.controller.protocol"));
    assert!(
        message.contains("controller listener CONTROLLER is SASL_SSL")
            && message.contains("GSSAPI"),
        "{message}"
    );
    // SASL_PLAINTEXT is served, but not with Kafka's default mechanism (GSSAPI).
    let (key, message) = refusal(&["listeners=SASL_PLAINTEXT://:9092"]);
    assert_eq!(key.as_deref(), Some("sasl.enabled.mechanisms"));
    assert!(
        message.contains("SASL_PLAINTEXT") && message.contains("GSSAPI"),
        "{message}"
    );
    let (key, message) = refusal(&["listeners=PLAINTEXT://:9092,SASL_SSL://:9094"]);
    assert_eq!(key.as_deref(), Some("sasl.enabled.mechanisms"));
    assert!(
        message.contains("SASL_SSL") && message.contains("GSSAPI"),
        "{message}"
    );
    assert_eq!(
        refusal(&[
            "listeners=PLAINTEXT://:9092,INTERNAL://:9093",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"
        ])
        .0,
        None
    );
}

#[test]
fn an_unknown_authorizer_sasl_mechanisms_or_a_secured_inter_broker_protocol_stop_the_node() {
    let (key, message) =
        refusal(&["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"]);
    assert_eq!(key.as_deref(), Some("authorizer.class.name"));
    assert!(message.contains("StandardAuthorizer"), "{message}");
    assert_eq!(refusal(&["authorizer.class.name="]).0, None);
    assert_eq!(
        refusal(&["authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"])
            .0,
        None
    );
    let (key, _) = refusal(&["sasl.enabled.mechanisms=PLAIN,GSSAPI"]);
    assert_eq!(key.as_deref(), Some("sasl.enabled.mechanisms"));
    // Mechanisms Brook serves load even where no listener uses them.
    assert_eq!(
        refusal(&["sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512"]).0,
        None
    );
    assert_eq!(refusal(&["sasl.enabled.mechanisms="]).0, None);
    let (key, _) = refusal(&["security.inter.broker.protocol=SSL"]);
    assert_eq!(key.as_deref(), Some("security.inter.broker.protocol"));
    // Harmless security keys load (and are only described).
    assert_eq!(
        refusal(&[
            "sasl.kerberos.min.time.before.relogin=58000",
            "ssl.client.auth=required"
        ])
        .0,
        None
    );
}

#[test]
fn an_ssl_listener_gets_its_per_listener_keys_and_they_load_without_warnings() {
    let loaded = BrokerConfig::load(
        None,
        no_env(),
        &overrides(&[
            "listeners=PLAINTEXT://:9092,SSL://:9093",
            "ssl.keystore.type=PEM",
            "listener.name.ssl.ssl.keystore.location=/etc/brook/broker.pem",
            "listener.name.ssl.ssl.client.auth=required",
        ]),
    );
    let (broker, warnings) = match loaded {
        Ok(x) => x,
        Err(e) => panic!("{e}"),
    };
    assert!(warnings.is_empty(), "{warnings:?}");
    let tls = broker
        .listener_tls
        .get("SSL")
        .expect("the SSL listener's settings");
    assert_eq!(tls.keystore_type.value, "PEM");
    assert_eq!(
        tls.keystore_location.as_ref().map(|s| s.key.as_str()),
        Some("listener.name.ssl.ssl.keystore.location")
    );
    assert_eq!(tls.client_auth, super::tls::ClientAuth::Required);
    assert!(!broker.listener_tls.contains_key("PLAINTEXT"));
    let (key, _) = refusal(&[
        "listeners=PLAINTEXT://:9092,SSL://:9093",
        "listener.name.ssl.ssl.client.auth=sometimes",
    ]);
    assert_eq!(key.as_deref(), Some("listener.name.ssl.ssl.client.auth"));
}

#[test]
fn key_passwords_broker_wide_and_per_listener_are_described_without_their_values() {
    let broker = with(&[
        "listeners=PLAINTEXT://:9092,SSL://:9093",
        "ssl.key.password=broker-wide-secret",
        "listener.name.ssl.ssl.key.password=listener-secret",
    ]);
    let entries = describe_broker(&broker, options());
    for name in ["ssl.key.password", "listener.name.ssl.ssl.key.password"] {
        let entry = find(&entries, name);
        assert_eq!(entry.value, None, "{name}");
        assert!(entry.is_sensitive, "{name}");
        assert_eq!(entry.config_type, ConfigType::Password, "{name}");
        assert!(!entry.synonyms.is_empty(), "{name}");
        assert!(entry.synonyms.iter().all(|s| s.value.is_none()), "{name}");
    }
}

#[test]
fn connection_creation_rates_are_read_broker_wide_and_per_listener() {
    let config = with(&[
        "max.connection.creation.rate=30",
        "listeners=PLAINTEXT://:9092,INTERNAL://:9094,CONTROLLER://:9093",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "listener.name.internal.max.connection.creation.rate=7",
    ]);
    let limits = &config.connection_limits;
    assert_eq!(limits.max_connection_creation_rate, Some(30));
    assert_eq!(
        limits.listener_creation_rates,
        BTreeMap::from([("INTERNAL".to_owned(), 7)])
    );
    // Kafka's default (i32::MAX) is no limit.
    let unlimited = with(&[]).connection_limits;
    assert_eq!(unlimited.max_connection_creation_rate, None);
    assert!(unlimited.listener_creation_rates.is_empty());
}
