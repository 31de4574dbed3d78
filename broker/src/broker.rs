//! `Broker`: the state every handler shares — configuration, the metadata quorum, the
//! partitions this broker leads, fetch sessions and the producer-id allocator — and its
//! start-up: read or write `meta.properties`, start the quorum, register the broker,
//! open and reconcile the logs.

use std::sync::Arc;

use anyhow::Context;
use brook_raft::{Command, MetadataImage, MetadataQuorum, QuorumConfig};
use brook_storage::LogManager;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::BrokerConfig;
use crate::coordinator::group::offsets_log::OffsetsLog;
use crate::coordinator::group::{GroupConfig, GroupCoordinator};
use crate::coordinator::producer_id::ProducerIdAllocator;
use crate::fetch_session::FetchSessions;
use crate::metadata::meta_properties;
use crate::partition::ReplicaManager;

pub struct Broker {
    pub config: BrokerConfig,
    pub node_id: i32,
    pub cluster_id: String,
    pub quorum: MetadataQuorum,
    pub replicas: ReplicaManager,
    pub fetch_sessions: FetchSessions,
    pub producer_ids: ProducerIdAllocator,
    /// Classic consumer groups and committed offsets; this broker coordinates all groups.
    pub groups: GroupCoordinator,
    /// Cancelled when a clean shutdown begins: every task stops, and a fetch waiting for
    /// data answers at once instead of holding its connection open until its wait ends.
    pub stopping: CancellationToken,
}

impl Broker {
    /// Opens storage and metadata and registers this broker; the listeners come after.
    pub async fn start(config: BrokerConfig) -> anyhow::Result<Arc<Broker>> {
        let first_dir = config
            .log_dirs
            .first()
            .context("log.dirs names no directory")?
            .clone();
        let cluster_id = {
            let dir = first_dir.clone();
            let node_id = config.node_id;
            let wanted = config.cluster_id.clone();
            tokio::task::spawn_blocking(move || {
                meta_properties::load_or_create(&dir, node_id, wanted)
            })
            .await??
        };
        let quorum = MetadataQuorum::start(QuorumConfig {
            node_id: u64::try_from(config.node_id).context("node.id must not be negative")?,
            // Not a `<topic>-<partition>` name, so the log manager never mistakes the
            // quorum's directory for a partition log.
            data_dir: first_dir.join("__cluster_metadata"),
            voters: Default::default(),
            listen: None,
        })
        .await
        .context("starting the metadata quorum")?;
        let logs = {
            let dirs = config.log_dirs.clone();
            let defaults = crate::partition::log_config(&config.topic_defaults);
            tokio::task::spawn_blocking(move || LogManager::open(&dirs, defaults))
                .await?
                .context("opening the partition logs")?
        };
        let replicas = ReplicaManager::new(logs);
        let offsets_log = OffsetsLog::new(
            replicas.clone(),
            quorum.subscribe(),
            config.clone(),
            config.node_id,
        );
        let groups = GroupCoordinator::start(
            // Not a `<topic>-<partition>` name, so the log manager leaves it alone.
            first_dir.join("__consumer_offsets_store"),
            GroupConfig {
                initial_rebalance_delay: std::time::Duration::from_millis(
                    config.group_initial_rebalance_delay_ms,
                ),
                min_session_timeout_ms: config.group_min_session_timeout_ms,
                max_session_timeout_ms: config.group_max_session_timeout_ms,
                offset_metadata_max_bytes: 4096,
                offsets_retention_ms: config.offsets_retention_ms,
                offsets_retention_check_interval: std::time::Duration::from_millis(
                    config.offsets_retention_check_interval_ms,
                ),
            },
            Some(offsets_log),
        )
        .await
        .context("opening the consumer offset store")?;
        let broker = Arc::new(Broker {
            node_id: config.node_id,
            cluster_id,
            quorum,
            replicas,
            fetch_sessions: FetchSessions::new(),
            producer_ids: ProducerIdAllocator::new(),
            groups,
            stopping: CancellationToken::new(),
            config,
        });
        broker.register().await?;
        broker.reconcile().await;
        info!(node_id = broker.node_id, cluster_id = %broker.cluster_id, "broker started");
        Ok(broker)
    }

    /// The current metadata image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.quorum.image()
    }

    /// Registers (or re-registers, after a restart or a changed advertised address) this
    /// broker's endpoint in the metadata.
    async fn register(&self) -> anyhow::Result<()> {
        let advertised = self
            .config
            .advertised_listeners
            .first()
            .context("no advertised listener")?;
        let host = advertised.host.clone();
        let port = advertised.port;
        let current = self.image();
        if let Some(reg) = current.broker(self.node_id) {
            if reg.host == host && reg.port == port {
                return Ok(());
            }
        }
        self.quorum
            .propose(Command::RegisterBroker {
                broker_id: self.node_id,
                host,
                port,
                rack: None,
            })
            .await
            .context("registering the broker")?;
        Ok(())
    }

    /// The broker config with the dynamic layers (cluster default and this broker's
    /// overrides) from the metadata image applied.
    pub fn effective_config(&self) -> BrokerConfig {
        let image = self.image();
        let empty = Default::default();
        self.config.with_dynamic(
            image.broker_configs(None).unwrap_or(&empty),
            image.broker_configs(Some(self.node_id)).unwrap_or(&empty),
        )
    }

    /// Applies the current metadata to local logs (deleted topics, changed configs).
    pub async fn reconcile(&self) {
        self.replicas
            .reconcile(&self.effective_config(), &self.image(), self.node_id)
            .await;
    }

    /// Follows metadata changes made elsewhere (other brokers, later) and reconciles.
    pub async fn follow_metadata(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        let mut images = self.quorum.subscribe();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = images.changed() => if changed.is_err() { return },
            }
            self.reconcile().await;
        }
    }
}
