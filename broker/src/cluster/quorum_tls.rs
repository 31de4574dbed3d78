//! TLS between quorum members (issue 25 item 6): when the controller listener (the first
//! of `controller.listener.names`) is mapped to SSL (or SASL_SSL, then with a SASL login
//! inside the TLS: `quorum_sasl`) in `listener.security.protocol.map`,
//! the raft transport runs over TLS with that listener's `ssl.*` keys
//! (`listener.name.<controller>.ssl.*` first): its key store is the node's certificate on
//! both sides, its trust store verifies the peers, and `ssl.client.auth=required` makes
//! the controllers authenticate each other (mutual TLS), as Kafka's controller listener
//! does. A broker-only node uses the same keys for its connections to the controllers and
//! for the raft RPCs it serves as a learner.
//!
//! Read once at start (and checked before the runtime starts, so a bad store stops the node
//! naming the key, exit 2).

use brook_raft::PeerTls;

use crate::config::error::ConfigError;
use crate::config::tls::ListenerTls;
use crate::config::BrokerConfig;
use crate::replication::peer_security::client_connector;
use crate::server::tls::{self, TlsConfigError};

/// Why the quorum's TLS cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum QuorumTlsError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
}

/// The quorum's TLS, `None` when the controller listener is PLAINTEXT or SASL_PLAINTEXT.
pub fn build(config: &BrokerConfig) -> Result<Option<PeerTls>, QuorumTlsError> {
    let Some(name) = config.controller_listener_names.first() else {
        return Ok(None);
    };
    let protocol = match config.listener_security_protocol_map.get(name) {
        Some(p) if p == "SSL" || p == "SASL_SSL" => p,
        _ => return Ok(None),
    };
    let settings = ListenerTls::resolve(&config.layers, name, protocol)?;
    let acceptor = tls::build(&settings)?.acceptor;
    // Always offered: a controller listener with ssl.client.auth=required asks for it.
    let connector = client_connector(&settings, true)?;
    Ok(Some(PeerTls {
        connector,
        acceptor,
    }))
}
