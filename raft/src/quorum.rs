//! [`MetadataQuorum`]: the facade the broker uses — start, propose, read the image, stop.
//!
//! Startup mirrors a KRaft node with `process.roles=broker,controller`: open the raft log
//! (`<data_dir>/raft-log`) and the snapshot (`<data_dir>/metadata-snapshot`), re-apply the
//! committed log past the snapshot, initialize the voter set if this node has never been
//! part of one, then wait for a leader. Nothing assumes a single voter: with several, the
//! same code elects over the peer transport, and `propose` on a follower returns
//! [`ProposeError::NotLeader`] with the leader's id and address.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use tokio::sync::watch;

use crate::command::Command;
use crate::error::{ProposeError, RaftError};
use crate::image::MetadataImage;
use crate::log_store::LogStore;
use crate::network::{serve, NetworkFactory, RaftServer};
use crate::state_machine::StateMachineStore;
use crate::TypeConfig;

/// How long `start` waits for a leader. A multi-voter cluster needs a majority up.
const LEADER_WAIT: Duration = Duration::from_secs(60);

/// Where and how this node takes part in the metadata quorum.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    pub node_id: u64,
    /// Holds `raft-log/` and `metadata-snapshot/`.
    pub data_dir: PathBuf,
    /// Every voter's peer-RPC address (`host:port`); empty means "this node alone".
    pub voters: BTreeMap<u64, String>,
    /// Where to serve peer RPC; `None` for a single voter that needs no peers.
    pub listen: Option<SocketAddr>,
}

/// A running member of the metadata quorum.
pub struct MetadataQuorum {
    node_id: u64,
    raft: Raft<TypeConfig>,
    images: watch::Receiver<Arc<MetadataImage>>,
    server: Option<RaftServer>,
}

impl MetadataQuorum {
    /// Opens storage, joins (or first initializes) the voter set and waits for a leader.
    pub async fn start(config: QuorumConfig) -> Result<Self, RaftError> {
        let voters = voter_set(&config)?;
        let dir = config.data_dir.clone();
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|source| RaftError::DataDir {
                path: dir.clone(),
                source,
            })?;
        let log_store = LogStore::open_async(dir.join("raft-log"))
            .await
            .map_err(storage_error("opening the raft log"))?;
        let state_machine = StateMachineStore::open(dir.join("metadata-snapshot"))
            .await
            .map_err(storage_error("opening the metadata snapshot"))?;
        let images = state_machine.subscribe();

        let raft_config = Config {
            cluster_name: "brook-metadata".into(),
            // Kafka's controller.quorum.election.timeout.ms defaults to 1000 ms.
            heartbeat_interval: 250,
            election_timeout_min: 1000,
            election_timeout_max: 2000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(1000),
            max_in_snapshot_log_to_keep: 100,
            ..Default::default()
        }
        .validate()
        .map_err(|e| RaftError::InvalidConfig {
            reason: e.to_string(),
        })?;
        let raft = Raft::new(
            config.node_id,
            Arc::new(raft_config),
            NetworkFactory,
            log_store,
            state_machine,
        )
        .await
        .map_err(|source| RaftError::Fatal {
            context: "starting",
            source: Box::new(source),
        })?;

        let server = match config.listen {
            Some(addr) => match serve(addr, raft.clone()).await {
                Ok(server) => Some(server),
                Err(source) => {
                    // Stop the raft tasks so that storage is closed before reporting.
                    if let Err(stop) = raft.shutdown().await {
                        tracing::warn!(error = %stop, "metadata quorum did not stop cleanly");
                    }
                    return Err(RaftError::Listen { addr, source });
                }
            },
            None => None,
        };
        let quorum = MetadataQuorum {
            node_id: config.node_id,
            raft,
            images,
            server,
        };

        match quorum.join(voters).await {
            Ok(()) => Ok(quorum),
            Err(e) => {
                // Stop the raft tasks so that storage is closed before reporting.
                if let Err(stop) = quorum.shutdown().await {
                    tracing::warn!(error = %stop, "metadata quorum did not stop cleanly");
                }
                Err(e)
            }
        }
    }

    /// Initializes the voter set if this node never had one, then waits for a leader.
    async fn join(&self, voters: BTreeMap<u64, BasicNode>) -> Result<(), RaftError> {
        let initialized = self
            .raft
            .is_initialized()
            .await
            .map_err(|source| RaftError::Fatal {
                context: "reading the initial state",
                source: Box::new(source),
            })?;
        if !initialized {
            tracing::info!(node_id = self.node_id, voters = ?voters.keys().collect::<Vec<_>>(), "initializing metadata quorum");
            match self.raft.initialize(voters).await {
                Ok(()) => {}
                // Another voter got there first and already replicated the membership to us.
                Err(openraft::error::RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(RaftError::Initialize(Box::new(e))),
            }
        }
        self.wait_for_leader().await
    }

    async fn wait_for_leader(&self) -> Result<(), RaftError> {
        let metrics = self
            .raft
            .wait(Some(LEADER_WAIT))
            .metrics(|m| m.current_leader.is_some(), "metadata leader known")
            .await
            .map_err(|_| RaftError::NoLeader {
                waited: LEADER_WAIT,
            })?;
        if metrics.current_leader == Some(self.node_id) {
            // A new leader commits a blank entry of its term first; waiting for it makes the
            // local image include everything committed before this start.
            if let Err(e) = self.raft.ensure_linearizable().await {
                tracing::warn!(error = %e, "metadata leader lost right after election");
            }
        }
        tracing::info!(node_id = self.node_id, leader = ?metrics.current_leader, "metadata quorum ready");
        Ok(())
    }

    /// Replicates `cmd`; returns once it is committed and applied on this (leader) node.
    pub async fn propose(&self, cmd: Command) -> Result<(), ProposeError> {
        match self.raft.client_write(cmd).await {
            Ok(response) => response.data.map_err(ProposeError::Apply),
            Err(openraft::error::RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(ProposeError::NotLeader {
                    leader_id: f.leader_id,
                    leader_addr: f.leader_node.map(|n: BasicNode| n.addr),
                })
            }
            Err(openraft::error::RaftError::APIError(ClientWriteError::ChangeMembershipError(
                e,
            ))) => Err(ProposeError::Unavailable {
                reason: e.to_string(),
            }),
            Err(openraft::error::RaftError::Fatal(f)) => Err(ProposeError::Fatal(Box::new(f))),
        }
    }

    /// The newest applied image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.images.borrow().clone()
    }

    /// A receiver that sees every newly applied image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.images.clone()
    }

    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The current leader's node id, if one is known.
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// The peer-RPC address actually bound, when listening.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(RaftServer::local_addr)
    }

    /// Builds a snapshot of the current image now and waits until it is on disk, so the
    /// log before it may be purged (openraft also snapshots every 1000 entries by itself).
    pub async fn snapshot(&self) -> Result<(), RaftError> {
        let applied = self.image().applied;
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|source| RaftError::Fatal {
                context: "triggering a snapshot",
                source: Box::new(source),
            })?;
        self.raft
            .wait(Some(LEADER_WAIT))
            .metrics(|m| m.snapshot >= applied, "snapshot built")
            .await
            .map_err(|_| RaftError::Storage {
                context: "building a snapshot",
                source: Box::new(
                    openraft::StorageIOError::write_snapshot(
                        None,
                        openraft::AnyError::error("snapshot not built in time"),
                    )
                    .into(),
                ),
            })?;
        Ok(())
    }

    /// Stops the peer listener and the raft tasks; storage is closed when they end.
    pub async fn shutdown(self) -> Result<(), RaftError> {
        if let Some(server) = self.server {
            server.shutdown().await;
        }
        self.raft.shutdown().await.map_err(RaftError::Shutdown)
    }
}

fn storage_error(context: &'static str) -> impl FnOnce(openraft::StorageError<u64>) -> RaftError {
    move |source| RaftError::Storage {
        context,
        source: Box::new(source),
    }
}

/// The initial voter set: the configured voters, or this node alone.
fn voter_set(config: &QuorumConfig) -> Result<BTreeMap<u64, BasicNode>, RaftError> {
    if config.voters.is_empty() {
        let addr = config.listen.map(|a| a.to_string()).unwrap_or_default();
        return Ok(BTreeMap::from([(config.node_id, BasicNode { addr })]));
    }
    if !config.voters.contains_key(&config.node_id) {
        return Err(RaftError::InvalidConfig {
            reason: format!(
                "node {} is not among the voters {:?}",
                config.node_id, config.voters
            ),
        });
    }
    Ok(config
        .voters
        .iter()
        .map(|(&id, addr)| (id, BasicNode { addr: addr.clone() }))
        .collect())
}
