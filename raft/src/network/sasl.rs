//! SASL on the controller listener (issue 25 items 1 and 6): when the listener is mapped to
//! SASL_PLAINTEXT or SASL_SSL, every peer connection is logged in before it carries a raft
//! frame, as Kafka's controllers and brokers log in to a controller listener.
//!
//! The raft frames are Brook's own, so the login borrows Kafka's: on connect (after TLS, on
//! SASL_SSL) the client sends Kafka SaslHandshake / SaslAuthenticate requests
//! ([`PeerSasl::login`]); the server runs Kafka's SASL state machine on the connection's
//! first frames ([`PeerSasl::authenticator`]: only ApiVersions, SaslHandshake and
//! SaslAuthenticate before authentication, anything else — a raft frame included — closes
//! it unanswered). Once authenticated, the next frame decides, as `sniff.rs` decides on a
//! listener without SASL: a raft frame switches the connection to peer RPC, a Kafka request
//! goes to the Kafka handler with the authenticated user (Kafka's tools with
//! `--bootstrap-controller`).
//!
//! The broker provides both sides (it knows Kafka's protocol, the mechanisms and the
//! credentials); this crate only calls them, so it never depends on the broker's
//! configuration. Both are given at start, before the node serves anything: peers log in
//! while the quorum forms.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use super::sniff::FirstFrame;
use super::tls::PeerStream;
use crate::image::MetadataImage;

/// A future the broker's SASL hooks return.
pub type SaslFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Logs a connection just opened to `addr` (`host:port`) in; an error means the connection
/// is unusable (the peer refused the login, or the exchange broke).
pub type PeerLogin =
    Arc<dyn Fn(PeerStream, String) -> SaslFuture<std::io::Result<PeerStream>> + Send + Sync>;

/// Authenticates a connection accepted from `peer` (with its TLS client certificate, DER,
/// on SASL_SSL), given the current metadata (SCRAM credentials, ACLs); `None`: closed.
pub type PeerAuthenticator = Arc<
    dyn Fn(
            PeerStream,
            SocketAddr,
            Option<Vec<u8>>,
            Arc<MetadataImage>,
        ) -> SaslFuture<Option<AuthenticatedPeer>>
        + Send
        + Sync,
>;

/// A connection whose peer logged in.
pub struct AuthenticatedPeer {
    /// The stream, its next frame (already looked at) replayed.
    pub stream: PeerStream,
    /// The user the peer logged in as (the principal is `User:<user>`).
    pub user: String,
    /// What the next frame is: raft peer RPC, or a Kafka request.
    pub next: FirstFrame,
}

/// Both sides of SASL between quorum members.
#[derive(Clone)]
pub struct PeerSasl {
    pub login: PeerLogin,
    pub authenticator: PeerAuthenticator,
}

impl fmt::Debug for PeerSasl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PeerSasl")
    }
}

/// Logs `stream` in when SASL is configured; else returns it as it is.
pub(crate) async fn login(
    sasl: Option<&PeerSasl>,
    stream: PeerStream,
    addr: &str,
) -> std::io::Result<PeerStream> {
    match sasl {
        Some(sasl) => (sasl.login)(stream, addr.to_owned()).await,
        None => Ok(stream),
    }
}
