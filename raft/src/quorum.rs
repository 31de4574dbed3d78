//! [`MetadataQuorum`]: the facade the broker uses — start, wait until ready, propose,
//! heartbeat, read the image, stop.
//!
//! Startup, like a KRaft node: bind the peer listener, open the raft log
//! (`<data_dir>/raft-log`) and the snapshot (`<data_dir>/metadata-snapshot`), re-apply the
//! committed log past the snapshot, then
//! - a voter (`process.roles` has `controller`) initializes the voter set if it has never
//!   been part of one (every voter does; the losers get `NotAllowed`, which is fine): the
//!   static `controller.quorum.voters`, or a dynamic quorum's initial voters from its
//!   bootstrap file (KIP-853, `brook format --standalone / --initial-controllers`);
//! - a controller of a dynamic quorum that is not among its initial voters, and a learner
//!   (`process.roles=broker`), ask the leader to add them as learners (`learner.rs`), KRaft's
//!   observers; such a controller becomes a voter by AddRaftVoter (`voters.rs`);
//! - a voter publishes its directory id to each leader while the membership lacks it (a
//!   static quorum, `update_voter.rs`), for the `kraft.version` 1 upgrade that records them.
//!
//! Once initialized, the membership in the raft log (and snapshot) is the voter set: a
//! restarted node uses it, not `controller.quorum.voters`, so voters changed or recorded
//! with their directory ids stay so.
//!
//! The peer listener is the controller listener: Kafka requests arriving there
//! (`kafka-metadata-quorum --bootstrap-controller`) go to the handler the broker installs
//! ([`MetadataQuorum::serve_kafka_on_controller_listener`], `network/sniff.rs`).
//!
//! [`MetadataQuorum::start`] returns as soon as the node runs: it never waits for peers, so
//! down or misconfigured voters cannot make it fail. [`MetadataQuorum::wait_ready`] then
//! waits, without a deadline, for a leader (and, on a learner, for the catch-up); meanwhile
//! a background task logs a WARN every few seconds naming the unreachable voters
//! (`monitor.rs`). The broker awaits `wait_ready` before serving, with its own shutdown
//! signal alongside.
//!
//! `propose` and `heartbeat` work on every node: a non-leader forwards them to the leader
//! (`forward.rs`), which answers them in `service.rs`, locally or from the peer server.
//!
//! Ownership: the quorum owns the raft core, the peer server and its background tasks
//! (leadership monitor, preceded by the join on a learner; early campaign; directory id
//! publisher on a voter); `shutdown` stops all of them.
//! Thread-safety: every method takes `&self`; share it by `Arc`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::QuorumNode;
use openraft::error::{Fatal, InitializeError};
use openraft::{Raft, RaftMetrics};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::command::Command;
use crate::config::{NodeRole, QuorumConfig};
use crate::error::{ProposeError, RaftError};
use crate::forward::{Forwarder, PROPOSE_TIMEOUT};
use crate::image::MetadataImage;
use crate::leader_gone::{self, LeaderContact};
use crate::liveness::{Heartbeat, HeartbeatReply, Liveness};
use crate::log_store::LogStore;
use crate::network::pool::PeerPool;
use crate::network::sniff::{KafkaHandler, KafkaHandlerSlot};
use crate::network::{serve, NetworkFactory, PeerSasl, PeerTls, RaftServer};
use crate::service::PeerService;
use crate::state_machine::StateMachineStore;
use crate::{learner, monitor, snapshot_trigger, TypeConfig};

/// How long `snapshot` waits for the snapshot to be on disk.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(60);

/// A running member of the metadata quorum.
pub struct MetadataQuorum {
    node_id: u64,
    role: NodeRole,
    raft: Raft<TypeConfig>,
    images: watch::Receiver<Arc<MetadataImage>>,
    liveness: Arc<Liveness>,
    forwarder: Forwarder,
    /// On a learner: the index to have applied to be caught up, once the leader accepted it.
    joined: watch::Receiver<Option<u64>>,
    /// Whether this node asked to join as a learner at this start (a broker, or a controller
    /// of a dynamic quorum joining as an observer): `wait_ready` then waits for the join.
    observer: bool,
    /// Serves the Kafka requests that arrive on the controller listener (`network/sniff.rs`).
    kafka_handler: KafkaHandlerSlot,
    /// Serves the leader-only requests; also holds the one-voter-change-at-a-time slot.
    service: Arc<PeerService>,
    server: Option<RaftServer>,
    /// TLS for this node's own connections to voters (broker attachments).
    tls: Option<PeerTls>,
    /// The SASL login of those connections.
    sasl: Option<PeerSasl>,
    /// On a voter formatted with bootstrap records and started on empty metadata: the
    /// [`Command::Bootstrap`] it proposes when it leads an image not yet bootstrapped
    /// (`bootstrap.rs`).
    bootstrap: Option<Command>,
    task: JoinHandle<()>,
    /// Campaigns early when the leader's process is gone (`leader_gone.rs`).
    leader_gone_task: JoinHandle<()>,
    /// On a voter with a directory id: publishes it to each leader (`update_voter.rs`).
    update_voter_task: Option<JoinHandle<()>>,
    /// Snapshots by applied record bytes (`snapshot_trigger.rs`).
    snapshot_task: JoinHandle<()>,
}

impl MetadataQuorum {
    /// Opens storage, starts serving peers and joins the quorum; returns once the node runs,
    /// without waiting for a leader (see [`MetadataQuorum::wait_ready`]).
    pub async fn start(config: QuorumConfig) -> Result<Self, RaftError> {
        config.check()?;
        let raft_config = config.raft_config()?;
        let lease = Duration::from_millis(raft_config.election_timeout_max);
        // Bind before anything else: a voter alone on port 0 advertises the bound address,
        // and a taken port fails start before storage is opened.
        let (listener, bound) = match config.listen {
            Some(addr) => {
                let bind = async {
                    let listener = TcpListener::bind(addr).await?;
                    let bound = listener.local_addr()?;
                    Ok::<_, std::io::Error>((listener, bound))
                };
                let (listener, bound) = bind
                    .await
                    .map_err(|source| RaftError::Listen { addr, source })?;
                (Some(listener), Some(bound))
            }
            None => (None, None),
        };

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
        // Subscribed before `Raft::new`, so the replay of the log counts too.
        let record_bytes = state_machine.subscribe_record_bytes();
        let raft = Raft::new(
            config.node_id,
            Arc::new(raft_config),
            NetworkFactory {
                tls: config.tls.clone(),
                sasl: config.sasl.clone(),
            },
            log_store,
            state_machine,
        )
        .await
        .map_err(|source| RaftError::Fatal {
            context: "starting",
            source: Box::new(source),
        })?;

        let liveness = Arc::new(Liveness::new(config.broker_session_timeout));
        let leader_contact = Arc::new(LeaderContact::default());
        let service = Arc::new(PeerService::new(
            config.node_id,
            config.directory_id.clone(),
            raft.clone(),
            liveness.clone(),
            images.clone(),
            leader_contact.clone(),
        ));
        let pool = Arc::new(PeerPool::new(config.tls.clone(), config.sasl.clone()));
        let (joined_tx, joined) = watch::channel(None);
        let kafka_handler: KafkaHandlerSlot = Arc::default();
        let server = match listener {
            Some(listener) => match serve(
                listener,
                service.clone(),
                config.tls.clone(),
                config.sasl.clone(),
                kafka_handler.clone(),
            ) {
                Ok(server) => Some(server),
                Err(source) => {
                    stop_raft(&raft).await;
                    return Err(RaftError::Listen {
                        addr: bound.unwrap_or_else(|| ([0, 0, 0, 0], 0).into()),
                        source,
                    });
                }
            },
            None => None,
        };

        // Nothing applied yet (no cluster id, no broker, no bootstrap): a first start, or one
        // that ended before anything was committed.
        let pristine = images.borrow().same_metadata(&MetadataImage::default());
        let joining = match read_bootstrap_file(&dir).await {
            Ok(file) => match config.role {
                NodeRole::Voter => match voter_start(&raft, &config, bound, file.as_ref()).await {
                    Ok(VoterStart::Voter) => {
                        bootstrap_command(&dir, file.map(|f| f.records), pristine)
                            .map(|bootstrap| (None, bootstrap))
                    }
                    Ok(VoterStart::Observer { contacts }) => config
                        .controller_addr
                        .clone()
                        .or(bound.map(|b| b.to_string()))
                        .ok_or_else(|| RaftError::InvalidConfig {
                            reason:
                                "a controller joining a dynamic quorum needs a controller listener"
                                    .into(),
                        })
                        .and_then(|addr| {
                            bootstrap_command(&dir, file.map(|f| f.records), pristine)
                                .map(|bootstrap| (Some((addr, contacts)), bootstrap))
                        }),
                    Err(e) => Err(e),
                },
                NodeRole::Learner => config
                    .advertised_addr(bound)
                    .map(|a| (Some((a, config.voters.clone())), None)),
            },
            Err(e) => Err(e),
        };
        let (advertised, bootstrap) = match joining {
            Ok(joined) => joined,
            Err(e) => {
                if let Some(server) = server {
                    server.shutdown().await;
                }
                stop_raft(&raft).await;
                return Err(e);
            }
        };
        // Where to find the leader before this node has a membership to look it up in.
        let contacts = match &advertised {
            Some((_, contacts)) if config.voters.is_empty() => contacts.clone(),
            _ => config.voters.clone(),
        };
        let observer = advertised.is_some();
        let leader_gone_task = tokio::spawn(leader_gone::run(
            config.node_id,
            raft.clone(),
            leader_contact,
            lease,
        ));
        let snapshot_task = tokio::spawn(snapshot_trigger::run(
            raft.clone(),
            record_bytes,
            config.snapshot_record_bytes,
        ));
        let metrics = raft.metrics();
        let task = match advertised {
            None => tokio::spawn(monitor::watch_leader(
                config.node_id,
                metrics,
                contacts.clone(),
            )),
            Some((advertised, voters)) => tokio::spawn(learner::run(
                learner::Join {
                    node_id: config.node_id,
                    advertised,
                    directory_id: config.directory_id.clone(),
                    voters,
                    pool: pool.clone(),
                    joined: joined_tx,
                },
                metrics,
            )),
        };
        let update_voter_task = match (&config.role, &config.directory_id) {
            (NodeRole::Voter, Some(directory_id)) => Some(tokio::spawn(crate::update_voter::run(
                config.node_id,
                directory_id.clone(),
                raft.metrics(),
                pool.clone(),
            ))),
            _ => None,
        };
        let forwarder = Forwarder::new(
            config.node_id,
            service.clone(),
            pool,
            contacts,
            images.clone(),
        );
        Ok(MetadataQuorum {
            node_id: config.node_id,
            role: config.role,
            raft,
            images,
            liveness,
            forwarder,
            joined,
            observer,
            kafka_handler,
            service,
            server,
            tls: config.tls,
            sasl: config.sasl,
            bootstrap,
            task,
            leader_gone_task,
            update_voter_task,
            snapshot_task,
        })
    }

    /// Waits (without a deadline: bound it with the caller's shutdown signal) until a
    /// leader is known; on the leader, until its first entry of the term is committed (so
    /// the image holds everything committed before); on a learner, until the leader has
    /// accepted it and its image has applied the log as of that moment. Fails only when
    /// the raft core stops.
    pub async fn wait_ready(&self) -> Result<(), RaftError> {
        let stopped = || RaftError::Fatal {
            context: "waiting for the metadata quorum",
            source: Box::new(Fatal::Stopped),
        };
        let mut catch_up_to = 0;
        if self.observer {
            let mut joined = self.joined.clone();
            catch_up_to = joined
                .wait_for(Option::is_some)
                .await
                .map_err(|_| stopped())?
                .unwrap_or_default();
        }
        let metrics = self
            .raft
            .wait(None)
            .metrics(|m| m.current_leader.is_some(), "metadata leader known")
            .await
            .map_err(|_| stopped())?;
        if metrics.current_leader == Some(self.node_id) {
            // A new leader commits a blank entry of its term first; waiting for it makes the
            // local image include everything committed before this start.
            if let Err(e) = self.raft.ensure_linearizable().await {
                tracing::warn!(error = %e, "metadata leader lost right after election");
            }
        }
        let mut images = self.images.clone();
        images
            .wait_for(|image| image.applied_index() >= catch_up_to)
            .await
            .map_err(|_| stopped())?;
        tracing::info!(node_id = self.node_id, role = ?self.role, leader = ?self.leader(), "metadata quorum ready");
        Ok(())
    }

    /// Replicates `cmd` through the leader (from any node) and returns once this node's
    /// image has applied it. Retries leader changes for up to 10 s, then `Timeout`.
    pub async fn propose(&self, cmd: Command) -> Result<(), ProposeError> {
        self.propose_within(cmd, PROPOSE_TIMEOUT).await
    }

    /// [`MetadataQuorum::propose`] with the caller's deadline (e.g. a request timeout).
    pub async fn propose_within(
        &self,
        cmd: Command,
        timeout: Duration,
    ) -> Result<(), ProposeError> {
        self.forwarder.propose(cmd, timeout).await
    }

    /// A broker heartbeat: answered here if this node leads, else forwarded to the leader
    /// once (about 1 s at most); `NotLeader` / `Unavailable` when no leader answers.
    pub async fn heartbeat(&self, hb: Heartbeat) -> Result<HeartbeatReply, ProposeError> {
        self.forwarder.heartbeat(hb).await
    }

    /// The metadata leader's raft metrics (its view of every voter's and observer's log
    /// position), asked of the leader once; `NotLeader` / `Unavailable` when none answers.
    pub async fn leader_metrics(&self) -> Result<RaftMetrics<u64, QuorumNode>, ProposeError> {
        self.forwarder.leader_metrics().await
    }

    /// The heartbeat state used while this node leads.
    pub fn liveness(&self) -> Arc<Liveness> {
        self.liveness.clone()
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

    pub fn role(&self) -> NodeRole {
        self.role
    }

    /// The current leader's node id, if one is known.
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// Whether this node believes it leads (a partitioned leader believes so until it
    /// hears of a higher term; `raft_metrics().millis_since_quorum_ack` tells how fresh).
    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.node_id)
    }

    /// The [`Command::Bootstrap`] to propose now: while this voter leads and the image has
    /// none yet (`controller.rs` proposes it).
    pub fn bootstrap_due(&self) -> Option<Command> {
        if !self.is_leader() || self.image().bootstrapped {
            return None;
        }
        self.bootstrap.clone()
    }

    /// openraft's view: term, last log index, applied, per-node replication progress (on
    /// the leader), membership — what DescribeQuorum reports.
    pub fn raft_metrics(&self) -> RaftMetrics<u64, QuorumNode> {
        self.raft.metrics().borrow().clone()
    }

    /// Holds this broker's attachments (`network/attach.rs`) to every other voter until
    /// the returned future is dropped: the controller then learns of this process's death
    /// when its connections close. Call again with the new epoch after re-registering.
    pub async fn hold_attachments(&self, broker_id: i32, broker_epoch: u64) {
        let voters: Vec<String> = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            let config = &m.membership_config;
            config
                .voter_ids()
                .filter(|&id| id != self.node_id)
                .filter_map(|id| config.membership().get_node(&id).map(|n| n.addr.clone()))
                .collect()
        };
        crate::network::attach::hold(
            voters,
            broker_id,
            broker_epoch,
            self.tls.clone(),
            self.sasl.clone(),
        )
        .await;
    }

    /// KIP-853 AddRaftVoter on the leader: makes the observer `id` with `directory_id` a
    /// voter (`voters.rs`); one change at a time.
    pub async fn add_voter(
        &self,
        id: u64,
        directory_id: &str,
    ) -> Result<(), crate::voters::VoterChangeError> {
        let _one = self.service.voter_change_slot()?;
        crate::voters::add(&self.raft, self.node_id, id, directory_id).await
    }

    /// KIP-853 RemoveRaftVoter on the leader: voter `id` becomes an observer.
    pub async fn remove_voter(
        &self,
        id: u64,
        directory_id: Option<&str>,
    ) -> Result<(), crate::voters::VoterChangeError> {
        let _one = self.service.voter_change_slot()?;
        crate::voters::remove(&self.raft, self.node_id, id, directory_id).await
    }

    /// The `kraft.version` 1 upgrade of the voter set (KIP-853), on the leader: once every
    /// voter's directory id is known there (a static quorum's voters publish theirs,
    /// `update_voter.rs`), they are recorded in the membership, which makes the quorum one
    /// whose voters AddRaftVoter / RemoveRaftVoter change; else why not (a voter's
    /// directory id is not known yet). `validate_only` checks and changes nothing.
    pub async fn upgrade_voters(
        &self,
        validate_only: bool,
    ) -> Result<crate::network::VoterDirectoryIds, ProposeError> {
        self.forwarder.upgrade_voters(validate_only).await
    }

    /// Hands the Kafka requests that arrive on the controller listener to `handler` from now
    /// on (the broker, once it serves; `network/sniff.rs`). Only the first call counts.
    pub fn serve_kafka_on_controller_listener(&self, handler: KafkaHandler) {
        let _ = self.kafka_handler.set(handler);
    }

    /// The voters of the current membership.
    pub fn voters(&self) -> Vec<u64> {
        let metrics = self.raft.metrics();
        let ids = metrics.borrow().membership_config.voter_ids().collect();
        ids
    }

    /// The learners (broker-only nodes) of the current membership.
    pub fn learners(&self) -> Vec<u64> {
        let metrics = self.raft.metrics();
        let ids = metrics
            .borrow()
            .membership_config
            .membership()
            .learner_ids()
            .collect();
        ids
    }

    /// The peer-RPC address actually bound, when listening.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(RaftServer::local_addr)
    }

    /// Builds a snapshot of the current image now and waits until it is on disk, so the
    /// log before it may be purged (openraft also snapshots every 1000 entries by itself, and
    /// `snapshot_trigger.rs` once the applied record bytes reach `snapshot_record_bytes`).
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
            .wait(Some(SNAPSHOT_WAIT))
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

    /// Stops the background task, the peer listener and the raft tasks; storage is closed
    /// when they end.
    pub async fn shutdown(self) -> Result<(), RaftError> {
        // The task only loops over network calls and waits; aborting it loses nothing.
        self.task.abort();
        let _ = self.task.await;
        self.leader_gone_task.abort();
        let _ = self.leader_gone_task.await;
        if let Some(task) = self.update_voter_task {
            task.abort();
            let _ = task.await;
        }
        self.snapshot_task.abort();
        let _ = self.snapshot_task.await;
        if let Some(server) = self.server {
            server.shutdown().await;
        }
        self.raft.shutdown().await.map_err(RaftError::Shutdown)
    }
}

/// Stops the raft tasks so that storage is closed before an error is reported.
async fn stop_raft(raft: &Raft<TypeConfig>) {
    if let Err(stop) = raft.shutdown().await {
        tracing::warn!(error = %stop, "metadata quorum did not stop cleanly");
    }
}

fn storage_error(context: &'static str) -> impl FnOnce(openraft::StorageError<u64>) -> RaftError {
    move |source| RaftError::Storage {
        context,
        source: Box::new(source),
    }
}

/// The bootstrap file of this node's metadata directory (`brook format`), if any.
async fn read_bootstrap_file(
    dir: &std::path::Path,
) -> Result<Option<crate::bootstrap::Bootstrap>, RaftError> {
    let read_dir = dir.to_path_buf();
    let read = tokio::task::spawn_blocking(move || crate::bootstrap::read_bootstrap(&read_dir))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|read| read);
    read.map_err(|source| RaftError::Bootstrap {
        path: dir.join(crate::bootstrap::FILE),
        source,
    })
}

/// What this voter proposes as [`Command::Bootstrap`]: the records of its bootstrap file if
/// its metadata was empty at start (`pristine`), as Kafka applies bootstrap metadata only to
/// an empty metadata log; else nothing. A node never formatted proposes nothing either, so a
/// cluster that does not use `brook format` never holds a `Bootstrap` entry (and can still
/// be downgraded to a build without it).
fn bootstrap_command(
    dir: &std::path::Path,
    records: Option<Vec<Command>>,
    pristine: bool,
) -> Result<Option<Command>, RaftError> {
    match records {
        Some(records) if pristine && !records.is_empty() => {
            tracing::info!(
                records = records.len(),
                "bootstrap records found; the first metadata leader applies them"
            );
            Ok(Some(Command::Bootstrap { records }))
        }
        Some(records) if !records.is_empty() => {
            tracing::info!(
                path = %dir.join(crate::bootstrap::FILE).display(),
                "bootstrap records ignored: this node's metadata log was initialised before"
            );
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// How a controller takes part at this start.
enum VoterStart {
    /// A voter (or a node whose membership already exists: openraft knows its part).
    Voter,
    /// A controller of a dynamic quorum that is not among its initial voters: it asks
    /// `contacts` (placeholder ids) to follow the log as an observer, and waits to be added
    /// with AddRaftVoter (KIP-853).
    Observer { contacts: BTreeMap<u64, String> },
}

/// Decides a controller's part and initializes the voter set when it is one of the first
/// voters: the static `controller.quorum.voters`; else the initial voters `brook format
/// --standalone / --initial-controllers` wrote; else, with `controller.quorum.bootstrap.servers`
/// naming other controllers, none (an observer); else this node alone.
async fn voter_start(
    raft: &Raft<TypeConfig>,
    config: &QuorumConfig,
    bound: Option<SocketAddr>,
    file: Option<&crate::bootstrap::Bootstrap>,
) -> Result<VoterStart, RaftError> {
    let initialized = is_initialized(raft).await?;
    if initialized || !config.voters.is_empty() {
        initialize(raft, config, bound, None).await?;
        return Ok(VoterStart::Voter);
    }
    let contacts = || -> BTreeMap<u64, String> {
        config
            .bootstrap_servers
            .iter()
            .enumerate()
            .map(|(i, server)| (u64::MAX - i as u64, server.clone()))
            .collect()
    };
    match file.and_then(|f| f.voters.as_ref()) {
        Some(voters) if voters.iter().any(|v| v.id == config.node_id) => {
            let initial = voters
                .iter()
                .map(|v| {
                    (
                        v.id,
                        QuorumNode {
                            addr: v.addr(),
                            directory_id: Some(v.directory_id.clone()),
                        },
                    )
                })
                .collect();
            initialize(raft, config, bound, Some(initial)).await?;
            Ok(VoterStart::Voter)
        }
        Some(voters) => {
            let mut contacts = contacts();
            if contacts.is_empty() {
                contacts = voters.iter().map(|v| (v.id, v.addr())).collect();
            }
            Ok(VoterStart::Observer { contacts })
        }
        None => {
            let own = config.controller_addr.as_deref();
            let alone = match config.bootstrap_servers.as_slice() {
                [] => true,
                [only] => Some(only.as_str()) == own,
                _ => false,
            };
            if alone {
                initialize(raft, config, bound, None).await?;
                Ok(VoterStart::Voter)
            } else {
                Ok(VoterStart::Observer {
                    contacts: contacts(),
                })
            }
        }
    }
}

/// Whether this node's raft state has a voter set already.
async fn is_initialized(raft: &Raft<TypeConfig>) -> Result<bool, RaftError> {
    raft.is_initialized()
        .await
        .map_err(|source| RaftError::Fatal {
            context: "reading the initial state",
            source: Box::new(source),
        })
}

/// Initializes the voter set if this voter never had one: the configured voters, or this
/// node alone at its bound address.
async fn initialize(
    raft: &Raft<TypeConfig>,
    config: &QuorumConfig,
    bound: Option<SocketAddr>,
    formatted: Option<BTreeMap<u64, QuorumNode>>,
) -> Result<(), RaftError> {
    let initialized = is_initialized(raft).await?;
    if initialized {
        return Ok(());
    }
    let voters: BTreeMap<u64, QuorumNode> = if let Some(formatted) = formatted {
        formatted
    } else if config.voters.is_empty() {
        let addr = bound.map(|a| a.to_string()).unwrap_or_default();
        BTreeMap::from([(
            config.node_id,
            QuorumNode {
                addr,
                directory_id: config.directory_id.clone(),
            },
        )])
    } else {
        config
            .voters
            .iter()
            .map(|(&id, addr)| (id, QuorumNode::new(addr.clone())))
            .collect()
    };
    tracing::info!(node_id = config.node_id, voters = ?voters.keys().collect::<Vec<_>>(), "initializing metadata quorum");
    match raft.initialize(voters).await {
        Ok(()) => Ok(()),
        // Another voter got there first and already replicated the membership to us.
        Err(openraft::error::RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(RaftError::Initialize(Box::new(e))),
    }
}
