//! Loading and unloading groups as this broker gains and loses the leadership of
//! `__consumer_offsets` partitions (Kafka's `GroupMetadataManager.loadGroupsForPartition`
//! / `removeGroupsForPartition`): a new leader replays the partition's log into the offset
//! store, then reads the partition's groups and commits back into memory; a broker that
//! stops leading a partition drops its groups from memory (their members rejoin at the
//! new coordinator; nothing is deleted from disk). The replay also rebuilds the
//! partition's open transactions (pending transactional offsets, see `txn_offsets`);
//! unloading forgets them.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use brook_storage::offsets::OffsetStore;
use tracing::{error, info};

use super::records::{partition_for, OFFSETS_TOPIC};
use super::txn_offsets::TxnOffsets;
use super::{replay, snapshot, Group, GroupCoordinator, OffsetMap};
use crate::coordinator::consumer_group::image::StoredRecords;
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
/// created Empty so it is listed and kept, as Kafka's replay of the record creates it.
pub(super) fn add_groups_with_pending_offsets(
    groups: &mut HashMap<String, Group>,
    txns: &TxnOffsets,
) {
    for group_id in txns.groups() {
        groups
            .entry(group_id.clone())
            .or_insert_with(|| Group::new(&group_id));
    }
}

impl GroupCoordinator {
    /// This broker now leads `partitions` of `__consumer_offsets` (of `count`): replay
    /// their logs into the store and load their groups. Groups already in memory (this
    /// broker coordinated them all along) are kept as they are.
    pub async fn load_partitions(
        &self,
        partitions: &BTreeSet<i32>,
        count: i32,
    ) -> Result<(), BrokerError> {
        let Some(log) = &self.shared.log else {
            return Ok(());
        };
        for &partition in partitions {
            if let Some(handle) = log.open(partition).await? {
                // In write order with appends and transaction completions of the partition.
                let _ordered = log.lock_partition(partition).await;
                let replayed = replay::replay(&self.shared.store, &handle).await?;
                self.shared.txns.lock().load_partition(
                    partition,
                    replayed.open,
                    replayed.processed,
                );
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
            add_groups_with_pending_offsets(&mut in_memory, &self.shared.txns.lock());
        }
        info!(topic = OFFSETS_TOPIC, partitions = ?partitions, groups = loaded, "loaded group coordinator partitions");
        Ok(())
    }

    /// This broker no longer leads `partitions`: forget their groups (parked joins and
    /// syncs end with COORDINATOR_NOT_AVAILABLE and the members find the new coordinator).
    pub fn unload_partitions(&self, partitions: &BTreeSet<i32>, count: i32) {
        let owned = |g: &str| partitions.contains(&partition_for(g, count));
        let removed = {
            let mut groups = self.shared.groups.lock();
            let before = groups.len();
            groups.retain(|id, _| !owned(id));
            before - groups.len()
        } + self.shared.consumer.unload(owned);
        self.shared.offsets.lock().retain(|id, _| !owned(id));
        {
            let mut txns = self.shared.txns.lock();
            for &partition in partitions {
                txns.unload_partition(partition);
            }
        }
        if removed > 0 {
            info!(topic = OFFSETS_TOPIC, partitions = ?partitions, groups = removed, "unloaded groups of partitions led elsewhere");
        }
    }
}
