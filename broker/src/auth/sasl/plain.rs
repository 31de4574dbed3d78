//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` checks it: one token
//! `authzid \0 authcid \0 password`, the user and password from the listener's JAAS entry,
//! an authorization id that is empty or the user. Passwords are compared in constant time
//! (through their SHA-256 digests, so neither a length nor an unknown user shows in the
//! timing). Pure.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Failure;
use crate::config::sasl::Secret;

/// Checks one PLAIN token; the authenticated user on success.
pub fn authenticate(token: &[u8], users: &BTreeMap<String, Secret>) -> Result<String, Failure> {
    let tokens: Vec<&[u8]> = token.split(|b| *b == 0).collect();
    let [authzid, username, password] = tokens.as_slice() else {
        // Kafka throws a SaslException here, whose text the client never sees.
        return Err(Failure::InvalidCredentials);
    };
    let (Ok(authzid), Ok(username)) = (std::str::from_utf8(authzid), std::str::from_utf8(username))
    else {
        return Err(Failure::InvalidCredentials);
    };
    if username.is_empty() {
        return Err(Failure::Message(
            "Authentication failed: username not specified".to_owned(),
        ));
    }
    if password.is_empty() {
        return Err(Failure::Message(
            "Authentication failed: password not specified".to_owned(),
        ));
    }
    let given = Sha256::digest(password);
    let matches = match users.get(username) {
        Some(expected) => Sha256::digest(expected.expose().as_bytes())
            .ct_eq(&given)
            .into(),
        None => {
            // The same work as for a known user, then a refusal.
            let _ = Sha256::digest(b"").ct_eq(&given);
            false
        }
    };
    if !matches {
        return Err(Failure::Message(
            "Authentication failed: Invalid username or password".to_owned(),
        ));
    }
    if !authzid.is_empty() && authzid != username {
        return Err(Failure::Message(
            "Authentication failed: Client requested an authorization id that is different from username".to_owned(),
        ));
    }
    Ok(username.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> BTreeMap<String, Secret> {
        crate::config::sasl::tests_support::users(&[("alice", "alice-secret")])
    }

    #[test]
    fn the_right_password_logs_in_and_anything_else_gets_kafkas_message() {
        assert_eq!(
            authenticate(b"\0alice\0alice-secret", &users()),
            Ok("alice".to_owned())
        );
        assert_eq!(
            authenticate(b"alice\0alice\0alice-secret", &users()),
            Ok("alice".to_owned())
        );
        let invalid = Err(Failure::Message(
            "Authentication failed: Invalid username or password".to_owned(),
        ));
        assert_eq!(authenticate(b"\0alice\0wrong", &users()), invalid);
        assert_eq!(authenticate(b"\0bob\0alice-secret", &users()), invalid);
        assert_eq!(
            authenticate(b"\0alice\0", &users()),
            Err(Failure::Message(
                "Authentication failed: password not specified".to_owned()
            ))
        );
        assert_eq!(
            authenticate(b"bob\0alice\0alice-secret", &users()),
            Err(Failure::Message("Authentication failed: Client requested an authorization id that is different from username".to_owned()))
        );
        assert_eq!(
            authenticate(b"alice-secret", &users()),
            Err(Failure::InvalidCredentials)
        );
    }
}
