//! One client connection: read size-prefixed frames, answer each in order.
//!
//! Requests on one connection are processed one after another, as Apache Kafka does
//! (it mutes a channel until its response is sent): pipelined produces of an idempotent
//! producer are appended in the order they were sent. A frame that is not a Kafka
//! request closes this connection with one log line; other connections carry on.
//! On a SASL listener every frame passes [`SaslSession::admit`] first (`auth::sasl`).
//! The connection's [`Session`] (listener, protocol, peer, principal) goes with every
//! request to its handler: `User:ANONYMOUS` until a SASL login names the user.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use brook_protocol::chunked::Chunk;
use brook_protocol::frame::split_frame;
use bytes::BytesMut;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn, Instrument};

use crate::auth::sasl::{Admit, SaslSession};
use crate::broker::Broker;
use crate::metrics;
use crate::server::dispatch::{self, Outcome};
use crate::server::session::{KafkaPrincipal, SecurityProtocol, Session};
use crate::server::write::write_response;

pub async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    listener: Arc<str>,
    broker: Arc<Broker>,
    shutdown: CancellationToken,
) {
    let _gauge = metrics::ConnectionGuard::open();
    let span = tracing::debug_span!("connection", %peer);
    async move {
        let sasl = SaslSession::for_listener(&broker.config.sasl, &listener);
        let protocol = broker
            .config
            .listener_security_protocol_map
            .get(&*listener)
            .and_then(|p| SecurityProtocol::parse(p))
            .unwrap_or(SecurityProtocol::Plaintext);
        let session = Session::new(listener, protocol, peer, KafkaPrincipal::anonymous());
        if let Err(reason) = serve(stream, session, &broker, sasl, &shutdown).await {
            warn!(%peer, %reason, "closing connection");
        } else {
            debug!(%peer, "connection closed");
        }
    }
    .instrument(span)
    .await
}

/// Returns `Err` with the reason when the connection is closed for bad input.
async fn serve(
    mut stream: TcpStream,
    mut session: Session,
    broker: &Broker,
    mut sasl: Option<SaslSession>,
    shutdown: &CancellationToken,
) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    let max_frame = broker.config.socket_request_max_bytes;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        let limit = sasl.as_ref().map_or(max_frame, |s| s.max_frame(max_frame));
        let frame = match split_frame(&mut buf, limit) {
            Ok(Some(frame)) => frame.freeze(),
            Ok(None) => {
                let read = tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    read = stream.read_buf(&mut buf) => read,
                };
                match read {
                    Ok(0) if buf.is_empty() => return Ok(()),
                    Ok(0) => {
                        return Err(format!(
                            "peer closed mid-frame ({} bytes buffered)",
                            buf.len()
                        ))
                    }
                    Ok(_) => continue,
                    // A peer resetting the connection is not an error of ours.
                    Err(e) => {
                        debug!(error = %e, "read failed");
                        return Ok(());
                    }
                }
            }
            Err(e) => return Err(e.to_string()),
        };
        let frame = match sasl.as_mut() {
            None => frame,
            Some(login) => match login.admit(frame, broker, Instant::now()) {
                Admit::Dispatch(frame) => frame,
                Admit::Reply(reply) => {
                    // A successful login (or re-login, always as the same user) is answered
                    // with a reply: the principal follows it.
                    if let Some(user) = login.user() {
                        if session.principal().name != user {
                            session.set_principal(KafkaPrincipal::user(user));
                        }
                    }
                    if let Err(e) = write_response(&mut stream, vec![Chunk::Bytes(reply)]).await {
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
                    info!(%reason, "failed authentication");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                    if let Some(reply) = reply {
                        let _ = write_response(&mut stream, vec![Chunk::Bytes(reply)]).await;
                    }
                    return Ok(());
                }
                Admit::Close(reason) => return Err(reason),
            },
        };
        match dispatch::handle_frame(broker, &session, frame).await {
            Outcome::Respond(chunks) => {
                if let Err(e) = write_response(&mut stream, chunks).await {
                    debug!(error = %e, "write failed");
                    return Ok(());
                }
            }
            Outcome::NoResponse => {}
            Outcome::Close(reason) => return Err(reason),
        }
    }
}
