//! SASL between quorum members (issue 25 items 1 and 6): when the controller listener is
//! mapped to SASL_PLAINTEXT or SASL_SSL (`config::controller_sasl`), the raft transport logs
//! every connection in with Kafka's SASL requests before its first raft frame, and checks
//! every login it serves with the same state machine the client listeners run
//! (`auth::sasl::SaslSession`); `brook_raft::network::sasl` says where both run.
//!
//! The client ([`login`]): SaslHandshake v1 naming `sasl.mechanism.controller.protocol`
//! (PLAIN), then SaslAuthenticate v2 with `\0user\0password` from the listener's JAAS entry.
//! A refusal fails the connection (raft backs off and retries), logged at WARN, limited.
//!
//! The server ([`authenticate`]): before the login only ApiVersions (answered as the
//! controller listener answers it, SASL APIs included), SaslHandshake and SaslAuthenticate;
//! anything else — a raft frame included — closes the connection unanswered; a failed login
//! waits `connection.failed.authentication.delay.ms`, answers SASL_AUTHENTICATION_FAILED and
//! closes. After the login, a raft frame is served only to a principal with CLUSTER_ACTION on
//! the cluster when an authorizer is configured (Kafka authorizes its raft and
//! broker-to-controller requests so); a Kafka request goes to the controller listener's
//! handler (`controller_api`) as the logged-in user.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brook_protocol::kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use brook_protocol::kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use brook_raft::network::sniff::{self, FirstFrame};
use brook_raft::network::{AuthenticatedPeer, PeerSasl, PeerStream};
use brook_raft::MetadataImage;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use crate::auth::sasl::{Admit, SaslSession};
use crate::auth::Authorizer;
use crate::config::controller_sasl::ControllerSasl;
use crate::config::inter_broker::InterBrokerLogin;
use crate::config::sasl::SaslSettings;
use crate::config::BrokerConfig;
use crate::logging::sites;
use crate::server::session::KafkaPrincipal;

const HANDSHAKE_VERSION: i16 = 1;
const AUTHENTICATE_VERSION: i16 = 2;
/// The largest response read during the login (a handshake's mechanism list).
const MAX_LOGIN_RESPONSE_BYTES: usize = 64 * 1024;
/// The largest frame read before the login; `sasl.server.max.receive.size` caps it further.
const MAX_LOGIN_REQUEST_BYTES: usize = 1024 * 1024;

/// Both sides of SASL on the quorum's connections; `None` when the controller listener has
/// no SASL.
pub fn build(config: &BrokerConfig) -> Option<PeerSasl> {
    let sasl = config.controller_sasl.clone()?;
    let own = Arc::new(sasl.login.clone());
    let gate = Arc::new(Gate::new(config, sasl));
    Some(PeerSasl {
        login: Arc::new(move |stream, addr| {
            let own = own.clone();
            Box::pin(async move { login(stream, &addr, &own).await })
        }),
        authenticator: Arc::new(move |stream, peer, _client_cert, image| {
            let gate = gate.clone();
            Box::pin(async move { authenticate(&gate, stream, peer, &image).await })
        }),
    })
}

/// Logs `stream`, just opened to `addr`, in with `own`; an error leaves it unusable.
pub async fn login(
    mut stream: PeerStream,
    addr: &str,
    own: &InterBrokerLogin,
) -> std::io::Result<PeerStream> {
    let refused = |reason: String| {
        if sites::CONTROLLER_LOGIN_REFUSED.allow() {
            tracing::warn!(%addr, user = %own.username, %reason, "controller listener authentication failed: check {}", own.jaas_key);
        }
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, reason)
    };
    let handshake: SaslHandshakeResponse = call(
        &mut stream,
        ApiKey::SaslHandshake,
        HANDSHAKE_VERSION,
        &SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(own.mechanism.name())),
    )
    .await?;
    if handshake.error_code != 0 {
        let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(refused(format!(
            "SaslHandshake for {} answered error {} (the peer enables {})",
            own.mechanism.name(),
            handshake.error_code,
            offered.join(",")
        )));
    }
    let token = format!("\0{}\0{}", own.username, own.password.expose());
    let answer: SaslAuthenticateResponse = call(
        &mut stream,
        ApiKey::SaslAuthenticate,
        AUTHENTICATE_VERSION,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.into_bytes())),
    )
    .await?;
    if answer.error_code != 0 {
        return Err(refused(format!(
            "SaslAuthenticate answered error {}: {}",
            answer.error_code,
            answer.error_message.as_deref().unwrap_or("no message")
        )));
    }
    Ok(stream)
}

/// One Kafka request and its response on a connection being logged in.
async fn call<Req, Resp>(
    stream: &mut PeerStream,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> std::io::Result<Resp>
where
    Req: Encodable + HeaderVersion,
    Resp: Decodable + HeaderVersion,
{
    let codec = |e| codec_error(api, e);
    let mut frame = BytesMut::with_capacity(128);
    frame.extend_from_slice(&[0; 4]);
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(0)
        .with_client_id(Some(StrBytes::from_static_str("brook-quorum")))
        .encode(&mut frame, Req::header_version(version))
        .map_err(codec)?;
    request.encode(&mut frame, version).map_err(codec)?;
    let len = u32::try_from(frame.len() - 4).map_err(std::io::Error::other)?;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    stream.write_all(&frame).await?;
    stream.flush().await?;
    let len = stream.read_u32().await? as usize;
    if len > MAX_LOGIN_RESPONSE_BYTES {
        return Err(std::io::Error::other(format!(
            "{api:?} response of {len} bytes"
        )));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    let mut body = Bytes::from(body);
    ResponseHeader::decode(&mut body, Resp::header_version(version)).map_err(codec)?;
    Resp::decode(&mut body, version).map_err(codec)
}

fn codec_error(api: ApiKey, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{api:?}: {e}"))
}

/// What the server side needs: the listener's SASL settings, the authorizer, and the
/// configuration ApiVersions is answered from.
struct Gate {
    listener: String,
    settings: SaslSettings,
    authorizer: Option<Authorizer>,
    config: BrokerConfig,
}

impl Gate {
    fn new(config: &BrokerConfig, sasl: ControllerSasl) -> Gate {
        let settings = SaslSettings {
            listeners: [(sasl.listener.clone(), sasl.server)].into(),
            ..config.sasl.clone()
        };
        Gate {
            listener: sasl.listener,
            settings,
            authorizer: config.authorizer.as_ref().map(Authorizer::new),
            config: config.clone(),
        }
    }

    /// Whether `user` may send raft traffic (CLUSTER_ACTION on the cluster).
    fn may_send_raft(&self, image: &MetadataImage, user: &str, peer: SocketAddr) -> bool {
        self.authorizer.as_ref().is_none_or(|authorizer| {
            authorizer.authorize_principal(
                &image.acls,
                &KafkaPrincipal::user(user),
                peer.ip(),
                AclOperation::ClusterAction,
                ResourceType::Cluster,
                CLUSTER_NAME,
            )
        })
    }
}

/// Runs the SASL login of a connection accepted from `peer`; the authenticated connection
/// with what its next frame is, or `None` once it is closed.
async fn authenticate(
    gate: &Gate,
    mut stream: PeerStream,
    peer: SocketAddr,
    image: &MetadataImage,
) -> Option<AuthenticatedPeer> {
    let mut session = SaslSession::for_listener(&gate.settings, &gate.listener)?;
    loop {
        if let Some(user) = session.user() {
            let user = user.to_owned();
            let (next, stream) = sniff::sniff(stream).await.ok()??;
            if next == FirstFrame::Raft && !gate.may_send_raft(image, &user, peer) {
                if sites::RAFT_UNAUTHORIZED.allow() {
                    tracing::warn!(%peer, principal = %KafkaPrincipal::user(&user), "raft traffic refused on the controller listener: the principal lacks CLUSTER_ACTION on the cluster (add it to super.users or grant it)");
                }
                return None;
            }
            return Some(AuthenticatedPeer { stream, user, next });
        }
        let frame = read_frame(&mut stream, session.max_frame(MAX_LOGIN_REQUEST_BYTES)).await?;
        let reply = match session.admit(frame, image, Instant::now()) {
            // Only ApiVersions is dispatched before the login.
            Admit::Dispatch(frame) => {
                crate::cluster::controller_api::api_versions_answer(&gate.config, image, frame)?
            }
            Admit::Reply(reply) => reply,
            Admit::Fail {
                reply,
                delay,
                reason,
            } => {
                if sites::FAILED_AUTHENTICATION.allow() {
                    tracing::info!(%peer, %reason, "controller listener authentication failed");
                }
                fail(stream, reply, delay).await;
                return None;
            }
            Admit::Close(reason) => {
                if sites::SASL_PROTOCOL.allow() {
                    tracing::info!(%peer, %reason, "controller listener connection closed before its login");
                }
                return None;
            }
        };
        stream.write_all(&reply).await.ok()?;
        stream.flush().await.ok()?;
    }
}

/// A failed login: after `delay`, the answer (if any), then the close.
async fn fail(mut stream: PeerStream, reply: Option<Bytes>, delay: Duration) {
    tokio::time::sleep(delay).await;
    if let Some(reply) = reply {
        if stream.write_all(&reply).await.is_ok() {
            let _ = stream.flush().await;
        }
    }
    let _ = stream.shutdown().await;
}

/// One size-prefixed frame of at most `max` bytes; `None` at the end of the stream, on an
/// error or for a larger frame.
async fn read_frame(stream: &mut PeerStream, max: usize) -> Option<Bytes> {
    let len = stream.read_u32().await.ok()? as usize;
    if len > max {
        return None;
    }
    let mut frame = vec![0u8; len];
    stream.read_exact(&mut frame).await.ok()?;
    Some(Bytes::from(frame))
}
