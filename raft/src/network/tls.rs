//! TLS for the raft transport (issue 25 item 6): when the controller listener is mapped to
//! SSL, every peer connection (raft RPCs, forwarded requests, broker attachments) runs over
//! TLS, verified both ways when the listener asks for client certificates (Kafka's
//! `ssl.client.auth=required`: mutually authenticated controllers).
//!
//! The broker reads the key and trust stores with Kafka's keys and hands over ready rustls
//! client and server configurations; this crate only wraps streams, so it never depends on
//! the broker's configuration. A client verifies the peer by the host of the address it
//! dials (`controller.quorum.voters`, a learner's advertised host).

use std::fmt;

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Both sides of TLS between quorum members.
#[derive(Clone)]
pub struct PeerTls {
    pub connector: TlsConnector,
    pub acceptor: TlsAcceptor,
}

impl fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PeerTls")
    }
}

/// A plain or TLS stream between quorum members (`Sync`: openraft shares its network clients).
pub trait PeerIo: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> PeerIo for T {}
pub type PeerStream = Box<dyn PeerIo>;

/// The client side: `tcp`, dialled at `addr` (`host:port`), wrapped in TLS when configured.
pub(crate) async fn client(
    tls: Option<&PeerTls>,
    tcp: TcpStream,
    addr: &str,
) -> std::io::Result<PeerStream> {
    let Some(tls) = tls else {
        return Ok(Box::new(tcp));
    };
    let host = host_of(addr);
    let name = ServerName::try_from(host.to_owned()).map_err(|e| {
        std::io::Error::other(format!("{host} is not a host name TLS can verify: {e}"))
    })?;
    Ok(Box::new(tls.connector.connect(name, tcp).await?))
}

/// The server side: an accepted `tcp`, wrapped in TLS when configured, with the client's
/// certificate (DER) when it presented one (the Kafka requests served on the controller
/// listener are authorized as its principal).
pub(crate) async fn server(
    tls: Option<&PeerTls>,
    tcp: TcpStream,
) -> std::io::Result<(PeerStream, Option<Vec<u8>>)> {
    match tls {
        None => Ok((Box::new(tcp), None)),
        Some(tls) => {
            let stream = tls.acceptor.accept(tcp).await?;
            let cert = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .map(|cert| cert.as_ref().to_vec());
            Ok((Box::new(stream), cert))
        }
    }
}

/// The host of `host:port` (an IPv6 literal without its brackets).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verified_name_is_the_dialled_host() {
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("controller-1.example:9093"), "controller-1.example");
    }
}
