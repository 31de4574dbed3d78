//! SASL settings of the `SASL_PLAINTEXT` and `SASL_SSL` listeners, typed: which mechanisms each listener
//! enables and the PLAIN users of its JAAS entry.
//!
//! Kafka's rules (`JaasContext.loadServerContext`, `SaslChannelBuilder`): a listener's
//! mechanisms are `listener.name.<listener>.sasl.enabled.mechanisms`, else
//! `sasl.enabled.mechanisms` (default GSSAPI); each enabled mechanism needs its own JAAS
//! entry `listener.name.<listener>.<mechanism>.sasl.jaas.config` (listener and mechanism
//! lower-cased), else the node does not start; the unprefixed `sasl.jaas.config` is a
//! client setting a broker ignores. PLAIN's users are the entry's `user_<name>="<password>"`
//! options. Brook serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (its
//! validator from [`super::sasl_oauthbearer`]): GSSAPI (Kerberos) and unknown names stop
//! the node naming the key. Pure but for reading an OAUTHBEARER JWKS file.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::broker::Layers;
use super::error::ConfigError;
use super::jaas::parse_jaas;
use super::listener::Listener;
use super::sasl_oauthbearer::resolve_oauthbearer;
use super::value::split_list;
use crate::auth::sasl::oauthbearer::OAuthBearerValidator;

/// A SASL mechanism Brook serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 4] = [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
        SaslMechanism::OAuthBearer,
    ];

    /// The name clients send in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// A password from the configuration: shown nowhere (Debug prints `[hidden]`, as Kafka
/// prints its `Password` values).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub(crate) fn new(value: String) -> Secret {
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

/// One SASL listener's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslListener {
    /// In configuration order: SaslHandshake answers them in this order.
    pub mechanisms: Vec<SaslMechanism>,
    /// PLAIN's users and their passwords.
    pub plain_users: BTreeMap<String, Secret>,
    /// `connections.max.reauth.ms` (listener-prefixed or not); `None` for 0: sessions
    /// never expire (KIP-368).
    pub connections_max_reauth_ms: Option<u64>,
    /// How OAUTHBEARER tokens are checked, when the listener enables it.
    pub oauthbearer: Option<OAuthBearerValidator>,
}

/// Every SASL listener, by listener name, and the settings they share.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaslSettings {
    pub listeners: BTreeMap<String, Arc<SaslListener>>,
    /// `sasl.server.max.receive.size`: the largest frame before authentication.
    pub max_receive_size: usize,
    /// `connection.failed.authentication.delay.ms`: how long a failed login waits before
    /// its answer and the close (slows down password guessing).
    pub failed_authentication_delay_ms: u64,
}

/// The mechanisms Brook cannot serve get their own words.
fn unsupported_mechanism(name: &str) -> String {
    match name {
        "GSSAPI" => "GSSAPI (Kerberos) is not supported by Brook".to_owned(),
        other => format!("{other} is not a SASL mechanism Brook knows"),
    }
}

/// Parses a mechanism list; the error names the first one Brook cannot serve.
fn mechanisms(key: &str, text: &str) -> Result<Vec<SaslMechanism>, ConfigError> {
    let mut out = Vec::new();
    for name in split_list(text) {
        let Some(mechanism) = SaslMechanism::from_name(&name) else {
            return Err(ConfigError::Unsupported {
                key: key.to_owned(),
                reason: format!(
                    "{key}={text}: {}; Brook serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER",
                    unsupported_mechanism(&name)
                ),
            });
        };
        if !out.contains(&mechanism) {
            out.push(mechanism);
        }
    }
    Ok(out)
}

/// Resolves the SASL settings of every `SASL_PLAINTEXT` and `SASL_SSL` listener in `listeners`
/// (over TLS the SASL exchange is the same: it sees frames only).
pub(crate) fn resolve(
    listeners: &[Listener],
    protocol_map: &BTreeMap<String, String>,
    layers: &Layers,
) -> Result<SaslSettings, ConfigError> {
    // An explicitly set list is checked even where no listener uses it: an operator who
    // asks for a mechanism Brook cannot serve learns it at start.
    for (key, value) in [
        &layers.per_broker,
        &layers.cluster_default,
        &layers.static_props,
    ]
    .into_iter()
    .flat_map(|layer| layer.iter())
    .filter(|(k, _)| k.ends_with("sasl.enabled.mechanisms"))
    {
        mechanisms(key, value)?;
    }
    let number = |key: &str| -> Result<i64, ConfigError> {
        let text = layers.effective(key).unwrap_or("0");
        text.parse()
            .map_err(|_| ConfigError::invalid(key, text, "Not a number"))
    };
    let mut settings = SaslSettings {
        listeners: BTreeMap::new(),
        max_receive_size: usize::try_from(number("sasl.server.max.receive.size")?)
            .unwrap_or(usize::MAX),
        failed_authentication_delay_ms: u64::try_from(number(
            "connection.failed.authentication.delay.ms",
        )?)
        .unwrap_or(0),
    };
    for listener in listeners {
        let protocol = match protocol_map.get(&listener.name).map(String::as_str) {
            Some(p @ ("SASL_PLAINTEXT" | "SASL_SSL")) => p,
            _ => continue,
        };
        let prefix = format!("listener.name.{}.", listener.name.to_ascii_lowercase());
        let prefixed = |key: &str| {
            let full = format!("{prefix}{key}");
            match layers.effective(&full) {
                Some(value) => (full, value.to_owned()),
                None => (
                    key.to_owned(),
                    layers.effective(key).unwrap_or_default().to_owned(),
                ),
            }
        };
        let (key, text) = prefixed("sasl.enabled.mechanisms");
        let enabled = mechanisms(&key, &text).map_err(|e| ConfigError::Unsupported {
            key: key.clone(),
            reason: format!("listener {listener} ({protocol}): {e}"),
        })?;
        if enabled.is_empty() {
            return Err(ConfigError::Unsupported {
                key,
                reason: format!("listener {listener} has no SASL mechanism enabled"),
            });
        }
        let mut plain_users = BTreeMap::new();
        let mut oauthbearer = None;
        for mechanism in &enabled {
            let key = format!(
                "{prefix}{}.sasl.jaas.config",
                mechanism.name().to_ascii_lowercase()
            );
            let Some(text) = layers.effective(&key) else {
                return Err(ConfigError::Unsupported {
                    key: key.clone(),
                    reason: format!(
                        "{key} is not set: SASL mechanism {} of listener {} needs its JAAS entry (Kafka: Could not find a 'KafkaServer' or '{}.KafkaServer' entry in the JAAS configuration)",
                        mechanism.name(),
                        listener.name,
                        listener.name.to_ascii_lowercase()
                    ),
                });
            };
            let entry = parse_jaas(text)
                .map_err(|reason| ConfigError::invalid(&key, "[hidden]", reason))?;
            if *mechanism == SaslMechanism::OAuthBearer {
                oauthbearer = Some(resolve_oauthbearer(&prefix, &key, &entry, layers)?);
            }
            if *mechanism == SaslMechanism::Plain {
                plain_users = entry
                    .options
                    .into_iter()
                    .filter_map(|(name, password)| {
                        let user = name.strip_prefix("user_")?.to_owned();
                        Some((user, Secret(password)))
                    })
                    .collect();
            }
        }
        let (key, reauth) = prefixed("connections.max.reauth.ms");
        let reauth: i64 = reauth
            .parse()
            .map_err(|_| ConfigError::invalid(&key, &reauth, "Not a number"))?;
        settings.listeners.insert(
            listener.name.clone(),
            Arc::new(SaslListener {
                mechanisms: enabled,
                plain_users,
                connections_max_reauth_ms: u64::try_from(reauth).ok().filter(|ms| *ms > 0),
                oauthbearer,
            }),
        );
    }
    Ok(settings)
}

/// Builders for other modules' tests.
#[cfg(test)]
pub mod tests_support {
    use super::*;

    pub fn users(pairs: &[(&str, &str)]) -> BTreeMap<String, Secret> {
        pairs
            .iter()
            .map(|(u, p)| (u.to_string(), Secret(p.to_string())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::listener::parse_listeners;

    fn layers(pairs: &[(&str, &str)]) -> Layers {
        Layers::from_static(pairs)
    }

    fn resolve_with(pairs: &[(&str, &str)]) -> Result<SaslSettings, ConfigError> {
        let listeners = parse_listeners("PLAINTEXT://:9092,SASL_PLAINTEXT://:9093").expect("valid");
        let map = BTreeMap::from([
            ("PLAINTEXT".to_owned(), "PLAINTEXT".to_owned()),
            ("SASL_PLAINTEXT".to_owned(), "SASL_PLAINTEXT".to_owned()),
        ]);
        resolve(&listeners, &map, &layers(pairs))
    }

    const PLAIN_JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;

    #[test]
    fn a_listener_gets_its_mechanisms_and_plain_users() {
        let settings = resolve_with(&[
            ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                PLAIN_JAAS,
            ),
            (
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            ),
            ("connections.max.reauth.ms", "3000"),
        ])
        .expect("valid");
        let listener = &settings.listeners["SASL_PLAINTEXT"];
        assert_eq!(
            listener.mechanisms,
            vec![SaslMechanism::Plain, SaslMechanism::ScramSha512]
        );
        assert_eq!(
            listener.plain_users.keys().collect::<Vec<_>>(),
            vec!["admin", "alice"]
        );
        assert_eq!(listener.plain_users["alice"].expose(), "alice-secret");
        assert_eq!(listener.connections_max_reauth_ms, Some(3000));
        assert!(!settings.listeners.contains_key("PLAINTEXT"));
        assert!(!format!("{settings:?}").contains("secret"));
    }

    #[test]
    fn the_listener_prefix_wins_and_kafkas_default_gssapi_is_refused() {
        let settings = resolve_with(&[
            ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
            (
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
                "PLAIN",
            ),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                PLAIN_JAAS,
            ),
        ]);
        // The unprefixed list names a mechanism without a JAAS entry, but no listener uses it.
        assert_eq!(
            settings.expect("valid").listeners["SASL_PLAINTEXT"].mechanisms,
            vec![SaslMechanism::Plain]
        );
        let err = resolve_with(&[]).expect_err("GSSAPI by default");
        assert!(
            err.to_string()
                .contains("GSSAPI (Kerberos) is not supported"),
            "{err}"
        );
        let err = resolve_with(&[("sasl.enabled.mechanisms", "KERBEROS-V")]).expect_err("unknown");
        assert!(
            err.to_string()
                .contains("KERBEROS-V is not a SASL mechanism Brook knows"),
            "{err}"
        );
        let err = resolve_with(&[("sasl.enabled.mechanisms", "OAUTHBEARER")]).expect_err("no JAAS");
        assert!(
            err.to_string()
                .contains("listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config is not set"),
            "{err}"
        );
    }

    #[test]
    fn a_mechanism_without_its_jaas_entry_stops_the_node_naming_the_key() {
        let err = resolve_with(&[("sasl.enabled.mechanisms", "PLAIN")]).expect_err("no JAAS");
        assert!(err
            .to_string()
            .contains("listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"));
        let err = resolve_with(&[
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                r#"PlainLoginModule required user_a="secret""#,
            ),
        ])
        .expect_err("unterminated");
        assert!(!err.to_string().contains("secret\""), "{err}");
    }
}
