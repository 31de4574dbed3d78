//! The inter-broker listener and how this broker logs in on it (issue 25 item 6): the
//! replication fetchers and the coordinator-to-leader requests connect to a peer's
//! endpoint registered for this listener name, with that listener's security, as Kafka's
//! `BrokerToBrokerNetworkClient` does.
//!
//! Kafka's rules (`KafkaConfig.interBrokerListenerName`, `validateValues`):
//! `inter.broker.listener.name` and `security.inter.broker.protocol` are exclusive; the
//! named listener (or the listener named after the protocol) must be advertised and may
//! not be a controller listener; over SASL the client mechanism is
//! `sasl.mechanism.inter.broker.protocol` (default GSSAPI), which must be enabled on that
//! listener; the broker's own login is the `username` / `password` options of the
//! listener's `listener.name.<l>.<mechanism>.sasl.jaas.config` (the same entry whose
//! `user_<name>` options list PLAIN's users). TLS reuses the listener's `ssl.*` keys: its
//! trust store verifies peers; its key store is presented when the listener asks clients
//! for certificates (`ssl.client.auth`).
//!
//! Brook keeps one lenience: with neither key set and no listener named PLAINTEXT, the
//! first client listener is the inter-broker one (`BrokerConfig::inter_broker_listener`),
//! and a single combined node (no peer to reach) is not checked at all. Pure.

use super::broker::{BrokerConfig, Layers, ProcessRole};
use super::error::ConfigError;
use super::jaas::parse_jaas;
use super::sasl::SaslMechanism;
use super::tls::ListenerTls;

const LISTENER_KEY: &str = "inter.broker.listener.name";
const PROTOCOL_KEY: &str = "security.inter.broker.protocol";
const MECHANISM_KEY: &str = "sasl.mechanism.inter.broker.protocol";

/// The mechanisms Brook's inter-broker client can log in with.
const CLIENT_MECHANISMS: [SaslMechanism; 3] = [
    SaslMechanism::Plain,
    SaslMechanism::ScramSha256,
    SaslMechanism::ScramSha512,
];

/// A password of the broker's own login; `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct LoginPassword(String);

impl LoginPassword {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for LoginPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

/// How this broker logs in to its peers over SASL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterBrokerLogin {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: LoginPassword,
    /// The key the login came from, for messages.
    pub jaas_key: String,
}

/// The inter-broker client's settings.
#[derive(Clone, Debug)]
pub struct InterBrokerClient {
    /// Upper case, as in `listeners`: peers are reached on their endpoint of this name.
    pub listener: String,
    /// `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub protocol: String,
    /// The listener's TLS settings (SSL and SASL_SSL).
    pub tls: Option<ListenerTls>,
    /// The broker's login (SASL_PLAINTEXT and SASL_SSL).
    pub login: Option<InterBrokerLogin>,
}

/// A key's value when some layer sets it (not the table's default).
fn explicit<'a>(layers: &'a Layers, key: &str) -> Option<&'a str> {
    [
        &layers.per_broker,
        &layers.cluster_default,
        &layers.static_props,
    ]
    .into_iter()
    .find_map(|layer| layer.get(key).map(String::as_str))
    .filter(|v| !v.is_empty())
}

/// A combined broker and controller that is the whole quorum has no peer to reach.
fn is_single_combined_node(config: &BrokerConfig) -> bool {
    config.process_roles.contains(&ProcessRole::Broker)
        && config.process_roles.contains(&ProcessRole::Controller)
        && config.controller_quorum_voters.len() <= 1
        && config.controller_quorum_bootstrap_servers.len() <= 1
}

/// Resolves and checks the inter-broker client; `None` on a node without peers to reach
/// (a controller alone, or a single combined node). Errors name the key to fix.
pub(crate) fn resolve(
    config: &BrokerConfig,
    layers: &Layers,
) -> Result<Option<InterBrokerClient>, ConfigError> {
    let named = explicit(layers, LISTENER_KEY);
    let by_protocol = explicit(layers, PROTOCOL_KEY);
    if named.is_some() && by_protocol.is_some() {
        return Err(ConfigError::Contradiction {
            keys: format!("{LISTENER_KEY}, {PROTOCOL_KEY}"),
            reason: format!("Only one of {LISTENER_KEY} and {PROTOCOL_KEY} should be set."),
        });
    }
    if let Some((key, name)) = named
        .map(|n| (LISTENER_KEY, n))
        .or(by_protocol.map(|p| (PROTOCOL_KEY, p)))
    {
        let name = name.to_ascii_uppercase();
        if config.is_controller_listener(&name) {
            return Err(ConfigError::invalid(
                key,
                &name,
                "the inter-broker listener cannot be a controller listener",
            ));
        }
        if !config.advertised_listeners.iter().any(|l| l.name == name) {
            let valid: Vec<&str> = config
                .advertised_listeners
                .iter()
                .filter(|l| !config.is_controller_listener(&l.name))
                .map(|l| l.name.as_str())
                .collect();
            return Err(ConfigError::invalid(
                key,
                &name,
                format!(
                    "{LISTENER_KEY} must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are {}",
                    valid.join(",")
                ),
            ));
        }
    }
    if !config.process_roles.contains(&ProcessRole::Broker) || is_single_combined_node(config) {
        return Ok(None);
    }
    let Some(listener) = config.inter_broker_listener() else {
        return Ok(None);
    };
    let protocol = config
        .listener_security_protocol_map
        .get(&listener.name)
        .cloned()
        .unwrap_or_else(|| "PLAINTEXT".to_owned());
    let tls = match protocol.as_str() {
        "SSL" | "SASL_SSL" => config.listener_tls.get(&listener.name).cloned(),
        _ => None,
    };
    let login = match protocol.as_str() {
        "SASL_PLAINTEXT" | "SASL_SSL" => Some(login(config, layers, &listener.name)?),
        _ => None,
    };
    Ok(Some(InterBrokerClient {
        listener: listener.name.clone(),
        protocol,
        tls,
        login,
    }))
}

/// The broker's SASL login on `listener`.
fn login(
    config: &BrokerConfig,
    layers: &Layers,
    listener: &str,
) -> Result<InterBrokerLogin, ConfigError> {
    let name = layers.effective(MECHANISM_KEY).unwrap_or("GSSAPI");
    let Some(mechanism) = SaslMechanism::from_name(name).filter(|m| CLIENT_MECHANISMS.contains(m))
    else {
        return Err(ConfigError::Unsupported {
            key: MECHANISM_KEY.to_owned(),
            reason: format!(
                "{MECHANISM_KEY}={name}: the inter-broker listener {listener} uses SASL, and Brook's brokers log in to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 only{}",
                if name == "GSSAPI" { " (GSSAPI, Kafka's default, is Kerberos)" } else { "" }
            ),
        });
    };
    let enabled = config
        .sasl
        .listeners
        .get(listener)
        .is_some_and(|l| l.mechanisms.contains(&mechanism));
    if !enabled {
        return Err(ConfigError::Unsupported {
            key: MECHANISM_KEY.to_owned(),
            reason: format!(
                "{MECHANISM_KEY}={name} must be included in sasl.enabled.mechanisms of the inter-broker listener {listener} when SASL is used for inter-broker communication"
            ),
        });
    }
    own_login(
        layers,
        listener,
        mechanism,
        &format!("the broker logs in to its peers on the inter-broker listener {listener}"),
    )
}

/// This node's own login on `listener` with `mechanism`: the `username` / `password` options
/// of `listener.name.<listener>.<mechanism>.sasl.jaas.config` (the same entry whose
/// `user_<name>` options list PLAIN's users). `purpose` says, in errors, who logs in where.
pub(crate) fn own_login(
    layers: &Layers,
    listener: &str,
    mechanism: SaslMechanism,
    purpose: &str,
) -> Result<InterBrokerLogin, ConfigError> {
    let jaas_key = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.name().to_ascii_lowercase()
    );
    let missing = |what: &str| ConfigError::Unsupported {
        key: jaas_key.clone(),
        reason: format!(
            "{jaas_key} has no {what} option: {purpose} with that entry's username and password"
        ),
    };
    let text = layers
        .effective(&jaas_key)
        .ok_or_else(|| missing("entry"))?;
    let mut entry =
        parse_jaas(text).map_err(|reason| ConfigError::invalid(&jaas_key, "[hidden]", reason))?;
    let username = entry
        .options
        .remove("username")
        .filter(|u| !u.is_empty())
        .ok_or_else(|| missing("username"))?;
    let password = entry
        .options
        .remove("password")
        .ok_or_else(|| missing("password"))?;
    Ok(InterBrokerLogin {
        mechanism,
        username,
        password: LoginPassword(password),
        jaas_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: [&str; 3] = [
        "controller.listener.names=CONTROLLER",
        "controller.quorum.voters=1@localhost:9093,2@localhost:9095,3@localhost:9097",
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093,INTERNAL://:9094",
    ];
    const JAAS: &str = "listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" password=\"broker-secret\" user_broker=\"broker-secret\";";

    fn load(extra: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let args: Vec<String> = CLUSTER
            .iter()
            .chain(extra)
            .map(|a| (*a).to_owned())
            .collect();
        BrokerConfig::load(None, Vec::new(), &args).map(|(config, _)| config)
    }

    fn refused_key(extra: &[&str]) -> (String, String) {
        match load(extra) {
            Ok(_) => panic!("{extra:?} loaded"),
            Err(e) => (e.key().unwrap_or_default().to_owned(), e.to_string()),
        }
    }

    #[test]
    fn a_sasl_inter_broker_listener_logs_in_with_its_jaas_entrys_username_and_password() {
        let config = load(&[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name=internal",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            "sasl.enabled.mechanisms=PLAIN",
            JAAS,
        ])
        .expect("valid");
        let client = config.inter_broker.expect("a cluster node reaches peers");
        assert_eq!(client.listener, "INTERNAL");
        assert_eq!(client.protocol, "SASL_PLAINTEXT");
        let login = client.login.expect("SASL");
        assert_eq!(login.mechanism, SaslMechanism::Plain);
        assert_eq!(login.username, "broker");
        assert_eq!(login.password.expose(), "broker-secret");
        assert!(!format!("{login:?}").contains("broker-secret"));
    }

    #[test]
    fn what_the_inter_broker_client_cannot_use_stops_the_node_naming_the_key() {
        let sasl = [
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
            "sasl.enabled.mechanisms=PLAIN",
            JAAS,
        ];
        // Kafka's default mechanism, GSSAPI.
        let (key, message) = refused_key(&sasl);
        assert_eq!(key, MECHANISM_KEY);
        assert!(message.contains("GSSAPI"), "{message}");
        // A mechanism the listener does not enable.
        let mut not_enabled = sasl.to_vec();
        not_enabled.push("sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512");
        let (key, message) = refused_key(&not_enabled);
        assert_eq!(key, MECHANISM_KEY);
        assert!(message.contains("sasl.enabled.mechanisms"), "{message}");
        // A JAAS entry without the broker's own login.
        let (key, _) = refused_key(&[
            sasl[0],
            sasl[1],
            sasl[2],
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            "listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_broker=\"x\";",
        ]);
        assert_eq!(key, "listener.name.internal.plain.sasl.jaas.config");
        // A listener that does not exist, or both ways of naming it.
        let (key, message) = refused_key(&[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SSL",
            "inter.broker.listener.name=ELSEWHERE",
        ]);
        assert_eq!(key, LISTENER_KEY);
        assert!(message.contains("PLAINTEXT,INTERNAL"), "{message}");
        let (key, _) = refused_key(&[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SSL",
            "inter.broker.listener.name=CONTROLLER",
        ]);
        assert_eq!(key, LISTENER_KEY);
        let (key, _) = refused_key(&[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SSL",
            "inter.broker.listener.name=INTERNAL",
            "security.inter.broker.protocol=SSL",
        ]);
        assert!(
            key.contains(LISTENER_KEY) && key.contains(PROTOCOL_KEY),
            "{key}"
        );
    }

    #[test]
    fn an_ssl_inter_broker_listener_carries_its_tls_settings_and_plaintext_none() {
        let config = load(&[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SSL",
            "inter.broker.listener.name=INTERNAL",
            "listener.name.internal.ssl.truststore.location=/ca.pem",
        ])
        .expect("valid");
        let client = config.inter_broker.expect("cluster");
        let tls = client.tls.expect("SSL");
        assert_eq!(
            tls.truststore_location.map(|s| s.value).as_deref(),
            Some("/ca.pem")
        );
        assert!(client.login.is_none());
        let config = load(&[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SSL",
        ])
        .expect("valid");
        let client = config.inter_broker.expect("cluster");
        assert_eq!(
            (client.listener.as_str(), client.tls.is_none()),
            ("PLAINTEXT", true)
        );
    }
}
