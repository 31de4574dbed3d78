//! Requests from any node to the metadata leader: proposals (retried until a deadline)
//! and broker heartbeats (one try). Kafka brokers forward admin requests to the controller
//! the same way (KIP-590), so a client may talk to any broker.
//!
//! A proposal goes to the leader this node knows (from raft metrics, else a redirect's hint);
//! on the leader it is a local `client_write`. The leader answers the committed log index
//! and the apply result; the proposer then waits until its *own* image has applied that
//! index, so whatever answers the client next on this node reads the write.
//!
//! Retries: a leader change, an unreachable or restarting leader, or a `NotLeader` redirect
//! are retried with a short backoff until the deadline. A connection lost after the request
//! was sent is retried too, so a command can be applied twice: commands are designed for it
//! (re-registration replaces, config sets are idempotent) or fail visibly
//! (`TopicAlreadyExists` for a create whose first answer was lost — Kafka clients see the
//! same after a retried CreateTopics).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::command::Command;
use crate::error::ProposeError;
use crate::image::MetadataImage;
use crate::liveness::{Heartbeat, HeartbeatReply};
use crate::network::pool::PeerPool;
use crate::network::{LeaderReply, RpcRequest, RpcResponse, VoterDirectoryIds};
use crate::service::{PeerService, LEADER_CALL_TIMEOUT};

/// How long `propose` keeps trying.
pub const PROPOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// A forwarded heartbeat gets one try of this long: the broker sends the next one soon.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between attempts while the leader is unknown or unreachable: about one
/// heartbeat interval, short enough to notice a new leader quickly.
const BACKOFF: Duration = Duration::from_millis(75);
/// Redirects followed at once before backing off (guards against two nodes pointing at
/// each other while leadership moves).
const MAX_IMMEDIATE_REDIRECTS: u32 = 2;

/// Where a leader-only request goes.
enum Target {
    Local,
    /// `node_id` is for error messages: the leader's, or a voter asked in its stead.
    Remote {
        node_id: Option<u64>,
        addr: String,
    },
    Unknown,
}

pub(crate) struct Forwarder {
    node_id: u64,
    service: Arc<PeerService>,
    pool: Arc<PeerPool>,
    /// Configured voter addresses: the leader is always a voter, and a learner that has
    /// not joined yet has no membership to look addresses up in.
    voters: BTreeMap<u64, String>,
    images: watch::Receiver<Arc<MetadataImage>>,
}

impl Forwarder {
    pub(crate) fn new(
        node_id: u64,
        service: Arc<PeerService>,
        pool: Arc<PeerPool>,
        voters: BTreeMap<u64, String>,
        images: watch::Receiver<Arc<MetadataImage>>,
    ) -> Self {
        Forwarder {
            node_id,
            service,
            pool,
            voters,
            images,
        }
    }

    fn target(&self, hint: Option<(Option<u64>, String)>) -> Target {
        if let Some((leader_id, addr)) = hint {
            if leader_id == Some(self.node_id) {
                return Target::Local;
            }
            return Target::Remote {
                node_id: leader_id,
                addr,
            };
        }
        match self.service.leader() {
            (Some(id), _) if id == self.node_id => Target::Local,
            (Some(id), addr) => match addr.or_else(|| self.voters.get(&id).cloned()) {
                Some(addr) => Target::Remote {
                    node_id: Some(id),
                    addr,
                },
                None => Target::Unknown,
            },
            (None, _) => Target::Unknown,
        }
    }

    /// The `attempt`-th other configured voter, round robin; `Unknown` if there is none.
    fn any_voter(&self, attempt: usize) -> Target {
        let others: Vec<(&u64, &String)> = self
            .voters
            .iter()
            .filter(|(&id, _)| id != self.node_id)
            .collect();
        match others.get(attempt % others.len().max(1)) {
            Some((&id, addr)) => Target::Remote {
                node_id: Some(id),
                addr: (*addr).clone(),
            },
            None => Target::Unknown,
        }
    }

    /// Replicates `cmd` through the leader and waits until this node has applied it.
    pub(crate) async fn propose(
        &self,
        cmd: Command,
        timeout: Duration,
    ) -> Result<(), ProposeError> {
        let deadline = Instant::now() + timeout;
        let mut hint = None;
        let mut redirects = 0;
        let mut attempt = 0;
        let mut last = String::from("no metadata leader known");
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(ProposeError::Timeout {
                    waited: timeout,
                    reason: last,
                });
            }
            let target = match self.target(hint.take()) {
                // A learner that has not joined yet (or a voter that lost track) asks the
                // configured voters in turn; a follower among them redirects to the leader.
                Target::Unknown => self.any_voter(attempt),
                known => known,
            };
            attempt += 1;
            let reply = match target {
                Target::Local => self
                    .service
                    .propose(cmd.clone(), remaining)
                    .await
                    .map_err(ProposeError::Fatal)?,
                Target::Remote { node_id, addr } => {
                    let request = RpcRequest::Propose(cmd.clone());
                    match self.pool.call(&addr, &request, remaining).await {
                        Ok(RpcResponse::Propose(reply)) => reply,
                        Ok(_) => LeaderReply::Unavailable {
                            reason: format!("leader at {addr} answered the wrong response type"),
                        },
                        Err(e) => LeaderReply::Unavailable {
                            reason: format!("node {node_id:?} at {addr}: {e}"),
                        },
                    }
                }
                Target::Unknown => LeaderReply::Unavailable {
                    reason: "no metadata leader known".into(),
                },
            };
            match reply {
                LeaderReply::Ok(committed) => {
                    self.wait_applied(committed.index, deadline, timeout)
                        .await?;
                    return committed.result.map_err(ProposeError::Apply);
                }
                LeaderReply::NotLeader {
                    leader_id,
                    leader_addr,
                } => {
                    last = format!("not the leader; leader {leader_id:?} at {leader_addr:?}");
                    if let Some(addr) = leader_addr {
                        hint = Some((leader_id, addr));
                        if redirects < MAX_IMMEDIATE_REDIRECTS {
                            redirects += 1;
                            continue;
                        }
                    }
                }
                LeaderReply::Unavailable { reason } => last = reason,
            }
            tracing::debug!(reason = %last, "metadata proposal retrying");
            redirects = 0;
            tokio::time::sleep_until((Instant::now() + BACKOFF).min(deadline)).await;
        }
    }

    /// Waits until the local image has applied `index` (read-your-writes on any node).
    async fn wait_applied(
        &self,
        index: u64,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), ProposeError> {
        let mut images = self.images.clone();
        // `map(drop)` releases the watch's read guard at once.
        let applied =
            tokio::time::timeout_at(deadline, images.wait_for(|i| i.applied_index() >= index))
                .await
                .map(|r| r.map(drop));
        match applied {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(ProposeError::Unavailable {
                reason: "the metadata state machine stopped".into(),
            }),
            Err(_) => Err(ProposeError::Timeout {
                waited: timeout,
                reason: format!("committed at index {index} but not yet applied on this node"),
            }),
        }
    }

    /// The leader's raft metrics, asked of it (or read here when this node leads); one try.
    pub(crate) async fn leader_metrics(
        &self,
    ) -> Result<openraft::RaftMetrics<u64, crate::QuorumNode>, ProposeError> {
        let reply = self
            .ask_leader(
                RpcRequest::LeaderMetrics,
                || self.service.leader_metrics(),
                |response| match response {
                    RpcResponse::LeaderMetrics(reply) => Some(reply),
                    _ => None,
                },
            )
            .await;
        leader_result(reply).map(|metrics| *metrics)
    }

    /// The `kraft.version` 1 upgrade of the voter set, on the leader (here when this node
    /// leads); one try.
    pub(crate) async fn upgrade_voters(
        &self,
        validate_only: bool,
    ) -> Result<VoterDirectoryIds, ProposeError> {
        let reply = match self.target(None) {
            Target::Local => self.service.upgrade_voters(validate_only).await,
            Target::Remote { node_id, addr } => {
                let request = RpcRequest::UpgradeVoters { validate_only };
                // The leader bounds its own work by LEADER_CALL_TIMEOUT; the answer needs
                // a moment more to come back.
                let ttl = LEADER_CALL_TIMEOUT + HEARTBEAT_TIMEOUT;
                self.call_leader(node_id, &addr, &request, ttl, |response| match response {
                    RpcResponse::UpgradeVoters(reply) => Some(reply),
                    _ => None,
                })
                .await
            }
            Target::Unknown => LeaderReply::NotLeader {
                leader_id: None,
                leader_addr: None,
            },
        };
        leader_result(reply)
    }

    /// Sends `hb` to the leader (or answers it here when this node leads); one try.
    pub(crate) async fn heartbeat(&self, hb: Heartbeat) -> Result<HeartbeatReply, ProposeError> {
        let reply = self
            .ask_leader(
                RpcRequest::Heartbeat(hb.clone()),
                || self.service.heartbeat(&hb),
                |response| match response {
                    RpcResponse::Heartbeat(reply) => Some(reply),
                    _ => None,
                },
            )
            .await;
        leader_result(reply)
    }

    /// One leader-only request: answered by `local` when this node leads, else sent once to
    /// the leader, whose response `unwrap` takes apart (`None`: the wrong response type).
    async fn ask_leader<T>(
        &self,
        request: RpcRequest,
        local: impl FnOnce() -> LeaderReply<T>,
        unwrap: impl FnOnce(RpcResponse) -> Option<LeaderReply<T>>,
    ) -> LeaderReply<T> {
        match self.target(None) {
            Target::Local => local(),
            Target::Remote { node_id, addr } => {
                self.call_leader(node_id, &addr, &request, HEARTBEAT_TIMEOUT, unwrap)
                    .await
            }
            Target::Unknown => LeaderReply::NotLeader {
                leader_id: None,
                leader_addr: None,
            },
        }
    }

    /// Sends `request` once to the leader at `addr`, whose response `unwrap` takes apart
    /// (`None`: the wrong response type); a failed call is the leader being unavailable.
    async fn call_leader<T>(
        &self,
        node_id: Option<u64>,
        addr: &str,
        request: &RpcRequest,
        ttl: Duration,
        unwrap: impl FnOnce(RpcResponse) -> Option<LeaderReply<T>>,
    ) -> LeaderReply<T> {
        match self.pool.call(addr, request, ttl).await {
            Ok(response) => unwrap(response).unwrap_or_else(|| LeaderReply::Unavailable {
                reason: format!("leader at {addr} answered the wrong response type"),
            }),
            Err(e) => LeaderReply::Unavailable {
                reason: format!("node {node_id:?} at {addr}: {e}"),
            },
        }
    }
}

/// A leader's reply as the caller's result.
fn leader_result<T>(reply: LeaderReply<T>) -> Result<T, ProposeError> {
    match reply {
        LeaderReply::Ok(value) => Ok(value),
        LeaderReply::NotLeader {
            leader_id,
            leader_addr,
        } => Err(ProposeError::NotLeader {
            leader_id,
            leader_addr,
        }),
        LeaderReply::Unavailable { reason } => Err(ProposeError::Unavailable { reason }),
    }
}
