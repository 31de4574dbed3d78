//! `CoordinatorRuntime`: which partitions of a coordinator's topic this broker serves, and
//! the loading of their state (Kafka's coordinator-common `CoordinatorRuntime`, reduced to
//! what Brook's coordinators share).
//!
//! A coordinator keeps one shard of state per partition of its topic
//! (`__consumer_offsets`, `__transaction_state`). When this broker becomes a partition's
//! leader, the runtime reads the partition's log back (`log_reader::LogCursor`) and hands
//! every chunk of records to the coordinator's [`CoordinatorShards::replay`], in offset
//! order, into a shard being built; at the log end the shard is handed over
//! ([`CoordinatorShards::loaded`]) and serves. When the broker stops leading it, the
//! coordinator forgets it ([`CoordinatorShards::unload`]). Writes then go through the
//! `PartitionWriter` and are applied by the coordinator itself.
//!
//! The runtime keeps each partition's load state with the leader epoch it was started at
//! (a coordinator answers COORDINATOR_LOAD_IN_PROGRESS until `Loaded` at the current
//! epoch); a load that finishes after its leadership moved on is dropped. The map sits
//! behind a `parking_lot::Mutex`, never held across `.await`; the coordinator's `loaded`
//! runs under it so a concurrent `follow` cannot unload a partition between the check and
//! the hand-over.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;

use brook_protocol::kafka_protocol::records::Record;
use brook_raft::MetadataImage;
use brook_storage::LogHandle;
use parking_lot::Mutex;

use super::log_reader::LogCursor;
use crate::error::BrokerError;

/// One partition's state in the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    Loading { epoch: i32 },
    Loaded { epoch: i32 },
}

impl Load {
    pub fn epoch(self) -> i32 {
        match self {
            Load::Loading { epoch } | Load::Loaded { epoch } => epoch,
        }
    }
}

/// What a new leader epoch of a partition this broker keeps leading does to its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnNewEpoch {
    /// Unload and load again: the state was decided under the old epoch (transactions:
    /// writes carry the coordinator epoch).
    Reload,
    /// Load again into the state kept in memory (groups: members stay joined).
    Refresh,
}

/// A coordinator's shards, as the runtime drives them.
pub trait CoordinatorShards: Send + Sync {
    /// A shard being built by a load.
    type Shard: Send;

    /// The empty shard of `log`'s partition and the offset its replay starts at.
    fn begin_load(
        &self,
        log: &LogHandle,
    ) -> impl Future<Output = Result<(Self::Shard, i64), BrokerError>> + Send;

    /// Replays `records` (in offset order; `next`: the offset after them) into `shard`.
    fn replay(
        &self,
        shard: &mut Self::Shard,
        records: Vec<Record>,
        next: i64,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// The replay reached the log end: `shard` serves `partition` (one of `count`) at
    /// leader `epoch` from now on. Runs under the runtime's lock: no `.await`, nothing
    /// slow.
    fn loaded(&self, partition: i32, epoch: i32, count: i32, shard: Self::Shard);

    /// This broker no longer serves `partitions` (of `count`): forget their state.
    fn unload(&self, partitions: &BTreeSet<i32>, count: i32);
}

/// What [`CoordinatorRuntime::follow`] decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Followed {
    /// Unloaded (the coordinator has forgotten them).
    pub unloaded: BTreeSet<i32>,
    /// To load now, at these epochs (see [`CoordinatorRuntime::load`]).
    pub to_load: BTreeMap<i32, i32>,
    /// The topic's partition count.
    pub count: i32,
}

/// See the module comment.
pub struct CoordinatorRuntime {
    topic: &'static str,
    node_id: i32,
    on_new_epoch: OnNewEpoch,
    loads: Mutex<HashMap<i32, Load>>,
    /// Whether `follow` has seen the topic yet: the first time, the partitions this broker
    /// does not lead are unloaded too, since a coordinator may start with state of every
    /// partition (the group coordinator reads its whole store at start), and a copy kept
    /// for a partition led elsewhere would go stale and be served if the leadership comes
    /// back here (loads keep what is in memory).
    followed_once: std::sync::atomic::AtomicBool,
}

impl CoordinatorRuntime {
    pub fn new(topic: &'static str, node_id: i32, on_new_epoch: OnNewEpoch) -> Self {
        CoordinatorRuntime {
            topic,
            node_id,
            on_new_epoch,
            loads: Mutex::new(HashMap::new()),
            followed_once: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn topic(&self) -> &'static str {
        self.topic
    }

    /// `partition`'s load state, if this broker serves it.
    pub fn status(&self, partition: i32) -> Option<Load> {
        self.loads.lock().get(&partition).copied()
    }

    /// Whether some partition is still loading.
    pub fn any_loading(&self) -> bool {
        self.loads
            .lock()
            .values()
            .any(|l| matches!(l, Load::Loading { .. }))
    }

    /// Follows `image`: unloads (through `shards`) the partitions this broker no longer
    /// leads, and marks those it newly leads (or leads at a new epoch) as loading; the
    /// caller runs their loads. A partition whose load failed is retried at the next
    /// call.
    pub fn follow<S: CoordinatorShards>(&self, image: &MetadataImage, shards: &S) -> Followed {
        let Some(topic) = image.topic(self.topic) else {
            return Followed::default();
        };
        let count = i32::try_from(topic.partitions.len()).unwrap_or(0);
        let led: BTreeMap<i32, i32> = topic
            .partitions
            .values()
            .filter(|p| p.leader == self.node_id)
            .map(|p| (p.partition, p.leader_epoch))
            .collect();
        let mut out = Followed {
            count,
            ..Followed::default()
        };
        let mut loads = self.loads.lock();
        loads.retain(|partition, load| match led.get(partition) {
            None => {
                out.unloaded.insert(*partition);
                false
            }
            Some(&epoch) if epoch != load.epoch() => {
                if self.on_new_epoch == OnNewEpoch::Reload {
                    out.unloaded.insert(*partition);
                }
                false
            }
            Some(_) => true,
        });
        if !self
            .followed_once
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            out.unloaded
                .extend((0..count).filter(|p| !led.contains_key(p)));
        }
        if !out.unloaded.is_empty() && count > 0 {
            shards.unload(&out.unloaded, count);
        }
        for (&partition, &epoch) in &led {
            if let std::collections::hash_map::Entry::Vacant(slot) = loads.entry(partition) {
                slot.insert(Load::Loading { epoch });
                out.to_load.insert(partition, epoch);
            }
        }
        out
    }

    /// Gives up the load of `partition` at `epoch` before it began (its log could not be
    /// reached): the next `follow` retries it.
    pub fn abandon(&self, partition: i32, epoch: i32) {
        let mut loads = self.loads.lock();
        if loads.get(&partition) == Some(&Load::Loading { epoch }) {
            loads.remove(&partition);
        }
    }

    /// Loads `partition` at `epoch` from `log` (which this broker leads): replays it into
    /// a new shard and hands it to `shards`, unless the leadership moved meanwhile (the
    /// shard is dropped). On failure the partition is left for the next `follow` to retry.
    pub async fn load<S: CoordinatorShards>(
        &self,
        shards: &S,
        log: &LogHandle,
        partition: i32,
        epoch: i32,
        count: i32,
    ) -> Result<(), BrokerError> {
        let replayed = async {
            let (mut shard, from) = shards.begin_load(log).await?;
            let mut cursor = LogCursor::new(log, from);
            while let Some(records) = cursor.next_chunk().await? {
                shards
                    .replay(&mut shard, records, cursor.next_offset())
                    .await?;
            }
            Ok::<_, BrokerError>(shard)
        }
        .await;
        let mut loads = self.loads.lock();
        let current = loads.get(&partition).copied();
        if current != Some(Load::Loading { epoch }) {
            // Unloaded, or loading at another epoch, while this load ran: that one counts.
            return Ok(());
        }
        match replayed {
            Ok(shard) => {
                shards.loaded(partition, epoch, count, shard);
                loads.insert(partition, Load::Loaded { epoch });
                Ok(())
            }
            Err(e) => {
                loads.remove(&partition);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
