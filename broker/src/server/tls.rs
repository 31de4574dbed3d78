//! TLS for SSL listeners: reads each listener's key store and trust store (PEM inline or
//! in a file) and builds its rustls acceptor, once at start. Any missing or bad
//! material stops the node naming the key (exit 2), as a Kafka broker refuses to start.
//!
//! rustls with the `ring` provider: TLS 1.2 and 1.3, AES-GCM and ChaCha20-Poly1305 with
//! the CPU's instructions. `ssl.client.auth` maps to rustls' client verifiers: `none` asks
//! for no certificate, `requested` verifies one when given, `required` refuses a client
//! without one. PKCS12 and JKS stores are refused with the command that converts them to
//! PEM (`openssl pkcs12`, `keytool -importkeystore`): a PKCS12 reader (p12-keystore) would
//! bring derive macros that rebuild RocksDB's bindgen; JKS has no maintained Rust reader.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::auth::ssl_principal::PrincipalMappingRules;
use crate::config::tls::{listener_key, ClientAuth, ListenerTls, Setting, TlsVersion};
use crate::config::BrokerConfig;

/// The first four bytes of a Java KeyStore (JKS) file.
const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];

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
}

/// The acceptors of SSL listeners, by listener name.
pub type TlsListeners = BTreeMap<String, Arc<TlsListener>>;

/// The TLS of every client listener whose protocol is SSL or SASL_SSL, by listener name.
pub fn build_all(config: &BrokerConfig) -> Result<TlsListeners, TlsConfigError> {
    config
        .listener_tls
        .iter()
        .map(|(name, tls)| Ok((name.clone(), Arc::new(build(tls)?))))
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = protocol_versions(tls);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| err("ssl.enabled.protocols", e.to_string()))?;
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

/// An error about one key: (key, reason).
pub(crate) type KeyError = (String, String);

pub(crate) type KeyMaterial = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The listener's certificate chain and private key (also the inter-broker client's
/// certificate, `replication::peer_security`).
pub(crate) fn key_store(tls: &ListenerTls) -> Result<KeyMaterial, KeyError> {
    let kind = tls.keystore_type.value.to_ascii_uppercase();
    let inline = (&tls.keystore_certificate_chain, &tls.keystore_key);
    if let (Some(_), _) | (_, Some(_)) = inline {
        if kind != "PEM" {
            return Err((
                tls.keystore_type.key.clone(),
                format!("ssl.keystore.certificate.chain and ssl.keystore.key are PEM: set ssl.keystore.type=PEM (it is {})", tls.keystore_type.value),
            ));
        }
    }
    match (kind.as_str(), inline) {
        ("PEM", (Some(chain), Some(key))) => {
            let certs = pem_certs(chain)?;
            let key = pem_key(key, tls.key_password.as_ref())?;
            Ok((certs, key))
        }
        ("PEM", (Some(one), None)) | ("PEM", (None, Some(one))) => Err((
            one.key.clone(),
            "an inline PEM key store needs both ssl.keystore.certificate.chain and ssl.keystore.key".to_owned(),
        )),
        ("PEM", (None, None)) => {
            let location = keystore_location(tls)?;
            let text = read_text(location)?;
            let in_file = Setting {
                key: location.key.clone(),
                value: text,
            };
            Ok((pem_certs(&in_file)?, pem_key(&in_file, tls.key_password.as_ref())?))
        }
        ("PKCS12" | "JKS", _) => {
            let location = keystore_location(tls)?;
            Err(store_refusal(location, &tls.keystore_type)?)
        }
        (_, _) => Err((
            tls.keystore_type.key.clone(),
            format!("unknown key store type {}: use PEM or PKCS12", tls.keystore_type.value),
        )),
    }
}

fn keystore_location(tls: &ListenerTls) -> Result<&Setting, KeyError> {
    tls.keystore_location.as_ref().ok_or_else(|| {
        (
            listener_key(&tls.listener, "ssl.keystore.location"),
            "an SSL listener needs a key store: set ssl.keystore.location (or, with ssl.keystore.type=PEM, ssl.keystore.certificate.chain and ssl.keystore.key), optionally prefixed listener.name.<listener>.".to_owned(),
        )
    })
}

/// The trusted CA certificates, `None` when no trust store is configured.
pub(crate) fn trust_store(tls: &ListenerTls) -> Result<Option<RootCertStore>, KeyError> {
    let kind = tls.truststore_type.value.to_ascii_uppercase();
    let certs = match (&tls.truststore_certificates, &tls.truststore_location) {
        (Some(inline), _) => {
            if kind != "PEM" {
                return Err((
                    tls.truststore_type.key.clone(),
                    "ssl.truststore.certificates is PEM: set ssl.truststore.type=PEM".to_owned(),
                ));
            }
            pem_certs(inline)?
        }
        (None, Some(location)) if kind == "PEM" => {
            let text = read_text(location)?;
            pem_certs(&Setting {
                key: location.key.clone(),
                value: text,
            })?
        }
        (None, Some(location)) if kind == "PKCS12" || kind == "JKS" => {
            return Err(store_refusal(location, &tls.truststore_type)?);
        }
        (None, Some(_)) => {
            return Err((
                tls.truststore_type.key.clone(),
                format!(
                    "unknown trust store type {}: use PEM or PKCS12",
                    tls.truststore_type.value
                ),
            ))
        }
        (None, None) => return Ok(None),
    };
    let where_from = tls
        .truststore_certificates
        .as_ref()
        .or(tls.truststore_location.as_ref())
        .map(|s| s.key.clone())
        .unwrap_or_default();
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| {
            (
                where_from.clone(),
                format!("a trusted certificate is not usable: {e}"),
            )
        })?;
    }
    if roots.is_empty() {
        return Err((
            where_from,
            "the trust store holds no certificate".to_owned(),
        ));
    }
    Ok(Some(roots))
}

fn read_text(location: &Setting) -> Result<String, KeyError> {
    std::fs::read_to_string(Path::new(&location.value)).map_err(|e| {
        (
            location.key.clone(),
            format!("cannot read {}: {e}", location.value),
        )
    })
}

/// The refusal of a PKCS12 or JKS store (Java's default `JKS` type also names PKCS12 files
/// since Java 9): Brook reads PEM stores only for now. A JKS file gets the keytool command
/// that converts it, a PKCS12 file the openssl one. `Err` when the file cannot be read.
fn store_refusal(location: &Setting, store_type: &Setting) -> Result<KeyError, KeyError> {
    let data = std::fs::read(&location.value).map_err(|e| {
        (
            location.key.clone(),
            format!("cannot read {}: {e}", location.value),
        )
    })?;
    let file = &location.value;
    if data.starts_with(&JKS_MAGIC) {
        return Ok((
            location.key.clone(),
            format!(
                "{file} is a JKS key store, which Brook cannot read: convert it to PKCS12 with `keytool -importkeystore -srckeystore {file} -srcstoretype JKS -destkeystore store.p12 -deststoretype PKCS12`, then to PEM with `openssl pkcs12 -in store.p12 -nodes -out store.pem`, and set {}=PEM",
                store_type.key
            ),
        ));
    }
    Ok((
        store_type.key.clone(),
        format!(
            "{}={}: Brook reads PEM stores only so far: convert {file} with `openssl pkcs12 -in {file} -nodes -out store.pem` and set {}=PEM",
            store_type.key, store_type.value, store_type.key
        ),
    ))
}

fn pem_certs(setting: &Setting) -> Result<Vec<CertificateDer<'static>>, KeyError> {
    let text = normalize_pem(&setting.value);
    let certs = CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (setting.key.clone(), format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err((setting.key.clone(), "holds no PEM certificate".to_owned()));
    }
    Ok(certs)
}

fn pem_key(
    setting: &Setting,
    password: Option<&Setting>,
) -> Result<PrivateKeyDer<'static>, KeyError> {
    let text = normalize_pem(&setting.value);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        let key = password
            .map(|p| p.key.clone())
            .unwrap_or_else(|| setting.key.clone());
        return Err((
            key,
            "encrypted PEM private keys are not supported yet: give the key unencrypted (`openssl pkcs8 -topk8 -nocrypt`) or use a PKCS12 key store".to_owned(),
        ));
    }
    PrivateKeyDer::from_pem_slice(text.as_bytes())
        .map_err(|e| (setting.key.clone(), format!("no PEM private key: {e}")))
}

/// Re-wraps PEM sections. Kafka's example configurations give PEM values on one logical
/// line (Java-properties continuations join the lines, leaving blanks in the base64), which
/// Kafka's own PEM reader accepts: every section is rebuilt with its base64 unbroken by
/// blanks and wrapped at 64 columns.
pub fn normalize_pem(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let Some(after_begin) = rest.get(start + "-----BEGIN ".len()..) else {
            break;
        };
        let Some(label_end) = after_begin.find("-----") else {
            break;
        };
        let label = after_begin.get(..label_end).unwrap_or_default();
        let body_and_rest = after_begin.get(label_end + 5..).unwrap_or_default();
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body_and_rest.find(&end_marker) else {
            break;
        };
        let body: String = body_and_rest
            .get(..end)
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for line in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = body_and_rest
            .get(end + end_marker.len()..)
            .unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_joined_on_one_line_is_rewrapped() {
        let joined = "-----BEGIN CERTIFICATE----- QUJD REVG\n  R0g= -----END CERTIFICATE-----";
        assert_eq!(
            normalize_pem(joined),
            "-----BEGIN CERTIFICATE-----\nQUJDREVGR0g=\n-----END CERTIFICATE-----\n"
        );
    }
}
