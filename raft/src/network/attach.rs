//! Broker attachments: a broker process keeps one idle connection open to every voter for
//! as long as it lives, so the controller learns of its death the moment the kernel closes
//! its sockets (kill -9, crash, OOM) instead of a whole `broker.session.timeout.ms` later.
//!
//! The connection carries one request, `Attach { broker_id, broker_epoch }`, and nothing
//! after it: no timeout can close it by mistake while the broker lives. Every voter records
//! attachments (not only the leader), so a controller elected after the broker's node died
//! with the old controller still knows the connection closed. A paused broker (SIGSTOP) or a
//! network partition keeps its connections open and is fenced by the session timeout, as in
//! Kafka; only a closed connection is this fast path (`Liveness::due`).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::sasl::{self, PeerSasl};
use super::tls::{self, PeerTls};
use super::{read_frame, write_frame, RpcRequest, RpcResponse};
use crate::liveness::Liveness;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause before attaching again after a connection failed or closed: shorter than
/// `Liveness`'s `DETACH_GRACE`, so a live broker whose connection merely broke is back
/// before the controller would fence it.
const RETRY: Duration = Duration::from_millis(50);

/// The server side: one attached connection; dropping it records the close.
pub(crate) struct Attached {
    liveness: Arc<Liveness>,
    broker_id: i32,
    broker_epoch: u64,
}

impl Attached {
    pub(crate) fn new(liveness: Arc<Liveness>, broker_id: i32, broker_epoch: u64) -> Self {
        liveness.attach(broker_id, broker_epoch);
        Attached {
            liveness,
            broker_id,
            broker_epoch,
        }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.liveness
            .detach(self.broker_id, self.broker_epoch, std::time::Instant::now());
    }
}

/// The broker side: holds an attachment to each of `voters` (peer-RPC addresses) until the
/// returned future is dropped, re-attaching whenever a connection fails or closes.
pub(crate) async fn hold(
    voters: Vec<String>,
    broker_id: i32,
    broker_epoch: u64,
    tls: Option<PeerTls>,
    sasl: Option<PeerSasl>,
) {
    if voters.is_empty() {
        // A quorum of this node alone: nothing to hold, and returning would have the caller
        // attach again at once, in a loop that never yields.
        return std::future::pending().await;
    }
    let mut tasks = JoinSet::new();
    for addr in voters {
        tasks.spawn(hold_one(
            addr,
            broker_id,
            broker_epoch,
            tls.clone(),
            sasl.clone(),
        ));
    }
    // The tasks loop forever; dropping this future drops the set, which aborts them.
    while tasks.join_next().await.is_some() {}
}

async fn hold_one(
    addr: String,
    broker_id: i32,
    broker_epoch: u64,
    tls: Option<PeerTls>,
    sasl: Option<PeerSasl>,
) {
    loop {
        match attach_once(&addr, broker_id, broker_epoch, tls.as_ref(), sasl.as_ref()).await {
            Ok(()) => tracing::debug!(%addr, "broker attachment closed by the voter"),
            Err(e) => tracing::debug!(%addr, error = %e, "broker attachment failed"),
        }
        tokio::time::sleep(RETRY).await;
    }
}

async fn attach_once(
    addr: &str,
    broker_id: i32,
    broker_epoch: u64,
    tls: Option<&PeerTls>,
    sasl: Option<&PeerSasl>,
) -> std::io::Result<()> {
    let open = async {
        let tcp = TcpStream::connect(addr).await?;
        let _ = tcp.set_nodelay(true);
        let stream = tls::client(tls, tcp, addr).await?;
        sasl::login(sasl, stream, addr).await
    };
    let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, open)
        .await
        .map_err(|_| std::io::Error::other("connect timed out"))??;
    write_frame(
        &mut stream,
        &RpcRequest::Attach {
            broker_id,
            broker_epoch,
        },
    )
    .await
    .map_err(std::io::Error::other)?;
    // The voter's answer, then nothing until one side goes away.
    loop {
        match read_frame::<_, RpcResponse>(&mut stream).await {
            Ok(Some(_)) => continue,
            Ok(None) => return Ok(()),
            Err(e) => return Err(std::io::Error::other(e)),
        }
    }
}
