//! The TLS settings of one SSL (or SASL_SSL) listener, resolved from the layers with
//! Kafka's per-listener override: `listener.name.<listener>.ssl.<key>` (listener name in
//! lower case, as Kafka's `ListenerName.configPrefix` writes it) wins over `ssl.<key>`.
//!
//! Pure: values are kept as text with the key they were found under, so that the code
//! that reads key and trust stores (`server::tls`) can name the exact key when material
//! is missing or bad. Secrets stay in [`Setting`]s whose `Debug` never shows the value.

use std::fmt;

use super::broker::Layers;
use super::error::ConfigError;
use crate::auth::ssl_principal::PrincipalMappingRules;

/// The prefix of a per-listener key (`listener.name.ssl.ssl.keystore.location`).
const LISTENER_PREFIX: &str = "listener.name.";

/// One effective value and the key it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: String,
    pub value: String,
}

impl fmt::Debug for Setting {
    // Keystore keys and passwords are secrets: only the key is ever printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Setting({})", self.key)
    }
}

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    /// A certificate is asked for; a client without one still connects (as ANONYMOUS).
    Requested,
    Required,
}

/// The TLS versions of `ssl.enabled.protocols` that rustls offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// Everything that shapes an SSL listener's TLS.
#[derive(Clone, Debug)]
pub struct ListenerTls {
    /// Upper case, as in `listeners`.
    pub listener: String,
    pub keystore_type: Setting,
    pub keystore_location: Option<Setting>,
    pub keystore_password: Option<Setting>,
    pub key_password: Option<Setting>,
    pub keystore_certificate_chain: Option<Setting>,
    pub keystore_key: Option<Setting>,
    pub truststore_type: Setting,
    pub truststore_location: Option<Setting>,
    pub truststore_password: Option<Setting>,
    pub truststore_certificates: Option<Setting>,
    pub client_auth: ClientAuth,
    pub versions: Vec<TlsVersion>,
    /// `ssl.cipher.suites`, as set (`server::tls_suites` reads the names); unset or empty:
    /// every suite of the crypto provider.
    pub cipher_suites: Option<Setting>,
    pub principal_mapping_rules: PrincipalMappingRules,
    /// `ssl.allow.dn.changes`: a dynamic update may change the certificate's subject DN.
    pub allow_dn_changes: bool,
    /// `ssl.allow.san.changes`: … or its subject alternative names.
    pub allow_san_changes: bool,
}

impl ListenerTls {
    /// Resolves the settings of `listener` (whose protocol is `protocol`) from the layers.
    pub(crate) fn resolve(
        layers: &Layers,
        listener: &str,
        protocol: &str,
    ) -> Result<ListenerTls, ConfigError> {
        let get = |key: &str| lookup(layers, listener, key);
        let need = |key: &str| {
            get(key).unwrap_or_else(|| Setting {
                key: key.to_owned(),
                value: String::new(),
            })
        };
        // KIP-684: on a SASL_SSL listener clients authenticate with SASL, so only the
        // listener's own `listener.name.<l>.ssl.client.auth` asks for certificates; the
        // broker-wide key (meant for SSL listeners) is ignored there, as Kafka ignores it.
        let client_auth = if protocol == "SASL_SSL" {
            let key = listener_key(listener, "ssl.client.auth");
            let value = layers.effective(&key).unwrap_or("none").to_owned();
            Setting { key, value }
        } else {
            need("ssl.client.auth")
        };
        let client_auth = match client_auth.value.as_str() {
            "required" => ClientAuth::Required,
            "requested" => ClientAuth::Requested,
            "none" | "" => ClientAuth::None,
            other => {
                return Err(ConfigError::invalid(
                    &client_auth.key,
                    other,
                    "String must be one of: required, requested, none",
                ))
            }
        };
        let protocols = need("ssl.enabled.protocols");
        let versions = parse_versions(&protocols.value)
            .map_err(|reason| ConfigError::invalid(&protocols.key, &protocols.value, reason))?;
        let rules = need("ssl.principal.mapping.rules");
        let principal_mapping_rules = PrincipalMappingRules::parse(&rules.value)
            .map_err(|reason| ConfigError::invalid(&rules.key, &rules.value, reason))?;
        Ok(ListenerTls {
            listener: listener.to_owned(),
            keystore_type: need("ssl.keystore.type"),
            keystore_location: get("ssl.keystore.location"),
            keystore_password: get("ssl.keystore.password"),
            key_password: get("ssl.key.password"),
            keystore_certificate_chain: get("ssl.keystore.certificate.chain"),
            keystore_key: get("ssl.keystore.key"),
            truststore_type: need("ssl.truststore.type"),
            truststore_location: get("ssl.truststore.location"),
            truststore_password: get("ssl.truststore.password"),
            truststore_certificates: get("ssl.truststore.certificates"),
            client_auth,
            versions,
            cipher_suites: get("ssl.cipher.suites"),
            principal_mapping_rules,
            allow_dn_changes: need("ssl.allow.dn.changes").value == "true",
            allow_san_changes: need("ssl.allow.san.changes").value == "true",
        })
    }
}

/// The per-listener key of `key` (`listener.name.<listener lower case>.<key>`).
pub fn listener_key(listener: &str, key: &str) -> String {
    format!("{LISTENER_PREFIX}{}.{key}", listener.to_ascii_lowercase())
}

/// `key` for `listener`: its per-listener value, else the broker-wide value, else the
/// table's default. Empty values count as unset, as Kafka treats an empty password.
fn lookup(layers: &Layers, listener: &str, key: &str) -> Option<Setting> {
    let prefixed = listener_key(listener, key);
    let found = [prefixed.as_str(), key].into_iter().find_map(|name| {
        layers
            .effective(name)
            .filter(|v| !v.is_empty())
            .map(|value| Setting {
                key: name.to_owned(),
                value: value.to_owned(),
            })
    });
    found
}

/// `ssl.enabled.protocols`: TLSv1.2 and TLSv1.3 are served; older names are accepted and
/// not offered (Java disables them too), but at least one served version must remain.
fn parse_versions(text: &str) -> Result<Vec<TlsVersion>, String> {
    let mut versions = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "TLSv1.3" => versions.push(TlsVersion::Tls13),
            "TLSv1.2" => versions.push(TlsVersion::Tls12),
            "TLSv1" | "TLSv1.1" | "SSLv3" => {}
            other => return Err(format!("unknown TLS protocol {other}")),
        }
    }
    if versions.is_empty() {
        return Err("no protocol Brook serves: enable TLSv1.2 or TLSv1.3".to_owned());
    }
    Ok(versions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(pairs: &[(&str, &str)]) -> Layers {
        Layers::from_static(pairs)
    }

    #[test]
    fn a_listener_prefixed_key_wins_over_the_broker_wide_one() {
        let l = layers(&[
            ("ssl.keystore.location", "/all.p12"),
            ("listener.name.external.ssl.keystore.location", "/ext.p12"),
            ("ssl.client.auth", "required"),
        ]);
        let ext = ListenerTls::resolve(&l, "EXTERNAL", "SSL").expect("valid");
        let ssl = ListenerTls::resolve(&l, "SSL", "SSL").expect("valid");
        let sasl_ssl = ListenerTls::resolve(&l, "SASL_SSL", "SASL_SSL").expect("valid");
        assert_eq!(
            ext.keystore_location.map(|s| (s.key, s.value)),
            Some((
                "listener.name.external.ssl.keystore.location".to_owned(),
                "/ext.p12".to_owned()
            ))
        );
        assert_eq!(
            ssl.keystore_location.map(|s| s.value).as_deref(),
            Some("/all.p12")
        );
        assert_eq!(ext.client_auth, ClientAuth::Required);
        assert_eq!(sasl_ssl.client_auth, ClientAuth::None);
        assert_eq!(ssl.keystore_type.value, "JKS");
        assert_eq!(ssl.versions, vec![TlsVersion::Tls12, TlsVersion::Tls13]);
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let s = Setting {
            key: "ssl.keystore.password".into(),
            value: "hunter2".into(),
        };
        assert_eq!(format!("{s:?}"), "Setting(ssl.keystore.password)");
    }

    #[test]
    fn enabled_protocols_must_leave_a_served_version() {
        assert_eq!(parse_versions("TLSv1.3"), Ok(vec![TlsVersion::Tls13]));
        assert!(parse_versions("TLSv1.1").is_err());
        assert!(parse_versions("TLSv9").is_err());
    }
}
