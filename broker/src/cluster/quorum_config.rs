//! The metadata quorum's settings from Kafka's keys: `node.id`, `process.roles`,
//! `controller.quorum.voters` (the raft voters, reached on their controller listeners),
//! the controller listener (where this voter serves raft peers),
//! `controller.quorum.{election,fetch}.timeout.ms` and `broker.session.timeout.ms`; for a
//! controller of a dynamic quorum (KIP-853: no voters, `controller.quorum.bootstrap.servers`)
//! the bootstrap servers, its advertised controller endpoint and its directory id.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::Context;
use brook_raft::{NodeRole, QuorumConfig};

use crate::config::{BrokerConfig, QuorumRole};

/// The quorum's directory in the first log dir: not a `<topic>-<partition>` name, so the
/// log manager never mistakes it for a partition log.
const QUORUM_DIR: &str = "__cluster_metadata";

/// The quorum's directory: the raft log, snapshots and bootstrap records (`brook format`).
pub fn data_dir(config: &BrokerConfig) -> anyhow::Result<std::path::PathBuf> {
    Ok(config
        .log_dirs
        .first()
        .context("log.dirs names no directory")?
        .join(QUORUM_DIR))
}

/// Builds the quorum config; the raft log and snapshots live in the first log dir.
pub fn build(config: &BrokerConfig) -> anyhow::Result<QuorumConfig> {
    let data_dir = data_dir(config)?;
    let node_id = u64::try_from(config.node_id).context("node.id must not be negative")?;
    let mode = config.cluster_mode();
    let mut voters: BTreeMap<u64, String> = config
        .controller_quorum_voters
        .iter()
        .filter_map(|v| {
            let id = u64::try_from(v.node_id).ok()?;
            Some((id, join(&v.host, v.port)))
        })
        .collect();
    let (role, listen) = match &mode.quorum {
        QuorumRole::Voter { listener } => {
            let listen = match listener {
                // A quorum of one needs no peers: nothing to listen on, unless it is a
                // dynamic quorum's (bootstrap servers), which Kafka's tools reach there.
                Some(l)
                    if !voters.is_empty()
                        || !config.controller_quorum_bootstrap_servers.is_empty() =>
                {
                    Some(resolve(&l.bind_address())?)
                }
                _ => None,
            };
            (NodeRole::Voter, listen)
        }
        QuorumRole::Learner => {
            if voters.is_empty() {
                // Only bootstrap servers are known: their ids are learned from the leader,
                // so they are contact points under placeholder ids.
                for (i, server) in config
                    .controller_quorum_bootstrap_servers
                    .iter()
                    .enumerate()
                {
                    voters.insert(u64::MAX - i as u64, server.clone());
                }
            }
            // A learner's raft endpoint: the host of its first client listener, any port.
            let host = config
                .advertised_listeners
                .first()
                .map(|l| l.host.clone())
                .unwrap_or_else(|| "127.0.0.1".into());
            (NodeRole::Learner, Some(resolve(&join(&host, 0))?))
        }
    };
    let controller_addr = match &mode.quorum {
        QuorumRole::Voter { listener: Some(l) } => {
            let advertised = l.advertised();
            Some(join(&advertised.host, advertised.port))
        }
        _ => None,
    };
    let bootstrap_servers = match &mode.quorum {
        QuorumRole::Voter { .. } if config.controller_quorum_voters.is_empty() => {
            config.controller_quorum_bootstrap_servers.clone()
        }
        _ => Vec::new(),
    };
    let learner_addr = match (&role, listen) {
        (NodeRole::Learner, Some(addr)) => Some(addr.to_string()),
        _ => None,
    };
    let sasl = super::quorum_sasl::build(config, &data_dir)?;
    Ok(QuorumConfig {
        node_id,
        data_dir,
        voters,
        listen,
        role,
        election_timeout_ms: config.controller_quorum_election_timeout_ms,
        fetch_timeout_ms: config.controller_quorum_fetch_timeout_ms,
        snapshot_record_bytes: config.metadata_log_max_record_bytes_between_snapshots,
        broker_session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
        learner_addr,
        tls: super::quorum_tls::build(config)?,
        sasl,
        bootstrap_servers,
        // Written by `brook format` (or a previous start); read before the quorum starts, a
        // few bytes once.
        directory_id: crate::metadata::meta_properties::read_directory_id(
            config
                .log_dirs
                .first()
                .context("log.dirs names no directory")?,
        ),
        controller_addr,
    })
}

fn join(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn resolve(addr: &str) -> anyhow::Result<SocketAddr> {
    addr.to_socket_addrs()
        .with_context(|| format!("cannot resolve controller listener address {addr}"))?
        .next()
        .with_context(|| format!("controller listener address {addr} resolves to nothing"))
}
