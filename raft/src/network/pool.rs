//! Pooled connections for the requests a node forwards to the leader (`Propose`,
//! `AddLearner`, `Heartbeat`).
//!
//! Each call takes an idle connection to the target out of the pool (or opens one), does
//! one exchange, and puts the connection back only if the exchange succeeded: a failed
//! stream may hold part of a frame. The idle list is a `std::sync::Mutex` held only to push
//! or pop, never across `.await`. Concurrent calls use separate connections (the server
//! answers one request at a time per connection), bounded by [`MAX_IN_FLIGHT`] so a burst
//! of proposals cannot exhaust the leader's connection limit.
//!
//! A pooled connection may have been closed by the peer while idle (a restarted leader):
//! when a *reused* connection fails, the call is repeated once on a fresh connection.
//! That can deliver a request twice if the peer read it and then died before answering —
//! the same ambiguity as any retried RPC, which the callers accept (see `forward.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::conn::{connect, exchange, CallError};
use super::sasl::PeerSasl;
use super::tls::{PeerStream, PeerTls};
use super::{RpcRequest, RpcResponse};

/// Forwarded calls in flight at once from this node.
pub(crate) const MAX_IN_FLIGHT: usize = 16;
/// Idle connections kept per target.
const MAX_IDLE_PER_TARGET: usize = 4;

pub(crate) struct PeerPool {
    idle: Mutex<HashMap<String, Vec<PeerStream>>>,
    in_flight: Semaphore,
    tls: Option<PeerTls>,
    sasl: Option<PeerSasl>,
}

impl std::fmt::Debug for PeerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerPool").field("tls", &self.tls).finish()
    }
}

impl Default for PeerPool {
    fn default() -> Self {
        PeerPool::new(None, None)
    }
}

impl PeerPool {
    /// A pool whose connections run over TLS when `tls` is given, logged in when `sasl` is.
    pub(crate) fn new(tls: Option<PeerTls>, sasl: Option<PeerSasl>) -> Self {
        PeerPool {
            idle: Mutex::new(HashMap::new()),
            in_flight: Semaphore::new(MAX_IN_FLIGHT),
            tls,
            sasl,
        }
    }

    /// Sends `request` to `addr` and returns its response, all within `ttl`.
    pub(crate) async fn call(
        &self,
        addr: &str,
        request: &RpcRequest,
        ttl: Duration,
    ) -> Result<RpcResponse, CallError> {
        match tokio::time::timeout(ttl, self.call_inner(addr, request)).await {
            Ok(result) => result,
            Err(_) => Err(CallError::TimedOut(ttl)),
        }
    }

    async fn call_inner(&self, addr: &str, request: &RpcRequest) -> Result<RpcResponse, CallError> {
        // The semaphore is never closed; a closed one would only mean "no limit".
        let _permit = self.in_flight.acquire().await.ok();
        if let Some(mut stream) = self.take(addr) {
            if let Ok(response) = exchange(&mut stream, request).await {
                self.put(addr, stream);
                return Ok(response);
            }
            // Most likely closed while idle: fall through to a fresh connection.
        }
        let mut stream = connect(addr, self.tls.as_ref(), self.sasl.as_ref()).await?;
        let response = exchange(&mut stream, request).await?;
        self.put(addr, stream);
        Ok(response)
    }

    fn take(&self, addr: &str) -> Option<PeerStream> {
        let mut idle = self.idle.lock().ok()?;
        idle.get_mut(addr)?.pop()
    }

    fn put(&self, addr: &str, stream: PeerStream) {
        // A poisoned lock only costs the reuse of this connection.
        if let Ok(mut idle) = self.idle.lock() {
            let list = idle.entry(addr.to_string()).or_default();
            if list.len() < MAX_IDLE_PER_TARGET {
                list.push(stream);
            }
        }
    }
}
