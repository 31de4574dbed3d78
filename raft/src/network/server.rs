//! The server side of peer RPC: accepts voter connections and hands each request to the
//! local `Raft`.
//!
//! Ownership: [`serve`] spawns one accept task that owns a `JoinSet` of connection tasks;
//! [`RaftServer::shutdown`] (or dropping the server) aborts the accept task, and dropping its
//! `JoinSet` aborts every connection. At most [`MAX_PEER_CONNECTIONS`] connections are served
//! at once: the permit is taken before `accept`, as in mini-redis. A peer disconnecting is
//! normal (DEBUG); a malformed frame closes that connection (WARN).

use std::net::SocketAddr;
use std::sync::Arc;

use openraft::Raft;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

use super::{read_frame, write_frame, RpcRequest, RpcResponse};
use crate::TypeConfig;

/// Connections served at once; a quorum has a handful of voters, each with a few streams.
pub const MAX_PEER_CONNECTIONS: usize = 64;

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

/// Binds `addr` and serves peer RPC for `raft` until the returned server is shut down.
pub async fn serve(addr: SocketAddr, raft: Raft<TypeConfig>) -> std::io::Result<RaftServer> {
    let listener = TcpListener::bind(addr).await?;
    let local_addr = listener.local_addr()?;
    tracing::info!(%local_addr, "raft peer listener started");
    let accept_task = tokio::spawn(accept_loop(listener, raft));
    Ok(RaftServer {
        local_addr,
        accept_task,
    })
}

async fn accept_loop(listener: TcpListener, raft: Raft<TypeConfig>) {
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
        let raft = raft.clone();
        connections.spawn(async move {
            serve_connection(stream, peer, raft).await;
            drop(permit);
        });
    }
}

async fn serve_connection(mut stream: TcpStream, peer: SocketAddr, raft: Raft<TypeConfig>) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "set_nodelay failed");
    }
    loop {
        let request: RpcRequest = match read_frame(&mut stream).await {
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
        let response = match request {
            RpcRequest::AppendEntries(rpc) => {
                RpcResponse::AppendEntries(raft.append_entries(rpc).await)
            }
            RpcRequest::Vote(rpc) => RpcResponse::Vote(raft.vote(rpc).await),
            RpcRequest::InstallSnapshot(rpc) => {
                RpcResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
        };
        if let Err(e) = write_frame(&mut stream, &response).await {
            tracing::debug!(%peer, error = %e, "raft peer response not delivered");
            return;
        }
    }
}
