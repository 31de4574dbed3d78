//! The errors of this crate, one enum per purpose: [`RaftError`] for starting and stopping
//! the quorum, [`ProposeError`] for a proposal. (Apply outcomes are
//! [`ApplyError`](crate::command::ApplyError), in `command.rs`, because they are replicated.)
//! Variants carry the data a caller needs (the leader's id and address, the rejected
//! command's reason); the broker alone maps them to Kafka error codes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::QuorumNode;
use openraft::error::{Fatal, InitializeError};
use openraft::StorageError;

use crate::command::ApplyError;

/// Starting, running or stopping the quorum failed.
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    #[error("cannot create metadata directory {path}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("metadata storage failed while {context}")]
    Storage {
        context: &'static str,
        #[source]
        source: Box<StorageError<u64>>,
    },
    #[error("cannot read the bootstrap records {path}")]
    Bootstrap {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid quorum configuration: {reason}")]
    InvalidConfig { reason: String },
    #[error("cannot listen for raft peers on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("raft core stopped while {context}")]
    Fatal {
        context: &'static str,
        #[source]
        source: Box<Fatal<u64>>,
    },
    #[error("initializing the metadata quorum failed")]
    Initialize(#[source] Box<openraft::error::RaftError<u64, InitializeError<u64, QuorumNode>>>),
    #[error("the raft core task failed to stop")]
    Shutdown(#[source] tokio::task::JoinError),
}

/// A proposal did not take effect.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// Committed, but applying it changed nothing (duplicate topic, unknown topic id, …).
    #[error("metadata command rejected")]
    Apply(#[from] ApplyError),
    /// No leader could be reached (a heartbeat is not retried: the next one follows soon).
    /// `propose` itself forwards and retries, so it ends in `Timeout` instead.
    #[error("this node is not the metadata leader (leader: {leader_id:?} at {leader_addr:?})")]
    NotLeader {
        leader_id: Option<u64>,
        leader_addr: Option<String>,
    },
    #[error("metadata quorum cannot accept the command: {reason}")]
    Unavailable { reason: String },
    /// No leader committed the command within the deadline, or it committed but this node
    /// has not applied it yet: the outcome is unknown, the caller may retry
    /// (Kafka's REQUEST_TIMED_OUT).
    #[error("metadata command not confirmed within {waited:?}: {reason}")]
    Timeout { waited: Duration, reason: String },
    #[error("raft core stopped")]
    Fatal(#[source] Box<Fatal<u64>>),
}
