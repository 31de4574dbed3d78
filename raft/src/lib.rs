//! `brook-raft`: the cluster-metadata quorum, Brook's counterpart of Kafka's KRaft
//! controller quorum (KIP-500 / KIP-595 / KIP-631), built on openraft.
//!
//! Brokers propose [`Command`]s (create topic, alter configs, register broker, …) through
//! [`MetadataQuorum::propose`]; once committed, every voter applies them in log order to an
//! immutable [`MetadataImage`] published on a `watch` channel ([`MetadataQuorum::subscribe`]).
//! The raft log lives in RocksDB (`log_store`), the image is snapshotted to a JSON file
//! (`state_machine`), and voters talk over a small TCP transport (`network`). The on-disk
//! layout is described in `raft/FORMAT.md`.
//!
//! This crate knows no Kafka wire types and no segment logs: broker ids are `i32`, topic ids
//! `Uuid`, config values strings; the broker maps them to and from the protocol.

// Without the `rocksdb` feature (the fuzz crate's build) there is no quorum, so the machinery
// that only it drives (forwarding, learner, monitors, the peer server) is unused there.
#![cfg_attr(not(feature = "rocksdb"), allow(dead_code, unused_imports))]

pub mod acl;
mod apply;
pub mod bootstrap;
pub mod command;
mod config;
#[cfg(feature = "rocksdb")]
pub mod controller;
pub mod election;
mod error;
mod forward;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod image;
mod leader_gone;
mod learner;
pub mod liveness;
#[cfg(feature = "rocksdb")]
pub mod log_store;
mod monitor;
pub mod network;
pub mod offline_replicas;
pub mod partition_change;
#[cfg(feature = "rocksdb")]
mod quorum;
pub mod quota;
pub mod reassignment;
mod service;
pub mod snapshot_trigger;
pub mod state_machine;
mod update_voter;
pub mod voters;

use std::io::Cursor;

pub use acl::{AclBinding, AclEntry, AclsImage};

pub use command::{
    ApplyError, ApplyResult, Command, ElectionType, FenceReason, PartitionAssignment,
    ScramUpsertion,
};
pub use config::{NodeRole, QuorumConfig};
pub use election::{
    preferred_leader_electable, unclean_electable, unclean_leader_election_enabled,
    ElectionRefusal, UNCLEAN_LEADER_ELECTION_ENABLE,
};
pub use error::{ProposeError, RaftError};
pub use forward::{HEARTBEAT_TIMEOUT, PROPOSE_TIMEOUT};
pub use image::{
    BrokerRegistration, LeaderRecoveryState, ListenerEndpoint, MetadataImage, PartitionImage,
    ProducerIdBlock, ScramCredentialImage, TopicImage, NO_LEADER,
};
pub use liveness::{Heartbeat, HeartbeatReply, Liveness, REGISTRATION_PROBE};
pub use network::{PeerSasl, PeerTls, VoterDirectoryIds};
pub use openraft::{LogId, RaftMetrics, ServerState};
pub use partition_change::{elr_enabled, ELIGIBLE_LEADER_REPLICAS_VERSION, MIN_IN_SYNC_REPLICAS};
#[cfg(feature = "rocksdb")]
pub use quorum::MetadataQuorum;
pub use quota::{ClientQuotasImage, QuotaAlteration, QuotaEntity};
pub use reassignment::{Reassignment, ReassignmentRefusal};

/// A member of the metadata quorum as the raft membership records it: its peer-RPC address
/// and, for a controller of a dynamic quorum (KIP-853), the directory id of its
/// `meta.properties`, which tells it from the same node id on a wiped disk. Without a
/// directory id the JSON is openraft's `QuorumNode`'s (`{"addr": …}`), so logs and snapshots
/// written before directory ids read unchanged, and older builds read the new ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuorumNode {
    pub addr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_id: Option<String>,
}

impl QuorumNode {
    pub fn new(addr: impl Into<String>) -> Self {
        QuorumNode {
            addr: addr.into(),
            directory_id: None,
        }
    }
}

impl std::fmt::Display for QuorumNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.directory_id {
            Some(dir) => write!(f, "{}({dir})", self.addr),
            None => f.write_str(&self.addr),
        }
    }
}

openraft::declare_raft_types!(
    /// The openraft type configuration of the metadata quorum.
    pub TypeConfig:
        D = Command,
        R = ApplyResult,
        NodeId = u64,
        Node = QuorumNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);
