//! The client side of the raft RPCs: one [`PeerClient`] per target node, created by
//! openraft through [`NetworkFactory`].
//!
//! Each call sends one request frame and waits for one response frame on a lazily opened
//! stream (TLS and a SASL login when configured), bounded by openraft's hard TTL for the RPC. Any I/O error or timeout drops the
//! connection (a half-read response would desynchronise the stream) and is reported as
//! `Unreachable` (connect failed: openraft backs off) or `Network` (call failed mid-way).
//! Remote raft errors come back as `RemoteError`, as openraft expects.

// openraft's `RaftNetwork` trait fixes `RPCError` as the error type.
#![allow(clippy::result_large_err)]

use std::error::Error;
use std::time::Duration;

use super::conn::{connect, exchange, CallError};
use super::sasl::PeerSasl;
use super::tls::{PeerStream, PeerTls};
use super::{RpcRequest, RpcResponse};
use crate::QuorumNode;
use crate::TypeConfig;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::AnyError;

type NodeId = u64;
type RpcResult<T, E> = Result<T, RPCError<NodeId, QuorumNode, E>>;

/// Creates [`PeerClient`]s; holds only the TLS and SASL settings, so cloning is cheap.
#[derive(Debug, Clone, Default)]
pub struct NetworkFactory {
    pub tls: Option<PeerTls>,
    pub sasl: Option<PeerSasl>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &QuorumNode) -> PeerClient {
        PeerClient {
            target,
            addr: node.addr.clone(),
            directory_id: node.directory_id.clone(),
            tls: self.tls.clone(),
            sasl: self.sasl.clone(),
            conn: None,
        }
    }
}

/// The connection to one peer.
pub struct PeerClient {
    target: NodeId,
    addr: String,
    /// The target's directory id in the membership (KIP-853), named on every raft RPC so
    /// that only that replica serves it; `None` in a static quorum.
    directory_id: Option<String>,
    tls: Option<PeerTls>,
    sasl: Option<PeerSasl>,
    conn: Option<PeerStream>,
}

impl PeerClient {
    async fn call(&mut self, request: RpcRequest, ttl: Duration) -> Result<RpcResponse, CallError> {
        let request = match &self.directory_id {
            Some(directory_id) => RpcRequest::ToReplica {
                directory_id: directory_id.clone(),
                rpc: Box::new(request),
            },
            None => request,
        };
        let result = tokio::time::timeout(ttl, self.exchange(&request)).await;
        let result = match result {
            Ok(r) => r,
            Err(_) => Err(CallError::TimedOut(ttl)),
        };
        if result.is_err() {
            // The stream may hold part of a frame: never reuse it.
            self.conn = None;
        }
        result
    }

    async fn exchange(&mut self, request: &RpcRequest) -> Result<RpcResponse, CallError> {
        let conn = match self.conn.as_mut() {
            Some(conn) => conn,
            None => self
                .conn
                .insert(connect(&self.addr, self.tls.as_ref(), self.sasl.as_ref()).await?),
        };
        exchange(conn, request).await
    }

    fn map_err<E: Error>(&self, err: CallError) -> RPCError<NodeId, QuorumNode, E> {
        match err {
            CallError::Connect(e) => {
                tracing::debug!(target_node = self.target, addr = %self.addr, error = %e, "raft peer unreachable");
                RPCError::Unreachable(Unreachable::new(&e))
            }
            CallError::Frame(e) => RPCError::Network(NetworkError::new(&e)),
            CallError::Closed => RPCError::Network(NetworkError::new(&AnyError::error(format!(
                "raft peer {} closed the connection",
                self.target
            )))),
            CallError::TimedOut(ttl) => RPCError::Network(NetworkError::new(&AnyError::error(
                format!("raft peer {} did not answer within {ttl:?}", self.target),
            ))),
        }
    }

    /// Any answer but the expected one. `NotThisReplica` is reported as unreachable, so
    /// openraft backs off: another disk answers at the member's address, and only replacing
    /// the voter (remove-controller, add-controller) changes that.
    fn unexpected<E: Error>(&self, response: RpcResponse) -> RPCError<NodeId, QuorumNode, E> {
        if let RpcResponse::NotThisReplica { directory_id } = response {
            let found = directory_id.as_deref().unwrap_or("none");
            let err = AnyError::error(format!(
                "raft peer {} at {} has directory id {found}, not {}: its disk was formatted again",
                self.target,
                self.addr,
                self.directory_id.as_deref().unwrap_or("none"),
            ));
            tracing::debug!(target_node = self.target, error = %err, "raft peer is another replica");
            return RPCError::Unreachable(Unreachable::new(&err));
        }
        RPCError::Network(NetworkError::new(&AnyError::error(format!(
            "raft peer {} answered with the wrong response type",
            self.target
        ))))
    }

    fn remote<T, E: Error>(&self, result: Result<T, E>) -> RpcResult<T, E> {
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, RaftError<NodeId>> {
        match self
            .call(RpcRequest::AppendEntries(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcResponse::AppendEntries(r)) => self.remote(r),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.map_err(e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        match self
            .call(RpcRequest::InstallSnapshot(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcResponse::InstallSnapshot(r)) => self.remote(r),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.map_err(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, RaftError<NodeId>> {
        match self.call(RpcRequest::Vote(rpc), option.hard_ttl()).await {
            Ok(RpcResponse::Vote(r)) => self.remote(r),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.map_err(e)),
        }
    }
}
