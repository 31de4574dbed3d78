//! SASL between quorum members (issue 25 items 1 and 6): when the controller listener is
//! mapped to SASL_PLAINTEXT or SASL_SSL (`config::controller_sasl`), the raft transport logs
//! every connection in with Kafka's SASL requests before its first raft frame, and checks
//! every login it serves with the same state machine the client listeners run
//! (`auth::sasl::SaslSession`); `brook_raft::network::sasl` says where both run.
//!
//! The client ([`login`]): SaslHandshake v1 naming `sasl.mechanism.controller.protocol`,
//! then SaslAuthenticate v2: with PLAIN `\0user\0password` from the listener's JAAS entry;
//! with SCRAM-SHA-256/512 client-first, client-final and the check of the server's signature
//! (`replication::peer_sasl::ScramClient`, the inter-broker client's). A refusal fails the
//! connection (raft backs off and retries), logged at WARN, limited.
//!
//! The server ([`authenticate`]): before the login only ApiVersions (answered as the
//! controller listener answers it, SASL APIs included), SaslHandshake and SaslAuthenticate;
//! anything else — a raft frame included — closes the connection unanswered; a failed login
//! waits `connection.failed.authentication.delay.ms`, answers SASL_AUTHENTICATION_FAILED and
//! closes. SCRAM logins are checked against the metadata image's credentials once it holds
//! any (or has applied the bootstrap records), before that against the node's bootstrap
//! records (`brook format --add-scram`, read once here at start): the voters must log in to
//! each other to elect the leader that writes those records to the log (Kafka 4.4 checks the
//! log's only, and its SCRAM voters never elect one). After the login, a raft frame is served
//! only to a principal with CLUSTER_ACTION on the cluster when an authorizer is configured
//! (Kafka authorizes its raft and broker-to-controller requests so); a Kafka request goes to
//! the controller listener's handler (`controller_api`) as the logged-in user.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use brook_protocol::kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use brook_protocol::kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use brook_raft::network::sniff::{self, FirstFrame};
use brook_raft::network::{AuthenticatedPeer, PeerSasl, PeerStream};
use brook_raft::{Command, MetadataImage};
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use crate::auth::sasl::scram::ScramCredential;
use crate::auth::sasl::{Admit, SaslSession, ScramCredentials};
use crate::auth::Authorizer;
use crate::config::controller_sasl::ControllerSasl;
use crate::config::inter_broker::InterBrokerLogin;
use crate::config::sasl::{SaslMechanism, SaslSettings};
use crate::config::BrokerConfig;
use crate::logging::sites;
use crate::replication::peer_sasl::ScramClient;
use crate::server::session::KafkaPrincipal;

const HANDSHAKE_VERSION: i16 = 1;
const AUTHENTICATE_VERSION: i16 = 2;
/// The largest response read during the login (a handshake's mechanism list).
const MAX_LOGIN_RESPONSE_BYTES: usize = 64 * 1024;
/// The largest frame read before the login; `sasl.server.max.receive.size` caps it further.
const MAX_LOGIN_REQUEST_BYTES: usize = 1024 * 1024;

/// Both sides of SASL on the quorum's connections; `None` when the controller listener has
/// no SASL. `data_dir` is the quorum's: its bootstrap file's SCRAM credentials check logins
/// until the metadata log has its own; an unreadable file stops the node.
pub fn build(config: &BrokerConfig, data_dir: &Path) -> anyhow::Result<Option<PeerSasl>> {
    let Some(sasl) = config.controller_sasl.clone() else {
        return Ok(None);
    };
    let bootstrap = bootstrap_credentials(data_dir)?;
    let own = Arc::new(sasl.login.clone());
    let gate = Arc::new(Gate::new(config, sasl, bootstrap));
    Ok(Some(PeerSasl {
        login: Arc::new(move |stream, addr| {
            let own = own.clone();
            Box::pin(async move { login(stream, &addr, &own).await })
        }),
        authenticator: Arc::new(move |stream, peer, _client_cert, image| {
            let gate = gate.clone();
            Box::pin(async move { authenticate(&gate, stream, peer, &image).await })
        }),
    }))
}

/// The SCRAM credentials of the bootstrap file in `data_dir` (`brook format --add-scram`),
/// as an image holding only them; empty without a file. A few bytes, read once at start.
pub fn bootstrap_credentials(data_dir: &Path) -> anyhow::Result<MetadataImage> {
    let records = brook_raft::bootstrap::read(data_dir)
        .with_context(|| {
            format!(
                "cannot read the bootstrap records of {}",
                data_dir.display()
            )
        })?
        .unwrap_or_default();
    let mut image = MetadataImage::default();
    for record in records {
        if let Command::AlterUserScramCredentials { upsertions, .. } = record {
            for u in upsertions {
                image
                    .scram_credentials
                    .entry(u.user)
                    .or_default()
                    .insert(u.mechanism, u.credential);
            }
        }
    }
    Ok(image)
}

/// Where the controller listener looks SCRAM credentials up: the metadata image once the log
/// holds credentials (the bootstrap records are its first entries), the bootstrap records
/// until then.
struct QuorumCredentials<'a> {
    image: &'a MetadataImage,
    bootstrap: &'a MetadataImage,
}

impl ScramCredentials for QuorumCredentials<'_> {
    fn scram_credential(&self, user: &str, mechanism: SaslMechanism) -> Option<ScramCredential> {
        let from_log = self.image.bootstrapped || !self.image.scram_credentials.is_empty();
        let source = if from_log { self.image } else { self.bootstrap };
        source.scram_credential(user, mechanism)
    }
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
    if own.mechanism == SaslMechanism::Plain {
        let token = format!("\0{}\0{}", own.username, own.password.expose());
        send_token(&mut stream, token.into_bytes())
            .await?
            .map_err(refused)?;
        return Ok(stream);
    }
    let mut scram = ScramClient::new(own.mechanism, &own.username, own.password.expose());
    let server_first = send_token(&mut stream, scram.client_first().into_bytes())
        .await?
        .map_err(refused)?;
    let client_final = scram.client_final(&server_first).map_err(refused)?;
    let server_final = send_token(&mut stream, client_final.into_bytes())
        .await?
        .map_err(refused)?;
    scram.check_server_final(&server_final).map_err(refused)?;
    Ok(stream)
}

/// One SaslAuthenticate round: the peer's answer token, or (inside) why it refused.
async fn send_token(
    stream: &mut PeerStream,
    token: Vec<u8>,
) -> std::io::Result<Result<Vec<u8>, String>> {
    let answer: SaslAuthenticateResponse = call(
        stream,
        ApiKey::SaslAuthenticate,
        AUTHENTICATE_VERSION,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
    )
    .await?;
    if answer.error_code != 0 {
        return Ok(Err(format!(
            "SaslAuthenticate answered error {}: {}",
            answer.error_code,
            answer.error_message.as_deref().unwrap_or("no message")
        )));
    }
    Ok(Ok(answer.auth_bytes.to_vec()))
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
    /// The bootstrap records' SCRAM credentials ([`QuorumCredentials`]).
    bootstrap: MetadataImage,
    settings: SaslSettings,
    authorizer: Option<Authorizer>,
    config: BrokerConfig,
}

impl Gate {
    fn new(config: &BrokerConfig, sasl: ControllerSasl, bootstrap: MetadataImage) -> Gate {
        let settings = SaslSettings {
            listeners: [(sasl.listener.clone(), sasl.server)].into(),
            ..config.sasl.clone()
        };
        Gate {
            listener: sasl.listener,
            bootstrap,
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
        let credentials = QuorumCredentials {
            image,
            bootstrap: &gate.bootstrap,
        };
        let reply = match session.admit(frame, &credentials, Instant::now()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::add_scram;

    const SCRAM_LOGIN: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

    /// A controller whose CONTROLLER listener is SASL_PLAINTEXT with SCRAM-SHA-512, logging in
    /// as `controller` with `password`.
    fn scram_controller(password: &str) -> BrokerConfig {
        let args: Vec<String> = [
            "controller.listener.names=CONTROLLER".to_owned(),
            "controller.quorum.voters=1@localhost:9093,2@localhost:9095".to_owned(),
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093".to_owned(),
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
                .to_owned(),
            "listener.name.controller.sasl.enabled.mechanisms=SCRAM-SHA-512".to_owned(),
            "sasl.mechanism.controller.protocol=SCRAM-SHA-512".to_owned(),
            format!("listener.name.controller.scram-sha-512.sasl.jaas.config={SCRAM_LOGIN} required username=\"controller\" password=\"{password}\";"),
        ]
        .into();
        BrokerConfig::load(None, Vec::new(), &args)
            .expect("valid")
            .0
    }

    /// An image holding `--add-scram` credentials (`spec`s in Kafka's syntax).
    fn credentials(specs: &[&str]) -> MetadataImage {
        let dir = tempfile::tempdir().expect("tempdir");
        let upsertions = specs
            .iter()
            .map(|s| {
                add_scram::parse(s)
                    .and_then(|a| a.upsertion())
                    .expect("valid")
            })
            .collect();
        brook_raft::bootstrap::write(
            dir.path(),
            &[Command::AlterUserScramCredentials {
                upsertions,
                deletions: Vec::new(),
            }],
        )
        .expect("write");
        bootstrap_credentials(dir.path()).expect("read")
    }

    /// Logs a client configured with `password` in to a controller whose bootstrap records hold
    /// `bootstrap` and whose image is `image`; the client's outcome.
    async fn log_in(
        password: &str,
        bootstrap: MetadataImage,
        image: MetadataImage,
    ) -> std::io::Result<()> {
        let server_config = scram_controller("controller-secret");
        let sasl = server_config.controller_sasl.clone().expect("SASL");
        let gate = Gate::new(&server_config, sasl, bootstrap);
        let client = scram_controller(password)
            .controller_sasl
            .expect("SASL")
            .login;
        let (client_end, server_end) = tokio::io::duplex(64 * 1024);
        let peer: SocketAddr = "127.0.0.1:40000".parse().expect("addr");
        let server = tokio::spawn(async move {
            // The client closes after its login: nothing follows it.
            authenticate(&gate, Box::new(server_end), peer, &image)
                .await
                .is_some()
        });
        let outcome = login(Box::new(client_end), "127.0.0.1:9093", &client)
            .await
            .map(drop);
        assert!(!server.await.expect("server"));
        outcome
    }

    #[tokio::test]
    async fn a_controller_logs_in_with_scram_against_the_bootstrap_credentials() {
        let bootstrap =
            || credentials(&["SCRAM-SHA-512=[name=controller,password=controller-secret]"]);
        log_in("controller-secret", bootstrap(), MetadataImage::default())
            .await
            .expect("logged in");
        let refused = log_in("not-the-password", bootstrap(), MetadataImage::default())
            .await
            .expect_err("refused");
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(
            refused.to_string().contains("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
            "{refused}"
        );
        // Another mechanism's credential for the user is no login either.
        let sha256 = credentials(&["SCRAM-SHA-256=[name=controller,password=controller-secret]"]);
        assert!(
            log_in("controller-secret", sha256, MetadataImage::default())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn once_the_log_holds_credentials_they_replace_the_bootstrap_ones() {
        // The password was changed (kafka-configs --alter) after the bootstrap records.
        let mut image = credentials(&["SCRAM-SHA-512=[name=controller,password=changed-secret]"]);
        image.bootstrapped = true;
        let bootstrap =
            || credentials(&["SCRAM-SHA-512=[name=controller,password=controller-secret]"]);
        assert!(log_in("controller-secret", bootstrap(), image.clone())
            .await
            .is_err());
        log_in("changed-secret", bootstrap(), image.clone())
            .await
            .expect("the log's credential");
        // Bootstrapped and every credential deleted since: none, not the bootstrap ones.
        image.scram_credentials.clear();
        assert!(log_in("controller-secret", bootstrap(), image)
            .await
            .is_err());
    }

    #[test]
    fn no_bootstrap_file_means_no_bootstrap_credentials() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(bootstrap_credentials(dir.path())
            .expect("read")
            .scram_credentials
            .is_empty());
    }
}
