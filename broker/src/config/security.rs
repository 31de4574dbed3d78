//! No silent downgrade: the security settings Brook cannot serve yet are refused, at
//! start and in dynamic updates, instead of being stored and ignored while clients get
//! plain, unauthenticated Kafka (issue 25 item 0).
//!
//! Every listener may use any of Kafka's four protocols (PLAINTEXT, SSL, SASL_PLAINTEXT,
//! SASL_SSL; `listener.security.protocol.map` admits no other): the inter-broker listener
//! ([`super::inter_broker`] checks how brokers log in on it) and the controller listener
//! (TLS: `cluster::quorum_tls`; SASL: [`super::controller_sasl`], which refuses the
//! mechanisms controllers cannot log in with) included. Refused at start: an
//! `authorizer.class.name` other than Kafka's StandardAuthorizer ([`super::authorizer`]) and
//! the SASL mechanisms Brook cannot serve ([`super::sasl`]).
//! Dynamically: every dynamic
//! `ssl.*` / `sasl.*` key, `principal.builder.class` and any `listener.name.*` key,
//! except a listener's key and trust stores (`listener.name.<listener>.ssl.keystore.*` and
//! `ssl.truststore.*`, swapped while the listener serves: `server::tls_reload`) and the
//! Kerberos and login-refresh timings, which only tune a login Brook never performs and are
//! stored as Kafka stores them (librdkafka's admin test 0081 alters
//! `sasl.kerberos.min.time.before.relogin`). Pure functions.

use super::error::ConfigError;

/// Kafka's `DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS`: keystore and truststore keys a
/// dynamic update may only set with a `listener.name.<listener>.` prefix.
pub const PER_LISTENER_ONLY: &[&str] = &[
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// A listener's store key (`listener.name.<listener>.<key>`, `<key>` in
/// [`PER_LISTENER_ONLY`]): the listener (as written, lower case) and the key.
pub fn listener_store_key(key: &str) -> Option<(&str, &'static str)> {
    let rest = key.strip_prefix("listener.name.")?;
    PER_LISTENER_ONLY.iter().find_map(|base| {
        let listener = rest.strip_suffix(base)?.strip_suffix('.')?;
        (!listener.is_empty() && !listener.contains('.')).then_some((listener, *base))
    })
}

/// Login timings of Kerberos and OAuth clients: harmless to store, as Kafka stores them.
fn is_login_timing(key: &str) -> bool {
    key.starts_with("sasl.kerberos.") || key.starts_with("sasl.login.refresh.")
}

/// Whether a dynamic update of `key` (a dynamic key, or a `listener.name.*` one) would
/// change how Brook authenticates, encrypts or authorizes, which it cannot do yet.
pub fn refused_dynamically(key: &str) -> bool {
    if key.starts_with("listener.name.") {
        return listener_store_key(key).is_none();
    }
    if is_login_timing(key) {
        return false;
    }
    key.starts_with("ssl.") || key.starts_with("sasl.") || key == "principal.builder.class"
}

/// The refusal of a dynamic security update.
pub fn dynamic_refusal(key: &str) -> ConfigError {
    ConfigError::Unsupported {
        key: key.to_owned(),
        reason: format!(
            "Brook cannot change this TLS or SASL setting while it runs (of TLS, a listener's key and trust stores can change: listener.name.<listener>.ssl.keystore.* and ssl.truststore.*): {key} cannot be set, as it would change how clients are authenticated or encrypted"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_timings_are_stored_and_what_changes_security_is_refused() {
        assert!(!refused_dynamically(
            "sasl.kerberos.min.time.before.relogin"
        ));
        assert!(!refused_dynamically("sasl.login.refresh.window.factor"));
        assert!(refused_dynamically("sasl.enabled.mechanisms"));
        assert!(refused_dynamically("sasl.jaas.config"));
        assert!(refused_dynamically("ssl.client.auth"));
        assert!(refused_dynamically("principal.builder.class"));
        assert!(refused_dynamically(
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"
        ));
        assert!(!refused_dynamically("log.cleaner.threads"));
        assert!(!refused_dynamically(
            "listener.name.ssl.ssl.keystore.location"
        ));
        assert!(refused_dynamically("listener.name.ssl.ssl.client.auth"));
        assert_eq!(
            listener_store_key("listener.name.sasl_ssl.ssl.truststore.password"),
            Some(("sasl_ssl", "ssl.truststore.password"))
        );
        assert_eq!(
            listener_store_key("listener.name.ssl.keystore.location"),
            None
        );
        assert_eq!(
            listener_store_key("listener.name.a.b.ssl.keystore.type"),
            None
        );
        assert_eq!(
            dynamic_refusal("ssl.client.auth").to_string(),
            "Brook cannot change this TLS or SASL setting while it runs (of TLS, a listener's key and trust stores can change: listener.name.<listener>.ssl.keystore.* and ssl.truststore.*): ssl.client.auth cannot be set, as it would change how clients are authenticated or encrypted"
        );
    }

    #[test]
    fn the_per_listener_list_is_sorted_and_all_ssl() {
        let mut sorted = PER_LISTENER_ONLY.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, PER_LISTENER_ONLY);
        assert!(PER_LISTENER_ONLY.iter().all(|k| k.starts_with("ssl.")));
    }
}
