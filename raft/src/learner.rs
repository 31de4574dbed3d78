//! A broker-only node (`process.roles=broker`) follows the metadata log as a raft learner,
//! KRaft's observer: it never votes and never initializes. It serves peer RPC so the leader
//! can replicate to it, and asks to be added with `AddLearner { node_id, addr }`, trying
//! each configured voter until the leader (or a redirect to it) accepts. The request is
//! idempotent, and re-sent at every start: a restarted learner may listen on a new port.
//!
//! The accepted reply names a log index; the learner is ready (`wait_ready`) once its image
//! has applied it, i.e. it has caught up with the log as of its joining.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::QuorumNode;
use openraft::RaftMetrics;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::monitor;
use crate::network::pool::PeerPool;
use crate::network::{LeaderReply, RpcRequest, RpcResponse};

/// One `AddLearner` may wait for a membership change to commit.
const JOIN_CALL_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY_EVERY: Duration = Duration::from_millis(200);
const WARN_EVERY: Duration = Duration::from_secs(5);

pub(crate) struct Join {
    pub node_id: u64,
    /// The `host:port` the leader replicates to.
    pub advertised: String,
    /// A controller observer's directory id (KIP-853); `None` for a broker.
    pub directory_id: Option<String>,
    pub voters: BTreeMap<u64, String>,
    pub pool: Arc<PeerPool>,
    /// Set to the index to catch up to once the leader has accepted this learner.
    pub joined: watch::Sender<Option<u64>>,
}

/// Joins, then watches leadership like every node. Owned by `MetadataQuorum`; aborted at
/// shutdown (nothing to clean up at any `.await`).
pub(crate) async fn run(join: Join, metrics: watch::Receiver<RaftMetrics<u64, QuorumNode>>) {
    let voters = join.voters.clone();
    let node_id = join.node_id;
    join_quorum(join).await;
    monitor::watch_leader(node_id, metrics, voters).await;
}

async fn join_quorum(join: Join) {
    let request = RpcRequest::AddLearner {
        node_id: join.node_id,
        addr: join.advertised.clone(),
        directory_id: join.directory_id.clone(),
    };
    let started = Instant::now();
    let mut last_warn = Instant::now();
    let mut hint: Option<(Option<u64>, String)> = None;
    loop {
        let targets: Vec<(Option<u64>, String)> = match hint.take() {
            Some(h) => vec![h],
            None => join
                .voters
                .iter()
                .map(|(&id, addr)| (Some(id), addr.clone()))
                .collect(),
        };
        let mut failures = Vec::new();
        for (id, addr) in targets {
            let reply = match join.pool.call(&addr, &request, JOIN_CALL_TIMEOUT).await {
                Ok(RpcResponse::AddLearner(reply)) => reply,
                Ok(_) => LeaderReply::Unavailable {
                    reason: "wrong response type".into(),
                },
                Err(e) => LeaderReply::Unavailable {
                    reason: e.to_string(),
                },
            };
            match reply {
                LeaderReply::Ok(index) => {
                    tracing::info!(node_id = join.node_id, addr = %join.advertised, leader = ?id, catch_up_to = index, "joined the metadata quorum as a learner");
                    join.joined.send_replace(Some(index));
                    return;
                }
                LeaderReply::NotLeader {
                    leader_id,
                    leader_addr: Some(leader_addr),
                } => {
                    hint = Some((leader_id, leader_addr));
                    break;
                }
                LeaderReply::NotLeader { .. } => {
                    failures.push((id.unwrap_or_default(), addr, "no leader known".to_string()));
                }
                LeaderReply::Unavailable { reason } => {
                    failures.push((id.unwrap_or_default(), addr, reason));
                }
            }
        }
        if last_warn.elapsed() >= WARN_EVERY && !failures.is_empty() {
            last_warn = Instant::now();
            tracing::warn!(
                node_id = join.node_id,
                waited_s = started.elapsed().as_secs(),
                "metadata learner not accepted by any voter yet: {}",
                monitor::list(&failures)
            );
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}
