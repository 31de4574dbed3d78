//! Listener TLS settings over the certificates in `server/testdata` (see its README), for the
//! unit tests of `tls_stores` and `tls_reload`.

use std::path::PathBuf;

use crate::auth::ssl_principal::PrincipalMappingRules;
use crate::config::tls::{ClientAuth, ListenerTls, Setting, TlsVersion};

/// The password of `served.p12`.
pub const P12_PASSWORD: &str = "unit-secret";

/// The password of the encrypted copies of `served.key` (`served-encrypted*.key`).
pub const KEY_PASSWORD: &str = "unit-secret";

pub fn path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/server/testdata")
        .join(file)
}

pub fn text(file: &str) -> String {
    std::fs::read_to_string(path(file)).expect("server/testdata file")
}

pub fn setting(key: &str, value: &str) -> Setting {
    Setting {
        key: key.to_owned(),
        value: value.to_owned(),
    }
}

/// Listener SSL with no stores and Kafka's defaults (store types JKS, no client auth).
fn bare() -> ListenerTls {
    ListenerTls {
        listener: "SSL".to_owned(),
        keystore_type: setting("ssl.keystore.type", "JKS"),
        keystore_location: None,
        keystore_password: None,
        key_password: None,
        keystore_certificate_chain: None,
        keystore_key: None,
        truststore_type: setting("ssl.truststore.type", "JKS"),
        truststore_location: None,
        truststore_password: None,
        truststore_certificates: None,
        client_auth: ClientAuth::None,
        versions: vec![TlsVersion::Tls12, TlsVersion::Tls13],
        cipher_suites: None,
        principal_mapping_rules: PrincipalMappingRules::parse("DEFAULT").expect("DEFAULT"),
        allow_dn_changes: false,
        allow_san_changes: false,
    }
}

/// The key store `<name>.pem` + `<name>.key`, inline PEM.
pub fn pem_listener(name: &str) -> ListenerTls {
    ListenerTls {
        keystore_type: setting("ssl.keystore.type", "PEM"),
        keystore_certificate_chain: Some(setting(
            "ssl.keystore.certificate.chain",
            &text(&format!("{name}.pem")),
        )),
        keystore_key: Some(setting("ssl.keystore.key", &text(&format!("{name}.key")))),
        ..bare()
    }
}

/// The key store `file` read as `store_type` with `password`, keys given per listener.
pub fn file_listener(store_type: &str, file: &str, password: &str) -> ListenerTls {
    let location = path(file).display().to_string();
    ListenerTls {
        keystore_type: setting("listener.name.ssl.ssl.keystore.type", store_type),
        keystore_location: Some(setting(
            "listener.name.ssl.ssl.keystore.location",
            &location,
        )),
        keystore_password: Some(setting("listener.name.ssl.ssl.keystore.password", password)),
        ..bare()
    }
}
