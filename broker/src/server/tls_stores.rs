//! An SSL listener's key and trust stores, as Kafka's `DefaultSslEngineFactory` reads
//! them: PEM inline (`ssl.keystore.certificate.chain`, `ssl.keystore.key`,
//! `ssl.truststore.certificates`) or in a file, and PKCS12 files (p12-keystore: OpenSSL 3's
//! and keytool's PBES2/AES stores and the legacy 3DES/RC2 ones), read whether the type says
//! PKCS12 or JKS, as Java reads a PKCS12 file under either name since Java 9. A real JKS
//! file is refused with the `keytool -importkeystore` command that converts it: JKS has no
//! maintained Rust reader. A PEM private key may be encrypted, decrypted with
//! `ssl.key.password` (`tls_pem_key`). Every error names the key whose material is missing
//! or bad, and none shows a secret.

use std::path::Path;

use p12_keystore::{KeyStore, KeyStoreEntry, Pkcs12ImportPolicy};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::server::tls_pem_key::pem_key;

use crate::config::tls::{listener_key, ListenerTls, Setting};

/// The first four bytes of a Java KeyStore (JKS) file.
const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];

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
    if kind == "PEM" {
        refuse_pem_keystore_password(tls, inline.0.is_some() && inline.1.is_some())?;
    }
    match (kind.as_str(), inline) {
        ("PEM", (Some(chain), Some(key))) => {
            let certs = pem_certs(chain)?;
            let key = pem_key(key, tls.key_password.as_ref(), &tls.listener)?;
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
            let key = pem_key(&in_file, tls.key_password.as_ref(), &tls.listener)?;
            Ok((pem_certs(&in_file)?, key))
        }
        ("PKCS12" | "JKS", _) => {
            let location = keystore_location(tls)?;
            let data = read_store(location, &tls.keystore_type)?;
            let password = tls.keystore_password.as_ref().ok_or_else(|| {
                (
                    listener_key(&tls.listener, "ssl.keystore.password"),
                    format!("{} is a PKCS12 key store: set ssl.keystore.password", location.value),
                )
            })?;
            pkcs12_key_store(location, &data, password)
        }
        (_, _) => Err((
            tls.keystore_type.key.clone(),
            format!("unknown key store type {}: use PEM, PKCS12 or JKS", tls.keystore_type.value),
        )),
    }
}

/// Kafka's `DefaultSslEngineFactory.createKeystore`: a PEM key store has no store password,
/// only a key password (`ssl.key.password`, for an encrypted key); Kafka refuses the
/// combination at start rather than ignore a password the operator meant to protect
/// something, with one sentence for the inline store (ending in a full stop) and one for a
/// file (without). The error names the key as set, per listener or broker-wide.
fn refuse_pem_keystore_password(tls: &ListenerTls, inline: bool) -> Result<(), KeyError> {
    let Some(password) = &tls.keystore_password else {
        return Ok(());
    };
    if !inline && tls.keystore_location.is_none() {
        return Ok(()); // no key store at all: the missing location is the error to report
    }
    let stop = if inline { "." } else { "" };
    Err((
        password.key.clone(),
        format!("SSL key store password cannot be specified with PEM format, only key password may be specified{stop}"),
    ))
}

fn keystore_location(tls: &ListenerTls) -> Result<&Setting, KeyError> {
    tls.keystore_location.as_ref().ok_or_else(|| {
        (
            listener_key(&tls.listener, "ssl.keystore.location"),
            "an SSL listener needs a key store: set ssl.keystore.location (or, with ssl.keystore.type=PEM, ssl.keystore.certificate.chain and ssl.keystore.key), optionally prefixed listener.name.<listener>.".to_owned(),
        )
    })
}

/// Kafka's `createTruststore`: PEM certificates are not protected by a store password, and
/// Kafka refuses one at start even where no client certificate is asked for (so a listener
/// calls this whether or not it reads its trust store).
pub(crate) fn refuse_pem_truststore_password(tls: &ListenerTls) -> Result<(), KeyError> {
    let pem = tls.truststore_type.value.eq_ignore_ascii_case("PEM");
    let store = tls.truststore_certificates.is_some() || tls.truststore_location.is_some();
    match &tls.truststore_password {
        Some(password) if pem && store => Err((
            password.key.clone(),
            "SSL trust store password cannot be specified for PEM format.".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// The trusted CA certificates, `None` when no trust store is configured.
pub(crate) fn trust_store(tls: &ListenerTls) -> Result<Option<RootCertStore>, KeyError> {
    refuse_pem_truststore_password(tls)?;
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
            let data = read_store(location, &tls.truststore_type)?;
            pkcs12_trust_store(location, &data, tls.truststore_password.as_ref())?
        }
        (None, Some(_)) => {
            return Err((
                tls.truststore_type.key.clone(),
                format!(
                    "unknown trust store type {}: use PEM, PKCS12 or JKS",
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

/// A PKCS12 (or JKS-typed) store file's bytes. A real JKS file is refused with the
/// keytool command that converts it to PKCS12.
fn read_store(location: &Setting, store_type: &Setting) -> Result<Vec<u8>, KeyError> {
    let data = std::fs::read(&location.value).map_err(|e| {
        (
            location.key.clone(),
            format!("cannot read {}: {e}", location.value),
        )
    })?;
    if data.starts_with(&JKS_MAGIC) {
        let file = &location.value;
        return Err((
            location.key.clone(),
            format!(
                "{file} is a JKS key store, which Brook cannot read: convert it to PKCS12 with `keytool -importkeystore -srckeystore {file} -srcstoretype JKS -destkeystore store.p12 -deststoretype PKCS12` and set {}=PKCS12",
                store_type.key
            ),
        ));
    }
    Ok(data)
}

/// The first private key of a PKCS12 key store and its certificate chain. The store's
/// password also decrypts the key (keytool refuses a different key password for PKCS12).
fn pkcs12_key_store(
    location: &Setting,
    data: &[u8],
    password: &Setting,
) -> Result<KeyMaterial, KeyError> {
    let file = &location.value;
    let store = KeyStore::from_pkcs12(data, &password.value, Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| pkcs12_error(location, &password.key, &e))?;
    let Some((_, chain)) = store.private_key_chain() else {
        return Err((
            location.key.clone(),
            format!("the PKCS12 key store {file} holds no private key"),
        ));
    };
    if chain.certs().is_empty() {
        return Err((
            location.key.clone(),
            format!("the PKCS12 key store {file} holds no certificate for its private key"),
        ));
    }
    let certs = chain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
    Ok((certs, key))
}

/// Every certificate of a PKCS12 trust store. Java trusts only entries keytool marked as
/// trusted; Brook also takes the unmarked ones `openssl pkcs12 -export -nokeys` writes.
fn pkcs12_trust_store(
    location: &Setting,
    data: &[u8],
    password: Option<&Setting>,
) -> Result<Vec<CertificateDer<'static>>, KeyError> {
    let secret = password.map_or("", |p| p.value.as_str());
    let password_key = password.map_or("ssl.truststore.password", |p| p.key.as_str());
    let store = KeyStore::from_pkcs12(data, secret, Pkcs12ImportPolicy::Raw)
        .map_err(|e| pkcs12_error(location, password_key, &e))?;
    let certs: Vec<CertificateDer<'static>> = store
        .entries()
        .filter_map(|(_, entry)| match entry {
            KeyStoreEntry::Certificate(cert) => Some(CertificateDer::from(cert.as_der().to_vec())),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err((
            location.key.clone(),
            format!(
                "the PKCS12 trust store {} holds no certificate",
                location.value
            ),
        ));
    }
    Ok(certs)
}

/// A PKCS12 store that does not open; a MAC mismatch is a wrong password (Kafka: "keystore
/// password was incorrect").
fn pkcs12_error(
    location: &Setting,
    password_key: &str,
    e: &p12_keystore::error::Error,
) -> KeyError {
    use p12_keystore::error::Error;
    match e {
        Error::MacError(_) | Error::UnpadError => (
            password_key.to_owned(),
            format!(
                "cannot open the PKCS12 store {}: the password was incorrect",
                location.value
            ),
        ),
        other => (
            location.key.clone(),
            format!("cannot read {} as a PKCS12 store: {other}", location.value),
        ),
    }
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
    use crate::server::tls_testdata::{file_listener, path, setting, text, P12_PASSWORD};

    fn served_der() -> Vec<u8> {
        CertificateDer::from_pem_slice(text("served.pem").as_bytes())
            .expect("served.pem")
            .as_ref()
            .to_vec()
    }

    const PEM_PASSWORD_REFUSED: &str =
        "SSL key store password cannot be specified with PEM format, only key password may be specified";

    #[test]
    fn an_inline_pem_key_store_with_a_store_password_is_refused_as_kafka_refuses_it() {
        let mut tls = crate::server::tls_testdata::pem_listener("served");
        tls.keystore_password = Some(setting("listener.name.ssl.ssl.keystore.password", "x"));
        let (key, reason) = key_store(&tls).expect_err("refused");
        assert_eq!(key, "listener.name.ssl.ssl.keystore.password");
        assert_eq!(reason, format!("{PEM_PASSWORD_REFUSED}."));
    }

    #[test]
    fn a_pem_key_store_file_with_a_store_password_is_refused_naming_the_key_as_set() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("keystore.pem");
        std::fs::write(&file, text("served.key") + &text("served.pem")).expect("write");
        let mut tls = file_listener("PEM", "served.pem", "x");
        tls.keystore_location = Some(setting(
            "ssl.keystore.location",
            &file.display().to_string(),
        ));
        tls.keystore_password = Some(setting("ssl.keystore.password", "x"));
        let (key, reason) = key_store(&tls).expect_err("refused");
        assert_eq!(
            (key.as_str(), reason.as_str()),
            ("ssl.keystore.password", PEM_PASSWORD_REFUSED)
        );
        tls.keystore_password = None;
        assert!(
            key_store(&tls).is_ok(),
            "the same store without the password is served"
        );
    }

    #[test]
    fn a_pem_trust_store_with_a_password_is_refused_as_kafka_refuses_it() {
        let mut tls = file_listener("PKCS12", "served.p12", P12_PASSWORD);
        tls.truststore_type = setting("ssl.truststore.type", "PEM");
        tls.truststore_location = Some(setting(
            "ssl.truststore.location",
            &path("served.pem").display().to_string(),
        ));
        tls.truststore_password = Some(setting("listener.name.ssl.ssl.truststore.password", "x"));
        let (key, reason) = trust_store(&tls).expect_err("refused");
        assert_eq!(key, "listener.name.ssl.ssl.truststore.password");
        assert_eq!(
            reason,
            "SSL trust store password cannot be specified for PEM format."
        );
    }

    #[test]
    fn an_openssl_pkcs12_key_store_gives_its_key_and_certificate() {
        let (certs, key) =
            key_store(&file_listener("PKCS12", "served.p12", P12_PASSWORD)).expect("reads");
        assert_eq!(certs.len(), 1);
        assert_eq!(certs[0].as_ref(), served_der().as_slice());
        assert!(matches!(key, PrivateKeyDer::Pkcs8(_)));
    }

    #[test]
    fn the_jks_type_reads_a_pkcs12_file_as_java_does() {
        assert!(key_store(&file_listener("JKS", "served.p12", P12_PASSWORD)).is_ok());
    }

    #[test]
    fn a_wrong_pkcs12_password_names_the_password_key_and_never_the_password() {
        let (key, reason) = key_store(&file_listener("PKCS12", "served.p12", "not-the-secret"))
            .expect_err("wrong password");
        assert_eq!(key, "listener.name.ssl.ssl.keystore.password");
        assert!(reason.ends_with("the password was incorrect"), "{reason}");
        assert!(!reason.contains("not-the-secret"));
    }

    #[test]
    fn a_jks_file_is_refused_with_the_keytool_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let jks = dir.path().join("store.jks");
        std::fs::write(&jks, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).expect("write");
        let mut tls = file_listener("JKS", "served.p12", P12_PASSWORD);
        tls.keystore_location = Some(setting("ssl.keystore.location", &jks.display().to_string()));
        let (key, reason) = key_store(&tls).expect_err("JKS");
        assert_eq!(key, "ssl.keystore.location");
        assert!(reason.contains("keytool -importkeystore"), "{reason}");
    }

    #[test]
    fn a_pkcs12_trust_store_gives_its_certificates() {
        let mut tls = file_listener("PEM", "served.pem", "");
        tls.truststore_type = setting("ssl.truststore.type", "PKCS12");
        tls.truststore_location = Some(setting(
            "ssl.truststore.location",
            &path("served.p12").display().to_string(),
        ));
        tls.truststore_password = Some(setting("ssl.truststore.password", P12_PASSWORD));
        let roots = trust_store(&tls).expect("reads").expect("configured");
        assert_eq!(roots.len(), 1);
    }

    #[test]
    fn pem_joined_on_one_line_is_rewrapped() {
        let joined = "-----BEGIN CERTIFICATE----- QUJD REVG\n  R0g= -----END CERTIFICATE-----";
        assert_eq!(
            normalize_pem(joined),
            "-----BEGIN CERTIFICATE-----\nQUJDREVGR0g=\n-----END CERTIFICATE-----\n"
        );
    }
}
