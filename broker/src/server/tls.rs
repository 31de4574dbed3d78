//! TLS for SSL listeners: builds each listener's rustls acceptor from its key and trust
//! stores (`tls_stores`) at start, where missing or bad material stops the node naming
//! the key (exit 2), as a Kafka broker refuses to start; `tls_reload` swaps an acceptor when
//! a dynamic update changes the stores.
//!
//! rustls with the `ring` provider: TLS 1.2 and 1.3, AES-GCM and ChaCha20-Poly1305 with
//! the CPU's instructions. `ssl.client.auth` maps to rustls' client verifiers: `none` asks
//! for no certificate, `requested` verifies one when given, `required` refuses a client
//! without one.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{ServerConfig, SupportedProtocolVersion};
use tokio_rustls::TlsAcceptor;

use crate::auth::ssl_principal::{subject_dn_rfc2253, PrincipalMappingRules};
use crate::config::tls::{ClientAuth, ListenerTls, TlsVersion};
use crate::config::BrokerConfig;
use crate::server::tls_reload::ServedTls;
pub use crate::server::tls_stores::normalize_pem;
pub(crate) use crate::server::tls_stores::{
    key_store, refuse_pem_truststore_password, trust_store,
};
use crate::server::tls_suites;

/// A TLS configuration that cannot be served; the node stops with this message.
#[derive(Debug, thiserror::Error)]
#[error("invalid TLS configuration for listener {listener}: {key}: {reason}")]
pub struct TlsConfigError {
    pub listener: String,
    pub key: String,
    pub reason: String,
}

/// What an SSL listener needs per connection.
pub struct TlsListener {
    pub acceptor: TlsAcceptor,
    pub principal_mapping_rules: PrincipalMappingRules,
    /// Who the listener's certificate says it is (dynamic updates may not change it).
    pub identity: CertIdentity,
}

/// The subject DN (RFC 2253) and subject alternative names of a certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertIdentity {
    pub dn: String,
    /// Sorted.
    pub sans: Vec<String>,
}

impl CertIdentity {
    fn of(cert: &[u8]) -> CertIdentity {
        let dn = subject_dn_rfc2253(cert).unwrap_or_default();
        let mut sans = match x509_parser::parse_x509_certificate(cert) {
            Ok((_, parsed)) => match parsed.subject_alternative_name() {
                Ok(Some(ext)) => ext
                    .value
                    .general_names
                    .iter()
                    .map(|name| format!("{name:?}"))
                    .collect(),
                _ => Vec::new(),
            },
            Err(_) => Vec::new(),
        };
        sans.sort();
        CertIdentity { dn, sans }
    }
}

/// The TLS of each SSL listener, by listener name; each can be swapped while it serves.
pub type TlsListeners = BTreeMap<String, Arc<ServedTls>>;

/// The TLS of every client listener whose protocol is SSL or SASL_SSL, by listener name.
pub fn build_all(config: &BrokerConfig) -> Result<TlsListeners, TlsConfigError> {
    config
        .listener_tls
        .iter()
        .map(|(name, tls)| Ok((name.clone(), Arc::new(ServedTls::new(tls)?))))
        .collect()
}

/// Builds one listener's acceptor.
pub fn build(tls: &ListenerTls) -> Result<TlsListener, TlsConfigError> {
    let err = |key: &str, reason: String| TlsConfigError {
        listener: tls.listener.clone(),
        key: key.to_owned(),
        reason,
    };
    let (certs, key) = key_store(tls).map_err(|(k, r)| err(&k, r))?;
    refuse_pem_truststore_password(tls).map_err(|(k, r)| err(&k, r))?;
    let identity = certs
        .first()
        .map(|leaf| CertIdentity::of(leaf.as_ref()))
        .unwrap_or_default();
    let provider = tls_suites::provider(tls).map_err(|(k, r)| err(&k, r))?;
    let versions = protocol_versions(tls);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| err(tls_suites::versions_key(tls), e.to_string()))?;
    let builder = match tls.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let roots = trust_store(tls)
                .map_err(|(k, r)| err(&k, r))?
                .ok_or_else(|| {
                    err(
                        "ssl.truststore.location",
                        "ssl.client.auth is requested or required, so client certificates must be verified: set ssl.truststore.location or ssl.truststore.certificates".to_owned(),
                    )
                })?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| err("ssl.truststore.location", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let keystore_key = tls
        .keystore_key
        .as_ref()
        .or(tls.keystore_location.as_ref())
        .map(|s| s.key.clone())
        .unwrap_or_else(|| "ssl.keystore.location".to_owned());
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        err(
            &keystore_key,
            format!("the key and certificate chain are not usable: {e}"),
        )
    })?;
    Ok(TlsListener {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        principal_mapping_rules: tls.principal_mapping_rules.clone(),
        identity,
    })
}

/// The TLS versions of `ssl.enabled.protocols`, as rustls names them.
pub(crate) fn protocol_versions(tls: &ListenerTls) -> Vec<&'static SupportedProtocolVersion> {
    tls.versions
        .iter()
        .map(|v| match v {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        })
        .collect()
}
