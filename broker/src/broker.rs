//! `Broker`: the state every handler shares — configuration, the metadata quorum, the
//! partition replicas this broker holds, fetch sessions and the producer-id allocator —
//! and its start-up: start the quorum (a voter on the controller listener, or a learner
//! for a broker-only node), agree on the cluster id, check or write `meta.properties`,
//! open the logs and the group and transaction coordinators, register the broker and reconcile the logs
//! with the image. Serving starts once the controller has unfenced it (see `main.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};
use brook_raft::{Command, MetadataImage, MetadataQuorum};
use brook_storage::LogManager;
use tokio_util::sync::CancellationToken;

use crate::auth::Authorizer;
use crate::cluster::quorum_config;
use crate::config::BrokerConfig;
use crate::coordinator::consumer_group::TopicsView;
use crate::coordinator::group::offsets_log::OffsetsLog;
use crate::coordinator::group::{GroupConfig, GroupCoordinator};
use crate::coordinator::handles::{CoordinatorHandles, CoordinatorHost};
use crate::coordinator::producer_id::ProducerIdAllocator;
use crate::coordinator::txn::{TxnConfig, TxnCoordinator};
use crate::coordinator::writer::PartitionWriter;
use crate::handlers::fetch::session::FetchSessions;
use crate::metadata::meta_properties;
use crate::partition::ReplicaManager;
use crate::replication::peer_security::PeerSecurity;
use crate::server::connection_limits::ConnectionQuotas;
use crate::server::tls::TlsListeners;

pub struct Broker {
    pub config: BrokerConfig,
    pub node_id: i32,
    pub cluster_id: String,
    pub quorum: MetadataQuorum,
    pub replicas: ReplicaManager,
    /// The coordinators' door to their partitions (over `replicas`).
    pub writer: PartitionWriter,
    pub fetch_sessions: FetchSessions,
    pub producer_ids: ProducerIdAllocator,
    /// Classic consumer groups and committed offsets; this broker coordinates all groups.
    pub groups: GroupCoordinator,
    /// Transactions whose `__transaction_state` partition this broker leads; its task
    /// (`coordinator::txn::run`) is started by `main`.
    pub txn: TxnCoordinator,
    /// The ACL authorizer (`authorizer.class.name`); `None` allows everything.
    pub authorizer: Option<Authorizer>,
    /// Client connections counted against `max.connections` and `max.connections.per.ip`.
    pub connection_quotas: Arc<ConnectionQuotas>,
    /// Bytes of large requests being read or handled (`queued.max.request.bytes`).
    pub request_memory_pool: Arc<crate::server::memory_pool::RequestMemoryPool>,
    /// How this broker reaches its peers: the inter-broker listener's endpoint, TLS, login.
    pub peers: PeerSecurity,
    /// The TLS of each SSL client listener, following dynamic updates of its stores.
    pub tls: TlsListeners,
    /// Cancelled when a clean shutdown begins: every task stops, and a fetch waiting for
    /// data answers at once instead of holding its connection open until its wait ends.
    pub stopping: CancellationToken,
    /// This process's random id: a restart registers a new incarnation.
    pub incarnation_id: uuid::Uuid,
    /// Client quotas (`producer_byte_rate`, `consumer_byte_rate`) as the image sets them.
    pub client_quotas: crate::quota::ClientQuotas,
    /// The leader side of the replication throttle: bytes served to throttled followers
    /// (`replication::throttle`, `leader.replication.throttled.rate`).
    pub leader_replication_quota: crate::replication::throttle::ReplicationQuota,
    /// The current registration's epoch (the raft log index of its RegisterBroker).
    broker_epoch: AtomicU64,
}

impl CoordinatorHost for Broker {
    fn coordinator_handles(&self) -> CoordinatorHandles<'_> {
        CoordinatorHandles {
            node_id: self.node_id,
            quorum: &self.quorum,
            writer: &self.writer,
            stopping: &self.stopping,
            peers: &self.peers,
            producer_ids: &self.producer_ids,
            groups: &self.groups,
            txn: &self.txn,
        }
    }
}

impl Broker {
    /// A topic was created or deleted: the consumer groups' topic patterns follow, each
    /// resolved for the principal whose heartbeat last resolved it.
    fn consumer_topics_changed(&self, image: &MetadataImage) {
        use crate::coordinator::consumer_group::{metadata_version, topic_metas, Caller};
        let topics = topic_metas(image);
        let may_describe = |c: &Caller, topic: &str| {
            crate::auth::may_describe_topic(self, image, &c.principal, c.host, topic)
        };
        self.groups.consumer_topics_changed(&TopicsView {
            topics: &topics,
            version: metadata_version(image),
            may_describe: &may_describe,
        });
    }

    /// Opens storage and metadata; `cluster::registration::join` registers the broker
    /// next (so this module does not depend on the registration that depends on it), and
    /// the listeners come after.
    pub async fn open(
        config: BrokerConfig,
        peers: PeerSecurity,
        tls: TlsListeners,
    ) -> anyhow::Result<Arc<Broker>> {
        let first_dir = config
            .log_dirs
            .first()
            .context("log.dirs names no directory")?
            .clone();
        let stored_cluster_id = {
            let dir = first_dir.clone();
            let node_id = config.node_id;
            tokio::task::spawn_blocking(move || meta_properties::read_cluster_id(&dir, node_id))
                .await??
        };
        // Before any log file is opened: the pool is sized once per process.
        let open_files_limit = brook_storage::file_pool::raise_open_files_limit();
        let pool_size = brook_storage::file_pool::configure(
            config
                .log_open_files_max
                .unwrap_or_else(|| brook_storage::file_pool::default_capacity(open_files_limit)),
        );
        tracing::info!(open_files_limit, pool_size, "log file pool sized");
        // The partition logs open on a blocking thread while the metadata quorum starts:
        // neither reads the other's files, and at 100,000 partitions each takes most of a
        // second of a clean start. (A start refused below, say for another cluster's id,
        // has then consumed the clean shutdown marker: the next start recovers every log
        // from its recovery point, as after a crash.)
        let logs_opening = {
            let dirs = config.log_dirs.clone();
            let defaults = crate::partition::log_config(&config.topic_defaults);
            tokio::task::spawn_blocking(move || LogManager::open(&dirs, defaults))
        };
        let mut quorum_config = quorum_config::build(&config)?;
        // A node that was never formatted gets its directory id now, kept in meta.properties
        // below: the quorum needs it from the first start (a voter publishes it to the leader
        // for the `kraft.version` upgrade, and is then addressed by it).
        let directory_id = quorum_config
            .directory_id
            .get_or_insert_with(meta_properties::random_directory_id)
            .clone();
        let quorum = MetadataQuorum::start(quorum_config)
            .await
            .context("starting the metadata quorum")?;
        quorum
            .wait_ready()
            .await
            .context("waiting for the metadata quorum")?;
        let cluster_id =
            agree_on_cluster_id(&quorum, stored_cluster_id.or(config.cluster_id.clone())).await?;
        {
            let dir = first_dir.clone();
            let node_id = config.node_id;
            let wanted = Some(cluster_id.clone());
            tokio::task::spawn_blocking(move || {
                meta_properties::load_or_create_with(&dir, node_id, wanted, Some(directory_id))
            })
            .await?
            .context("cluster.id")?;
        }
        let logs = logs_opening.await?.context("opening the partition logs")?;
        let replicas = ReplicaManager::new(logs, config.node_id, quorum.subscribe());
        // Every replica this broker holds gets its partition (log open, role) before the
        // coordinators load their partitions.
        let image = quorum.image();
        // Logs of partitions assigned while this broker was down are created once it
        // serves (`main`), not before it registers; requests create the ones they need.
        replicas.hold_log_creation();
        replicas
            .apply(image.clone(), &effective_config(&config, &image))
            .await;
        let offsets_log = OffsetsLog::new(
            PartitionWriter::new(replicas.clone()),
            quorum.subscribe(),
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
        groups.consumer_groups().set_config(
            crate::coordinator::consumer_group::ConsumerGroupConfig {
                session_timeout_ms: config.group_consumer_session_timeout_ms,
                heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
                assignors: config.group_consumer_assignors.clone(),
                migration_policy: config.group_consumer_migration_policy,
                // At least 1 (the key table's validators), so the conversion is lossless.
                consumer_max_size: usize::try_from(config.group_consumer_max_size).unwrap_or(1),
                classic_max_size: usize::try_from(config.group_max_size).unwrap_or(1),
            },
        );
        let broker = Arc::new(Broker {
            node_id: config.node_id,
            cluster_id,
            quorum,
            writer: PartitionWriter::new(replicas.clone()),
            replicas,
            fetch_sessions: FetchSessions::new(),
            producer_ids: ProducerIdAllocator::new(),
            groups,
            txn: TxnCoordinator::new(TxnConfig::from_broker(&config), config.node_id),
            authorizer: config.authorizer.as_ref().map(Authorizer::new),
            connection_quotas: ConnectionQuotas::new(config.connection_limits.clone()),
            request_memory_pool: crate::server::memory_pool::RequestMemoryPool::new(
                config.queued_max_request_bytes,
            ),
            peers,
            tls,
            stopping: CancellationToken::new(),
            incarnation_id: uuid::Uuid::new_v4(),
            broker_epoch: AtomicU64::new(0),
            client_quotas: Default::default(),
            leader_replication_quota: Default::default(),
            config,
        });
        Ok(broker)
    }

    /// The epoch of this incarnation's registration.
    pub fn broker_epoch(&self) -> u64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    pub fn set_broker_epoch(&self, epoch: u64) {
        self.broker_epoch.store(epoch, Ordering::Release);
    }

    /// The current metadata image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.quorum.image()
    }

    /// The broker config with the dynamic layers (cluster default and this broker's
    /// overrides) from the metadata image applied.
    pub fn effective_config(&self) -> BrokerConfig {
        effective_config(&self.config, &self.image())
    }

    /// Applies the current metadata to local logs (deleted topics, changed configs).
    pub async fn reconcile(&self) {
        self.replicas
            .reconcile(&self.effective_config(), &self.image(), self.node_id)
            .await;
    }

    /// Follows metadata changes made elsewhere (other brokers, later): applies this
    /// broker's role changes to its replicas, moves group coordination with the
    /// `__consumer_offsets` leadership (`GroupCoordinator::follow`), and reconciles the
    /// logs.
    pub async fn follow_metadata(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        let mut images = self.quorum.subscribe();
        let mut last = self.image();
        loop {
            // Applied before waiting: an image published between the start-up apply and
            // this subscription is applied too (the replica manager diffs against what it
            // applied last, so an unchanged image costs nothing).
            let image = self.image();
            let config = effective_config(&self.config, &image);
            self.connection_quotas.set_limits(&config.connection_limits);
            self.update_tls(&config, false);
            self.client_quotas.update(&image.client_quotas);
            self.connection_quotas
                .rates
                .set_ip_quotas(&image.client_quotas);
            self.replicas.apply(image.clone(), &config).await;
            // Group coordination follows the `__consumer_offsets` leadership (from the
            // first image on: the runtime diffs against the partitions it serves). A
            // failed load is retried after a pause even if no new image comes.
            let groups_retry = self.groups.follow(&image).await;
            if !Arc::ptr_eq(&image, &last) {
                // A topic created or deleted: the consumer groups' topic patterns follow.
                if last.topic_names_by_id != image.topic_names_by_id {
                    self.consumer_topics_changed(&image);
                }
                self.replicas.reconcile(&config, &image, self.node_id).await;
                last = image;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = images.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(GROUP_LOAD_RETRY), if groups_retry => {}
            }
        }
    }

    /// Serves the key and trust stores `config` names on each SSL listener (`reread_files`:
    /// also when a store file changed on disk, as an update that sets the same location asks).
    pub fn update_tls(&self, config: &BrokerConfig, reread_files: bool) {
        for (name, served) in &self.tls {
            if let Some(next) = config.listener_tls.get(name) {
                served.update(next, reread_files);
            }
        }
    }
}

/// `config` with the dynamic layers of `image` (the cluster default and this broker's
/// overrides) applied.
fn effective_config(config: &BrokerConfig, image: &MetadataImage) -> BrokerConfig {
    let empty = Default::default();
    config.with_dynamic(
        image.broker_configs(None).unwrap_or(&empty),
        image.broker_configs(Some(config.node_id)).unwrap_or(&empty),
    )
}

/// The pause before a failed load of group coordinator partitions is tried again.
const GROUP_LOAD_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// The cluster id every node shares: the quorum's, set by the first node that finds none
/// (with the id this node's data directory was formatted with, or `cluster.id`, or a new
/// one). A data directory formatted for another cluster is refused.
async fn agree_on_cluster_id(
    quorum: &MetadataQuorum,
    local: Option<String>,
) -> anyhow::Result<String> {
    if quorum.image().cluster_id.is_none() {
        let proposed = local
            .clone()
            .unwrap_or_else(|| meta_properties::uuid_to_kafka_string(uuid::Uuid::new_v4()));
        loop {
            match quorum
                .propose(Command::SetClusterId {
                    cluster_id: proposed.clone(),
                })
                .await
            {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot record the cluster id yet; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                }
            }
        }
    }
    let Some(cluster_id) = quorum.image().cluster_id.clone() else {
        bail!("the metadata quorum has no cluster id after setting one");
    };
    if let Some(local) = local {
        if local != cluster_id {
            bail!(
                "this node's data belongs to cluster {local} but the metadata quorum is cluster {cluster_id} (cluster.id / meta.properties)"
            );
        }
    }
    Ok(cluster_id)
}
