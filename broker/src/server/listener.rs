//! Listeners from `listeners`: bind each, accept connections under the connection limits
//! (`connection_limits`: `max.connections`, `max.connections.per.ip`; `connection_rate`:
//! the connection creation rates), hand each to its own task. A client that resolves `localhost` to `::1` (librdkafka may)
//! must still connect, so a wildcard host (`0.0.0.0` or empty) binds the dual-stack
//! `[::]` (which also accepts IPv4), falling back to `0.0.0.0` on hosts without IPv6,
//! and `localhost` binds both `127.0.0.1` and `::1`. Each listener serves its security
//! protocol: an SSL listener runs the TLS handshake of its own configuration
//! (`server::tls`) before the first request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::broker::Broker;
use crate::config::{BrokerConfig, Listener};
use crate::metrics;
use crate::server::closed::{self, CloseReason};
use crate::server::connection;
use crate::server::session::SecurityProtocol;
use crate::server::tls_reload::ServedTls;

/// What every connection accepted on one listener shares.
pub struct ClientListener {
    /// Upper case, as in `listeners`.
    pub name: Arc<str>,
    pub protocol: SecurityProtocol,
    /// Present on SSL listeners.
    pub tls: Option<Arc<ServedTls>>,
}

/// Binds every configured listener and serves until `shutdown` fires. `broker.tls` holds
/// the TLS of every SSL listener, built at start (`server::tls::build_all`).
pub async fn serve(
    broker: Arc<Broker>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) -> anyhow::Result<Vec<SocketAddr>> {
    let mut bound = Vec::new();
    // Controller listeners carry the metadata quorum's raft traffic, bound by the quorum.
    let client_listeners = broker
        .config
        .listeners
        .iter()
        .filter(|l| !broker.config.is_controller_listener(&l.name))
        .cloned()
        .collect::<Vec<_>>();
    for listener in client_listeners {
        let protocol = broker
            .config
            .listener_security_protocol_map
            .get(&listener.name)
            .and_then(|p| SecurityProtocol::parse(p))
            .unwrap_or(SecurityProtocol::Plaintext);
        let tls = broker.tls.get(&listener.name).cloned();
        if protocol.uses_tls() && tls.is_none() {
            anyhow::bail!("listener {listener} has no TLS configuration");
        }
        let client_listener = Arc::new(ClientListener {
            name: Arc::from(listener.name.as_str()),
            protocol,
            tls,
        });
        for (addr, fallback) in bind_addresses(&listener)? {
            let socket = match TcpListener::bind(addr).await {
                Ok(socket) => socket,
                // IPv6 is best effort: hosts without it serve IPv4 only.
                Err(e) if addr.is_ipv6() => {
                    debug!(%addr, error = %e, "ipv6 listener not bound");
                    match fallback {
                        Some(v4) => TcpListener::bind(v4)
                            .await
                            .map_err(|e| anyhow::anyhow!("cannot bind listener {v4}: {e}"))?,
                        None => continue,
                    }
                }
                Err(e) => return Err(anyhow::anyhow!("cannot bind listener {addr}: {e}")),
            };
            set_buffer_sizes(&socket, &broker.config)
                .map_err(|e| anyhow::anyhow!("cannot size the buffers of listener {addr}: {e}"))?;
            let local = socket.local_addr()?;
            info!(listener = %listener.name, %protocol, addr = %local, "listening");
            bound.push(local);
            tracker.spawn(accept_loop(
                socket,
                client_listener.clone(),
                broker.clone(),
                shutdown.clone(),
                tracker.clone(),
            ));
        }
    }
    Ok(bound)
}

/// `socket.send.buffer.bytes` and `socket.receive.buffer.bytes` (256 KiB and 100 KiB by
/// default), set on the listening socket: accepted connections inherit them. A bounded
/// send buffer is also cheaper for zero-copy fetches on loopback: `sendfile` queues at
/// most that much ahead, and the rest is sent as the client acknowledges, instead of a
/// whole response queued at once (about a third less broker system CPU per GB fetched
/// than the OS default); 256 KiB rather than Kafka's 100 KiB halves the sends and
/// wake-ups per response again.
fn set_buffer_sizes(socket: &TcpListener, config: &BrokerConfig) -> std::io::Result<()> {
    use rustix::net::sockopt;
    if let Some(bytes) = config.socket_send_buffer_bytes {
        sockopt::set_socket_send_buffer_size(socket, bytes)?;
    }
    if let Some(bytes) = config.socket_receive_buffer_bytes {
        sockopt::set_socket_recv_buffer_size(socket, bytes)?;
    }
    Ok(())
}

/// The addresses to bind for a listener, each with the IPv4 address to bind instead
/// when it is IPv6 and the host has no IPv6.
fn bind_addresses(listener: &Listener) -> anyhow::Result<Vec<(SocketAddr, Option<SocketAddr>)>> {
    let port = listener.port;
    let host = listener.host.trim_matches(|c| c == '[' || c == ']');
    let at = |ip: IpAddr| SocketAddr::new(ip, port);
    Ok(match host {
        "" | "0.0.0.0" | "::" => vec![(
            at(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
            Some(at(IpAddr::V4(Ipv4Addr::UNSPECIFIED))),
        )],
        "localhost" => vec![
            (at(IpAddr::V4(Ipv4Addr::LOCALHOST)), None),
            (at(IpAddr::V6(Ipv6Addr::LOCALHOST)), None),
        ],
        other => {
            let ip: IpAddr = other
                .parse()
                .map_err(|_| anyhow::anyhow!("listener host {other:?} is not an IP address"))?;
            vec![(at(ip), None)]
        }
    })
}

async fn accept_loop(
    socket: TcpListener,
    listener: Arc<ClientListener>,
    broker: Arc<Broker>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        // At max.connections nothing is accepted: new connections wait in the listen queue.
        let reservation = tokio::select! {
            _ = shutdown.cancelled() => return,
            reservation = broker.connection_quotas.reserve() => reservation,
        };
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = socket.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let rates = &broker.connection_quotas.rates;
                // Past max.connection.creation.rate (broker-wide or this listener's) the
                // connection is served late and nothing else is accepted meanwhile.
                let delay = rates.accept_delay(&listener.name);
                if !delay.is_zero() {
                    metrics::record_accept_throttle(&listener.name, delay);
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
                if let Some(throttle) = rates.ip_throttle(&listener.name, peer.ip()) {
                    hold_then_close(stream, peer, throttle, &shutdown, &tracker);
                    continue;
                }
                let slot = match reservation.admit(peer.ip()) {
                    Ok(slot) => slot,
                    Err(refused) => {
                        let detail = format_args!(
                            "address already has the configured maximum of {} connections",
                            refused.limit
                        );
                        closed::connection_closed(CloseReason::AddressLimit, peer, &detail);
                        drop(stream);
                        continue;
                    }
                };
                let broker = broker.clone();
                let shutdown = shutdown.clone();
                let listener = listener.clone();
                tracker.spawn(async move {
                    connection::run(stream, peer, listener, broker, shutdown).await;
                    drop(slot);
                });
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A connection from an address past its `connection_creation_rate` is not served: Kafka
/// holds it for the throttle time (so the client cannot reconnect at once) and then closes
/// it. It holds no place under `max.connections` meanwhile; the wait is at most one quota
/// window.
fn hold_then_close(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    throttle: Duration,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) {
    let detail = format_args!(
        "connection creation rate of the address exceeded: closing after {} ms",
        throttle.as_millis()
    );
    closed::connection_closed(CloseReason::ConnectionRate, peer, &detail);
    let shutdown = shutdown.clone();
    tracker.spawn(async move {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(throttle) => {}
        }
        drop(stream);
    });
}
