//! The server side of peer RPC: accepts connections from other quorum members, hands raft
//! RPCs to the local `Raft` and leader-only requests to the `PeerService`.
//!
//! Ownership: [`serve`] spawns one accept task that owns a `JoinSet` of connection tasks;
//! [`RaftServer::shutdown`] (or dropping the server) aborts the accept task, and dropping its
//! `JoinSet` aborts every connection. At most [`MAX_PEER_CONNECTIONS`] connections are served
//! at once: the permit is taken before `accept`, as in mini-redis. A peer disconnecting is
//! normal (DEBUG); a malformed frame closes that connection (WARN).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

use super::sasl::PeerSasl;
use super::sniff::{self, FirstFrame, KafkaHandlerSlot};
use super::tls::{self, PeerStream, PeerTls};
use super::{read_frame, write_frame, LeaderReply, RpcRequest, RpcResponse};
use crate::service::{PeerService, LEADER_CALL_TIMEOUT};
use crate::QuorumNode;

/// Connections served at once: per peer, openraft's one per target plus the forwarding
/// pool's (at most `pool::MAX_IN_FLIGHT`), for a handful of voters and learners.
pub const MAX_PEER_CONNECTIONS: usize = 256;
/// How long a peer has to complete its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a peer has to log in and send its first request on a SASL listener (a failed
/// login's delay, `connection.failed.authentication.delay.ms`, is far shorter).
const LOGIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A running peer-RPC listener.
pub struct RaftServer {
    local_addr: SocketAddr,
    accept_task: JoinHandle<()>,
}

impl RaftServer {
    /// The bound address (useful when listening on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting and closes every connection.
    pub async fn shutdown(mut self) {
        self.accept_task.abort();
        // An aborted task reports a cancellation error, which is the expected outcome.
        let _ = (&mut self.accept_task).await;
    }
}

impl Drop for RaftServer {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

/// Serves peer RPC on an already bound `listener` until the returned server is shut down.
/// (The caller binds first so that a voter listening on port 0 knows its address before
/// the raft node exists.) With `sasl`, every connection logs in first (`sasl.rs`).
pub(crate) fn serve(
    listener: TcpListener,
    service: Arc<PeerService>,
    tls: Option<PeerTls>,
    sasl: Option<PeerSasl>,
    kafka: KafkaHandlerSlot,
) -> std::io::Result<RaftServer> {
    let local_addr = listener.local_addr()?;
    tracing::info!(%local_addr, tls = tls.is_some(), sasl = sasl.is_some(), "raft peer listener started");
    let accept_task = tokio::spawn(accept_loop(listener, service, tls, sasl, kafka));
    Ok(RaftServer {
        local_addr,
        accept_task,
    })
}

async fn accept_loop(
    listener: TcpListener,
    service: Arc<PeerService>,
    tls: Option<PeerTls>,
    sasl: Option<PeerSasl>,
    kafka: KafkaHandlerSlot,
) {
    let limit = Arc::new(Semaphore::new(MAX_PEER_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "raft peer accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = service.clone();
        let tls = tls.clone();
        let sasl = sasl.clone();
        let kafka = kafka.clone();
        connections.spawn(async move {
            serve_connection(stream, peer, service, tls, sasl, kafka).await;
            drop(permit);
        });
    }
}

async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    service: Arc<PeerService>,
    tls: Option<PeerTls>,
    sasl: Option<PeerSasl>,
    kafka: KafkaHandlerSlot,
) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "set_nodelay failed");
    }
    let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls::server(tls.as_ref(), tcp));
    let (stream, client_cert) = match handshake.await {
        Ok(Ok(accepted)) => accepted,
        // A reachability probe (`monitor.rs`) connects and closes without a handshake.
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            tracing::debug!(%peer, "raft peer closed before the TLS handshake");
            return;
        }
        Ok(Err(e)) => {
            tracing::warn!(%peer, error = %e, "raft peer TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::warn!(%peer, "raft peer TLS handshake timed out");
            return;
        }
    };
    let first = match sasl.as_ref() {
        None => first_frame(stream, peer).await,
        Some(sasl) => {
            let image = service.image();
            let login = (sasl.authenticator)(stream, peer, client_cert.clone(), image);
            match tokio::time::timeout(LOGIN_TIMEOUT, login).await {
                Ok(Some(authenticated)) => Some((
                    authenticated.next,
                    authenticated.stream,
                    Some(authenticated.user),
                )),
                Ok(None) => {
                    tracing::debug!(%peer, "controller listener connection not authenticated; closed");
                    None
                }
                Err(_) => {
                    tracing::debug!(%peer, "controller listener login timed out; closed");
                    None
                }
            }
        }
    };
    let mut stream = match first {
        Some((FirstFrame::Raft, stream, _)) => stream,
        Some((FirstFrame::Kafka, stream, user)) => {
            match kafka.get() {
                Some(handler) => handler(stream, peer, client_cert, user).await,
                None => {
                    tracing::debug!(%peer, "kafka request on the controller listener before the node serves them")
                }
            }
            return;
        }
        None => return,
    };
    // Set once the peer attaches a broker to this connection; its drop (however the loop
    // ends) tells liveness that the broker's connection closed.
    let mut _attached: Option<super::attach::Attached> = None;
    // The leader whose AppendEntries this connection carries: its close, once the loop
    // ends, may mean that leader's process is gone (`leader_gone.rs`).
    let mut leader_on_connection: Option<u64> = None;
    serve_requests(
        &mut stream,
        peer,
        &service,
        &mut _attached,
        &mut leader_on_connection,
    )
    .await;
    if let Some(leader) = leader_on_connection {
        service.leader_contact().connection_closed(leader);
    }
}

/// What the first frame of a connection without SASL is, with the stream (frame replayed);
/// `None` once the peer closed or the read failed.
async fn first_frame(
    stream: PeerStream,
    peer: SocketAddr,
) -> Option<(FirstFrame, PeerStream, Option<String>)> {
    match sniff::sniff(stream).await {
        Ok(Some((kind, stream))) => Some((kind, stream, None)),
        Ok(None) => {
            tracing::debug!(%peer, "raft peer closed before its first frame");
            None
        }
        Err(e) => {
            tracing::debug!(%peer, error = %e, "raft peer connection closed");
            None
        }
    }
}

async fn serve_requests(
    stream: &mut PeerStream,
    peer: SocketAddr,
    service: &PeerService,
    attached: &mut Option<super::attach::Attached>,
    leader_on_connection: &mut Option<u64>,
) {
    // Whether this connection was already told it addresses another replica (logged once).
    let mut refused_replica = false;
    loop {
        let request: RpcRequest = match read_frame(stream).await {
            Ok(Some(request)) => request,
            Ok(None) => {
                tracing::debug!(%peer, "raft peer disconnected");
                return;
            }
            Err(super::FrameError::Io(e)) => {
                tracing::debug!(%peer, error = %e, "raft peer connection closed");
                return;
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "bad raft peer frame, closing connection");
                return;
            }
        };
        let request = match request {
            RpcRequest::ToReplica { directory_id, rpc } => {
                match addressed_here(service, &directory_id, *rpc) {
                    Some(rpc) => rpc,
                    None => {
                        if !std::mem::replace(&mut refused_replica, true) {
                            tracing::warn!(
                                %peer,
                                addressed = %directory_id,
                                own = service.directory_id().unwrap_or("none"),
                                "raft request for another replica of this node id refused: this node's disk was formatted again, so it stays an observer until the voter is replaced (kafka-metadata-quorum remove-controller, then add-controller)"
                            );
                        }
                        let refusal = RpcResponse::NotThisReplica {
                            directory_id: service.directory_id().map(str::to_owned),
                        };
                        if let Err(e) = write_frame(stream, &refusal).await {
                            tracing::debug!(%peer, error = %e, "raft peer response not delivered");
                            return;
                        }
                        continue;
                    }
                }
            }
            request => request,
        };
        let response = match request {
            RpcRequest::Attach {
                broker_id,
                broker_epoch,
            } => {
                *attached = Some(super::attach::Attached::new(
                    service.liveness(),
                    broker_id,
                    broker_epoch,
                ));
                RpcResponse::Attach
            }
            RpcRequest::AppendEntries(rpc) => {
                if let Some(leader) = rpc.vote.leader_id().voted_for() {
                    service.leader_contact().heard(leader);
                    *leader_on_connection = Some(leader);
                }
                answer(service, RpcRequest::AppendEntries(rpc)).await
            }
            request => answer(service, request).await,
        };
        if let Err(e) = write_frame(stream, &response).await {
            tracing::debug!(%peer, error = %e, "raft peer response not delivered");
            return;
        }
    }
}

/// The raft RPC inside a [`RpcRequest::ToReplica`] when this node is the replica it names
/// (or has no directory id to tell); `None` when it is to be refused. Only raft RPCs are
/// addressed; anything else inside is refused the same way.
fn addressed_here(
    service: &PeerService,
    directory_id: &str,
    rpc: RpcRequest,
) -> Option<RpcRequest> {
    let raft_rpc = matches!(
        rpc,
        RpcRequest::AppendEntries(_) | RpcRequest::Vote(_) | RpcRequest::InstallSnapshot(_)
    );
    let ours = service.directory_id().is_none_or(|own| own == directory_id);
    (raft_rpc && ours).then_some(rpc)
}

async fn answer(service: &PeerService, request: RpcRequest) -> RpcResponse {
    let raft = service.raft();
    match request {
        RpcRequest::AppendEntries(rpc) => {
            RpcResponse::AppendEntries(raft.append_entries(rpc).await)
        }
        RpcRequest::Vote(rpc) => RpcResponse::Vote(raft.vote(rpc).await),
        RpcRequest::InstallSnapshot(rpc) => {
            RpcResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
        }
        RpcRequest::Propose(cmd) => RpcResponse::Propose(
            // A stopped raft core here is this node's problem, not the proposer's: to the
            // proposer it is just an unavailable leader.
            service
                .propose(cmd, LEADER_CALL_TIMEOUT)
                .await
                .unwrap_or_else(|fatal| LeaderReply::Unavailable {
                    reason: fatal.to_string(),
                }),
        ),
        RpcRequest::AddLearner {
            node_id,
            addr,
            directory_id,
        } => RpcResponse::AddLearner(
            service
                .add_learner(node_id, QuorumNode { addr, directory_id })
                .await,
        ),
        RpcRequest::Heartbeat(hb) => RpcResponse::Heartbeat(service.heartbeat(&hb)),
        RpcRequest::LeaderMetrics => RpcResponse::LeaderMetrics(service.leader_metrics()),
        RpcRequest::UpdateVoter {
            node_id,
            directory_id,
        } => RpcResponse::UpdateVoter(service.update_voter(node_id, directory_id)),
        RpcRequest::UpgradeVoters { validate_only } => {
            RpcResponse::UpgradeVoters(service.upgrade_voters(validate_only).await)
        }
        // Handled by the connection loop, which owns the attachment.
        RpcRequest::Attach { .. } => RpcResponse::Attach,
        // Unwrapped by the connection loop; one inside another is refused.
        RpcRequest::ToReplica { .. } => RpcResponse::NotThisReplica {
            directory_id: service.directory_id().map(str::to_owned),
        },
    }
}
