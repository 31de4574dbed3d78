//! One client connection: (on an SSL listener, the TLS handshake first), then read
//! size-prefixed frames and answer each in order.
//!
//! Requests on one connection are processed one after another, as Apache Kafka does
//! (it mutes a channel until its response is sent): pipelined produces of an idempotent
//! producer are appended in the order they were sent. A frame that is not a Kafka
//! request closes this connection with one log line; so does a failed TLS handshake
//! (plaintext bytes sent to a TLS port, an unknown or expired client certificate); other
//! connections carry on. On a SASL listener (SASL_PLAINTEXT, or SASL_SSL inside the TLS
//! stream) every frame passes [`SaslSession::admit`] first (`auth::sasl`). The
//! connection's [`Session`] (listener, protocol, peer, principal) goes with every request
//! to its handler.
//!
//! What a connection buffers of its client's requests is bounded by `server::frame_reader`:
//! its own small read buffer, and a request larger than that only once it holds a lease of
//! its size from the broker's request memory pool (`queued.max.request.bytes`); while the
//! pool is dry it reads nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brook_protocol::chunked::Chunk;
use bytes::BufMut;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, Instrument};

use crate::auth::sasl::{Admit, SaslSession};
use crate::auth::ssl_principal::subject_dn_rfc2253;
use crate::broker::Broker;
use crate::metrics;
use crate::server::closed::{self, CloseReason};
use crate::server::dispatch::{self, Outcome};
use crate::server::frame_reader::{FrameReader, Step};
use crate::server::listener::ClientListener;
use crate::server::session::{KafkaPrincipal, Session};
use crate::server::tls::TlsListener;
use crate::server::write::{write_response, ResponseChunk};
use crate::server::write_tls::{write_response_tls, Gather};

/// How long a client may take to complete the TLS handshake (a port scanner or a stuck
/// client must not hold a connection slot forever).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    listener: Arc<ClientListener>,
    broker: Arc<Broker>,
    shutdown: CancellationToken,
) {
    let _gauge = metrics::ConnectionGuard::open();
    let span = tracing::debug_span!("connection", %peer, listener = %listener.name);
    async move {
        let _ = stream.set_nodelay(true);
        let sasl = SaslSession::for_listener(&broker.config.sasl, &listener.name);
        let (transport, principal) = match &listener.tls {
            None => (Transport::Plain(stream), KafkaPrincipal::anonymous()),
            Some(tls) => {
                // The stores serving now: a later dynamic update leaves this connection alone.
                let tls = tls.current();
                let Some((stream, principal)) = handshake(stream, peer, &tls, &shutdown).await
                else {
                    return;
                };
                let transport = Transport::Tls(Box::new(stream), Gather::default());
                (transport, principal)
            }
        };
        let session = Session::new(listener.name.clone(), listener.protocol, peer, principal);
        if let Err((reason, detail)) = serve(transport, session, &broker, sasl, &shutdown).await {
            closed::connection_closed(reason, peer, &detail);
        } else {
            debug!(%peer, "connection closed");
        }
    }
    .instrument(span)
    .await
}

/// The TLS handshake and the principal it authenticates; `None` (after one log line) when
/// it fails, times out or the node stops.
async fn handshake(
    stream: TcpStream,
    peer: SocketAddr,
    tls: &TlsListener,
    shutdown: &CancellationToken,
) -> Option<(TlsStream<TcpStream>, KafkaPrincipal)> {
    let accepted = tokio::select! {
        _ = shutdown.cancelled() => return None,
        accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)) => accepted,
    };
    let stream = match accepted {
        Ok(Ok(stream)) => stream,
        // Kafka logs a failed handshake at INFO ("Failed authentication with …").
        Ok(Err(e)) => {
            let detail = format_args!("SSL handshake failed: {e}");
            closed::connection_closed(CloseReason::TlsHandshake, peer, &detail);
            return None;
        }
        Err(_) => {
            let detail = "SSL handshake timed out";
            closed::connection_closed(CloseReason::TlsHandshake, peer, &detail);
            return None;
        }
    };
    let client_cert = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first());
    let Some(cert) = client_cert else {
        return Some((stream, KafkaPrincipal::anonymous()));
    };
    let Some(dn) = subject_dn_rfc2253(cert.as_ref()) else {
        let detail = "the client certificate's subject does not parse";
        closed::connection_closed(CloseReason::TlsHandshake, peer, &detail);
        return None;
    };
    match tls.principal_mapping_rules.apply(&dn) {
        Some(name) => {
            let principal = KafkaPrincipal::user(name);
            debug!(%peer, %principal, "client authenticated by certificate");
            Some((stream, principal))
        }
        None => {
            let detail = format_args!(
                "no ssl.principal.mapping.rules rule matches the certificate's DN {dn}"
            );
            closed::connection_closed(CloseReason::TlsHandshake, peer, &detail);
            None
        }
    }
}

/// The connection's byte stream.
enum Transport {
    /// Responses go out with `writev` and `sendfile` (`server::write`).
    Plain(TcpStream),
    /// Responses are encrypted by rustls from a gathering buffer (`server::write_tls`).
    Tls(Box<TlsStream<TcpStream>>, Gather),
}

impl Transport {
    async fn read_buf<B: BufMut>(&mut self, buf: &mut B) -> std::io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.read_buf(buf).await,
            Transport::Tls(stream, _) => read_into(stream.as_mut(), buf).await,
        }
    }

    async fn write_response(&mut self, chunks: Vec<ResponseChunk>) -> std::io::Result<()> {
        match self {
            Transport::Plain(stream) => write_response(stream, chunks).await,
            Transport::Tls(stream, gather) => {
                write_response_tls(stream.as_mut(), chunks, gather).await
            }
        }
    }
}

async fn read_into<R: AsyncRead + Unpin, B: BufMut>(
    stream: &mut R,
    buf: &mut B,
) -> std::io::Result<usize> {
    stream.read_buf(buf).await
}

/// One read, or `None` when nothing arrives within `max_idle` (Kafka's
/// `connections.max.idle.ms`: a connection silent that long is closed).
async fn read_or_idle<B: BufMut>(
    transport: &mut Transport,
    buf: &mut B,
    max_idle: Option<Duration>,
) -> Option<std::io::Result<usize>> {
    match max_idle {
        None => Some(transport.read_buf(buf).await),
        Some(idle) => tokio::time::timeout(idle, transport.read_buf(buf))
            .await
            .ok(),
    }
}

/// Returns `Err` with the reason and its detail when the connection is closed for bad input
/// or idleness.
async fn serve(
    mut transport: Transport,
    mut session: Session,
    broker: &Broker,
    mut sasl: Option<SaslSession>,
    shutdown: &CancellationToken,
) -> Result<(), (CloseReason, String)> {
    let max_frame = broker.config.socket_request_max_bytes;
    let max_idle = broker.config.connection_limits.max_idle;
    let mut sasl_principal_taken = false;
    let mut reader = FrameReader::default();
    loop {
        let limit = sasl.as_ref().map_or(max_frame, |s| s.max_frame(max_frame));
        let (frame, lease) = match reader.next(limit) {
            Ok(Step::Frame(frame, lease)) => (frame, lease),
            Ok(Step::Lease(size)) => {
                // Nothing is read while the pool is dry: the client's bytes wait in the
                // socket buffers (back-pressure), and so does this connection.
                let lease = tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    lease = broker.request_memory_pool.lease(size) => lease,
                };
                reader.start_large(size, lease);
                continue;
            }
            Ok(Step::Read) => {
                let read = {
                    let mut target = reader.read_target();
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        read = read_or_idle(&mut transport, &mut target, max_idle) => read,
                    }
                };
                let Some(read) = read else {
                    let detail = format!(
                        "nothing received for {} ms",
                        max_idle.map_or(0, |d| d.as_millis())
                    );
                    return Err((CloseReason::Idle, detail));
                };
                match read {
                    Ok(0) if reader.buffered() == 0 => return Ok(()),
                    Ok(0) => {
                        let detail = format!(
                            "peer closed mid-frame ({} bytes buffered)",
                            reader.buffered()
                        );
                        return Err((CloseReason::TruncatedFrame, detail));
                    }
                    Ok(_) => continue,
                    // A peer resetting the connection is not an error of ours.
                    Err(e) => {
                        debug!(error = %e, "read failed");
                        return Ok(());
                    }
                }
            }
            Err(e) => return Err((CloseReason::MalformedFrame, e.to_string())),
        };
        let frame = match sasl.as_mut() {
            None => frame,
            Some(sasl) => match sasl.admit(frame, broker, Instant::now()) {
                Admit::Dispatch(frame) => {
                    // SASL's principal replaces the transport's (an mTLS certificate on
                    // SASL_SSL), as Kafka's SaslServerAuthenticator does; re-authentication
                    // keeps the user, so it is taken once.
                    if !sasl_principal_taken {
                        if let Some(principal) = sasl.principal() {
                            let name = principal.strip_prefix("User:").unwrap_or(&principal);
                            session.set_principal(KafkaPrincipal::user(name));
                            sasl_principal_taken = true;
                        }
                    }
                    frame
                }
                Admit::Reply(reply) => {
                    if let Err(e) = transport.write_response(vec![Chunk::Bytes(reply)]).await {
                        debug!(error = %e, "write failed");
                        return Ok(());
                    }
                    continue;
                }
                Admit::Fail {
                    reply,
                    delay,
                    reason,
                } => {
                    // Kafka's connection.failed.authentication.delay.ms: the answer and the
                    // close wait, so failed logins cannot be retried at full speed.
                    let peer = session.peer;
                    closed::connection_closed(CloseReason::FailedAuthentication, peer, &reason);
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                    if let Some(reply) = reply {
                        let _ = transport.write_response(vec![Chunk::Bytes(reply)]).await;
                    }
                    return Ok(());
                }
                Admit::Close(reason) => return Err((CloseReason::SaslProtocol, reason)),
            },
        };
        let outcome = dispatch::handle_frame(broker, &session, frame).await;
        // Handled: its bytes go back to the pool before the response is written, so a
        // client that never reads its responses holds only those.
        drop(lease);
        match outcome {
            Outcome::Respond(chunks, throttle) => {
                if let Err(e) = transport.write_response(chunks).await {
                    debug!(error = %e, "write failed");
                    return Ok(());
                }
                if !mute(throttle, shutdown).await {
                    return Ok(());
                }
            }
            Outcome::NoResponse(throttle) => {
                if !mute(throttle, shutdown).await {
                    return Ok(());
                }
            }
            Outcome::Close(reason) => return Err((CloseReason::BadRequest, reason)),
        }
    }
}

/// KIP-219: a throttled client's connection reads nothing for the throttle time, after its
/// response went out (Kafka mutes the channel). False when the node stops meanwhile.
async fn mute(throttle: Duration, shutdown: &CancellationToken) -> bool {
    if throttle.is_zero() {
        return true;
    }
    tokio::select! {
        _ = shutdown.cancelled() => false,
        _ = tokio::time::sleep(throttle) => true,
    }
}
