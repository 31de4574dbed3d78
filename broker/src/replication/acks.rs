//! Waiting for replication: an acks=all produce (and a group coordinator write) is
//! answered once the high watermark covers its last offset (Kafka's `DelayedProduce`).
//! The wait ends early when this broker stops leading the partition in that epoch
//! (NOT_LEADER_OR_FOLLOWER: the client retries at the new leader; an idempotent producer's
//! retry is de-duplicated there) or when the ISR falls below `min.insync.replicas`
//! (NOT_ENOUGH_REPLICAS_AFTER_APPEND), and at the request's timeout (REQUEST_TIMED_OUT).

use std::sync::Arc;
use std::time::Duration;

use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::MetadataImage;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::leader::LeaderPartition;

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

/// Waits until `state`'s high watermark reaches `required` (the offset after the write).
pub async fn wait_for_high_watermark(
    mut images: watch::Receiver<Arc<MetadataImage>>,
    state: &LeaderPartition,
    node_id: i32,
    required: i64,
    timeout: Duration,
    stopping: &CancellationToken,
) -> Result<(), NotReplicated> {
    let mut appends = state.log.subscribe_appends();
    let deadline = Instant::now() + timeout;
    loop {
        let image = images.borrow_and_update().clone();
        let Some(part) = image.partition(&state.topic, state.partition) else {
            return Err(NotReplicated::Moved {
                leader: -1,
                leader_epoch: -1,
            });
        };
        if part.leader != node_id || part.leader_epoch != state.leader_epoch {
            return Err(NotReplicated::Moved {
                leader: part.leader,
                leader_epoch: part.leader_epoch,
            });
        }
        let short = part.isr.len() < state.effective_min_isr(part);
        if state.maybe_advance_high_watermark(part, node_id) >= required {
            return if short {
                Err(NotReplicated::NotEnoughReplicasAfterAppend)
            } else {
                Ok(())
            };
        }
        if short {
            return Err(NotReplicated::NotEnoughReplicasAfterAppend);
        }
        tokio::select! {
            changed = appends.changed() => if changed.is_err() {
                // The log was closed or deleted under the write.
                return Err(NotReplicated::Moved { leader: -1, leader_epoch: -1 });
            },
            changed = images.changed() => if changed.is_err() {
                return Err(NotReplicated::TimedOut);
            },
            _ = tokio::time::sleep_until(deadline) => return Err(NotReplicated::TimedOut),
            _ = stopping.cancelled() => return Err(NotReplicated::TimedOut),
        }
    }
}
