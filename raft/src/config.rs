//! [`QuorumConfig`]: how this node takes part in the metadata quorum, and its mapping onto
//! openraft's `Config`.
//!
//! Timeouts use Kafka's names: `controller.quorum.fetch.timeout.ms` (how long a follower
//! goes without hearing from the leader before it starts an election) and
//! `controller.quorum.election.timeout.ms` (how long an election may take). The aim, with
//! the broker's 1000/1000 defaults, is a dead leader replaced in about 1–1.5 s.
//!
//! openraft 0.9 has a randomized election timeout `t` in `[election_timeout_min,
//! election_timeout_max]` and a *leader lease* equal to `election_timeout_max`: a follower
//! that has a leader waits `lease + t` after the last heartbeat before it campaigns (and
//! refuses votes during the lease). The obvious mapping `min = fetch` would make failover
//! `fetch + election/2 + fetch…` ≈ 2.5–3 s (measured), so the budget is split instead:
//! - `election_timeout_min = fetch_timeout_ms / 2`
//! - `election_timeout_max = fetch_timeout_ms / 2 + election_timeout_ms / 4`
//! - so a follower campaigns `lease + t` ∈ `[fetch + election/4, fetch + election/2]` after
//!   the leader went silent — Kafka's fetch timeout plus a random part of the election
//!   timeout — and, without a leader, retries a split vote every `t` (500–750 ms).
//! - `heartbeat_interval = max(fetch_timeout_ms / 4, 50)` (kept below the minimum timeout):
//!   several heartbeats per timeout tolerate a lost one without an election.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use openraft::{Config, SnapshotPolicy};

use crate::error::RaftError;

/// Whether a node votes (Kafka `process.roles` contains `controller`) or only follows the
/// log (a broker-only node: a raft learner, KRaft's observer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeRole {
    #[default]
    Voter,
    Learner,
}

/// Where and how this node takes part in the metadata quorum.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    pub node_id: u64,
    /// Holds `raft-log/` and `metadata-snapshot/`.
    pub data_dir: PathBuf,
    pub role: NodeRole,
    /// Every voter's peer-RPC address (`host:port`), Kafka's `controller.quorum.voters`.
    /// For a voter, empty means "this node alone"; a learner needs at least one.
    pub voters: BTreeMap<u64, String>,
    /// Where to serve peer RPC; `None` only for a single voter that needs no peers.
    pub listen: Option<SocketAddr>,
    /// The `host:port` a learner advertises to the leader for its peer listener. `None`
    /// means the bound `listen` address; a port of 0 means the bound port.
    pub learner_addr: Option<String>,
    /// Kafka's `controller.quorum.election.timeout.ms`.
    pub election_timeout_ms: u64,
    /// Kafka's `controller.quorum.fetch.timeout.ms`.
    pub fetch_timeout_ms: u64,
    /// Kafka's `broker.session.timeout.ms`: a broker silent for longer is fenced.
    pub broker_session_timeout: Duration,
    /// TLS on every peer connection (the controller listener mapped to SSL); `None`: TCP.
    pub tls: Option<crate::network::PeerTls>,
    /// A SASL login on every peer connection (the controller listener mapped to SASL_*).
    pub sasl: Option<crate::network::PeerSasl>,
    /// Kafka's `controller.quorum.bootstrap.servers` for a controller of a dynamic quorum
    /// (no `voters`): where it asks to follow the log as an observer when its bootstrap file
    /// names no initial voters that include it (KIP-853).
    pub bootstrap_servers: Vec<String>,
    /// This node's directory id (`meta.properties`), recorded in the membership.
    pub directory_id: Option<String>,
    /// The `host:port` of this controller's listener as peers reach it.
    pub controller_addr: Option<String>,
    /// Kafka's `metadata.log.max.record.bytes.between.snapshots`: this node snapshots once
    /// the entries it applied since its last snapshot stand for this many record bytes
    /// (`snapshot_trigger.rs`), besides openraft's every [`SNAPSHOT_EVERY_LOGS`] entries.
    pub snapshot_record_bytes: u64,
}

/// Openraft builds a snapshot every this many entries and then purges the log before it
/// (keeping [`LOGS_KEPT_AFTER_SNAPSHOT`]), so a node further behind is sent the snapshot.
pub const SNAPSHOT_EVERY_LOGS: u64 = 1000;
const LOGS_KEPT_AFTER_SNAPSHOT: u64 = 100;

impl QuorumConfig {
    /// A single voter without a peer listener, with Kafka's default timeouts.
    pub fn single(node_id: u64, data_dir: impl Into<PathBuf>) -> Self {
        QuorumConfig {
            node_id,
            data_dir: data_dir.into(),
            role: NodeRole::Voter,
            voters: BTreeMap::new(),
            listen: None,
            learner_addr: None,
            election_timeout_ms: 1000,
            fetch_timeout_ms: 1000,
            broker_session_timeout: Duration::from_millis(9000),
            tls: None,
            sasl: None,
            bootstrap_servers: Vec::new(),
            directory_id: None,
            controller_addr: None,
            snapshot_record_bytes: crate::snapshot_trigger::DEFAULT_SNAPSHOT_RECORD_BYTES,
        }
    }

    /// Refuses combinations that could never form or join a quorum.
    pub(crate) fn check(&self) -> Result<(), RaftError> {
        let invalid = |reason: String| Err(RaftError::InvalidConfig { reason });
        let in_voters = self.voters.contains_key(&self.node_id);
        match self.role {
            NodeRole::Voter if !self.voters.is_empty() && !in_voters => invalid(format!(
                "node {} is not among the voters {:?}",
                self.node_id, self.voters
            )),
            NodeRole::Voter if self.voters.len() > 1 && self.listen.is_none() => invalid(format!(
                "voter {} has peers but no listen address",
                self.node_id
            )),
            NodeRole::Learner if self.voters.is_empty() => {
                invalid("a learner needs the voters to join".into())
            }
            NodeRole::Learner if in_voters => invalid(format!(
                "node {} is listed among the voters, so it cannot be a learner",
                self.node_id
            )),
            NodeRole::Learner if self.listen.is_none() => {
                invalid("a learner needs a listen address for the leader to replicate to".into())
            }
            _ => Ok(()),
        }
    }

    /// The `host:port` a learner advertises: `learner_addr` (its port 0 replaced by the bound
    /// port), else the bound address, which must then be a specific one.
    pub(crate) fn advertised_addr(&self, bound: Option<SocketAddr>) -> Result<String, RaftError> {
        let invalid = |reason: String| RaftError::InvalidConfig { reason };
        let bound = bound.ok_or_else(|| invalid("a learner needs a listen address".into()))?;
        match &self.learner_addr {
            Some(addr) => match addr.rsplit_once(':') {
                Some((host, "0")) => Ok(format!("{host}:{}", bound.port())),
                Some(_) => Ok(addr.clone()),
                None => Err(invalid(format!(
                    "learner address {addr:?} is not host:port"
                ))),
            },
            None if bound.ip().is_unspecified() => Err(invalid(format!(
                "learner listens on the wildcard {bound}: set the address to advertise"
            ))),
            None => Ok(bound.to_string()),
        }
    }

    /// The openraft configuration these settings map to (see the module docs).
    pub(crate) fn raft_config(&self) -> Result<Config, RaftError> {
        let invalid = |reason: String| RaftError::InvalidConfig { reason };
        if self.fetch_timeout_ms < 4 {
            return Err(invalid(format!(
                "fetch timeout of {} ms is too short",
                self.fetch_timeout_ms
            )));
        }
        let min = self.fetch_timeout_ms / 2;
        // openraft needs max > min to randomize; a zero election timeout still gets 1 ms.
        let max = min + (self.election_timeout_ms / 4).max(1);
        let mut heartbeat = (self.fetch_timeout_ms / 4).max(50);
        if heartbeat >= min {
            // Only for sub-200 ms fetch timeouts (tests): keep the heartbeat below the timeout.
            heartbeat = min / 2;
        }
        Config {
            cluster_name: "brook-metadata".into(),
            heartbeat_interval: heartbeat,
            election_timeout_min: min,
            election_timeout_max: max,
            // The default 200 ms per chunk is too short for a multi-MB JSON image sent and
            // fsynced on two busy cores; an expired chunk restarts the whole transfer.
            install_snapshot_timeout: 10_000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(SNAPSHOT_EVERY_LOGS),
            max_in_snapshot_log_to_keep: LOGS_KEPT_AFTER_SNAPSHOT,
            // Must exceed the snapshot interval, or a follower lagging by less than one
            // snapshot would be treated as lagging and sent a snapshot instead of entries.
            replication_lag_threshold: 5 * SNAPSHOT_EVERY_LOGS,
            ..Default::default()
        }
        .validate()
        .map_err(|e| invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_timeouts_map_onto_openraft_timers() {
        let config = QuorumConfig::single(1, "/nonexistent").raft_config();
        let config = config.expect("defaults are valid");
        assert_eq!(config.election_timeout_min, 500);
        assert_eq!(config.election_timeout_max, 750);
        assert_eq!(config.heartbeat_interval, 250);
        // openraft's lease (= max) plus its timeout: a silent leader is replaced after
        // 1250..=1500 ms, Kafka's fetch timeout plus up to half the election timeout.
        let silent_min = config.election_timeout_max + config.election_timeout_min;
        let silent_max = 2 * config.election_timeout_max;
        assert_eq!((silent_min, silent_max), (1250, 1500));
        assert!(config.replication_lag_threshold > SNAPSHOT_EVERY_LOGS);

        let fast = QuorumConfig {
            fetch_timeout_ms: 100,
            election_timeout_ms: 0,
            ..QuorumConfig::single(1, "/nonexistent")
        };
        let fast = fast.raft_config().expect("valid");
        assert_eq!(fast.election_timeout_min, 50);
        assert_eq!(fast.election_timeout_max, 51);
        assert_eq!(fast.heartbeat_interval, 25);

        let zero = QuorumConfig {
            fetch_timeout_ms: 0,
            ..QuorumConfig::single(1, "/nonexistent")
        };
        assert!(matches!(
            zero.raft_config(),
            Err(RaftError::InvalidConfig { .. })
        ));
    }

    #[test]
    fn a_learner_advertises_its_bound_port_when_configured_with_port_0() {
        let bound: Option<SocketAddr> = Some(([127, 0, 0, 1], 40123).into());
        let mut config = QuorumConfig::single(4, "/nonexistent");
        config.role = NodeRole::Learner;
        assert_eq!(
            config.advertised_addr(bound).expect("bound address"),
            "127.0.0.1:40123"
        );
        config.learner_addr = Some("broker4.local:0".into());
        assert_eq!(
            config.advertised_addr(bound).expect("port filled in"),
            "broker4.local:40123"
        );
        config.learner_addr = Some("broker4.local:9093".into());
        assert_eq!(
            config.advertised_addr(bound).expect("as given"),
            "broker4.local:9093"
        );
        config.learner_addr = None;
        let wildcard = Some(([0, 0, 0, 0], 9093).into());
        assert!(config.advertised_addr(wildcard).is_err());
    }
}
