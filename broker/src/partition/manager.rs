//! `ReplicaManager`: the partition replicas this broker holds, one [`Partition`] each.
//!
//! The map is filled by metadata images, not by requests (Kafka's
//! `ReplicaManager.applyDelta`): [`ReplicaManager::apply`] diffs each new image against the
//! last applied one (`delta::role_changes`) and opens the log of every partition this
//! broker becomes a replica of, makes it leader (recording the epoch's start offset in the
//! log's epoch cache) or follower, updates a leader's ISR, and drops (and deletes) the
//! replicas it no longer holds — a log is never deleted while this broker is still one of
//! the partition's replicas, whatever its role. A log that cannot be opened leaves its
//! partition offline (KAFKA_STORAGE_ERROR to requests), never served as led.
//! The apply does no file I/O for a new partition: its log is registered
//! (`LogManager::get_or_register`) and created in the background (`log_creator`), or by
//! the first request that needs it, which waits for its creation.
//!
//! Requests find a partition with one lookup (`leader_partition`): a sharded concurrent
//! map (`dashmap`) by topic name (borrowed as `&str`, nothing allocated) holds each topic's
//! table of partitions, replaced whole when an image changes the topic (copy-on-write,
//! one copy per topic per image), so readers never contend with each other nor wait for
//! an apply. When the quorum's image is newer than the applied one and says this broker
//! leads, the request waits (briefly) for the apply, so a client that saw this broker as
//! leader in Metadata is not refused for the milliseconds the apply takes.
//! `reconcile` pushes changed topic configs into the open logs. Only the leader serves
//! produce, fetch, ListOffsets and DeleteRecords; any other broker answers
//! NOT_LEADER_OR_FOLLOWER with the leader it knows (KIP-951).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use brook_raft::MetadataImage;
use brook_storage::{LogHandle, LogManager, StorageError};
use dashmap::DashMap;
use tokio::sync::watch;
use tracing::{info, warn};

use super::delta::{self, RoleChange};
use super::log_creator::LogCreator;
use super::replica::{Partition, Role};
use super::{log_config, TopicOverrides};
use crate::config::{BrokerConfig, TopicConfig};
use crate::error::BrokerError;
use crate::replication::leader::{Assignment, LeaderPartition};

/// How long a request waits for the apply of a newer image that makes this broker the
/// partition's leader. Once one wait for an image has run out, no later lookup waits for
/// that image (`Inner::slow_apply`): a request naming thousands of partitions of new
/// topics would otherwise wait this long for each in turn while their logs are created,
/// past the client's request timeout (librdkafka's 60 s), whose retry then appends the
/// records a second time. They are answered NOT_LEADER_OR_FOLLOWER, as Kafka answers a
/// partition whose leadership it has not applied yet, and the client retries.
const APPLY_WAIT: Duration = Duration::from_secs(2);

/// One partition slot of a topic's table.
#[derive(Debug, Clone)]
enum Slot {
    Online(Arc<Partition>),
    /// The log could not be opened (the reason is logged once and answered as
    /// KAFKA_STORAGE_ERROR).
    Offline(Arc<str>),
}

/// The partitions of one topic this broker holds (replaced whole on change).
#[derive(Debug, Clone, Default)]
struct TopicTable {
    topic_id: uuid::Uuid,
    partitions: HashMap<i32, Slot>,
}

struct Inner {
    logs: Arc<LogManager>,
    node_id: i32,
    topics: DashMap<Arc<str>, Arc<TopicTable>>,
    /// The quorum's images (the newest, possibly not applied yet).
    images: watch::Receiver<Arc<MetadataImage>>,
    /// The last applied image: the partitions match it.
    applied: watch::Sender<Arc<MetadataImage>>,
    /// One apply at a time.
    applying: tokio::sync::Mutex<()>,
    /// The image a lookup has already waited `APPLY_WAIT` for in vain (weak: it keeps the
    /// allocation, so no later image can share its address).
    slow_apply: parking_lot::Mutex<Weak<MetadataImage>>,
    /// Wakes the ISR task (`replication::isr`) when a follower may have caught up.
    isr_wakeup: Arc<tokio::sync::Notify>,
    /// Creates the files of new partitions' logs in the background.
    creator: Arc<LogCreator>,
}

/// Cheap to clone: clones share the partitions (the group coordinator holds one).
#[derive(Clone)]
pub struct ReplicaManager {
    inner: Arc<Inner>,
}

impl ReplicaManager {
    pub fn new(
        logs: LogManager,
        node_id: i32,
        images: watch::Receiver<Arc<MetadataImage>>,
    ) -> Self {
        ReplicaManager {
            inner: Arc::new(Inner {
                logs: Arc::new(logs),
                node_id,
                topics: DashMap::new(),
                images,
                applied: watch::channel(Arc::new(MetadataImage::default())).0,
                applying: tokio::sync::Mutex::new(()),
                slow_apply: parking_lot::Mutex::new(Weak::new()),
                isr_wakeup: Arc::default(),
                creator: Arc::default(),
            }),
        }
    }

    /// The partition `topic`-`partition` in any role, if this broker holds it.
    pub fn get(&self, topic: &str, partition: i32) -> Option<Result<Arc<Partition>, BrokerError>> {
        let table = self
            .inner
            .topics
            .get(topic)
            .map(|t| Arc::clone(t.value()))?;
        Some(match table.partitions.get(&partition)? {
            Slot::Online(p) => Ok(Arc::clone(p)),
            Slot::Offline(reason) => Err(offline(topic, partition, reason)),
        })
    }

    /// Whether this broker's replica of the partition is offline: its log failed to open
    /// (the slot, or storage's offline set for a log that failed at start). Metadata then
    /// reports the partition without a leader here.
    pub fn is_offline(&self, topic: &str, partition: i32) -> bool {
        matches!(self.get(topic, partition), Some(Err(_)))
            || self.inner.logs.is_offline(topic, partition)
    }

    /// The partition `topic`-`partition` if this broker leads it, at
    /// `current_leader_epoch` when the request carries one (KIP-320): one lookup. Errors:
    /// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (with the leader this broker
    /// knows), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KAFKA_STORAGE_ERROR (offline).
    pub async fn leader_partition(
        &self,
        topic: &str,
        partition: i32,
        current_leader_epoch: Option<i32>,
    ) -> Result<Arc<Partition>, BrokerError> {
        let found = self.try_leader(topic, partition, current_leader_epoch);
        if found.is_ok() || !self.leads_in_newer_image(topic, partition) {
            return found.map_err(|e| self.explain(e, topic, partition));
        }
        let latest = self.inner.images.borrow().clone();
        if std::ptr::eq(self.inner.slow_apply.lock().as_ptr(), Arc::as_ptr(&latest)) {
            return found.map_err(|e| self.explain(e, topic, partition));
        }
        let mut applied = self.inner.applied.subscribe();
        let caught_up = applied.wait_for(|image| {
            Arc::ptr_eq(image, &latest)
                || (image.applied.is_some() && image.applied >= latest.applied)
        });
        if tokio::time::timeout(APPLY_WAIT, caught_up).await.is_err() {
            *self.inner.slow_apply.lock() = Arc::downgrade(&latest);
        }
        self.try_leader(topic, partition, current_leader_epoch)
            .map_err(|e| self.explain(e, topic, partition))
    }

    fn try_leader(
        &self,
        topic: &str,
        partition: i32,
        current_leader_epoch: Option<i32>,
    ) -> Result<Arc<Partition>, BrokerError> {
        let p = self
            .get(topic, partition)
            .ok_or_else(|| unknown(topic, partition))??;
        // Its log failed to open or to be created after the apply (atomics only while
        // no log failed).
        if self.inner.logs.is_offline(topic, partition) {
            return Err(offline(topic, partition, "the log is offline"));
        }
        p.leader(current_leader_epoch)?;
        Ok(p)
    }

    /// The images as they are applied: the partitions' roles match the current one.
    pub fn subscribe_applied(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.inner.applied.subscribe()
    }

    /// Whether the quorum's newest image, not applied yet, has this broker lead.
    fn leads_in_newer_image(&self, topic: &str, partition: i32) -> bool {
        let latest = self.inner.images.borrow().clone();
        !Arc::ptr_eq(&latest, &self.inner.applied.borrow())
            && latest
                .partition(topic, partition)
                .is_some_and(|p| p.leader == self.inner.node_id)
    }

    /// A partition this broker does not hold is unknown, or led elsewhere, as the newest
    /// image says.
    fn explain(&self, e: BrokerError, topic: &str, partition: i32) -> BrokerError {
        if !matches!(e, BrokerError::UnknownTopicOrPartition { .. }) {
            return e;
        }
        let image = self.inner.images.borrow().clone();
        match image.partition(topic, partition) {
            Some(p) => BrokerError::NotLeaderOrFollower {
                topic: topic.to_string(),
                partition,
                leader: if p.leader == self.inner.node_id {
                    -1
                } else {
                    p.leader
                },
                leader_epoch: p.leader_epoch,
            },
            None => e,
        }
    }

    /// Every partition this broker leads, with its leader state.
    /// A partition whose new log could not be created (in the background) is not led.
    pub fn leaders(&self) -> Vec<Arc<LeaderPartition>> {
        self.partitions()
            .iter()
            .filter_map(|p| p.leader_state())
            .filter(|s| !self.inner.logs.is_offline(&s.topic, s.partition))
            .collect()
    }

    /// Every partition this broker holds (online).
    pub fn partitions(&self) -> Vec<Arc<Partition>> {
        self.inner
            .topics
            .iter()
            .flat_map(|t| {
                t.value()
                    .partitions
                    .values()
                    .filter_map(|slot| match slot {
                        Slot::Online(p) => Some(Arc::clone(p)),
                        Slot::Offline(_) => None,
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Asks the ISR task to look at the partitions now (a follower may have caught up).
    pub fn wake_isr_task(&self) {
        self.inner.isr_wakeup.notify_one();
    }

    pub fn isr_wakeup(&self) -> Arc<tokio::sync::Notify> {
        self.inner.isr_wakeup.clone()
    }

    /// Applies `image`'s role changes for this broker since the last applied image
    /// (`broker`: the effective broker config, for the logs it opens).
    pub async fn apply(&self, image: Arc<MetadataImage>, broker: &BrokerConfig) {
        let _one = self.inner.applying.lock().await;
        let old = self.inner.applied.borrow().clone();
        if Arc::ptr_eq(&old, &image) {
            return;
        }
        let mut by_topic: BTreeMap<String, Vec<(i32, RoleChange)>> = BTreeMap::new();
        for ((topic, partition), change) in delta::role_changes(&old, &image, self.inner.node_id) {
            by_topic.entry(topic).or_default().push((partition, change));
        }
        for (topic, changes) in by_topic {
            self.apply_topic(&image, broker, &topic, changes).await;
        }
        self.inner.applied.send_replace(image);
    }

    /// One topic's changes, published as one new table.
    async fn apply_topic(
        &self,
        image: &MetadataImage,
        broker: &BrokerConfig,
        topic: &str,
        changes: Vec<(i32, RoleChange)>,
    ) {
        let topic_image = image.topic(topic);
        let topic_id = topic_image.map_or(uuid::Uuid::nil(), |t| t.topic_id);
        let name: Arc<str> = Arc::from(topic);
        let mut table = self
            .inner
            .topics
            .get(topic)
            .map(|t| TopicTable::clone(t.value()))
            .unwrap_or_default();
        // The topic's `min.insync.replicas`, resolved once for all its new leaderships.
        let mut min_isr = None;
        let mut led = Vec::new();
        let mut to_create = Vec::new();
        // The topic's log config, resolved once for all its new logs.
        let mut config = None;
        // Partitions no longer held here: their logs are deleted together, after the loop.
        let mut stopped = Vec::new();
        for (partition, change) in changes {
            let part = topic_image.and_then(|t| t.partitions.get(&partition));
            if let RoleChange::Stop = change {
                if let Some(Slot::Online(p)) = table.partitions.remove(&partition) {
                    // Requests still waiting on it answer with the new leader.
                    let change = p.begin_role_change().await;
                    p.set_role(
                        &change,
                        Role::Follower {
                            leader: part.map_or(-1, |p| p.leader),
                            leader_epoch: part.map_or(-1, |p| p.leader_epoch),
                        },
                    );
                }
                stopped.push(partition);
                continue;
            }
            let (Some(topic_image), Some(part)) = (topic_image, part) else {
                continue;
            };
            let slot = match table.partitions.get(&partition) {
                Some(Slot::Online(p)) if table.topic_id == topic_id => Slot::Online(p.clone()),
                _ => match self.replica_log(
                    broker,
                    &topic_image.configs,
                    &mut config,
                    topic,
                    partition,
                ) {
                    Ok(log) => {
                        if !log.is_created() {
                            to_create.push(log.clone());
                        }
                        Slot::Online(Arc::new(Partition::new(
                            name.clone(),
                            topic_id,
                            partition,
                            log,
                        )))
                    }
                    Err(e) => {
                        warn!(%topic, partition, error = %e, "cannot open the replica log; the partition is offline");
                        Slot::Offline(Arc::from(e.to_string()))
                    }
                },
            };
            if let Slot::Online(p) = &slot {
                // No follower write (a fetch answered for the old role) lands during the
                // change: a new leader's epoch starts at a log end offset that stays put.
                let guard = p.begin_role_change().await;
                let assignment = Assignment {
                    replicas: part.replicas.clone(),
                    isr: part.isr.clone(),
                    partition_epoch: part.partition_epoch,
                };
                match change {
                    RoleChange::BecomeLeader { leader_epoch } => {
                        let min_isr = *min_isr.get_or_insert_with(|| {
                            TopicConfig::resolve(broker, &topic_image.configs)
                                .map_or(1, |c| c.min_insync_replicas)
                        });
                        if let Err(e) = p.log().assign_epoch_start(leader_epoch).await {
                            warn!(%topic, partition, error = %e, "recording the leader epoch start failed");
                        }
                        let now_ms = brook_storage::log_manager::now_ms();
                        let state = Arc::new(LeaderPartition::new(
                            p.log().clone(),
                            leader_epoch,
                            assignment,
                            self.inner.node_id,
                            min_isr,
                            now_ms,
                        ));
                        p.set_role(&guard, Role::Leader(state.clone()));
                        state.maybe_advance_high_watermark();
                        led.push((partition, leader_epoch));
                    }
                    RoleChange::BecomeFollower {
                        leader,
                        leader_epoch,
                    } => {
                        p.set_role(
                            &guard,
                            Role::Follower {
                                leader,
                                leader_epoch,
                            },
                        );
                        tracing::debug!(%topic, partition, leader, leader_epoch, "following");
                    }
                    RoleChange::UpdateAssignment => p.set_assignment(assignment),
                    RoleChange::Stop => {}
                }
            }
            table.partitions.insert(partition, slot);
        }
        log_leaderships(topic, &led);
        self.delete_logs(topic, stopped).await;
        self.inner.creator.enqueue(to_create);
        table.topic_id = topic_id;
        if table.partitions.is_empty() {
            self.inner.topics.remove(topic);
        } else {
            self.inner.topics.insert(name, Arc::new(table));
        }
    }

    /// The log of `topic`-`partition`: the open one, or a new one with the topic's
    /// resolved config, registered without I/O (its files are created in the background,
    /// or by the first use): the one place a replica's log is obtained.
    /// `config` caches the topic's resolved log config: resolving it was most of the
    /// cost of a new partition.
    fn replica_log(
        &self,
        broker: &BrokerConfig,
        overrides: &TopicOverrides,
        config: &mut Option<brook_storage::LogConfig>,
        topic: &str,
        partition: i32,
    ) -> Result<LogHandle, BrokerError> {
        if let Some(log) = self.inner.logs.get(topic, partition) {
            return Ok(log);
        }
        let config = match config {
            Some(config) => config.clone(),
            None => config
                .insert(log_config(&TopicConfig::resolve(broker, overrides)?))
                .clone(),
        };
        Ok(self.inner.logs.get_or_register(topic, partition, config)?)
    }

    /// Holds the background creation of new logs (requests still create the ones they
    /// need) until `release_log_creation`: at start, until the broker serves.
    pub fn hold_log_creation(&self) {
        self.inner.creator.hold();
    }

    /// Creates the logs queued while held, and the later ones as they come.
    pub fn release_log_creation(&self) {
        self.inner.creator.release();
    }

    /// Abandons the background creation of new logs (a clean stop begins: the logs not
    /// created yet are registered again by the next start).
    pub fn stop_log_creation(&self) {
        self.inner.creator.stop();
    }

    /// How many new logs wait for their background creation.
    pub fn logs_to_create(&self) -> usize {
        self.inner.creator.pending()
    }

    /// The log of a partition if it is open (no creation).
    pub fn existing(&self, topic: &str, partition: i32) -> Option<LogHandle> {
        self.inner.logs.get(topic, partition)
    }

    /// Deletes the local logs of `topic` (all partitions).
    pub async fn delete_topic(&self, topic: &str) {
        self.inner.topics.remove(topic);
        let victims: Vec<i32> = self
            .inner
            .logs
            .logs()
            .into_iter()
            .filter(|log| log.topic() == topic)
            .map(|log| log.partition())
            .collect();
        self.delete_logs(topic, victims).await;
    }

    /// Deletes the local logs of `partitions` of `topic`, on a blocking thread, as one
    /// batch (one checkpoint rewrite for all: `LogManager::delete_logs`).
    async fn delete_logs(&self, topic: &str, partitions: Vec<i32>) {
        if partitions.is_empty() {
            return;
        }
        let logs = self.inner.logs.clone();
        let t = topic.to_string();
        let asked = partitions.len();
        let deleted = tokio::task::spawn_blocking(move || {
            logs.delete_logs(partitions.iter().map(|&p| (t.as_str(), p)))
        })
        .await;
        match deleted {
            Ok(Ok(0)) => {}
            Ok(Ok(deleted)) => info!(%topic, deleted, asked, "logs deleted"),
            Ok(Err(e)) => warn!(%topic, asked, error = %e, "log deletion failed"),
            Err(e) => warn!(%topic, error = %e, "log deletion task failed"),
        }
    }

    /// Brings local logs in line with the image: logs of topics (or partitions) that no
    /// longer exist are deleted, open logs get their topic's current config.
    pub async fn reconcile(&self, broker: &BrokerConfig, image: &MetadataImage, node_id: i32) {
        // Resolved once per topic, not per partition: 100,000 partitions of 100 topics
        // are 100 resolutions (a log whose config is unchanged costs a comparison).
        let mut resolved: HashMap<String, Option<TopicConfig>> = HashMap::new();
        // Logs this broker no longer holds, deleted a topic at a time after the scan.
        let mut victims: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for log in self.inner.logs.logs() {
            let topic = log.topic().to_string();
            let partition = log.partition();
            let Some(topic_image) = image.topic(&topic) else {
                victims.entry(topic).or_default().push(partition);
                continue;
            };
            match topic_image.partitions.get(&partition) {
                Some(p) if p.replicas.contains(&node_id) => {}
                _ => {
                    victims.entry(topic).or_default().push(partition);
                    continue;
                }
            }
            let config = match resolved.get(&topic) {
                Some(config) => config,
                None => {
                    let config = TopicConfig::resolve(broker, &topic_image.configs)
                        .inspect_err(|e| warn!(%topic, error = %e, "topic config does not resolve"))
                        .ok();
                    resolved.entry(topic.clone()).or_insert(config)
                }
            };
            let Some(config) = config else { continue };
            let state = self
                .get(&topic, partition)
                .and_then(Result::ok)
                .and_then(|p| p.leader_state());
            if let Some(state) = state {
                state.set_min_isr(config.min_insync_replicas);
            }
            match log.set_config(log_config(config)).await {
                // Deleted, or closed by a shutdown, since the list was taken; or in a failed
                // log directory, logged once when it failed (not once per partition and image).
                Ok(()) | Err(StorageError::LogDeleted { .. } | StorageError::LogOffline { .. }) => {
                }
                Err(e) => warn!(%topic, partition, error = %e, "applying topic config failed"),
            }
        }
        for (topic, partitions) in victims {
            self.delete_logs(&topic, partitions).await;
        }
    }

    /// Persists every log directory's log start offsets (after retention or
    /// DeleteRecords moved one), on a blocking thread.
    pub async fn checkpoint_log_start_offsets(&self) -> Result<(), BrokerError> {
        self.checkpoint_blocking(LogManager::checkpoint_log_start_offsets)
            .await
    }

    /// Persists every log's high watermark (`replication-offset-checkpoint`).
    pub async fn checkpoint_high_watermarks(&self) -> Result<(), BrokerError> {
        self.checkpoint_blocking(LogManager::checkpoint_high_watermarks)
            .await
    }

    /// Persists every log's recovery point (`recovery-point-offset-checkpoint`, with a
    /// producer snapshot for each log whose point moved), on a blocking thread.
    pub async fn checkpoint_recovery_points(&self) -> Result<(), BrokerError> {
        self.checkpoint_blocking(LogManager::checkpoint_recovery_points)
            .await
    }

    /// Runs one of the log manager's checkpoint writers (file I/O) on a blocking thread.
    async fn checkpoint_blocking(
        &self,
        write: fn(&LogManager) -> brook_storage::Result<()>,
    ) -> Result<(), BrokerError> {
        let logs = self.inner.logs.clone();
        tokio::task::spawn_blocking(move || write(&logs))
            .await
            .map_err(|e| BrokerError::InvalidRequest(format!("checkpoint task failed: {e}")))??;
        Ok(())
    }

    /// Which log directories failed while running (watched by `log_dir_task`).
    pub fn log_dir_failures(&self) -> Arc<brook_storage::log_dir_failure::LogDirFailures> {
        Arc::clone(self.inner.logs.log_dir_failures())
    }

    /// This broker's partitions whose log is offline (its directory failed, or it failed
    /// to open), for the controller (`cluster::offline_replicas`).
    pub fn offline_logs(&self) -> Vec<(String, i32)> {
        self.inner
            .logs
            .offline_logs()
            .into_iter()
            .map(|(key, _)| key)
            .collect()
    }

    /// Starts moving the partition's log into `target` (one of `log.dirs`) on a blocking
    /// thread (AlterReplicaLogDirs); a move already under way, or a log already there, is
    /// left alone. Failures are logged (and fail a directory if they should) by storage.
    pub fn move_log(&self, topic: &str, partition: i32, target: PathBuf) {
        let logs = Arc::clone(&self.inner.logs);
        let topic = topic.to_string();
        tokio::task::spawn_blocking(move || logs.move_log(&topic, partition, &target));
    }

    /// The log directory the partition's log is being moved into, if it is (DescribeLogDirs
    /// lists it there as a future replica).
    pub fn future_log_dir(&self, topic: &str, partition: i32) -> Option<PathBuf> {
        self.inner.logs.future_dir(topic, partition)
    }

    /// Every open log, for metrics and shutdown.
    pub fn logs(&self) -> Vec<LogHandle> {
        self.inner.logs.logs()
    }

    /// Flushes and closes every log (clean shutdown).
    /// Flushes and closes every log; `true` when all of it succeeded (a clean shutdown).
    /// Logs not created yet are abandoned: the next start registers them again.
    pub async fn shutdown(&self) -> bool {
        self.inner.creator.stop();
        let logs = self.inner.logs.clone();
        match tokio::task::spawn_blocking(move || logs.shutdown()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                warn!(error = %e, "flushing logs at shutdown failed");
                false
            }
            Err(e) => {
                warn!(error = %e, "shutdown task failed");
                false
            }
        }
    }
}

fn unknown(topic: &str, partition: i32) -> BrokerError {
    BrokerError::UnknownTopicOrPartition {
        topic: topic.to_string(),
        partition,
    }
}

/// An offline partition's answer: KAFKA_STORAGE_ERROR.
fn offline(topic: &str, partition: i32, reason: &str) -> BrokerError {
    BrokerError::Storage(StorageError::Io {
        context: "the log of this partition could not be opened",
        path: format!("{topic}-{partition}").into(),
        source: std::io::Error::other(reason.to_string()),
    })
}

#[cfg(test)]
mod tests;

/// Partitions of one topic listed one by one in a "became leader" line; more are counted
/// in one line (a start leading 100,000 partitions would log 100,000 lines).
const LEADERSHIPS_LISTED: usize = 16;

fn log_leaderships(topic: &str, led: &[(i32, i32)]) {
    if led.len() <= LEADERSHIPS_LISTED {
        for &(partition, leader_epoch) in led {
            info!(%topic, partition, leader_epoch, "became leader");
        }
    } else {
        let epochs = led.iter().map(|&(_, e)| e);
        let (low, high) = (epochs.clone().min(), epochs.max());
        info!(%topic, partitions = led.len(), leader_epoch_min = low, leader_epoch_max = high, "became leader");
    }
}
