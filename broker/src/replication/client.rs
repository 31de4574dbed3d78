//! The broker-to-broker Kafka client a follower uses to fetch from a leader: one TCP
//! connection per (follower, leader) pair, requests encoded with `kafka-protocol` and
//! framed like any client's, one request in flight at a time (the fetcher waits for each
//! answer before it sends the next, as Kafka's fetcher threads do).
//!
//! Every wait is bounded: a leader that stops answering (SIGSTOP, partition) costs one
//! timeout, after which the connection is dropped and opened again.

use std::time::Duration;

use brook_protocol::kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use brook_protocol::kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

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
}

/// One connection to another broker's client listener.
pub struct PeerConnection {
    addr: String,
    stream: BufReader<TcpStream>,
    next_correlation_id: i32,
    client_id: StrBytes,
}

impl PeerConnection {
    pub async fn connect(addr: &str, node_id: i32, timeout: Duration) -> Result<Self, PeerError> {
        let connect = TcpStream::connect(addr);
        let stream = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => {
                return Err(PeerError::Connect {
                    addr: addr.to_string(),
                    source,
                })
            }
            Err(_) => {
                return Err(PeerError::Timeout {
                    addr: addr.to_string(),
                    timeout,
                })
            }
        };
        // Fetch answers are latency-critical for acks=all; never wait for Nagle.
        let _ = stream.set_nodelay(true);
        Ok(PeerConnection {
            addr: addr.to_string(),
            stream: BufReader::new(stream),
            next_correlation_id: 0,
            client_id: StrBytes::from_string(format!("brook-replica-{node_id}")),
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// One request on a connection of its own, closed after the answer: for the rare
    /// coordinator-to-leader requests (transaction markers, KIP-890 checks), which do not
    /// keep a connection open.
    pub async fn call_once<Req, Resp>(
        addr: &str,
        node_id: i32,
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
        let mut conn = PeerConnection::connect(addr, node_id, connect_timeout).await?;
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
            self.stream.get_mut().write_all(&body).await?;
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
