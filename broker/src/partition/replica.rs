//! `Partition`: one replica this broker holds (Kafka's `Partition`), by topic id and
//! index: its log, its role — leader at an epoch (followers' state, ISR, high watermark:
//! `replication::leader::LeaderPartition`) or follower of a leader — and the operations
//! requests run on it: find the leader state at a request's epoch, append as leader
//! (`append`), record a follower's fetch.
//!
//! The role is set only by the replica manager when it applies a metadata image
//! (`ReplicaManager::apply`), never by requests. It sits behind a per-partition
//! read-write lock held for a clone of an `Arc` (never across `.await`); every role or
//! ISR change bumps `changes`, which wakes the delayed operations waiting on the partition
//! (`partition::delayed`: an acks=all produce ends when the leadership moves).
//!
//! The replica fetcher writes the log (appends, truncations) only as a follower of the
//! leader and epoch it fetched from, checked under `follower_writes`, which every role
//! change also takes (Kafka's `leaderIsrUpdateLock`). Without it, a fetcher working from a
//! newer image than the applied roles truncated a leader's log under an acks=all produce
//! still waiting on it, and refilled it from the new leader past the produce's offsets: the
//! old leader's high watermark then covered them and the producer was acknowledged for
//! records no replica kept (seed-13 chaos run, 7 records of partition 0).

use std::sync::Arc;

use brook_storage::LogHandle;
use tokio::sync::watch;

use crate::error::BrokerError;
use crate::replication::leader::{Assignment, LeaderPartition};

/// What this broker is for a partition.
#[derive(Debug, Clone)]
pub enum Role {
    /// It leads at the state's epoch.
    Leader(Arc<LeaderPartition>),
    /// `leader` (-1: nobody) leads at `leader_epoch`; this broker follows (or, once the
    /// partition is dropped, points waiting requests at the new leader).
    Follower { leader: i32, leader_epoch: i32 },
}

pub struct Partition {
    topic: Arc<str>,
    topic_id: uuid::Uuid,
    index: i32,
    log: LogHandle,
    role: parking_lot::RwLock<Role>,
    /// Held by a follower write to the log and by every role change (module comment).
    follower_writes: tokio::sync::Mutex<()>,
    /// Bumped on every role or ISR change.
    changes: watch::Sender<u64>,
}

/// A follower's permission to write the log: while held, the role stays what was checked.
pub struct FollowerWrite<'a> {
    _held: tokio::sync::MutexGuard<'a, ()>,
}

/// Held across a role change: no follower write runs meanwhile.
pub(crate) struct RoleChangeGuard<'a> {
    _held: tokio::sync::MutexGuard<'a, ()>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("topic", &self.topic)
            .field("index", &self.index)
            .field("role", &*self.role.read())
            .finish()
    }
}

impl Partition {
    /// A replica with its opened log, following nobody until a role is applied.
    pub fn new(topic: Arc<str>, topic_id: uuid::Uuid, index: i32, log: LogHandle) -> Self {
        Partition {
            topic,
            topic_id,
            index,
            log,
            role: parking_lot::RwLock::new(Role::Follower {
                leader: -1,
                leader_epoch: -1,
            }),
            follower_writes: tokio::sync::Mutex::new(()),
            changes: watch::channel(0).0,
        }
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn topic_id(&self) -> uuid::Uuid {
        self.topic_id
    }

    pub fn index(&self) -> i32 {
        self.index
    }

    pub fn log(&self) -> &LogHandle {
        &self.log
    }

    pub fn role(&self) -> Role {
        self.role.read().clone()
    }

    /// The leader state when this broker leads.
    pub fn leader_state(&self) -> Option<Arc<LeaderPartition>> {
        match &*self.role.read() {
            Role::Leader(state) => Some(state.clone()),
            Role::Follower { .. } => None,
        }
    }

    /// The leader state, checked against a request's `current_leader_epoch` (Fetch v9+,
    /// ListOffsets v4+: KIP-320); NOT_LEADER_OR_FOLLOWER with the leader this broker
    /// knows when it does not lead.
    pub fn leader(
        &self,
        current_leader_epoch: Option<i32>,
    ) -> Result<Arc<LeaderPartition>, BrokerError> {
        match &*self.role.read() {
            Role::Leader(state) => {
                if let Some(requested) = current_leader_epoch {
                    super::check_leader_epoch(state.leader_epoch, requested)?;
                }
                Ok(state.clone())
            }
            &Role::Follower {
                leader,
                leader_epoch,
            } => Err(BrokerError::NotLeaderOrFollower {
                topic: self.topic.to_string(),
                partition: self.index,
                leader,
                leader_epoch,
            }),
        }
    }

    /// Permission to write the log as the follower of `leader` at `leader_epoch`; `None`
    /// when the applied role is anything else (not applied yet, or moved on since the
    /// fetch was sent). Waits for a role change in progress.
    pub async fn follower_write(
        &self,
        leader: i32,
        leader_epoch: i32,
    ) -> Option<FollowerWrite<'_>> {
        let guard = self.follower_writes.lock().await;
        match *self.role.read() {
            Role::Follower {
                leader: l,
                leader_epoch: e,
            } if l == leader && e == leader_epoch => {}
            _ => return None,
        }
        Some(FollowerWrite { _held: guard })
    }

    /// Waits for a follower write in progress, and keeps others out until dropped: taken
    /// for every role change.
    pub(crate) async fn begin_role_change(&self) -> RoleChangeGuard<'_> {
        RoleChangeGuard {
            _held: self.follower_writes.lock().await,
        }
    }

    /// Applies a role (the replica manager, from a metadata image, holding the guard of
    /// `begin_role_change`).
    pub(crate) fn set_role(&self, _change: &RoleChangeGuard<'_>, role: Role) {
        let old = std::mem::replace(&mut *self.role.write(), role.clone());
        if let Role::Leader(state) = old {
            if !matches!(&role, Role::Leader(now) if Arc::ptr_eq(now, &state)) {
                state.resign();
            }
        }
        self.changes.send_modify(|n| *n += 1);
    }

    /// A role change outside the replica manager, for tests (no follower write may be in
    /// progress).
    #[cfg(test)]
    pub(crate) fn set_role_now(&self, role: Role) {
        let change = RoleChangeGuard {
            _held: self
                .follower_writes
                .try_lock()
                .expect("no follower write in progress"),
        };
        self.set_role(&change, role);
    }

    /// Applies a new committed ISR (or replica set) to the leader state; the high
    /// watermark may move (a shrunk ISR no longer waits for the followers that left).
    pub(crate) fn set_assignment(&self, assignment: Assignment) {
        if let Some(state) = self.leader_state() {
            state.set_assignment(assignment);
            state.maybe_advance_high_watermark();
        }
        self.changes.send_modify(|n| *n += 1);
    }

    /// A receiver notified on every role or ISR change.
    pub fn subscribe_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}
