//! SCRAM credentials as the metadata quorum holds them (KRaft's
//! `UserScramCredentialRecord`), and Kafka's numbering of the SCRAM mechanisms on the wire
//! (AlterUserScramCredentials / DescribeUserScramCredentials: 1 SCRAM-SHA-256,
//! 2 SCRAM-SHA-512).

use brook_raft::{MetadataImage, ScramCredentialImage};

use super::scram::ScramCredential;
use super::ScramCredentials;
use crate::broker::Broker;
use crate::config::sasl::SaslMechanism;

/// Kafka's `ScramMechanism` type byte.
pub fn mechanism_type(mechanism: SaslMechanism) -> Option<i8> {
    match mechanism {
        SaslMechanism::ScramSha256 => Some(1),
        SaslMechanism::ScramSha512 => Some(2),
        SaslMechanism::Plain | SaslMechanism::OAuthBearer => None,
    }
}

/// The mechanism of a type byte; `None` for 0 (UNKNOWN) and anything else.
pub fn mechanism_of_type(mechanism: i8) -> Option<SaslMechanism> {
    match mechanism {
        1 => Some(SaslMechanism::ScramSha256),
        2 => Some(SaslMechanism::ScramSha512),
        _ => None,
    }
}

impl From<ScramCredential> for ScramCredentialImage {
    fn from(c: ScramCredential) -> Self {
        ScramCredentialImage {
            salt: c.salt,
            stored_key: c.stored_key,
            server_key: c.server_key,
            iterations: c.iterations,
        }
    }
}

impl ScramCredentials for Broker {
    fn scram_credential(&self, user: &str, mechanism: SaslMechanism) -> Option<ScramCredential> {
        self.image().as_ref().scram_credential(user, mechanism)
    }
}

/// The credentials of one metadata image (the controller listener's logins, `cluster::quorum_sasl`).
impl ScramCredentials for MetadataImage {
    fn scram_credential(&self, user: &str, mechanism: SaslMechanism) -> Option<ScramCredential> {
        let stored = self
            .scram_credentials
            .get(user)?
            .get(&mechanism_type(mechanism)?)?;
        Some(ScramCredential {
            salt: stored.salt.clone(),
            stored_key: stored.stored_key.clone(),
            server_key: stored.server_key.clone(),
            iterations: stored.iterations,
        })
    }
}
