//! Key and trust stores changed while the node runs, as Kafka's `SslFactory` reconfigures a
//! listener. A per-broker dynamic update (`kafka-configs --entity-type brokers --entity-name
//! <id> --alter --add-config listener.name.<l>.ssl.keystore.location=…`) is checked by
//! building the acceptor it asks for; once stored, that acceptor replaces the serving one.
//! New connections get it; connections already open keep theirs, nothing is dropped. The
//! same location set again re-reads its file when the file changed on disk, as Kafka
//! reloads a key store replaced in place.
//!
//! The checks are Kafka's (`SslFactory.createNewSslEngineFactory`): the new certificate keeps
//! the subject DN and the subject alternative names unless `ssl.allow.dn.changes` /
//! `ssl.allow.san.changes`, and a trust store cannot be added to a listener that had none.
//! Refusals are worded as Kafka words them.

use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock};

use crate::config::tls::{ListenerTls, Setting};
use crate::server::tls::{build, TlsConfigError, TlsListener};

/// The prefix of every refusal, as Kafka's `SslFactory` words it.
const REFUSAL: &str = "Validation of dynamic config update of SSLFactory failed";

/// One SSL listener's TLS, swapped when its stores change.
pub struct ServedTls {
    /// Upper case, as in `listeners`.
    listener: String,
    current: RwLock<Arc<TlsListener>>,
    /// What `current` was built from; held while an update builds and swaps, so updates
    /// apply one at a time.
    built: Mutex<BuiltFrom>,
}

/// The settings and files an acceptor was built from.
#[derive(Clone, PartialEq, Eq)]
struct BuiltFrom {
    stores: Vec<Setting>,
    files: Vec<FileStamp>,
    has_truststore: bool,
}

/// A store file as it was on disk when read.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    path: String,
    modified: Option<SystemTime>,
    len: Option<u64>,
}

impl BuiltFrom {
    fn of(tls: &ListenerTls) -> BuiltFrom {
        BuiltFrom::with_stores(store_settings(tls), tls)
    }

    fn with_stores(stores: Vec<Setting>, tls: &ListenerTls) -> BuiltFrom {
        BuiltFrom {
            stores,
            files: file_stamps(tls),
            has_truststore: tls.truststore_location.is_some()
                || tls.truststore_certificates.is_some(),
        }
    }
}

/// The settings that say which stores a listener serves.
fn store_settings(tls: &ListenerTls) -> Vec<Setting> {
    [
        Some(&tls.keystore_type),
        tls.keystore_location.as_ref(),
        tls.keystore_password.as_ref(),
        tls.key_password.as_ref(),
        tls.keystore_certificate_chain.as_ref(),
        tls.keystore_key.as_ref(),
        Some(&tls.truststore_type),
        tls.truststore_location.as_ref(),
        tls.truststore_password.as_ref(),
        tls.truststore_certificates.as_ref(),
        // Not a store, but rebuilt the same way (Kafka rebuilds on any SSL key's change).
        tls.cipher_suites.as_ref(),
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect()
}

/// The store files as they are on disk now.
fn file_stamps(tls: &ListenerTls) -> Vec<FileStamp> {
    [&tls.keystore_location, &tls.truststore_location]
        .into_iter()
        .flatten()
        .map(|location| {
            let meta = std::fs::metadata(&location.value).ok();
            FileStamp {
                path: location.value.clone(),
                modified: meta.as_ref().and_then(|m| m.modified().ok()),
                len: meta.map(|m| m.len()),
            }
        })
        .collect()
}

impl ServedTls {
    /// The listener's TLS as configured at start.
    pub fn new(tls: &ListenerTls) -> Result<ServedTls, TlsConfigError> {
        Ok(ServedTls {
            listener: tls.listener.clone(),
            current: RwLock::new(Arc::new(build(tls)?)),
            built: Mutex::new(BuiltFrom::of(tls)),
        })
    }

    /// The acceptor a connection accepted now uses.
    pub fn current(&self) -> Arc<TlsListener> {
        self.current.read().clone()
    }

    /// Checks that `next` can be served in place of the current TLS: `Err` with Kafka's
    /// words when it cannot. Nothing changes.
    pub fn validate(&self, next: &ListenerTls) -> Result<(), String> {
        let built = self.built.lock().clone();
        self.prepare(&built, next, true).map(|_| ())
    }

    /// Serves `next` from now on when its stores differ from the serving ones (or, with
    /// `reread_files`, when a store file changed on disk) and pass the checks; a refused
    /// update is logged and the current TLS stays.
    pub fn update(&self, next: &ListenerTls, reread_files: bool) {
        let mut built = self.built.lock();
        match self.prepare(&built, next, reread_files) {
            Ok(Some((listener, from))) => {
                *self.current.write() = Arc::new(listener);
                *built = from;
                tracing::info!(listener = %self.listener, "TLS key and trust stores reloaded");
            }
            Ok(None) => {}
            Err(reason) => {
                tracing::error!(listener = %self.listener, "dynamic TLS update not applied: {reason}");
            }
        }
    }

    /// The TLS `next` asks for, `None` when it asks for what is served.
    fn prepare(
        &self,
        built: &BuiltFrom,
        next: &ListenerTls,
        reread_files: bool,
    ) -> Result<Option<(TlsListener, BuiltFrom)>, String> {
        // Metadata updates ask on every new image: the files are looked at only when asked to.
        let stores = store_settings(next);
        if stores == built.stores && (!reread_files || file_stamps(next) == built.files) {
            return Ok(None);
        }
        let from = BuiltFrom::with_stores(stores, next);
        let listener = build(next).map_err(|e| format!("{REFUSAL}: {}: {}", e.key, e.reason))?;
        if !built.has_truststore && from.has_truststore {
            return Err(format!("{REFUSAL}: Cannot add SSL truststore to an existing listener for which no truststore was configured."));
        }
        let old = &self.current().identity;
        let new = &listener.identity;
        if !next.allow_dn_changes && old.dn != new.dn {
            return Err(format!(
                "{REFUSAL}: Keystore DistinguishedName does not match: existing={{DN={}}}, new={{DN={}}}",
                old.dn, new.dn
            ));
        }
        if !next.allow_san_changes && old.sans != new.sans {
            return Err(format!(
                "{REFUSAL}: Keystore SubjectAltNames do not match: existing={{SAN=[{}]}}, new={{SAN=[{}]}}",
                old.sans.join(", "),
                new.sans.join(", ")
            ));
        }
        Ok(Some((listener, from)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::tls_testdata::{pem_listener, setting, text, KEY_PASSWORD};

    #[test]
    fn the_same_stores_change_nothing() {
        let served = ServedTls::new(&pem_listener("served")).expect("served");
        let before = served.current();
        assert_eq!(served.validate(&pem_listener("served")), Ok(()));
        served.update(&pem_listener("served"), true);
        assert!(Arc::ptr_eq(&before, &served.current()));
    }

    #[test]
    fn a_renewal_with_the_same_subject_and_sans_is_swapped_in() {
        let served = ServedTls::new(&pem_listener("served")).expect("served");
        let before = served.current();
        assert_eq!(before.identity.dn, "O=Brook,CN=localhost");
        assert_eq!(before.identity.sans.len(), 2, "{:?}", before.identity.sans);
        assert_eq!(served.validate(&pem_listener("renewed")), Ok(()));
        assert!(
            Arc::ptr_eq(&before, &served.current()),
            "validate swaps nothing"
        );
        served.update(&pem_listener("renewed"), false);
        let after = served.current();
        assert!(!Arc::ptr_eq(&before, &after));
        assert_eq!(after.identity, before.identity);
    }

    #[test]
    fn another_subject_is_refused_in_kafkas_words_and_the_served_tls_stays() {
        let served = ServedTls::new(&pem_listener("served")).expect("served");
        let before = served.current();
        let refusal = served
            .validate(&pem_listener("renamed"))
            .expect_err("another DN");
        assert_eq!(
            refusal,
            "Validation of dynamic config update of SSLFactory failed: Keystore DistinguishedName does not match: existing={DN=O=Brook,CN=localhost}, new={DN=O=Brook,CN=renamed}"
        );
        served.update(&pem_listener("renamed"), true);
        assert!(Arc::ptr_eq(&before, &served.current()));
    }

    #[test]
    fn ssl_allow_dn_changes_lets_another_subject_in() {
        let served = ServedTls::new(&pem_listener("served")).expect("served");
        let next = ListenerTls {
            allow_dn_changes: true,
            ..pem_listener("renamed")
        };
        assert_eq!(served.validate(&next), Ok(()));
        served.update(&next, false);
        assert_eq!(served.current().identity.dn, "O=Brook,CN=renamed");
    }

    #[test]
    fn a_trust_store_cannot_be_added_to_a_listener_that_had_none() {
        let served = ServedTls::new(&pem_listener("served")).expect("served");
        let next = ListenerTls {
            truststore_type: setting("ssl.truststore.type", "PEM"),
            truststore_certificates: Some(setting(
                "ssl.truststore.certificates",
                &text("served.pem"),
            )),
            ..pem_listener("served")
        };
        assert_eq!(
            served.validate(&next),
            Err("Validation of dynamic config update of SSLFactory failed: Cannot add SSL truststore to an existing listener for which no truststore was configured.".to_owned())
        );
    }

    #[test]
    fn a_store_that_does_not_build_is_refused_naming_its_key() {
        let served = ServedTls::new(&pem_listener("served")).expect("served");
        let next = ListenerTls {
            keystore_key: None,
            ..pem_listener("served")
        };
        let refusal = served.validate(&next).expect_err("no key");
        assert!(
            refusal.starts_with("Validation of dynamic config update of SSLFactory failed: ssl.keystore.certificate.chain: "),
            "{refusal}"
        );
    }

    /// `served`'s certificate with its key encrypted, under `password`.
    fn encrypted(password: &str) -> ListenerTls {
        ListenerTls {
            keystore_key: Some(setting(
                "listener.name.ssl.ssl.keystore.key",
                &text("served-encrypted.key"),
            )),
            key_password: Some(setting("listener.name.ssl.ssl.key.password", password)),
            ..pem_listener("served")
        }
    }

    #[test]
    fn an_encrypted_key_with_its_password_is_swapped_in() {
        let served = ServedTls::new(&pem_listener("served")).expect("served");
        let before = served.current();
        assert_eq!(served.validate(&encrypted(KEY_PASSWORD)), Ok(()));
        served.update(&encrypted(KEY_PASSWORD), false);
        assert!(!Arc::ptr_eq(&before, &served.current()));
    }

    #[test]
    fn an_encrypted_key_with_a_wrong_password_is_refused_naming_the_password_key() {
        let served = ServedTls::new(&pem_listener("served")).expect("served");
        let before = served.current();
        let refusal = served
            .validate(&encrypted("not-the-secret"))
            .expect_err("wrong password");
        assert_eq!(
            refusal,
            "Validation of dynamic config update of SSLFactory failed: listener.name.ssl.ssl.key.password: cannot decrypt the private key in listener.name.ssl.ssl.keystore.key: the password was incorrect"
        );
        served.update(&encrypted("not-the-secret"), false);
        assert!(Arc::ptr_eq(&before, &served.current()));
    }
}
