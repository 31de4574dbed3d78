//! A loopback cluster harness for the multi-node tests: voters on free 127.0.0.1 ports
//! (their addresses must be known up front, for the voter set), learners on port 0, each
//! node in its own temp dir; stop, restart and wipe one node at a time.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use brook_raft::{
    Command, MetadataImage, MetadataQuorum, NodeRole, PartitionAssignment, QuorumConfig,
};
use tempfile::TempDir;
use uuid::Uuid;

/// Every wait in these tests is bounded by this, far above what a healthy run needs.
pub const PATIENCE: Duration = Duration::from_secs(20);

mod ports;
pub use ports::free_port;

pub struct Cluster {
    pub voters: BTreeMap<u64, String>,
    pub dirs: BTreeMap<u64, TempDir>,
    pub nodes: BTreeMap<u64, MetadataQuorum>,
    pub learners: BTreeMap<u64, NodeRole>,
    /// Kafka's `controller.quorum.fetch.timeout.ms` / `election.timeout.ms` for every node.
    pub timeouts_ms: (u64, u64),
}

impl Cluster {
    /// Starts voters `1..=n` and waits until each is ready.
    pub async fn start(n: u64) -> anyhow::Result<Cluster> {
        Self::start_with(n, (1000, 1000)).await
    }

    pub async fn start_with(n: u64, timeouts_ms: (u64, u64)) -> anyhow::Result<Cluster> {
        let mut cluster = Cluster::new(n, timeouts_ms)?;
        for id in 1..=n {
            cluster.start_node(id).await?;
        }
        cluster.wait_ready_all().await?;
        Ok(cluster)
    }

    /// Voters `1..=n` configured, none started.
    pub fn new(n: u64, timeouts_ms: (u64, u64)) -> anyhow::Result<Cluster> {
        let mut voters = BTreeMap::new();
        let mut dirs = BTreeMap::new();
        for id in 1..=n {
            voters.insert(id, format!("127.0.0.1:{}", free_port()?));
            dirs.insert(id, tempfile::tempdir()?);
        }
        Ok(Cluster {
            voters,
            dirs,
            nodes: BTreeMap::new(),
            learners: BTreeMap::new(),
            timeouts_ms,
        })
    }

    pub fn config(&self, id: u64) -> anyhow::Result<QuorumConfig> {
        let dir = self.dirs.get(&id).context("no dir for node")?;
        let mut config = QuorumConfig {
            voters: self.voters.clone(),
            fetch_timeout_ms: self.timeouts_ms.0,
            election_timeout_ms: self.timeouts_ms.1,
            ..QuorumConfig::single(id, dir.path())
        };
        if self.learners.contains_key(&id) {
            config.role = NodeRole::Learner;
            config.listen = Some("127.0.0.1:0".parse()?);
        } else {
            config.listen = Some(self.voters[&id].parse()?);
        }
        Ok(config)
    }

    pub async fn start_node(&mut self, id: u64) -> anyhow::Result<()> {
        let node = MetadataQuorum::start(self.config(id)?).await?;
        self.nodes.insert(id, node);
        Ok(())
    }

    /// Adds broker-only node `id` (a learner listening on port 0) and waits until ready.
    pub async fn add_learner(&mut self, id: u64) -> anyhow::Result<()> {
        self.dirs.insert(id, tempfile::tempdir()?);
        self.learners.insert(id, NodeRole::Learner);
        self.start_node(id).await?;
        self.wait_ready(id).await
    }

    pub async fn wait_ready(&self, id: u64) -> anyhow::Result<()> {
        let node = self.node(id)?;
        tokio::time::timeout(PATIENCE, node.wait_ready())
            .await
            .with_context(|| format!("node {id} not ready in time"))??;
        Ok(())
    }

    pub async fn wait_ready_all(&self) -> anyhow::Result<()> {
        for &id in self.nodes.keys() {
            self.wait_ready(id).await?;
        }
        Ok(())
    }

    pub fn node(&self, id: u64) -> anyhow::Result<&MetadataQuorum> {
        self.nodes
            .get(&id)
            .with_context(|| format!("node {id} is not running"))
    }

    pub async fn stop(&mut self, id: u64) -> anyhow::Result<()> {
        let node = self
            .nodes
            .remove(&id)
            .context("stopping a node that is not running")?;
        node.shutdown().await?;
        Ok(())
    }

    /// Replaces node `id`'s data dir with an empty one (it must be stopped).
    pub fn wipe(&mut self, id: u64) -> anyhow::Result<()> {
        if self.nodes.contains_key(&id) {
            bail!("wipe a stopped node only");
        }
        self.dirs.insert(id, tempfile::tempdir()?);
        Ok(())
    }

    /// Waits until every running voter names the same running leader that knows it leads,
    /// other than `not`; returns it.
    pub async fn agreed_leader(&self, not: Option<u64>) -> anyhow::Result<u64> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let leaders: Vec<Option<u64>> = self
                .nodes
                .values()
                .filter(|n| n.role() == NodeRole::Voter)
                .map(MetadataQuorum::leader)
                .collect();
            if let Some(Some(leader)) = leaders.first() {
                let agreed = leaders.iter().all(|l| *l == Some(*leader));
                let live = self
                    .nodes
                    .get(leader)
                    .is_some_and(MetadataQuorum::is_leader);
                if agreed && live && Some(*leader) != not {
                    return Ok(*leader);
                }
            }
            if Instant::now() > deadline {
                bail!("no agreed leader within {PATIENCE:?}: {leaders:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn followers(&self, leader: u64) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|(&id, n)| id != leader && n.role() == NodeRole::Voter)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Waits until node `id` has applied `index` and holds the same metadata as `expected`.
    pub async fn converged(&self, id: u64, expected: &MetadataImage) -> anyhow::Result<()> {
        let mut images = self.node(id)?.subscribe();
        let target = expected.applied_index();
        tokio::time::timeout(PATIENCE, images.wait_for(|i| i.applied_index() >= target))
            .await
            .with_context(|| format!("node {id} did not reach index {target}"))??;
        let image = self.node(id)?.image();
        if !image.same_metadata(expected) {
            bail!("node {id} diverged:\n{image:#?}\nexpected:\n{expected:#?}");
        }
        Ok(())
    }

    pub async fn shutdown(self) -> anyhow::Result<()> {
        for (_, node) in self.nodes {
            node.shutdown().await?;
        }
        Ok(())
    }
}

pub fn create_topic(name: &str, topic_id: Uuid, partitions: i32) -> Command {
    Command::CreateTopic {
        name: name.into(),
        topic_id,
        partitions: (0..partitions)
            .map(|p| PartitionAssignment {
                partition: p,
                replicas: vec![1],
                leader: 1,
            })
            .collect(),
        configs: BTreeMap::new(),
    }
}

/// A small command whose effect stays small however often it is applied.
pub fn set_default_config(i: u64) -> Command {
    Command::AlterBrokerConfigs {
        broker_id: None,
        set: BTreeMap::from([(format!("k{}", i % 10), i.to_string())]),
        delete: vec![],
    }
}

/// Proposes `count` commands on `node`, `parallel` at a time (openraft batches concurrent
/// writes into one log append, which keeps 10,000 synced commits quick).
pub async fn propose_many(
    node: Arc<MetadataQuorum>,
    count: u64,
    parallel: u64,
) -> anyhow::Result<()> {
    let mut next = 0;
    while next < count {
        let mut batch = tokio::task::JoinSet::new();
        for i in next..(next + parallel).min(count) {
            let node = node.clone();
            batch.spawn(async move { node.propose(set_default_config(i)).await });
        }
        while let Some(done) = batch.join_next().await {
            done??;
        }
        next += parallel;
    }
    Ok(())
}

pub fn dir_of(cluster: &Cluster, id: u64) -> anyhow::Result<PathBuf> {
    Ok(cluster
        .dirs
        .get(&id)
        .context("no dir")?
        .path()
        .to_path_buf())
}

/// A heartbeat built from its stable wire fields, so that fields the struct gains later
/// (all `#[serde(default)]`) do not break these tests.
pub fn heartbeat(broker_id: i32, applied_index: u64) -> anyhow::Result<brook_raft::Heartbeat> {
    Ok(serde_json::from_value(serde_json::json!({
        "broker_id": broker_id,
        "broker_epoch": 1,
        "applied_index": applied_index,
        "want_shutdown": false,
    }))?)
}
