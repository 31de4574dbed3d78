//! Loading and unloading groups as this broker gains and loses the leadership of
//! `__consumer_offsets` partitions (Kafka's `GroupMetadataManager.loadGroupsForPartition`
//! / `removeGroupsForPartition`), on the coordinator runtime (`coordinator::runtime`): a
//! new leader replays the partition's log into the offset store (the store is the
//! shard's state: a cache of the log), then reads the partition's groups and commits back
//! into memory; a broker that
//! stops leading a partition drops its groups from memory (their members rejoin at the
//! new coordinator; nothing is deleted from disk). The replay also rebuilds the
//! partition's open transactions (pending transactional offsets, see `txn_offsets`);
//! unloading forgets them.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use brook_protocol::kafka_protocol::records::Record;
use brook_raft::MetadataImage;
use brook_storage::offsets::OffsetStore;
use brook_storage::LogHandle;
use tracing::{error, info};

use super::records::{partition_for, OFFSETS_TOPIC};
use super::replay::StoreReplay;
use super::txn_offsets::TxnOffsets;
use super::{snapshot, Group, GroupCoordinator, OffsetMap, Shared};
use crate::coordinator::consumer_group::image::StoredRecords;
use crate::coordinator::consumer_group::ConsumerGroups;
use crate::coordinator::runtime::CoordinatorShards;
use crate::error::BrokerError;

/// What `read_groups` found.
pub(super) struct StoredGroups {
    /// Classic groups (and groups with only committed offsets).
    pub classic: HashMap<String, Group>,
    pub offsets: HashMap<String, OffsetMap>,
    /// KIP-848 consumer groups: their records (key, value).
    pub consumer: Vec<(String, StoredRecords)>,
}

/// Groups and their commits read from `store`, for the group ids `wanted` accepts. A
/// group with consumer-group records is a consumer group, not also a classic one.
pub(super) async fn read_groups(
    store: &OffsetStore,
    wanted: impl Fn(&str) -> bool + Send + 'static,
) -> Result<StoredGroups, BrokerError> {
    let loaded = store
        .run_blocking(move |s| {
            let mut out = Vec::new();
            for group in s.list_groups()? {
                if !wanted(&group) {
                    continue;
                }
                let metadata = s.get_group(&group)?;
                let records = s.group_records(&group)?;
                let offsets = s.fetch(&group)?;
                out.push((group, metadata, records, offsets));
            }
            Ok(out)
        })
        .await?;
    let now = Instant::now();
    let mut stored = StoredGroups {
        classic: HashMap::new(),
        offsets: HashMap::new(),
        consumer: Vec::new(),
    };
    for (group_id, metadata, records, committed) in loaded {
        let map: OffsetMap = committed.into_iter().map(|(t, p, c)| ((t, p), c)).collect();
        stored.offsets.insert(group_id.clone(), map);
        if !records.is_empty() {
            if metadata.is_some() {
                error!(group = %group_id, "stored as both a classic and a consumer group; loaded as the consumer group");
            }
            stored.consumer.push((group_id, records));
            continue;
        }
        let group = match metadata.map(|m| snapshot::decode(&group_id, &m, now)) {
            Some(Ok(g)) => g,
            Some(Err(e)) => {
                error!(group = %group_id, error = %e, "stored group metadata unreadable; group starts empty");
                Group::new(&group_id)
            }
            None => Group::new(&group_id),
        };
        stored.classic.insert(group_id, group);
    }
    Ok(stored)
}

/// A group that only has pending transactional offsets (a TxnOffsetCommit from outside
/// the group created it, as Kafka's simple groups) has nothing in the store yet: it is
/// created Empty so it is listed and kept (`add_offsets_only_group`; `consumer` must hold
/// the loaded consumer groups already).
pub(super) fn add_groups_with_pending_offsets(
    groups: &mut HashMap<String, Group>,
    txns: &TxnOffsets,
    consumer: &ConsumerGroups,
) {
    for group_id in txns.groups() {
        add_offsets_only_group(groups, consumer, &group_id);
    }
}

/// The Empty classic group that offsets committed from outside any group make, as Kafka's
/// replay of the record makes it; only when no group of that id exists: a consumer group's
/// (KIP-848) offsets are its own, and a classic entry beside it would take its id.
pub(super) fn add_offsets_only_group(
    groups: &mut HashMap<String, Group>,
    consumer: &ConsumerGroups,
    group_id: &str,
) {
    if !groups.contains_key(group_id) && !consumer.exists(group_id) {
        groups.insert(group_id.to_string(), Group::new(group_id));
    }
}

/// A `__consumer_offsets` partition being loaded: its log replayed into the store, in the
/// partition's write order (held from the start of the replay to the hand-over).
pub(crate) struct GroupShard {
    replay: StoreReplay,
    _ordered: tokio::sync::OwnedMutexGuard<()>,
}

impl CoordinatorShards for Shared {
    type Shard = GroupShard;

    async fn begin_load(&self, log: &LogHandle) -> Result<(GroupShard, i64), BrokerError> {
        let offsets_log = self
            .log
            .as_ref()
            .ok_or_else(|| BrokerError::ServerFault("no offsets log to load from".into()))?;
        // In write order with appends and transaction completions of the partition.
        let ordered = offsets_log.lock_partition(log.partition()).await;
        let (replay, from) = StoreReplay::start(&self.store, log).await?;
        Ok((
            GroupShard {
                replay,
                _ordered: ordered,
            },
            from,
        ))
    }

    async fn replay(
        &self,
        shard: &mut GroupShard,
        records: Vec<Record>,
        next: i64,
    ) -> Result<(), BrokerError> {
        shard.replay.apply(&self.store, records, next).await
    }

    fn loaded(&self, partition: i32, _epoch: i32, _count: i32, shard: GroupShard) {
        // Its groups are read into memory after this (`read_into_memory`).
        if let Some(log) = &self.log {
            log.unread.lock().insert(partition);
        }
        let replayed = shard.replay.finish();
        self.txns
            .lock()
            .load_partition(partition, replayed.open, replayed.processed);
    }

    /// Forgets the partitions' groups (parked joins and syncs end with
    /// COORDINATOR_NOT_AVAILABLE and the members find the new coordinator).
    fn unload(&self, partitions: &BTreeSet<i32>, count: i32) {
        let owned = |g: &str| partitions.contains(&partition_for(g, count));
        let removed = {
            let mut groups = self.groups.lock();
            let before = groups.len();
            groups.retain(|id, _| !owned(id));
            before - groups.len()
        } + self.consumer.unload(owned);
        self.offsets.lock().retain(|id, _| !owned(id));
        if let Some(log) = &self.log {
            log.unread.lock().retain(|p| !partitions.contains(p));
        }
        {
            let mut txns = self.txns.lock();
            for &partition in partitions {
                txns.unload_partition(partition);
            }
        }
        if removed > 0 {
            info!(topic = OFFSETS_TOPIC, partitions = ?partitions, groups = removed, "unloaded groups of partitions led elsewhere");
        }
    }
}

impl GroupCoordinator {
    /// Follows `image` on the coordinator runtime: the `__consumer_offsets` partitions
    /// this broker newly leads (or leads at a new epoch) have their logs replayed into
    /// the store and their groups and commits read back into memory (groups already in
    /// memory, which this broker coordinated all along, are kept as they are); those it
    /// stops leading are unloaded.
    ///
    /// Returns whether a load or a read-back failed: the caller calls again after a pause
    /// (`GROUP_LOAD_RETRY`), whether or not a new image came, and each call retries them.
    /// Until then their groups' requests are answered COORDINATOR_LOAD_IN_PROGRESS, which
    /// every client retries; served without their stored groups, a member would be told
    /// its group does not exist (fatal to the Java consumer) and a consumer would find no
    /// committed offsets.
    pub async fn follow(&self, image: &MetadataImage) -> bool {
        let Some(log) = &self.shared.log else {
            return false;
        };
        let shards: &Shared = &self.shared;
        let followed = log.runtime.follow(image, shards);
        let mut failed = false;
        for (&partition, &epoch) in &followed.to_load {
            let result = match log.led_log(partition).await {
                Ok(handle) => {
                    log.runtime
                        .load(shards, &handle, partition, epoch, followed.count)
                        .await
                }
                Err(e) => {
                    log.runtime.abandon(partition, epoch);
                    Err(e)
                }
            };
            if let Err(e) = result {
                failed = true;
                error!(partition, error = %e, "loading groups of a newly led __consumer_offsets partition failed; retrying");
            }
        }
        // Every partition loaded and not read back: those just loaded, and any whose
        // read-back failed at an earlier call (calls run one at a time, and an unload
        // takes a partition out of the set).
        let unread = log.unread.lock().clone();
        if unread.is_empty() {
            return failed;
        }
        if let Err(e) = self.read_into_memory(&unread, followed.count).await {
            error!(partitions = ?unread, error = %e, "reading the groups of newly led __consumer_offsets partitions failed; retrying");
            return true;
        }
        failed
    }

    /// Reads the groups and commits of `partitions` (of `count`) from the store into
    /// memory, keeping the groups already there.
    async fn read_into_memory(
        &self,
        partitions: &BTreeSet<i32>,
        count: i32,
    ) -> Result<(), BrokerError> {
        #[cfg(test)]
        {
            use std::sync::atomic::Ordering;
            let failing = &self.shared.failing_reads;
            if failing
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(BrokerError::ServerFault("injected read failure".into()));
            }
        }
        let wanted = partitions.clone();
        let stored = read_groups(&self.shared.store, move |g| {
            wanted.contains(&partition_for(g, count))
        })
        .await?;
        let loaded = stored.classic.len() + stored.consumer.len();
        {
            let mut in_memory = self.shared.groups.lock();
            let mut committed = self.shared.offsets.lock();
            for (id, group) in stored.classic {
                // A consumer group in memory keeps its id (a group id is one or the other).
                if self.shared.consumer.exists(&id) {
                    continue;
                }
                if let std::collections::hash_map::Entry::Vacant(slot) = in_memory.entry(id) {
                    if let Some(map) = stored.offsets.get(slot.key()) {
                        committed.insert(slot.key().clone(), map.clone());
                    }
                    slot.insert(group);
                }
            }
            let now = Instant::now();
            for (id, records) in stored.consumer {
                if !in_memory.contains_key(&id) && !self.shared.consumer.exists(&id) {
                    if let Some(map) = stored.offsets.get(&id) {
                        committed.insert(id.clone(), map.clone());
                    }
                    self.shared.consumer.load(&id, records, now);
                }
            }
            drop(committed);
            add_groups_with_pending_offsets(
                &mut in_memory,
                &self.shared.txns.lock(),
                &self.shared.consumer,
            );
            // Only once its groups are in: a heartbeat that saw the partition loaded and
            // then finds no group knows the group is not stored.
            if let Some(log) = &self.shared.log {
                log.unread.lock().retain(|p| !partitions.contains(p));
            }
        }
        info!(topic = OFFSETS_TOPIC, partitions = ?partitions, groups = loaded, "loaded group coordinator partitions");
        Ok(())
    }
}
