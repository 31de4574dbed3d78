//! Waiting for replication: an acks=all produce (and a group coordinator write) is
//! answered once the high watermark covers its last offset (Kafka's `DelayedProduce`).
//! The wait ends early when this broker stops leading the partition in that epoch
//! (NOT_LEADER_OR_FOLLOWER: the client retries at the new leader; an idempotent producer's
//! retry is de-duplicated there), and at the request's timeout (REQUEST_TIMED_OUT).
//! An ISR that falls below `min.insync.replicas` does not end it: the high watermark stands
//! still meanwhile, so the write times out unless the ISR grows back in time (Kafka 4's
//! `Partition.checkEnoughReplicasReachOffset`); NOT_ENOUGH_REPLICAS_AFTER_APPEND is the
//! answer only when the high watermark covers the write but the ISR is short by then.
//! It waits as a delayed operation on the partition (`partition::delayed`), woken by its
//! high watermark and by role and ISR changes.

use std::sync::Arc;
use std::time::Duration;

use brook_protocol::kafka_protocol::ResponseError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::leader::LeaderPartition;
use crate::partition::delayed::{Delayed, Wake, Watch};
use crate::partition::{Partition, Role};

/// Why an appended write was not acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReplicated {
    /// The partition is led by `leader` (-1: nobody) at `leader_epoch` now.
    Moved {
        leader: i32,
        leader_epoch: i32,
    },
    NotEnoughReplicasAfterAppend,
    TimedOut,
}

impl NotReplicated {
    pub fn code(self) -> ResponseError {
        match self {
            NotReplicated::Moved { .. } => ResponseError::NotLeaderOrFollower,
            NotReplicated::NotEnoughReplicasAfterAppend => {
                ResponseError::NotEnoughReplicasAfterAppend
            }
            NotReplicated::TimedOut => ResponseError::RequestTimedOut,
        }
    }
}

/// Waits until `state`'s high watermark reaches `required` (the offset after the write),
/// while `partition` is led by this broker at `state`'s epoch.
pub async fn wait_for_high_watermark(
    partition: &Partition,
    state: &Arc<LeaderPartition>,
    required: i64,
    timeout: Duration,
    stopping: &CancellationToken,
) -> Result<(), NotReplicated> {
    let mut delayed = Delayed::new(1, Instant::now() + timeout, stopping.clone());
    delayed.set(0, Some(Watch::partition(partition)));
    loop {
        if delayed.is_closed(0) {
            // The log was closed or deleted under the write.
            return Err(NotReplicated::Moved {
                leader: -1,
                leader_epoch: -1,
            });
        }
        // The high watermark is read before the role is checked: the log is written as a
        // follower's only once the role has changed (`Partition::follower_write`), so a
        // role still unchanged after the read proves the value is this leader's.
        let short = state.isr_below_min();
        let high_watermark = state.maybe_advance_high_watermark();
        match partition.role() {
            Role::Leader(now) if Arc::ptr_eq(&now, state) => {}
            Role::Leader(now) => {
                return Err(NotReplicated::Moved {
                    leader: now.node_id(),
                    leader_epoch: now.leader_epoch,
                })
            }
            Role::Follower {
                leader,
                leader_epoch,
            } => {
                return Err(NotReplicated::Moved {
                    leader,
                    leader_epoch,
                })
            }
        }
        if high_watermark >= required {
            return if short {
                Err(NotReplicated::NotEnoughReplicasAfterAppend)
            } else {
                Ok(())
            };
        }
        match delayed.wait().await {
            Wake::Changed(_) => {}
            // Kafka answers an acks=all produce it could not complete by its timeout (or
            // at shutdown) with REQUEST_TIMED_OUT.
            Wake::TimedOut | Wake::ShuttingDown => return Err(NotReplicated::TimedOut),
        }
    }
}
