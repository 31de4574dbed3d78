//! The classic group coordinator: every group lives on this broker (it answers
//! FindCoordinator for all of them). Group state sits behind one `parking_lot::Mutex`
//! never held across `.await`; JoinGroup/SyncGroup park on oneshot receivers with a
//! deadline. One owned background task ticks the timers (session expiry, rebalance
//! deadlines) and another writes changed group metadata to the offset store in order,
//! coalescing repeated changes of one group. Both stop when the coordinator is dropped.
//!
//! Persistence goes through `__consumer_offsets` (see `offsets_log`): a commit, a group's
//! metadata and their tombstones are appended to the group's partition in Kafka's record
//! format, fsynced, then applied to the RocksDB offset store, which is what start-up
//! reads groups back from (after replaying the log tail it had not applied). Committed
//! offsets are also cached in memory for OffsetFetch. Until `__consumer_offsets` exists
//! (it is created by the first FindCoordinator of a group, as in Kafka), and in unit
//! tests without logs, changes go straight to the store with synced writes.
//! A third task expires offsets (`offsets.retention.minutes`, see `retention`).
//! Transactional offset commits (TxnOffsetCommit) are appended the same way but as
//! transactional batches and stay pending until their transaction's marker (`txn_hook`,
//! `txn_offsets`).
//! While a group's partition is loading here (`loading`) and the group is not in memory,
//! its requests answer COORDINATOR_LOAD_IN_PROGRESS as Kafka's runtime does (`serves`);
//! a classic Heartbeat is answered without an error then, as Kafka's is; ListGroups
//! answers it while any partition led here loads (`refuse_listing_while_loading`).

mod classic_in_consumer;
mod consumer_persist;
mod lifecycle;
mod loading;
mod migration;
mod offsets;
pub mod offsets_log;
#[cfg(test)]
mod persist_tests;
mod protocol;
pub mod records;
pub mod replay;
mod retention;
mod snapshot;
mod state;
#[cfg(test)]
mod tests;
mod txn_hook;
mod txn_offsets;
#[cfg(test)]
mod txn_tests;
mod types;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brook_storage::offsets::{CommittedOffset, OffsetRecord, OffsetStore};
use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::coordinator::consumer_group::{
    Caller, ConsumerGroupConfig, ConsumerGroups, HeartbeatReply, HeartbeatRequest, TopicsView,
};
use crate::error::BrokerError;
use migration::AfterDowngrade;
use offsets_log::OffsetsLog;
use txn_offsets::TxnOffsets;

pub use lifecycle::SyncRequest;
pub use offsets::{Committer, GroupDescription, MemberDescription};
pub use offsets_log::TxnProducer;
pub use state::Group;
pub use txn_hook::TxnCommitter;
pub use types::{
    GroupError, GroupState, JoinReply, JoinRequest, JoinResult, SyncReply, SyncResult,
};

/// How often the timer task looks at session and rebalance deadlines.
const TICK: Duration = Duration::from_millis(100);
/// Extra wait beyond a member's own timeout before a parked request gives up.
const PARK_SLACK: Duration = Duration::from_secs(5);

/// The coordinator's limits from the broker config.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub initial_rebalance_delay: Duration,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes` (or Brook's `brook.offsets.retention.ms`), in ms.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_interval: Duration,
}

type OffsetMap = BTreeMap<(String, i32), CommittedOffset>;

pub(crate) struct Shared {
    config: GroupConfig,
    store: OffsetStore,
    /// `None` in unit tests: changes then go straight to the store.
    log: Option<OffsetsLog>,
    groups: Mutex<HashMap<String, Group>>,
    offsets: Mutex<HashMap<String, OffsetMap>>,
    /// Transactional offset commits waiting for their markers (see `txn_offsets`).
    txns: Mutex<TxnOffsets>,
    /// Group metadata waiting for the writer: `None` = delete.
    pending_writes: Mutex<HashMap<String, Option<Vec<u8>>>>,
    write_wanted: Notify,
    /// KIP-848 consumer groups; a group id is either classic (`groups`) or here.
    consumer: ConsumerGroups,
    /// Unit tests: how many reads of loaded partitions' groups fail (`loading.rs`).
    #[cfg(test)]
    failing_reads: std::sync::atomic::AtomicUsize,
}

pub struct GroupCoordinator {
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

impl Drop for GroupCoordinator {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl GroupCoordinator {
    /// Opens the offset store at `dir`, replays the `__consumer_offsets` logs on disk into
    /// it, reloads groups and offsets, starts the tasks.
    pub async fn start(
        dir: std::path::PathBuf,
        config: GroupConfig,
        log: Option<OffsetsLog>,
    ) -> Result<Self, BrokerError> {
        let store = OffsetStore::open_async(dir).await?;
        let mut txns = TxnOffsets::default();
        if let Some(log) = &log {
            for partition_log in log.logs_on_disk() {
                let replayed = replay::replay(&store, &partition_log).await?;
                txns.load_partition(partition_log.partition(), replayed.open, replayed.processed);
            }
        }
        let stored = loading::read_groups(&store, |_| true).await?;
        let (mut groups, offsets) = (stored.classic, stored.offsets);
        let consumer = ConsumerGroups::default();
        let now = Instant::now();
        for (group_id, records) in stored.consumer {
            consumer.load(&group_id, records, now);
        }
        loading::add_groups_with_pending_offsets(&mut groups, &txns, &consumer);
        let shared = Arc::new(Shared {
            config,
            store,
            log,
            groups: Mutex::new(groups),
            offsets: Mutex::new(offsets),
            txns: Mutex::new(txns),
            pending_writes: Mutex::new(HashMap::new()),
            write_wanted: Notify::new(),
            consumer,
            #[cfg(test)]
            failing_reads: Default::default(),
        });
        let shutdown = CancellationToken::new();
        tokio::spawn(tick_loop(Arc::clone(&shared), shutdown.clone()));
        tokio::spawn(write_loop(Arc::clone(&shared), shutdown.clone()));
        tokio::spawn(retention::run(Arc::clone(&shared), shutdown.clone()));
        Ok(GroupCoordinator { shared, shutdown })
    }

    pub fn config(&self) -> &GroupConfig {
        &self.shared.config
    }

    /// NOT_COORDINATOR unless this broker leads the group's `__consumer_offsets`
    /// partition (COORDINATOR_NOT_AVAILABLE while nobody does).
    pub fn coordinates(&self, group_id: &str) -> Result<(), GroupError> {
        match &self.shared.log {
            Some(log) => log.coordinates(group_id),
            None => Ok(()),
        }
    }

    /// `coordinates`, then COORDINATOR_LOAD_IN_PROGRESS while the group's partition is
    /// still loading here and the group is not in memory: it may be stored, not read
    /// back yet (Kafka's runtime refuses every operation on a partition it is loading;
    /// see `Shared::refuse_while_loading`).
    pub fn serves(&self, group_id: &str) -> Result<(), GroupError> {
        self.coordinates(group_id)?;
        self.shared.refuse_while_loading(group_id)
    }

    /// Runs `f` on the group (if it exists) under the lock, then queues its metadata
    /// for the writer if `f` changed it.
    pub fn with_group<T>(&self, group_id: &str, f: impl FnOnce(Option<&mut Group>) -> T) -> T {
        let mut groups = self.shared.groups.lock();
        let group = groups.get_mut(group_id);
        let result = f(group);
        if let Some(g) = groups.get_mut(group_id) {
            self.shared.queue_if_dirty(g);
        }
        result
    }

    /// JoinGroup: validates, then joins (creating the group for a new member) and waits.
    pub async fn join(&self, group_id: &str, req: JoinRequest) -> Result<JoinOutcome, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        self.coordinates(group_id)?;
        let cfg = &self.shared.config;
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return Err(GroupError::InvalidSessionTimeout(req.session_timeout_ms));
        }
        self.shared.refuse_while_loading(group_id)?;
        let wait = Duration::from_millis(state::millis(req.rebalance_timeout_ms))
            .max(cfg.initial_rebalance_delay)
            + PARK_SLACK;
        // A consumer group with members takes the classic member in (KIP-848 migration);
        // an empty one gives way, its records deleted first.
        if self.shared.consumer.has_members(group_id) {
            return self.join_consumer_group(group_id, req).await;
        }
        let replaced = self.shared.consumer.remove_if_empty(group_id);
        self.shared
            .write_removed_consumer_group(group_id, replaced)
            .await?;
        let reply = {
            let mut groups = self.shared.groups.lock();
            if self.shared.consumer.has_members(group_id) {
                return Err(GroupError::InconsistentGroupProtocol);
            }
            if !groups.contains_key(group_id) {
                if !req.member_id.is_empty() {
                    return Err(GroupError::UnknownMemberId);
                }
                groups.insert(group_id.to_owned(), Group::new(group_id));
            }
            let Some(group) = groups.get_mut(group_id) else {
                return Err(GroupError::CoordinatorNotAvailable);
            };
            let reply = group.join(req, Instant::now(), cfg.initial_rebalance_delay);
            self.shared.queue_if_dirty(group);
            reply
        };
        match reply {
            JoinReply::Done(result) => result.map(JoinOutcome::Joined),
            JoinReply::MemberIdRequired(id) => Ok(JoinOutcome::MemberIdRequired(id)),
            JoinReply::Wait(rx) => parked(rx, wait).await.map(JoinOutcome::Joined),
        }
    }

    /// SyncGroup: hands out the leader's assignment, waiting for the leader if needed.
    pub async fn sync(&self, group_id: &str, req: SyncRequest) -> Result<SyncResult, GroupError> {
        self.serves(group_id)?;
        if let Some(result) = self.sync_in_consumer_group(group_id, &req) {
            return result;
        }
        let reply = self.with_group(group_id, |g| match g {
            Some(g) => g.sync(req, Instant::now()),
            None => SyncReply::Done(Err(GroupError::UnknownMemberId)),
        });
        match reply {
            SyncReply::Done(result) => result,
            SyncReply::Wait(rx) => {
                let max_rebalance = self.with_group(group_id, |g| {
                    g.map(|g| {
                        g.members
                            .values()
                            .map(|m| state::millis(m.rebalance_timeout_ms))
                            .max()
                            .unwrap_or(0)
                    })
                    .unwrap_or(0)
                });
                parked(rx, Duration::from_millis(max_rebalance) + PARK_SLACK).await
            }
        }
    }

    /// Heartbeat: answered without an error while the group's partition is loading and
    /// the group not in memory yet, as Kafka does (the member is not told to rejoin for a
    /// group it cannot see yet).
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        self.coordinates(group_id)?;
        if self.shared.refuse_while_loading(group_id).is_err() {
            return Ok(());
        }
        if let Some(result) =
            self.heartbeat_in_consumer_group(group_id, member_id, instance_id, generation_id)
        {
            return result;
        }
        self.with_group(group_id, |g| match g {
            Some(g) => g.heartbeat(member_id, instance_id, generation_id, Instant::now()),
            None => Err(GroupError::UnknownMemberId),
        })
    }

    /// LeaveGroup for each (member id, instance id); one result per member, or an error
    /// for the whole request (not the coordinator, the partition loading), as Kafka
    /// answers those.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.serves(group_id)?;
        if let Some(results) = self.leave_consumer_group(group_id, members) {
            return Ok(results);
        }
        Ok(self.with_group(group_id, |g| match g {
            Some(g) => members
                .iter()
                .map(|(m, i)| g.leave(m, i.as_deref(), Instant::now()))
                .collect(),
            None => members
                .iter()
                .map(|_| Err(GroupError::UnknownMemberId))
                .collect(),
        }))
    }

    /// The KIP-848 consumer groups.
    pub fn consumer_groups(&self) -> &ConsumerGroups {
        &self.shared.consumer
    }

    /// Topics were created or deleted: consumer groups subscribed by pattern follow (see
    /// `ConsumerGroups::topics_changed`), and the groups that changed are written.
    pub fn consumer_topics_changed(&self, view: &TopicsView<'_>) {
        for group_id in self.shared.consumer.topics_changed(view) {
            let shared = Arc::clone(&self.shared);
            tokio::spawn(async move {
                // A failure is logged and the records are written with the next change.
                let _ = shared.flush_consumer_group(&group_id).await;
            });
        }
    }

    /// ConsumerGroupHeartbeat: a join (epoch 0) replaces an empty classic group of that id
    /// (as Kafka does), and converts a classic group with members online into a consumer
    /// group when `group.consumer.migration.policy` allows an upgrade, refused with Kafka
    /// 4.4's error otherwise (see `migration`); any other epoch for a classic group, or a
    /// group there is none of, is GROUP_ID_NOT_FOUND, except while the group's partition
    /// is loading (COORDINATOR_LOAD_IN_PROGRESS: the group may be stored). A leave that
    /// leaves classic members only converts the group back when the policy allows a
    /// downgrade. The group's changes are written before the answer (see
    /// `consumer_persist`).
    pub async fn consumer_heartbeat(
        &self,
        group_id: &str,
        req: &HeartbeatRequest,
        caller: &Caller,
        view: &TopicsView<'_>,
        config: &ConsumerGroupConfig,
    ) -> Result<HeartbeatReply, GroupError> {
        self.coordinates(group_id)?;
        let reply = self.consumer_heartbeat_in_memory(group_id, req, caller, view, config);
        // A member that left may leave classic members only: back to a classic group.
        if reply.is_ok() && req.member_epoch < 0 {
            self.shared
                .downgrade_if_classic_only(group_id, AfterDowngrade::Rebalance)
                .await?;
        }
        // Written even when the heartbeat failed: a fenced member's removal is a change.
        self.shared.flush_consumer_group(group_id).await?;
        reply
    }

    fn consumer_heartbeat_in_memory(
        &self,
        group_id: &str,
        req: &HeartbeatRequest,
        caller: &Caller,
        view: &TopicsView<'_>,
        config: &ConsumerGroupConfig,
    ) -> Result<HeartbeatReply, GroupError> {
        // Asked before the lock: the runtime takes its own lock, then this one, to unload.
        let loading = self.shared.loading(group_id);
        let mut groups = self.shared.groups.lock();
        let classic = groups
            .get(group_id)
            .is_some_and(|g| g.state != GroupState::Dead);
        // Only a join may take a classic group's id over; any other heartbeat is refused,
        // an empty classic group (one with only committed offsets) included, as Kafka does.
        if classic && req.member_epoch != 0 {
            return Err(GroupError::WrongGroupType(format!(
                "Group {group_id} is not a consumer group."
            )));
        }
        // Not in memory while the partition loads: it may be among the stored groups.
        if !classic && loading && !self.shared.consumer.exists(group_id) {
            return Err(GroupError::CoordinatorLoadInProgress);
        }
        if let Some(classic) = groups.get(group_id).filter(|_| req.member_epoch == 0) {
            if classic.state != GroupState::Empty && classic.state != GroupState::Dead {
                if !config.migration_policy.upgrade_enabled() {
                    return Err(migration::refused(group_id, "online upgrade is disabled"));
                }
                let converted = migration::upgrade(
                    classic,
                    view.topics,
                    config.consumer_max_size,
                    Instant::now(),
                )?;
                info!(group = %group_id, epoch = converted.group_epoch, members = converted.members.len(),
                    "converted the classic group to a consumer group");
                self.shared.consumer.insert_converted(converted);
            }
            if let Some(mut old) = groups.remove(group_id) {
                // Kafka completes the classic group's parked requests so they rejoin.
                for m in old.members.values_mut() {
                    if let Some(w) = m.join_waiter.take() {
                        let _ = w.send(Err(GroupError::RebalanceInProgress));
                    }
                    if let Some(w) = m.sync_waiter.take() {
                        let _ = w.send(Err(GroupError::RebalanceInProgress));
                    }
                }
            }
            self.shared
                .pending_writes
                .lock()
                .insert(group_id.to_owned(), None);
            self.shared.write_wanted.notify_one();
        }
        self.shared
            .consumer
            .heartbeat(group_id, req, caller, view, config, Instant::now())
    }

    /// ListGroups: COORDINATOR_LOAD_IN_PROGRESS while any `__consumer_offsets` partition
    /// led here is loading (`OffsetsLog::any_loading`), for the whole request: Kafka's
    /// `GroupCoordinatorService.listGroups` fails the listing when one of its shards is
    /// loading, and lists none of the loaded shards' groups then.
    pub fn refuse_listing_while_loading(&self) -> Result<(), GroupError> {
        match &self.shared.log {
            Some(log) if log.any_loading() => Err(GroupError::CoordinatorLoadInProgress),
            _ => Ok(()),
        }
    }

    /// (group id, protocol type, state) of every group this broker coordinates.
    pub fn list(&self) -> Vec<(String, String, GroupState)> {
        let groups = self.shared.groups.lock();
        let mut out: Vec<_> = groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .filter(|g| self.coordinates(&g.group_id).is_ok())
            .map(|g| {
                let protocol_type = g.protocol_type.clone().unwrap_or_default();
                (g.group_id.clone(), protocol_type, g.state)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// DeleteGroups for one group: only an Empty group goes, with its offsets.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        self.serves(group_id)?;
        // Held from the consumer group's removal to its tombstones' write, so no write of
        // a group of the same id created meanwhile can land before them.
        let partition = self.shared.offsets_partition(group_id);
        let _ordered = self.shared.write_order(partition).await;
        let mut tombstones;
        let mut consumer_tombstones = Vec::new();
        {
            let mut groups = self.shared.groups.lock();
            match groups.get(group_id).map(|g| g.state) {
                // A consumer group (KIP-848) goes the same way: its offsets with it.
                None => match self.shared.consumer.delete_if_empty(group_id) {
                    None => return Err(GroupError::GroupIdNotFound),
                    Some(result) => consumer_tombstones = result?,
                },
                Some(GroupState::Dead) => return Err(GroupError::GroupIdNotFound),
                Some(GroupState::Empty) => {}
                Some(_) => return Err(GroupError::NonEmptyGroup),
            }
            groups.remove(group_id);
            let mut partitions: std::collections::BTreeSet<(String, i32)> = self
                .shared
                .offsets
                .lock()
                .remove(group_id)
                .unwrap_or_default()
                .into_keys()
                .collect();
            // Kafka writes a tombstone per committed offset and one for the metadata; and
            // one per partition with pending transactional offsets, which the tombstone
            // removes from their transactions (a later COMMIT must not resurrect them).
            partitions.extend(self.shared.txns.lock().pending_of_group(group_id));
            tombstones = partitions
                .into_iter()
                .map(|(topic, partition)| OffsetRecord::DeleteOffset {
                    group: group_id.to_owned(),
                    topic,
                    partition,
                })
                .collect::<Vec<_>>();
            tombstones.push(OffsetRecord::DeleteGroup {
                group: group_id.to_owned(),
            });
            tombstones.extend(consumer_persist::offset_records(
                group_id,
                &consumer_tombstones,
            ));
            // Overrides metadata still queued, so the writer cannot bring the group back.
            self.shared
                .pending_writes
                .lock()
                .insert(group_id.to_owned(), None);
        }
        self.shared.write_wanted.notify_one();
        if let Err(e) = self.shared.persist_in_order(partition, tombstones).await {
            error!(group = %group_id, error = %e, "deleting group from the offset store failed");
            return Err(GroupError::CoordinatorNotAvailable);
        }
        Ok(())
    }
}

/// What a JoinGroup call ends in when it does not fail.
#[derive(Debug)]
pub enum JoinOutcome {
    Joined(JoinResult),
    MemberIdRequired(String),
}

async fn parked<T>(
    rx: oneshot::Receiver<Result<T, GroupError>>,
    wait: Duration,
) -> Result<T, GroupError> {
    match tokio::time::timeout(wait, rx).await {
        Ok(Ok(result)) => result,
        // The group went away (deleted) while the request was parked.
        Ok(Err(_)) => Err(GroupError::CoordinatorNotAvailable),
        Err(_) => Err(GroupError::RebalanceInProgress),
    }
}

impl Shared {
    fn queue_if_dirty(&self, group: &mut Group) {
        observe_state(group, brook_storage::log_manager::now_ms());
        if !group.dirty {
            return;
        }
        group.dirty = false;
        match snapshot::encode(group) {
            Ok(bytes) => {
                self.pending_writes
                    .lock()
                    .insert(group.group_id.clone(), Some(bytes));
                self.write_wanted.notify_one();
            }
            Err(e) => error!(group = %group.group_id, error = %e, "encoding group metadata failed"),
        }
    }
}

/// Keeps `empty_since_ms` (the current-state timestamp offsets retention counts from):
/// set when the group is Empty, cleared when it has members. A group that had members
/// is written again when it becomes empty, so the timestamp survives a restart.
fn observe_state(group: &mut Group, now_ms: i64) {
    match (group.state, group.empty_since_ms) {
        (GroupState::Empty, None) => {
            group.empty_since_ms = Some(now_ms);
            if group.generation_id > 0 {
                group.dirty = true;
            }
        }
        (GroupState::Empty, Some(_)) => {}
        (_, Some(_)) => group.empty_since_ms = None,
        (_, None) => {}
    }
}

async fn tick_loop(shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        let now = Instant::now();
        let mut groups = shared.groups.lock();
        for group in groups.values_mut() {
            group.tick(now);
            shared.queue_if_dirty(group);
        }
        drop(groups);
        for group_id in shared.consumer.tick(now) {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                // A failure is logged and the records are written with the next change.
                let _ = shared
                    .downgrade_if_classic_only(&group_id, AfterDowngrade::Rebalance)
                    .await;
                let _ = shared.flush_consumer_group(&group_id).await;
            });
        }
    }
}

/// Writes queued group metadata one batch at a time, so writes of one group stay in order.
async fn write_loop(shared: Arc<Shared>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = shared.write_wanted.notified() => {}
        }
        let batch: Vec<(String, Option<Vec<u8>>)> = shared.pending_writes.lock().drain().collect();
        if batch.is_empty() {
            continue;
        }
        let records = batch
            .into_iter()
            .map(|(group, metadata)| match metadata {
                Some(metadata) => OffsetRecord::PutGroup { group, metadata },
                None => OffsetRecord::DeleteGroup { group },
            })
            .collect();
        if let Err(e) = shared.persist(records).await {
            warn!(error = %e, "writing group metadata failed; it is rewritten on the next change");
        }
    }
}
