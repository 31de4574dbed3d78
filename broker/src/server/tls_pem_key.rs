//! A PEM key store's private key, plain or encrypted, as Kafka's `DefaultSslEngineFactory`
//! (`PemStore.privateKey`) reads it: with `ssl.key.password` set the key must be an encrypted
//! PKCS#8 key (`-----BEGIN ENCRYPTED PRIVATE KEY-----`) and is decrypted with it; without, the
//! key must be unencrypted. Kafka refuses both mismatches, and so does Brook, naming the key.
//!
//! Two encryption schemes are read:
//! - PBES2 (PBKDF2 or scrypt, AES-CBC or DES-EDE3-CBC), what `openssl pkcs8 -topk8` writes by
//!   default, by RustCrypto's `pkcs8`. Kafka on Java 17 cannot read these ("PBES2
//!   SecretKeyFactory not available": `EncryptedPrivateKeyInfo.getAlgName` answers `PBES2`).
//! - PKCS#12's pbeWithSHA1And3-KeyTripleDES-CBC, what `openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES`
//!   writes and Kafka's own tests use: the one scheme both Kafka on Java 17 and Brook read.
//!   The key and IV come from RustCrypto's PKCS#12 KDF (`pkcs12::kdf`), the cipher from `des`
//!   and `cbc`; only the wiring is here.
//!
//! Other schemes (RC2, RC4, single DES, traditional OpenSSL `Proc-Type` encryption) are refused
//! with the `openssl pkcs8` command that re-encrypts the key. Pure: no I/O. The password is
//! never part of an error.

use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockModeDecrypt, KeyIvInit};
use pkcs12::kdf::{derive_key_utf8, Pkcs12KeyType};
use pkcs8::der::asn1::{AnyRef, OctetStringRef};
use pkcs8::der::{Decode, Encode, Reader, SliceReader};
use pkcs8::{
    pkcs5, AlgorithmIdentifierRef, EncryptedPrivateKeyInfoRef, ObjectIdentifier, PrivateKeyInfoRef,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::config::tls::{listener_key, Setting};
use crate::server::tls_stores::{normalize_pem, KeyError};

const ENCRYPTED_KEY_LABEL: &str = "ENCRYPTED PRIVATE KEY";

/// pbeWithSHA1And3-KeyTripleDES-CBC (PKCS#12, RFC 7292 appendix C).
const PBE_SHA1_3DES: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.1.3");

/// How to turn any private key into one Brook decrypts; `-v1 PBE-SHA1-3DES` is also read by
/// Kafka on Java 17.
const REENCRYPT: &str = "re-encrypt it with `openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES -in old.key -out new.key` (Kafka on Java 17 reads that too) or `-v2 aes-256-cbc`";

/// The private key of a PEM key store; `setting` holds the PEM (`ssl.keystore.key`, or a store
/// file's text under its location key), `password` is `ssl.key.password`. Brook also takes
/// unencrypted PKCS#1 and SEC1 keys, where Kafka reads PKCS#8 only.
pub(crate) fn pem_key(
    setting: &Setting,
    password: Option<&Setting>,
    listener: &str,
) -> Result<PrivateKeyDer<'static>, KeyError> {
    if setting.value.contains("Proc-Type:") && setting.value.contains("ENCRYPTED") {
        return Err((
            setting.key.clone(),
            format!("the private key is encrypted the traditional OpenSSL way (Proc-Type), which Kafka and Brook cannot read: {REENCRYPT}"),
        ));
    }
    let text = normalize_pem(&setting.value);
    match (pem_section(&text, ENCRYPTED_KEY_LABEL), password) {
        (Some(section), Some(password)) => decrypt(setting, section, password),
        (Some(_), None) => Err((
            listener_key(listener, "ssl.key.password"),
            format!(
                "the private key in {} is encrypted: set ssl.key.password (optionally prefixed listener.name.<listener>.) to its password",
                setting.key
            ),
        )),
        (None, Some(password)) => Err((
            password.key.clone(),
            format!(
                "the private key in {} is not encrypted, but a PEM key is decrypted whenever ssl.key.password is set (as Kafka does): remove {} or give the key encrypted",
                setting.key, password.key
            ),
        )),
        (None, None) => PrivateKeyDer::from_pem_slice(text.as_bytes())
            .map_err(|e| (setting.key.clone(), format!("no PEM private key: {e}"))),
    }
}

/// The first `label` section of normalized PEM text, BEGIN and END lines included.
fn pem_section<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let length = text.get(start..)?.find(&end)? + end.len();
    text.get(start..start + length)
}

/// Why a key did not decrypt.
enum Failure {
    WrongPassword,
    /// The scheme is not one Brook reads, or its parameters are bad.
    Unreadable(String),
}

fn decrypt(
    setting: &Setting,
    section: &str,
    password: &Setting,
) -> Result<PrivateKeyDer<'static>, KeyError> {
    let unreadable = |reason: String| (setting.key.clone(), reason);
    let (_, der) = pkcs8::der::pem::decode_vec(section.as_bytes())
        .map_err(|e| unreadable(format!("the encrypted private key is not valid PEM: {e}")))?;
    let plain = match EncryptedPrivateKeyInfoRef::from_der(&der) {
        Ok(info) => decrypt_pbes2(&info, &password.value),
        Err(e) => match outer(&der) {
            Ok((algorithm, data)) if algorithm.oid == PBE_SHA1_3DES => {
                decrypt_pkcs12_3des(&algorithm, data, &password.value)
            }
            Ok((algorithm, _)) => Err(Failure::Unreadable(format!(
                "it is encrypted with {}",
                algorithm.oid
            ))),
            Err(_) => Err(Failure::Unreadable(e.to_string())),
        },
    };
    let wrong_password = || {
        (
            password.key.clone(),
            format!(
                "cannot decrypt the private key in {}: the password was incorrect",
                setting.key
            ),
        )
    };
    let plain = plain.map_err(|failure| match failure {
        Failure::WrongPassword => wrong_password(),
        Failure::Unreadable(why) => unreadable(format!(
            "cannot decrypt the private key ({why}): Brook decrypts PBES2 (PBKDF2 or scrypt with AES-CBC or 3DES) and PKCS#12 pbeWithSHA1And3-KeyTripleDES-CBC: {REENCRYPT}"
        )),
    })?;
    // A wrong password passes the padding check about once in 256 tries: the plaintext must
    // also be a PKCS#8 private key.
    PrivateKeyInfoRef::try_from(plain.as_slice()).map_err(|_| wrong_password())?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(plain)))
}

fn decrypt_pbes2(
    info: &EncryptedPrivateKeyInfoRef<'_>,
    password: &str,
) -> Result<Vec<u8>, Failure> {
    match info.decrypt(password.as_bytes()) {
        Ok(document) => Ok(document.as_bytes().to_vec()),
        Err(
            pkcs8::Error::EncryptedPrivateKey(pkcs5::Error::DecryptFailed) | pkcs8::Error::Asn1(_),
        ) => Err(Failure::WrongPassword),
        Err(other) => Err(Failure::Unreadable(other.to_string())),
    }
}

/// `EncryptedPrivateKeyInfo ::= SEQUENCE { encryptionAlgorithm, encryptedData OCTET STRING }`
/// for any algorithm.
fn outer(der: &[u8]) -> pkcs8::der::Result<(AlgorithmIdentifierRef<'_>, &[u8])> {
    SliceReader::new(der)?.sequence(|inner| {
        let algorithm = inner.decode::<AlgorithmIdentifierRef<'_>>()?;
        let data = inner.decode::<&OctetStringRef>()?;
        Ok((algorithm, data.as_bytes()))
    })
}

/// PKCS#12 PBE with SHA-1 and three-key 3DES-CBC: `parameters ::= SEQUENCE { salt OCTET
/// STRING, iterations INTEGER }`; a 24-byte key and an 8-byte IV from the PKCS#12 KDF over
/// the password as a BMPString (what Java's PBEWithSHA1AndDESede does).
fn decrypt_pkcs12_3des(
    algorithm: &AlgorithmIdentifierRef<'_>,
    data: &[u8],
    password: &str,
) -> Result<Vec<u8>, Failure> {
    let bad = |what: &str| Failure::Unreadable(format!("bad {PBE_SHA1_3DES} {what}"));
    let parameters = algorithm
        .parameters
        .as_ref()
        .and_then(|p: &AnyRef<'_>| p.to_der().ok())
        .ok_or_else(|| bad("parameters"))?;
    let (salt, iterations) = SliceReader::new(&parameters)
        .and_then(|mut reader| {
            reader.sequence(|inner| {
                let salt = inner.decode::<&OctetStringRef>()?.as_bytes().to_vec();
                let iterations = inner.decode::<i32>()?;
                Ok((salt, iterations))
            })
        })
        .map_err(|_| bad("parameters"))?;
    if iterations < 1 {
        return Err(bad("iteration count"));
    }
    let key = derive_key_utf8::<sha1::Sha1>(
        password,
        &salt,
        Pkcs12KeyType::EncryptionKey,
        iterations,
        24,
    )
    .map_err(|_| Failure::WrongPassword)?;
    let iv = derive_key_utf8::<sha1::Sha1>(password, &salt, Pkcs12KeyType::Iv, iterations, 8)
        .map_err(|_| Failure::WrongPassword)?;
    let cipher = cbc::Decryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
        .map_err(|_| bad("key length"))?;
    cipher
        .decrypt_padded_vec::<Pkcs7>(data)
        .map_err(|_| Failure::WrongPassword)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tls::ListenerTls;
    use crate::server::tls_stores::key_store;
    use crate::server::tls_testdata::{file_listener, pem_listener, setting, text, KEY_PASSWORD};
    use rustls_pki_types::CertificateDer;

    /// `served.pem` with the key `key_file` inline, `password` as `listener.name.ssl.ssl.key.password`.
    fn inline_key(key_file: &str, password: Option<&str>) -> ListenerTls {
        let mut tls = pem_listener("served");
        tls.keystore_key = Some(setting("ssl.keystore.key", &text(key_file)));
        tls.key_password = password.map(|p| setting("listener.name.ssl.ssl.key.password", p));
        tls
    }

    fn served_der() -> Vec<u8> {
        CertificateDer::from_pem_slice(text("served.pem").as_bytes())
            .expect("served.pem")
            .as_ref()
            .to_vec()
    }

    fn served_key_der() -> Vec<u8> {
        match PrivateKeyDer::from_pem_slice(text("served.key").as_bytes()).expect("served.key") {
            PrivateKeyDer::Pkcs8(key) => key.secret_pkcs8_der().to_vec(),
            other => panic!("served.key is PKCS#8, not {other:?}"),
        }
    }

    #[test]
    fn an_encrypted_inline_pem_key_is_decrypted_with_the_key_password() {
        for file in [
            "served-encrypted.key",
            "served-encrypted-sha1-3des.key",
            "served-encrypted-pkcs12-3des.key",
        ] {
            let (certs, key) = key_store(&inline_key(file, Some(KEY_PASSWORD))).expect(file);
            assert_eq!(certs[0].as_ref(), served_der().as_slice());
            assert_eq!(key.secret_der(), served_key_der().as_slice(), "{file}");
        }
    }

    #[test]
    fn an_encrypted_key_in_a_pem_key_store_file_is_decrypted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("keystore.pem");
        let contents = text("served-encrypted.key") + &text("served.pem");
        std::fs::write(&store, contents).expect("write");
        let mut tls = file_listener("PEM", "served.pem", "");
        tls.keystore_location = Some(setting(
            "listener.name.ssl.ssl.keystore.location",
            &store.display().to_string(),
        ));
        tls.keystore_password = None;
        tls.key_password = Some(setting("ssl.key.password", KEY_PASSWORD));
        let (_, key) = key_store(&tls).expect("decrypts");
        assert_eq!(key.secret_der(), served_key_der().as_slice());
    }

    #[test]
    fn a_wrong_key_password_names_the_password_key_and_never_the_password() {
        for file in ["served-encrypted.key", "served-encrypted-pkcs12-3des.key"] {
            let (key, reason) =
                key_store(&inline_key(file, Some("not-the-secret"))).expect_err(file);
            assert_eq!(key, "listener.name.ssl.ssl.key.password");
            assert_eq!(
                reason,
                "cannot decrypt the private key in ssl.keystore.key: the password was incorrect"
            );
        }
    }

    #[test]
    fn an_encrypted_key_without_a_password_asks_for_the_listeners_key_password() {
        let (key, reason) =
            key_store(&inline_key("served-encrypted.key", None)).expect_err("no password");
        assert_eq!(key, "listener.name.ssl.ssl.key.password");
        assert!(reason.contains("ssl.keystore.key is encrypted"), "{reason}");
    }

    #[test]
    fn a_key_password_for_an_unencrypted_key_is_refused_as_kafka_refuses_it() {
        let (key, reason) =
            key_store(&inline_key("served.key", Some(KEY_PASSWORD))).expect_err("not encrypted");
        assert_eq!(key, "listener.name.ssl.ssl.key.password");
        assert!(reason.contains("is not encrypted"), "{reason}");
        assert!(!reason.contains(KEY_PASSWORD));
    }

    #[test]
    fn keys_encrypted_another_way_are_refused_with_the_command_that_reencrypts_them() {
        for file in [
            "served-encrypted-rc2.key",
            "served-encrypted-traditional.key",
        ] {
            let (key, reason) = key_store(&inline_key(file, Some(KEY_PASSWORD))).expect_err(file);
            assert_eq!(key, "ssl.keystore.key", "{file}");
            assert!(
                reason.contains("openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES"),
                "{reason}"
            );
        }
        let (_, reason) = key_store(&inline_key("served-encrypted-rc2.key", Some(KEY_PASSWORD)))
            .expect_err("RC2");
        assert!(
            reason.contains("encrypted with 1.2.840.113549.1.12.1.6"),
            "{reason}"
        );
    }
}
