//! How this broker reaches its peers (issue 25 item 6): which of a peer's registered
//! endpoints to dial (the one of the inter-broker listener, `config::inter_broker`), the
//! rustls client of that listener when it is SSL or SASL_SSL, and the broker's SASL login
//! when it is SASL_*. Built once at start, before the runtime: a trust or key store that
//! cannot be read stops the node naming the key (exit 2), as a bad listener store does.
//!
//! TLS: peers are verified against the listener's trust store, by the host they advertise
//! (Kafka's default `ssl.endpoint.identification.algorithm=https`); the listener's key store
//! is offered as the client certificate when the listener asks its clients for one
//! (`ssl.client.auth` requested or required), so brokers authenticate each other with the
//! certificates they serve. Immutable; shared by `Arc`.

use std::sync::Arc;

use brook_raft::BrokerRegistration;
use rustls::ClientConfig;
use tokio_rustls::TlsConnector;

use crate::config::inter_broker::InterBrokerLogin;
use crate::config::tls::{listener_key, ClientAuth, ListenerTls};
use crate::config::BrokerConfig;
use crate::server::tls::{key_store, protocol_versions, trust_store, TlsConfigError};
use crate::server::tls_suites;

/// The inter-broker client's security, resolved.
#[derive(Clone, Default)]
pub struct PeerSecurity {
    /// This broker's id: its connections introduce themselves as `brook-replica-<id>`.
    node_id: i32,
    /// The listener name whose endpoints peers are reached on; `None` on a lone node.
    listener: Option<String>,
    tls: Option<TlsConnector>,
    login: Option<InterBrokerLogin>,
}

impl std::fmt::Debug for PeerSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerSecurity")
            .field("node_id", &self.node_id)
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("login", &self.login)
            .finish()
    }
}

impl PeerSecurity {
    /// The security of `config`'s inter-broker listener.
    pub fn build(config: &BrokerConfig) -> Result<PeerSecurity, TlsConfigError> {
        let Some(client) = &config.inter_broker else {
            return Ok(PeerSecurity {
                node_id: config.node_id,
                ..PeerSecurity::default()
            });
        };
        let tls = client
            .tls
            .as_ref()
            .map(|tls| client_connector(tls, tls.client_auth != ClientAuth::None))
            .transpose()?;
        Ok(PeerSecurity {
            node_id: config.node_id,
            listener: Some(client.listener.clone()),
            tls,
            login: client.login.clone(),
        })
    }

    /// The `(host, port)` to dial for `peer`: its endpoint of the inter-broker listener,
    /// else the endpoint its registration names first (its own inter-broker listener;
    /// registrations made before listeners were recorded have only that one).
    pub fn endpoint<'a>(&self, peer: &'a BrokerRegistration) -> (&'a str, u16) {
        self.listener
            .as_deref()
            .and_then(|name| peer.endpoint(name))
            .unwrap_or((peer.host.as_str(), peer.port))
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn listener(&self) -> &str {
        self.listener.as_deref().unwrap_or("(default)")
    }

    pub fn tls(&self) -> Option<&TlsConnector> {
        self.tls.as_ref()
    }

    pub fn login(&self) -> Option<&InterBrokerLogin> {
        self.login.as_ref()
    }
}

/// The rustls client of an SSL or SASL_SSL listener: peers verified with its trust store; its
/// key store offered as the client certificate when `offer_certificate` (the inter-broker
/// listener when it asks clients for certificates; the controller listener always).
pub(crate) fn client_connector(
    tls: &ListenerTls,
    offer_certificate: bool,
) -> Result<TlsConnector, TlsConfigError> {
    let err = |key: String, reason: String| TlsConfigError {
        listener: tls.listener.clone(),
        key,
        reason,
    };
    let roots = trust_store(tls)
        .map_err(|(k, r)| err(k, r))?
        .ok_or_else(|| {
            err(
                listener_key(&tls.listener, "ssl.truststore.location"),
                "brokers and controllers connect to each other on this listener: its trust store verifies their certificates: set ssl.truststore.location or ssl.truststore.certificates (optionally prefixed listener.name.<listener>.)".to_owned(),
            )
        })?;
    let provider = tls_suites::provider(tls).map_err(|(k, r)| err(k, r))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&protocol_versions(tls))
        .map_err(|e| err(tls_suites::versions_key(tls).to_owned(), e.to_string()))?
        .with_root_certificates(roots);
    let config = if !offer_certificate {
        builder.with_no_client_auth()
    } else {
        let (certs, key) = key_store(tls).map_err(|(k, r)| err(k, r))?;
        builder.with_client_auth_cert(certs, key).map_err(|e| {
            err(
                listener_key(&tls.listener, "ssl.keystore.location"),
                format!(
                    "the key store cannot serve as the client certificate between brokers: {e}"
                ),
            )
        })?
    };
    Ok(TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use brook_raft::ListenerEndpoint;

    use super::*;

    fn config(args: &[&str]) -> BrokerConfig {
        let args: Vec<String> = [
            "controller.listener.names=CONTROLLER",
            "controller.quorum.voters=1@localhost:9093,2@localhost:9095,3@localhost:9097",
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093,INTERNAL://:9094",
        ]
        .iter()
        .chain(args)
        .map(|a| (*a).to_owned())
        .collect();
        match BrokerConfig::load(None, Vec::new(), &args) {
            Ok((config, _)) => config,
            Err(e) => panic!("{e}"),
        }
    }

    fn peer() -> BrokerRegistration {
        let endpoint = |name: &str, port| ListenerEndpoint {
            name: name.to_owned(),
            host: "peer-2".to_owned(),
            port,
        };
        BrokerRegistration {
            broker_id: 2,
            host: "peer-2".to_owned(),
            port: 19092,
            listeners: vec![endpoint("PLAINTEXT", 19092), endpoint("INTERNAL", 19094)],
            rack: None,
            incarnation_id: uuid::Uuid::nil(),
            broker_epoch: 1,
            fenced: false,
            in_controlled_shutdown: false,
        }
    }

    #[test]
    fn peers_are_dialled_on_their_endpoint_of_the_inter_broker_listener() {
        let internal = PeerSecurity::build(&config(&[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
        ]))
        .expect("plain");
        assert_eq!(internal.endpoint(&peer()), ("peer-2", 19094));
        // A registration from before listeners were recorded: its one endpoint.
        let old = BrokerRegistration {
            listeners: Vec::new(),
            ..peer()
        };
        assert_eq!(internal.endpoint(&old), ("peer-2", 19092));
        assert!(internal.tls().is_none() && internal.login().is_none());
        assert_eq!(internal.node_id(), 1);
    }

    #[test]
    fn an_ssl_inter_broker_listener_without_a_trust_store_stops_the_node_naming_the_key() {
        let err = PeerSecurity::build(&config(&[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:SSL",
            "inter.broker.listener.name=INTERNAL",
        ]))
        .expect_err("no trust store");
        assert_eq!(err.key, "listener.name.internal.ssl.truststore.location");
        assert!(
            err.to_string().contains("verifies their certificates"),
            "{err}"
        );
    }
}
