//! SASL on the controller listener (issue 25 items 1 and 6): how this node logs in to the
//! controllers, and how the controllers (and a broker-only node's raft listener) check the
//! logins, when the controller listener (the first of `controller.listener.names`) is
//! mapped to SASL_PLAINTEXT or SASL_SSL.
//!
//! Kafka's rules (`RaftManager`, `NodeToControllerChannelManager`): the mechanism is
//! `sasl.mechanism.controller.protocol` (default GSSAPI); the node's login is the `username`
//! / `password` of `listener.name.<controller listener>.<mechanism>.sasl.jaas.config`, whose
//! `user_<name>` options are the users a controller accepts with PLAIN. Brook's controllers
//! log in with PLAIN or SCRAM-SHA-256/512. SCRAM credentials live in the metadata log, which
//! no leader can write before the voters have logged in to each other, so until the log holds
//! credentials the controller listener checks SCRAM logins against the node's bootstrap
//! records (`brook format --add-scram`, Kafka's `kafka-storage format --add-scram`), as
//! `cluster::quorum_sasl` does; once it holds them (the bootstrap records are its first
//! entries) against the log's. (Kafka 4.4 checks the log's only, so its voters never elect a
//! leader with SCRAM there: KAFKA-15513.) GSSAPI is Kerberos and OAUTHBEARER needs an
//! identity provider: any mechanism but PLAIN and SCRAM stops the node naming the listener
//! and the mechanism. A controller must enable the mechanism on its controller listener
//! (`listener.name.<listener>.sasl.enabled.mechanisms`, checked by [`super::sasl`] like any
//! SASL listener's); Kafka's tools may log in there with any mechanism it enables.
//!
//! A broker-only node has no controller listener of its own, but Brook's voters push the log
//! to its raft listener (KRaft's observers fetch instead), so that listener checks logins
//! too: with PLAIN, the `user_<name>` entries of the same JAAS entry and the node's own login
//! (the controllers usually share it); with SCRAM, its bootstrap records, then the log's. Sessions on the controller listener do not expire
//! (`connections.max.reauth.ms` is not applied there: raft connections never
//! re-authenticate). Pure.

use std::sync::Arc;

use super::broker::{BrokerConfig, Layers, ProcessRole};
use super::error::ConfigError;
use super::inter_broker::{own_login, InterBrokerLogin};
use super::jaas::parse_jaas;
use super::sasl::{SaslListener, SaslMechanism, Secret};

const MECHANISM_KEY: &str = "sasl.mechanism.controller.protocol";

/// SASL on the controller listener, resolved.
#[derive(Clone, Debug)]
pub struct ControllerSasl {
    /// The controller listener's name, upper case.
    pub listener: String,
    /// How this node logs in to the controllers (and, on a voter, to its peers).
    pub login: InterBrokerLogin,
    /// What the logins this node serves on its raft listener are checked against.
    pub server: Arc<SaslListener>,
}

/// The controller listener's SASL settings; `None` when it is not mapped to SASL_*.
pub(crate) fn resolve(
    config: &BrokerConfig,
    layers: &Layers,
) -> Result<Option<ControllerSasl>, ConfigError> {
    let Some(listener) = config.controller_listener_names.first() else {
        return Ok(None);
    };
    let protocol = config
        .listener_security_protocol_map
        .get(listener)
        .map_or("PLAINTEXT", String::as_str);
    if !matches!(protocol, "SASL_PLAINTEXT" | "SASL_SSL") {
        return Ok(None);
    }
    let name = layers.effective(MECHANISM_KEY).unwrap_or("GSSAPI");
    let mechanism = match SaslMechanism::from_name(name) {
        Some(
            mechanism @ (SaslMechanism::Plain
            | SaslMechanism::ScramSha256
            | SaslMechanism::ScramSha512),
        ) => mechanism,
        other => {
            return Err(ConfigError::Unsupported {
                key: MECHANISM_KEY.to_owned(),
                reason: format!(
                    "{MECHANISM_KEY}={name}: the controller listener {listener} is {protocol}, and Brook's controllers and brokers log in to it with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 only ({})",
                    refusal(name, other)
                ),
            })
        }
    };
    let purpose = format!(
        "controllers and brokers log in to the controller listener {listener} ({protocol})"
    );
    let login = own_login(layers, listener, mechanism, &purpose)?;
    let served = config.sasl.listeners.get(listener);
    let server = match served {
        Some(served) => {
            if !served.mechanisms.contains(&mechanism) {
                return Err(ConfigError::Unsupported {
                    key: MECHANISM_KEY.to_owned(),
                    reason: format!(
                        "{MECHANISM_KEY}={name} must be included in sasl.enabled.mechanisms of the controller listener {listener}: the controllers log in to each other with it"
                    ),
                });
            }
            SaslListener {
                connections_max_reauth_ms: None,
                ..served.as_ref().clone()
            }
        }
        // A controller always serves its controller listener (`roles` checks it is in
        // `listeners`); without it this is a broker-only node's raft listener.
        None if !config.process_roles.contains(&ProcessRole::Controller) => {
            learner_server(layers, &login)?
        }
        None => {
            return Err(ConfigError::Unsupported {
                key: "listeners".to_owned(),
                reason: format!(
                    "the controller listener {listener} is mapped to {protocol} but is not in listeners"
                ),
            })
        }
    };
    Ok(Some(ControllerSasl {
        listener: listener.clone(),
        login,
        server: Arc::new(server),
    }))
}

/// Why a mechanism other than PLAIN and SCRAM cannot log nodes in to the controllers.
fn refusal(name: &str, mechanism: Option<SaslMechanism>) -> String {
    match mechanism {
        _ if name == "GSSAPI" => {
            "GSSAPI, Kafka's default, is Kerberos, which Brook does not support".to_owned()
        }
        Some(other) => format!(
            "{} needs an identity provider the controllers do not log in to",
            other.name()
        ),
        None => format!("{name} is not a SASL mechanism Brook knows"),
    }
}

/// A broker-only node's raft listener: PLAIN with the entry's `user_<name>` options and the
/// node's own login; SCRAM with the credentials `cluster::quorum_sasl` looks up.
fn learner_server(layers: &Layers, login: &InterBrokerLogin) -> Result<SaslListener, ConfigError> {
    if login.mechanism != SaslMechanism::Plain {
        return Ok(SaslListener {
            mechanisms: vec![login.mechanism],
            plain_users: Default::default(),
            connections_max_reauth_ms: None,
            oauthbearer: None,
        });
    }
    let text = layers.effective(&login.jaas_key).unwrap_or_default();
    let entry = parse_jaas(text)
        .map_err(|reason| ConfigError::invalid(&login.jaas_key, "[hidden]", reason))?;
    let mut plain_users: std::collections::BTreeMap<String, Secret> = entry
        .options
        .into_iter()
        .filter_map(|(name, password)| {
            let user = name.strip_prefix("user_")?.to_owned();
            Some((user, Secret::new(password)))
        })
        .collect();
    plain_users
        .entry(login.username.clone())
        .or_insert_with(|| Secret::new(login.password.expose().to_owned()));
    Ok(SaslListener {
        mechanisms: vec![SaslMechanism::Plain],
        plain_users,
        connections_max_reauth_ms: None,
        oauthbearer: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VOTERS: &str =
        "controller.quorum.voters=1@localhost:9093,2@localhost:9095,3@localhost:9097";
    const JAAS: &str = "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"controller\" password=\"controller-secret\" user_controller=\"controller-secret\" user_admin=\"admin-secret\";";

    fn load(extra: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let args: Vec<String> = [
            "controller.listener.names=CONTROLLER",
            VOTERS,
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
        ]
        .iter()
        .chain(extra)
        .map(|a| (*a).to_owned())
        .collect();
        BrokerConfig::load(None, Vec::new(), &args).map(|(config, _)| config)
    }

    fn refused(extra: &[&str]) -> (String, String) {
        match load(extra) {
            Ok(_) => panic!("{extra:?} loaded"),
            Err(e) => (e.key().unwrap_or_default().to_owned(), e.to_string()),
        }
    }

    const SASL_CONTROLLER: [&str; 3] = [
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        JAAS,
    ];

    #[test]
    fn a_sasl_controller_listener_logs_in_with_plain_and_its_jaas_entry() {
        let mut args = SASL_CONTROLLER.to_vec();
        args.push("sasl.mechanism.controller.protocol=PLAIN");
        args.push("connections.max.reauth.ms=5000");
        let config = load(&args).expect("valid");
        let sasl = config
            .controller_sasl
            .expect("SASL_PLAINTEXT controller listener");
        assert_eq!(sasl.listener, "CONTROLLER");
        assert_eq!(sasl.login.mechanism, SaslMechanism::Plain);
        assert_eq!(
            (sasl.login.username.as_str(), sasl.login.password.expose()),
            ("controller", "controller-secret")
        );
        assert_eq!(
            sasl.server.plain_users.keys().collect::<Vec<_>>(),
            ["admin", "controller"]
        );
        // Raft connections never re-authenticate: their sessions do not expire.
        assert_eq!(sasl.server.connections_max_reauth_ms, None);
        assert!(!format!("{sasl:?}").contains("controller-secret"));
        // SASL_SSL too; a PLAINTEXT or SSL controller listener has no SASL.
        let mut ssl = args.clone();
        ssl[0] = "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL";
        assert!(load(&ssl).expect("valid").controller_sasl.is_some());
        let plain =
            load(&["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"])
                .expect("valid");
        assert!(plain.controller_sasl.is_none());
    }

    #[test]
    fn a_sasl_controller_listener_logs_in_with_scram_and_its_scram_jaas_entry() {
        for (mechanism, entry) in [
            ("SCRAM-SHA-256", "scram-sha-256"),
            ("SCRAM-SHA-512", "scram-sha-512"),
        ] {
            let enabled = format!("listener.name.controller.sasl.enabled.mechanisms={mechanism}");
            let setting = format!("sasl.mechanism.controller.protocol={mechanism}");
            let jaas = format!("listener.name.controller.{entry}.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"controller\" password=\"controller-secret\";");
            let config = load(&[SASL_CONTROLLER[0], &enabled, &setting, &jaas]).expect("valid");
            let sasl = config.controller_sasl.expect("SASL");
            assert_eq!(sasl.login.mechanism.name(), mechanism);
            assert_eq!(
                (sasl.login.username.as_str(), sasl.login.password.expose()),
                ("controller", "controller-secret")
            );
            assert_eq!(sasl.server.mechanisms, [sasl.login.mechanism]);
            // The node's login is that entry's username and password (SCRAM's users are
            // credentials in the metadata, not JAAS options).
            let anonymous = format!("listener.name.controller.{entry}.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;");
            let (key, message) = refused(&[SASL_CONTROLLER[0], &enabled, &setting, &anonymous]);
            assert_eq!(
                key,
                format!("listener.name.controller.{entry}.sasl.jaas.config")
            );
            assert!(message.contains("has no username option"), "{message}");
        }
    }

    #[test]
    fn what_controllers_cannot_log_in_with_stops_the_node_naming_the_listener_and_mechanism() {
        // Kafka's default, GSSAPI.
        let (key, message) = refused(&SASL_CONTROLLER);
        assert_eq!(key, MECHANISM_KEY);
        assert!(
            message.contains("controller listener CONTROLLER")
                && message.contains("GSSAPI, Kafka's default, is Kerberos"),
            "{message}"
        );
        for (mechanism, why) in [
            ("GSSAPI", "GSSAPI, Kafka's default, is Kerberos"),
            ("OAUTHBEARER", "OAUTHBEARER needs an identity provider"),
            (
                "DIGEST-MD5",
                "DIGEST-MD5 is not a SASL mechanism Brook knows",
            ),
        ] {
            let setting = format!("sasl.mechanism.controller.protocol={mechanism}");
            let mut args = SASL_CONTROLLER.to_vec();
            args.push(&setting);
            let (key, message) = refused(&args);
            assert_eq!(key, MECHANISM_KEY);
            assert!(
                message.contains(&format!("{MECHANISM_KEY}={mechanism}: the controller listener CONTROLLER is SASL_PLAINTEXT"))
                    && message.contains(why),
                "{message}"
            );
        }
        // PLAIN not enabled on the controller listener.
        let (key, message) = refused(&[
            SASL_CONTROLLER[0],
            "listener.name.controller.sasl.enabled.mechanisms=SCRAM-SHA-512",
            "listener.name.controller.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
            JAAS,
            "sasl.mechanism.controller.protocol=PLAIN",
        ]);
        assert_eq!(key, MECHANISM_KEY);
        assert!(
            message.contains("sasl.enabled.mechanisms of the controller listener CONTROLLER"),
            "{message}"
        );
        // A JAAS entry without the node's own login.
        let (key, message) = refused(&[
            SASL_CONTROLLER[0],
            SASL_CONTROLLER[1],
            "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_controller=\"x\";",
            "sasl.mechanism.controller.protocol=PLAIN",
        ]);
        assert_eq!(key, "listener.name.controller.plain.sasl.jaas.config");
        assert!(message.contains("has no username option"), "{message}");
    }

    #[test]
    fn a_broker_only_nodes_raft_listener_accepts_the_entrys_users_and_its_own_login() {
        let args: Vec<String> = [
            "process.roles=broker",
            "node.id=4",
            "controller.listener.names=CONTROLLER",
            VOTERS,
            "listeners=PLAINTEXT://:9092",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol=PLAIN",
            "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" password=\"broker-secret\" user_controller=\"controller-secret\";",
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
        let (config, _) = BrokerConfig::load(None, Vec::new(), &args).expect("valid");
        let sasl = config.controller_sasl.expect("SASL");
        assert_eq!(sasl.login.username, "broker");
        assert_eq!(sasl.server.mechanisms, [SaslMechanism::Plain]);
        assert_eq!(
            sasl.server.plain_users["controller"].expose(),
            "controller-secret"
        );
        assert_eq!(sasl.server.plain_users["broker"].expose(), "broker-secret");
    }
}
