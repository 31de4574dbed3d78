//! One request/response exchange on a peer connection, shared by [`PeerClient`] and
//! `PeerPool`: connect with `TCP_NODELAY`, write one frame, read one frame.
//!
//! A failed exchange leaves the stream in an unknown state (part of a frame may have been
//! written or read), so callers drop the stream on any error and never reuse it.
//!
//! [`PeerClient`]: super::PeerClient

use std::time::Duration;

use tokio::net::TcpStream;

use super::sasl::{self, PeerSasl};
use super::tls::{self, PeerStream, PeerTls};

use super::{read_frame, write_frame, FrameError, RpcRequest, RpcResponse};

/// Why one call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// Nothing was sent: the request certainly did not reach the peer.
    #[error("cannot connect: {0}")]
    Connect(#[source] std::io::Error),
    #[error("{0}")]
    Frame(#[source] FrameError),
    #[error("connection closed by the peer")]
    Closed,
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

/// Opens a connection to `addr` (`host:port`, resolved at each attempt so a moved host
/// name is followed), over TLS when `tls` is given and logged in when `sasl` is (a failed
/// handshake or login sent no request).
pub(crate) async fn connect(
    addr: &str,
    tls: Option<&PeerTls>,
    sasl: Option<&PeerSasl>,
) -> Result<PeerStream, CallError> {
    let stream = TcpStream::connect(addr).await.map_err(CallError::Connect)?;
    // Raft messages are small and latency-bound; do not wait for Nagle.
    stream.set_nodelay(true).map_err(CallError::Connect)?;
    let stream = tls::client(tls, stream, addr)
        .await
        .map_err(CallError::Connect)?;
    sasl::login(sasl, stream, addr)
        .await
        .map_err(CallError::Connect)
}

/// Sends `request` and reads its response.
pub(crate) async fn exchange(
    stream: &mut PeerStream,
    request: &RpcRequest,
) -> Result<RpcResponse, CallError> {
    write_frame(stream, request)
        .await
        .map_err(CallError::Frame)?;
    read_frame(stream)
        .await
        .map_err(CallError::Frame)?
        .ok_or(CallError::Closed)
}
