//! The requests only the metadata leader serves — `Propose`, `AddLearner`, `Heartbeat`,
//! `UpdateVoter`, `UpgradeVoters` — answered the same way whether they come from this node
//! (`MetadataQuorum`) or from a peer (the peer server). A non-leader answers
//! [`LeaderReply::NotLeader`] with the leader it knows, so the caller can go there.
//!
//! Every wait on raft is bounded ([`LEADER_CALL_TIMEOUT`]): openraft 0.9 keeps a leader that
//! lost its quorum believing it leads until it sees a higher term, and its `client_write`
//! would then wait forever. Thread-safety: shared by `Arc`; the directory ids voters
//! published sit behind a `std::sync::Mutex` held only to read or write the map, and voter
//! changes are serialized by a `tokio::sync::Mutex` (one at a time, as Kafka's leader).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::QuorumNode;
use openraft::error::{ClientWriteError, Fatal, ForwardToLeader};
use openraft::{ChangeMembers, Raft, RaftMetrics};
use tokio::sync::watch;

use crate::command::Command;
use crate::image::MetadataImage;
use crate::leader_gone::LeaderContact;
use crate::liveness::{Heartbeat, HeartbeatReply, Liveness};
use crate::network::{Committed, LeaderReply, VoterDirectoryIds};
use crate::TypeConfig;

/// How long the leader works on one request before answering `Unavailable`.
pub(crate) const LEADER_CALL_TIMEOUT: Duration = Duration::from_secs(10);

type WriteError = openraft::error::RaftError<u64, ClientWriteError<u64, QuorumNode>>;

pub(crate) struct PeerService {
    node_id: u64,
    /// This node's `meta.properties` directory id (KIP-853), when it has one.
    directory_id: Option<String>,
    raft: Raft<TypeConfig>,
    liveness: Arc<Liveness>,
    images: watch::Receiver<Arc<MetadataImage>>,
    leader_contact: Arc<LeaderContact>,
    /// The directory ids voters published to this node while it led (`UpdateVoter`), with
    /// the term they were published in: only the current term's count, as a Kafka leader
    /// starts each epoch from the voter set it read from the log.
    published: Mutex<BTreeMap<u64, (u64, String)>>,
    /// One voter change at a time (KIP-853), as Kafka's leader allows.
    voter_change: tokio::sync::Mutex<()>,
}

/// Kafka's answer to a voter change while another is in progress.
pub(crate) const CHANGE_IN_PROGRESS: &str =
    "Request timed out waiting for leader to handle previous voter change request";

impl PeerService {
    pub(crate) fn new(
        node_id: u64,
        directory_id: Option<String>,
        raft: Raft<TypeConfig>,
        liveness: Arc<Liveness>,
        images: watch::Receiver<Arc<MetadataImage>>,
        leader_contact: Arc<LeaderContact>,
    ) -> Self {
        PeerService {
            node_id,
            directory_id,
            raft,
            liveness,
            images,
            leader_contact,
            published: Mutex::default(),
            voter_change: tokio::sync::Mutex::new(()),
        }
    }

    /// The slot for one voter change; refused while another runs.
    pub(crate) fn voter_change_slot(
        &self,
    ) -> Result<tokio::sync::MutexGuard<'_, ()>, crate::voters::VoterChangeError> {
        self.voter_change
            .try_lock()
            .map_err(|_| crate::voters::VoterChangeError::TimedOut(CHANGE_IN_PROGRESS.into()))
    }

    /// This node's directory id, which a [`RpcRequest::ToReplica`](crate::network::RpcRequest)
    /// must name to be served.
    pub(crate) fn directory_id(&self) -> Option<&str> {
        self.directory_id.as_deref()
    }

    /// What the peer server saw of the leaders' connections (`leader_gone.rs`).
    pub(crate) fn leader_contact(&self) -> &LeaderContact {
        &self.leader_contact
    }

    pub(crate) fn liveness(&self) -> Arc<Liveness> {
        self.liveness.clone()
    }

    pub(crate) fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    pub(crate) fn metrics(&self) -> RaftMetrics<u64, QuorumNode> {
        self.raft.metrics().borrow().clone()
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().current_leader == Some(self.node_id)
    }

    /// The leader this node knows of, with its address from the membership.
    pub(crate) fn leader(&self) -> (Option<u64>, Option<String>) {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let leader = metrics.current_leader;
        let addr = leader.and_then(|id| {
            metrics
                .membership_config
                .membership()
                .get_node(&id)
                .map(|n| n.addr.clone())
        });
        (leader, addr)
    }

    fn not_leader<T>(&self) -> LeaderReply<T> {
        let (leader_id, leader_addr) = self.leader();
        LeaderReply::NotLeader {
            leader_id,
            leader_addr,
        }
    }

    /// Replicates `cmd` if this node leads; the reply carries its log index and apply result.
    /// `Err` only when this node's raft core has stopped.
    pub(crate) async fn propose(
        &self,
        cmd: Command,
        timeout: Duration,
    ) -> Result<LeaderReply<Committed>, Box<Fatal<u64>>> {
        let timeout = timeout.min(LEADER_CALL_TIMEOUT);
        match tokio::time::timeout(timeout, self.raft.client_write(cmd)).await {
            Ok(Ok(response)) => Ok(LeaderReply::Ok(Committed {
                index: response.log_id.index,
                result: response.data,
            })),
            Ok(Err(e)) => write_reply(e),
            Err(_) => Ok(LeaderReply::Unavailable {
                reason: format!("not committed within {timeout:?}"),
            }),
        }
    }

    /// Makes `node_id` a learner reachable at `addr` (idempotent). The reply is the index
    /// the learner must apply to have caught up with the log as of its joining.
    pub(crate) async fn add_learner(&self, node_id: u64, node: QuorumNode) -> LeaderReply<u64> {
        if !self.is_leader() {
            return self.not_leader();
        }
        let metrics = self.metrics();
        let membership = metrics.membership_config.membership();
        if membership.voter_ids().any(|id| id == node_id) {
            return LeaderReply::Unavailable {
                reason: format!("node {node_id} is a voter, it cannot join as a learner"),
            };
        }
        let write = match membership.get_node(&node_id) {
            // A restarted learner: nothing to change, but it must still catch up to what is
            // committed now, which a linearizable read point gives.
            Some(known) if *known == node => {
                return match tokio::time::timeout(
                    LEADER_CALL_TIMEOUT,
                    self.raft.ensure_linearizable(),
                )
                .await
                {
                    Ok(Ok(read)) => LeaderReply::Ok(read.map_or(0, |id| id.index)),
                    Ok(Err(e)) => match e.into_api_error() {
                        Some(openraft::error::CheckIsLeaderError::ForwardToLeader(f)) => {
                            forward_reply(f)
                        }
                        other => LeaderReply::Unavailable {
                            reason: format!("{other:?}"),
                        },
                    },
                    Err(_) => LeaderReply::Unavailable {
                        reason: "leadership not confirmed in time".into(),
                    },
                };
            }
            // Same learner, new address (it listens on an ephemeral port): `AddNodes` never
            // replaces a node, `SetNodes` does; replication streams are rebuilt with it.
            Some(_) => {
                tracing::info!(node_id, addr = %node.addr, "metadata learner moved");
                let change = ChangeMembers::SetNodes(BTreeMap::from([(node_id, node)]));
                tokio::time::timeout(
                    LEADER_CALL_TIMEOUT,
                    self.raft.change_membership(change, true),
                )
                .await
            }
            None => {
                tracing::info!(node_id, addr = %node.addr, "adding metadata learner");
                tokio::time::timeout(
                    LEADER_CALL_TIMEOUT,
                    self.raft.add_learner(node_id, node, false),
                )
                .await
            }
        };
        match write {
            Ok(Ok(response)) => LeaderReply::Ok(response.log_id.index),
            Ok(Err(e)) => write_reply(e).unwrap_or_else(|fatal| LeaderReply::Unavailable {
                reason: fatal.to_string(),
            }),
            Err(_) => LeaderReply::Unavailable {
                reason: "membership change not committed in time".into(),
            },
        }
    }

    /// A voter of a static quorum publishes its directory id (Kafka's UpdateRaftVoter at
    /// `kraft.version` 0, which only updates the leader's in-memory voter set): kept for
    /// this term, for [`PeerService::upgrade_voters`].
    pub(crate) fn update_voter(&self, node_id: u64, directory_id: String) -> LeaderReply<()> {
        if !self.is_leader() {
            return self.not_leader();
        }
        let metrics = self.metrics();
        if !metrics
            .membership_config
            .voter_ids()
            .any(|id| id == node_id)
        {
            return LeaderReply::Unavailable {
                reason: format!("node {node_id} is not a voter"),
            };
        }
        let term = metrics.current_term;
        let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        let entry = (term, directory_id);
        if published.get(&node_id) != Some(&entry) {
            tracing::info!(voter = node_id, directory_id = %entry.1, term, "voter published its directory id");
            published.insert(node_id, entry);
        }
        LeaderReply::Ok(())
    }

    /// Every voter's directory id as this leader knows it in this term: the membership's,
    /// its own, or what the voter published; else why one is missing.
    fn voter_directory_ids(&self) -> Result<BTreeMap<u64, String>, VoterDirectoryIds> {
        let metrics = self.metrics();
        let membership = metrics.membership_config.membership();
        let published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        let mut known = BTreeMap::new();
        let mut missing = Vec::new();
        for id in membership.voter_ids() {
            let recorded = membership
                .get_node(&id)
                .and_then(|n| n.directory_id.clone());
            let own = (id == self.node_id)
                .then(|| self.directory_id.clone())
                .flatten();
            let sent = published
                .get(&id)
                .filter(|(term, _)| *term == metrics.current_term)
                .map(|(_, dir)| dir.clone());
            match recorded.or(own).or(sent) {
                Some(dir) => {
                    known.insert(id, dir);
                }
                None => missing.push(id),
            }
        }
        if missing.is_empty() {
            return Ok(known);
        }
        tracing::info!(
            ?missing,
            "kraft.version upgrade refused: voters whose directory id this leader does not know"
        );
        match missing.iter().find(|id| !published.contains_key(id)) {
            Some(&never) => Err(VoterDirectoryIds::Unregistered(never)),
            None => Err(VoterDirectoryIds::NotThisTerm),
        }
    }

    /// The `kraft.version` 1 upgrade of the voter set: why not while a voter's directory id
    /// is unknown; else, unless `validate_only`, every voter is recorded with its directory
    /// id (`voters::record_directory_ids`), and the answer is `Known`.
    pub(crate) async fn upgrade_voters(
        &self,
        validate_only: bool,
    ) -> LeaderReply<VoterDirectoryIds> {
        if !self.is_leader() {
            return self.not_leader();
        }
        let known = match self.voter_directory_ids() {
            Ok(known) => known,
            Err(why) => return LeaderReply::Ok(why),
        };
        if validate_only {
            return LeaderReply::Ok(VoterDirectoryIds::Known);
        }
        let recorded = match self.voter_change_slot() {
            Ok(_one) => crate::voters::record_directory_ids(&self.raft, self.node_id, &known).await,
            Err(busy) => Err(busy),
        };
        match recorded {
            Ok(()) => LeaderReply::Ok(VoterDirectoryIds::Known),
            Err(crate::voters::VoterChangeError::NotLeader) => self.not_leader(),
            Err(e) => LeaderReply::Unavailable {
                reason: e.to_string(),
            },
        }
    }

    /// The leader's raft metrics (its replication view of every member).
    pub(crate) fn leader_metrics(&self) -> LeaderReply<Box<RaftMetrics<u64, QuorumNode>>> {
        if !self.is_leader() {
            return self.not_leader();
        }
        LeaderReply::Ok(Box::new(self.raft.metrics().borrow().clone()))
    }

    /// The current metadata image (cheap: an `Arc`).
    pub(crate) fn image(&self) -> Arc<MetadataImage> {
        self.images.borrow().clone()
    }

    /// Answers a broker heartbeat from the leader's liveness state.
    pub(crate) fn heartbeat(&self, hb: &Heartbeat) -> LeaderReply<HeartbeatReply> {
        if !self.is_leader() {
            return self.not_leader();
        }
        // Clone the `Arc` so the watch's lock is not held while liveness works.
        let image = self.images.borrow().clone();
        LeaderReply::Ok(self.liveness.on_heartbeat(hb, &image, Instant::now()))
    }
}

fn forward_reply<T>(f: ForwardToLeader<u64, QuorumNode>) -> LeaderReply<T> {
    LeaderReply::NotLeader {
        leader_id: f.leader_id,
        leader_addr: f.leader_node.map(|n| n.addr),
    }
}

/// Maps a failed raft write to a reply; a stopped raft core is the caller's to report.
fn write_reply<T>(e: WriteError) -> Result<LeaderReply<T>, Box<Fatal<u64>>> {
    match e {
        openraft::error::RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            Ok(forward_reply(f))
        }
        openraft::error::RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            Ok(LeaderReply::Unavailable {
                reason: e.to_string(),
            })
        }
        openraft::error::RaftError::Fatal(f) => Err(Box::new(f)),
    }
}
