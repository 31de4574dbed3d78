//! What the broker knows about one client connection: the listener it came in on, that
//! listener's security protocol, the peer's address and the authenticated principal.
//!
//! Created by `server::connection` once the transport is up (after the TLS handshake on
//! an SSL listener) and passed by reference to dispatch and every handler. Handlers read
//! the listener name to answer with that listener's advertised addresses (Metadata,
//! DescribeCluster, FindCoordinator, as Kafka does); authorization reads the principal.
//! The principal starts as Kafka's `DefaultKafkaPrincipalBuilder` gives it for the
//! transport: `User:ANONYMOUS` on PLAINTEXT (and on SSL without a client certificate), the
//! mapped subject DN for a client certificate. A SASL exchange on the connection replaces
//! it with [`Session::set_principal`]. Owned by its connection task; not shared.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// Kafka's `SecurityProtocol`: what a listener speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name (`listener.security.protocol.map` values), upper case.
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether the transport is TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kafka's `KafkaPrincipal`: a type (`User` for every built-in authenticator) and a name.
/// Displayed as ACLs spell it, `User:alice`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    /// `KafkaPrincipal.USER_TYPE`.
    pub const USER_TYPE: &'static str = "User";

    /// A `User:` principal.
    pub fn user(name: impl Into<String>) -> KafkaPrincipal {
        KafkaPrincipal {
            principal_type: Self::USER_TYPE.to_owned(),
            name: name.into(),
        }
    }

    /// `KafkaPrincipal.ANONYMOUS`: an unauthenticated client.
    pub fn anonymous() -> KafkaPrincipal {
        KafkaPrincipal::user("ANONYMOUS")
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// One connection's security context.
#[derive(Clone, Debug)]
pub struct Session {
    /// The listener name, upper case as Kafka normalises it (`PLAINTEXT`, `SSL`, `EXTERNAL`).
    pub listener_name: Arc<str>,
    pub security_protocol: SecurityProtocol,
    pub peer: SocketAddr,
    principal: KafkaPrincipal,
    /// The client quotas this connection's client resolved to (`quota`).
    pub quotas: Arc<crate::quota::SessionQuotas>,
}

impl Session {
    pub fn new(
        listener_name: Arc<str>,
        security_protocol: SecurityProtocol,
        peer: SocketAddr,
        principal: KafkaPrincipal,
    ) -> Session {
        Session {
            listener_name,
            security_protocol,
            peer,
            principal,
            quotas: Arc::default(),
        }
    }

    /// The principal requests on this connection act as.
    pub fn principal(&self) -> &KafkaPrincipal {
        &self.principal
    }

    /// Replaces the principal once an authentication on the connection succeeds (SASL).
    pub fn set_principal(&mut self, principal: KafkaPrincipal) {
        self.principal = principal;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_display_as_acls_spell_them() {
        assert_eq!(KafkaPrincipal::anonymous().to_string(), "User:ANONYMOUS");
        assert_eq!(
            KafkaPrincipal::user("CN=a,O=b").to_string(),
            "User:CN=a,O=b"
        );
    }

    #[test]
    fn protocols_parse_kafka_names() {
        assert_eq!(SecurityProtocol::parse("ssl"), Some(SecurityProtocol::Ssl));
        assert_eq!(
            SecurityProtocol::parse("SASL_SSL").map(SecurityProtocol::uses_tls),
            Some(true)
        );
        assert_eq!(SecurityProtocol::parse("TLS"), None);
    }
}
