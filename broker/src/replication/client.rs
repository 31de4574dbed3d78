//! The broker-to-broker Kafka client a follower uses to fetch from a leader: one TCP
//! connection per (follower, leader) pair, requests encoded with `kafka-protocol` and
//! framed like any client's, one request in flight at a time (the fetcher waits for each
//! answer before it sends the next, as Kafka's fetcher threads do).
//!
//! Every wait is bounded: a leader that stops answering (SIGSTOP, partition) costs one
//! timeout, after which the connection is dropped and opened again.
//!
//! Connections go to the peer's endpoint of the inter-broker listener, with its security
//! (`peer_security`): TLS first when it is SSL or SASL_SSL, then the SASL login
//! (`peer_sasl`) when it is SASL_*, all within the connect timeout. A refused login is
//! counted (`brook_inter_broker_connections_total{result="authentication_failed"}`) and
//! logged at WARN, at most once per [`FAILURE_LOG_INTERVAL`]: the fetcher retries every
//! few hundred milliseconds, and an operator needs one line, not thousands.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use brook_protocol::kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use brook_protocol::kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use brook_raft::BrokerRegistration;
use bytes::{Bytes, BytesMut};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tracing::warn;

use super::peer_sasl;
use super::peer_security::PeerSecurity;
use crate::metrics::inter_broker as probe;

/// The largest response a follower accepts (a fetch of many partitions at 1 MiB each).
const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// Why a call to a peer failed; the connection is unusable afterwards.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("i/o with {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("{addr} did not answer within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("bad response from {addr}: {reason}")]
    Protocol { addr: String, reason: String },
    #[error("TLS handshake with {addr}: {source}")]
    Tls {
        addr: String,
        source: std::io::Error,
    },
    #[error("inter-broker authentication with {addr} failed: {reason}")]
    Authentication { addr: String, reason: String },
}

/// The shortest time between two WARN lines about failed inter-broker logins.
const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A plain or TLS stream to a peer.
trait PeerIo: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> PeerIo for T {}

/// One connection to another broker's client listener.
pub struct PeerConnection {
    addr: String,
    stream: BufReader<Box<dyn PeerIo>>,
    next_correlation_id: i32,
    client_id: StrBytes,
}

impl PeerConnection {
    /// Connects to `peer`'s inter-broker endpoint, secured as `security` says.
    pub async fn connect(
        security: &PeerSecurity,
        peer: &BrokerRegistration,
        timeout: Duration,
    ) -> Result<Self, PeerError> {
        let (host, port) = security.endpoint(peer);
        let addr = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let opened =
            tokio::time::timeout(timeout, Self::open(security, host, addr.clone(), timeout))
                .await
                .unwrap_or_else(|_| {
                    Err(PeerError::Timeout {
                        addr: addr.clone(),
                        timeout,
                    })
                });
        match &opened {
            Ok(_) => probe::record_connection("success"),
            Err(e @ PeerError::Authentication { .. }) => {
                probe::record_connection("authentication_failed");
                if failure_worth_logging() {
                    warn!(peer = peer.broker_id, listener = security.listener(), error = %e, "inter-broker authentication failed");
                }
            }
            Err(e @ PeerError::Tls { .. }) => {
                probe::record_connection("tls_failed");
                if failure_worth_logging() {
                    warn!(peer = peer.broker_id, listener = security.listener(), error = %e, "inter-broker TLS handshake failed");
                }
            }
            Err(_) => probe::record_connection("unreachable"),
        }
        opened
    }

    async fn open(
        security: &PeerSecurity,
        host: &str,
        addr: String,
        timeout: Duration,
    ) -> Result<Self, PeerError> {
        let tcp = TcpStream::connect(&addr)
            .await
            .map_err(|source| PeerError::Connect {
                addr: addr.clone(),
                source,
            })?;
        // Fetch answers are latency-critical for acks=all; never wait for Nagle.
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn PeerIo> = match security.tls() {
            None => Box::new(tcp),
            Some(connector) => {
                let tls_error = |source| PeerError::Tls {
                    addr: addr.clone(),
                    source,
                };
                let name = ServerName::try_from(host.to_owned()).map_err(|e| {
                    tls_error(std::io::Error::other(format!(
                        "{host} is not a host name TLS can verify: {e}"
                    )))
                })?;
                Box::new(connector.connect(name, tcp).await.map_err(tls_error)?)
            }
        };
        let mut conn = PeerConnection {
            addr,
            stream: BufReader::new(stream),
            next_correlation_id: 0,
            client_id: StrBytes::from_string(format!("brook-replica-{}", security.node_id())),
        };
        if let Some(login) = security.login() {
            peer_sasl::authenticate(&mut conn, login, timeout).await?;
        }
        Ok(conn)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// One request on a connection of its own, closed after the answer: for the rare
    /// coordinator-to-leader requests (transaction markers, KIP-890 checks), which do not
    /// keep a connection open.
    pub async fn call_once<Req, Resp>(
        security: &PeerSecurity,
        peer: &BrokerRegistration,
        connect_timeout: Duration,
        api: ApiKey,
        version: i16,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, PeerError>
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        let mut conn = PeerConnection::connect(security, peer, connect_timeout).await?;
        conn.call(api, version, request, timeout).await
    }

    /// Sends `request` at `version` and waits up to `timeout` for its response.
    pub async fn call<Req, Resp>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, PeerError>
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let protocol = |reason: String| PeerError::Protocol {
            addr: self.addr.clone(),
            reason,
        };
        let mut body = BytesMut::with_capacity(256);
        body.extend_from_slice(&[0; 4]);
        RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()))
            .encode(&mut body, Req::header_version(version))
            .map_err(|e| protocol(format!("encoding the request header: {e}")))?;
        request
            .encode(&mut body, version)
            .map_err(|e| protocol(format!("encoding the request: {e}")))?;
        let len = u32::try_from(body.len() - 4).map_err(|e| protocol(e.to_string()))?;
        body[..4].copy_from_slice(&len.to_be_bytes());
        let exchange = async {
            let socket = self.stream.get_mut();
            socket.write_all(&body).await?;
            // TLS buffers records until flushed; a plain socket's flush does nothing.
            socket.flush().await?;
            let len = self.stream.read_u32().await? as usize;
            if len > MAX_RESPONSE_BYTES {
                return Err(std::io::Error::other(format!(
                    "response of {len} bytes exceeds {MAX_RESPONSE_BYTES}"
                )));
            }
            let mut frame = vec![0u8; len];
            self.stream.read_exact(&mut frame).await?;
            Ok(Bytes::from(frame))
        };
        let mut frame = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(frame)) => frame,
            Ok(Err(source)) => {
                return Err(PeerError::Io {
                    addr: self.addr.clone(),
                    source,
                })
            }
            Err(_) => {
                return Err(PeerError::Timeout {
                    addr: self.addr.clone(),
                    timeout,
                })
            }
        };
        let header = ResponseHeader::decode(&mut frame, Resp::header_version(version))
            .map_err(|e| protocol(format!("decoding the response header: {e}")))?;
        if header.correlation_id != correlation_id {
            return Err(protocol(format!(
                "correlation id {} answers request {correlation_id}",
                header.correlation_id
            )));
        }
        Resp::decode(&mut frame, version).map_err(|e| protocol(format!("decoding: {e}")))
    }
}

/// Whether a failed inter-broker login is logged now (at most once per interval).
fn failure_worth_logging() -> bool {
    static START: OnceLock<Instant> = OnceLock::new();
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let now_ms = START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1;
    let last = LAST_MS.load(Ordering::Relaxed);
    let due = last == 0 || now_ms.saturating_sub(last) >= FAILURE_LOG_INTERVAL.as_millis() as u64;
    due && LAST_MS
        .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}
