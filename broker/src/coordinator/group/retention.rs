//! Offsets retention (`offsets.retention.minutes`, checked every
//! `offsets.retention.check.interval.ms`), after Kafka's `GroupMetadataManager.cleanupGroupMetadata`
//! and KIP-211: only an Empty group's offsets expire. For a group that had members the
//! clock starts when it became empty (its current-state timestamp); for a group that only
//! ever saw standalone commits (no generation) it starts at each offset's commit. Expired
//! offsets get tombstones in `__consumer_offsets`; an Empty group left without offsets is
//! removed (Dead) with a metadata tombstone. Pending transactional offsets are never
//! expired: the partition's committed offset waits for the marker, and a group with
//! pending offsets is not removed (Kafka's `cleanupExpiredOffsets`).

use std::sync::Arc;

use brook_storage::offsets::{CommittedOffset, OffsetRecord};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use super::state::Group;
use super::types::GroupState;
use super::{GroupCoordinator, Shared};

pub(super) async fn run(shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(shared.config.offsets_retention_check_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick fires at once; skip it so start-up is not slowed by a pass.
    interval.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        shared.expire(brook_storage::log_manager::now_ms()).await;
    }
}

/// When an offset of `group` may expire, or `None` if it may not (yet).
fn expires_at(group: &Group, offset: &CommittedOffset, retention_ms: i64) -> Option<i64> {
    if group.state != GroupState::Empty {
        return None;
    }
    let base = if group.generation_id > 0 || group.protocol_type.is_some() {
        group.empty_since_ms?
    } else {
        offset.commit_timestamp_ms
    };
    Some(base.saturating_add(retention_ms))
}

impl Shared {
    /// One retention pass at `now_ms`; returns how many offsets expired.
    async fn expire(&self, now_ms: i64) -> usize {
        let retention_ms = self.config.offsets_retention_ms;
        let mut records = Vec::new();
        let mut expired = 0;
        {
            let mut groups = self.groups.lock();
            let mut offsets = self.offsets.lock();
            let txns = self.txns.lock();
            let mut dead = Vec::new();
            for (group_id, group) in groups.iter() {
                if group.state != GroupState::Empty {
                    continue;
                }
                // Kafka's `cleanupExpiredOffsets`: an offset with a pending transactional
                // commit does not expire yet, and a group with open transactions stays
                // (the marker could otherwise apply offsets to a group already gone).
                let pending = txns.pending_of_group(group_id);
                let map = offsets.entry(group_id.clone()).or_default();
                let gone: Vec<(String, i32)> = map
                    .iter()
                    .filter(|(key, _)| !pending.contains(key))
                    .filter(|(_, c)| {
                        expires_at(group, c, retention_ms).is_some_and(|t| t <= now_ms)
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                let had_expiry = !gone.is_empty();
                for (topic, partition) in gone {
                    map.remove(&(topic.clone(), partition));
                    expired += 1;
                    records.push(OffsetRecord::DeleteOffset {
                        group: group_id.clone(),
                        topic,
                        partition,
                    });
                }
                // A group that never became empty here (created by a commit still in
                // flight) has no timestamp and stays.
                let idle_long_enough = group
                    .empty_since_ms
                    .is_some_and(|t| t.saturating_add(retention_ms) <= now_ms)
                    || had_expiry;
                if map.is_empty()
                    && idle_long_enough
                    && group.members.is_empty()
                    && pending.is_empty()
                {
                    dead.push(group_id.clone());
                }
            }
            for group_id in dead {
                groups.remove(&group_id);
                offsets.remove(&group_id);
                info!(group = %group_id, "empty group without offsets removed");
                records.push(OffsetRecord::DeleteGroup { group: group_id });
            }
            offsets.retain(|_, map| !map.is_empty());
            drop(txns);
        }
        if expired > 0 {
            info!(offsets = expired, "committed offsets expired");
        }
        if let Err(e) = self.persist(records).await {
            error!(error = %e, "writing offsets expiry failed; it is retried on restart");
        }
        expired
    }
}

impl GroupCoordinator {
    /// Runs one retention pass as if the wall clock said `now_ms` (tests, tooling).
    pub async fn expire_offsets_at(&self, now_ms: i64) -> usize {
        self.shared.expire(now_ms).await
    }
}
