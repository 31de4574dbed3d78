//! `ssl.cipher.suites`: the cipher suites an SSL listener offers (and its inter-broker
//! client asks for), by the IANA names Kafka's JSSE uses: `TLS_AES_128_GCM_SHA256` for
//! TLS 1.3, `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384` for TLS 1.2. Unset or empty: every
//! suite of the crypto provider (Kafka: the JVM's defaults).
//!
//! A name that is a registered suite rustls does not implement (the CBC and DHE suites
//! JSSE still has) is left out with a warning, as long as one listed suite remains; a
//! list of none Brook offers, or a name that is no cipher suite, stops the node naming the
//! key, as Kafka's start-up SSL validation refuses an unsupported suite. The provider's
//! own order of preference is kept.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::CipherSuite;

use crate::config::tls::ListenerTls;

/// The crypto provider of `tls`'s listener, its suites cut to `ssl.cipher.suites`.
/// `Err((key, reason))` names the key as it was set.
pub(crate) fn provider(tls: &ListenerTls) -> Result<Arc<CryptoProvider>, (String, String)> {
    let mut provider = rustls::crypto::ring::default_provider();
    let Some(setting) = &tls.cipher_suites else {
        return Ok(Arc::new(provider));
    };
    let wanted: Vec<&str> = setting
        .value
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect();
    if wanted.is_empty() {
        return Ok(Arc::new(provider));
    }
    let offered: Vec<String> = provider
        .cipher_suites
        .iter()
        .filter_map(|s| iana_name(s.suite()))
        .collect();
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|name| !offered.iter().any(|o| o == name))
        .collect();
    let unknown: Vec<&str> = missing
        .iter()
        .copied()
        .filter(|name| !is_registered(name))
        .collect();
    if !unknown.is_empty() {
        return Err((
            setting.key.clone(),
            format!("Unsupported CipherSuite: {}", unknown.join(", ")),
        ));
    }
    provider
        .cipher_suites
        .retain(|s| iana_name(s.suite()).is_some_and(|name| wanted.iter().any(|w| *w == name)));
    if provider.cipher_suites.is_empty() {
        return Err((
            setting.key.clone(),
            format!(
                "Brook implements none of these cipher suites; it offers {}",
                offered.join(", ")
            ),
        ));
    }
    if !missing.is_empty() {
        tracing::warn!(
            listener = %tls.listener,
            key = %setting.key,
            suites = %missing.join(","),
            "cipher suites Brook does not implement are not offered"
        );
    }
    Ok(Arc::new(provider))
}

/// The key to name when rustls finds no suite for the enabled TLS versions: the cipher
/// list when one is set, else the versions.
pub(crate) fn versions_key(tls: &ListenerTls) -> &str {
    tls.cipher_suites
        .as_ref()
        .map_or("ssl.enabled.protocols", |s| s.key.as_str())
}

/// The suite's IANA name (rustls writes TLS 1.3's as `TLS13_…`).
fn iana_name(suite: CipherSuite) -> Option<String> {
    let name = suite.as_str()?;
    Some(match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name.to_owned(),
    })
}

/// Whether `name` is a cipher suite of IANA's registry (as far as rustls lists it).
fn is_registered(name: &str) -> bool {
    (0..=u16::MAX).any(|code| iana_name(CipherSuite::from(code)).as_deref() == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tls::Setting;

    fn listener(suites: Option<&str>) -> ListenerTls {
        let layers = crate::config::broker::Layers::from_static(&[]);
        let mut tls = ListenerTls::resolve(&layers, "SSL", "SSL").expect("defaults");
        tls.cipher_suites = suites.map(|value| Setting {
            key: "listener.name.ssl.ssl.cipher.suites".to_owned(),
            value: value.to_owned(),
        });
        tls
    }

    fn names(provider: &CryptoProvider) -> Vec<String> {
        provider
            .cipher_suites
            .iter()
            .filter_map(|s| iana_name(s.suite()))
            .collect()
    }

    #[test]
    fn unset_or_empty_offers_every_suite_of_the_provider() {
        let all = rustls::crypto::ring::default_provider().cipher_suites.len();
        for suites in [None, Some(""), Some(" , ")] {
            let provider = provider(&listener(suites)).expect("served");
            assert_eq!(provider.cipher_suites.len(), all, "{suites:?}");
        }
    }

    #[test]
    fn the_listed_suites_are_offered_by_kafkas_names_for_both_versions() {
        let provider = provider(&listener(Some(
            "TLS_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        )))
        .expect("served");
        assert_eq!(
            names(&provider),
            [
                "TLS_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
            ]
        );
    }

    #[test]
    fn a_registered_suite_rustls_lacks_is_left_out_while_another_remains() {
        let provider = provider(&listener(Some(
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,TLS_AES_128_GCM_SHA256",
        )))
        .expect("served");
        assert_eq!(names(&provider), ["TLS_AES_128_GCM_SHA256"]);
    }

    #[test]
    fn a_list_brook_cannot_serve_stops_the_node_naming_the_key() {
        let (key, reason) =
            provider(&listener(Some("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"))).expect_err("none");
        assert_eq!(key, "listener.name.ssl.ssl.cipher.suites");
        assert!(
            reason.starts_with("Brook implements none of these cipher suites; it offers TLS_"),
            "{reason}"
        );
        let (key, reason) = provider(&listener(Some(
            "TLS_AES_128_GCM_SHA256,ECDHE-RSA-AES128-GCM-SHA256",
        )))
        .expect_err("unknown");
        assert_eq!(key, "listener.name.ssl.ssl.cipher.suites");
        assert_eq!(
            reason,
            "Unsupported CipherSuite: ECDHE-RSA-AES128-GCM-SHA256"
        );
    }

    #[test]
    fn only_tls_1_3_suites_with_only_tls_1_2_enabled_names_the_cipher_key() {
        let mut tls = listener(Some("TLS_AES_128_GCM_SHA256"));
        tls.versions = vec![crate::config::tls::TlsVersion::Tls12];
        let built = rustls::ServerConfig::builder_with_provider(provider(&tls).expect("suites"))
            .with_protocol_versions(&crate::server::tls::protocol_versions(&tls));
        assert!(built.is_err(), "no suite for TLS 1.2");
        assert_eq!(versions_key(&tls), "listener.name.ssl.ssl.cipher.suites");
    }
}
