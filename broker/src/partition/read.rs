//! The partition side of a fetch (Kafka's `Partition.fetchRecords`): how far a reader may
//! read, what a read_committed reader must drop, the planned read of the log; and a
//! follower's fetch as the leader records it (its log end offset, divergence).
//!
//! Planning touches memory only: the partition lock is held just to capture the segments
//! (`brook_storage::PlannedRead`); the read itself happens later, outside any lock.

use brook_storage::{AbortedTxn, PlannedRead, StorageError};

use super::replica::Partition;
use crate::error::BrokerError;

/// How far a reader may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBound {
    /// A follower: up to the log end.
    LogEnd,
    /// A consumer: up to the high watermark.
    HighWatermark,
    /// A read_committed consumer: up to the last stable offset.
    LastStable,
}

/// A planned read and the partition's offsets at planning time.
pub struct ReadPlan {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// For `LastStable` readers with something to read: the aborted transactions
    /// overlapping the read, whose records the consumer drops until their abort marker
    /// (Kafka's `collectAbortedTransactions`).
    pub aborted: Option<Vec<AbortedTxn>>,
    /// The read; `None` when the fetch offset is valid but nothing is readable yet (between
    /// the bound and the log end).
    pub read: Result<Option<PlannedRead>, StorageError>,
}

/// What the leader made of a follower's fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerFetch {
    /// The follower's `last_fetched_epoch` ends here before its fetch offset (or is an
    /// epoch this leader does not know): it must truncate; nothing is recorded.
    Diverging { epoch: i32, end_offset: i64 },
    /// Recorded; `wake_isr` when the ISR task should look (the follower is out of the ISR,
    /// or the high watermark moved).
    Recorded { wake_isr: bool },
}

impl Partition {
    /// Plans a read from `fetch_offset` of at most `max_bytes` (one batch more for the
    /// first partition with data: `MinOneBatch` is the executor's choice).
    pub async fn plan_read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        bound: ReadBound,
    ) -> ReadPlan {
        self.plan(fetch_offset, Some(max_bytes), bound).await
    }

    /// The partition's offsets for a fetch whose response's byte budget is already spent:
    /// no read is planned (planning may open the segment files), and the records are
    /// empty, but an invalid `fetch_offset` still fails with OFFSET_OUT_OF_RANGE, as
    /// Kafka's read of 0 bytes does.
    pub async fn plan_offsets_only(&self, fetch_offset: i64, bound: ReadBound) -> ReadPlan {
        self.plan(fetch_offset, None, bound).await
    }

    async fn plan(
        &self,
        fetch_offset: i64,
        max_bytes: Option<usize>,
        bound: ReadBound,
    ) -> ReadPlan {
        let log = self.log();
        let log_end = log.log_end_offset();
        let log_start = log.log_start_offset();
        let high_watermark = log.high_watermark();
        let last_stable_offset = log.last_stable_offset();
        let upper = match bound {
            ReadBound::LogEnd => log_end,
            ReadBound::HighWatermark => high_watermark,
            ReadBound::LastStable => last_stable_offset,
        };
        let aborted =
            (bound == ReadBound::LastStable && fetch_offset < upper && max_bytes.is_some())
                .then(|| log.aborted_transactions(fetch_offset, upper));
        let read = if fetch_offset >= upper && fetch_offset <= log_end {
            // Valid, just nothing to read yet.
            Ok(None)
        } else if let Some(max_bytes) = max_bytes {
            log.plan_read(fetch_offset, max_bytes, upper)
                .await
                .map(Some)
        } else if (log_start..=log_end).contains(&fetch_offset) {
            Ok(None)
        } else {
            Err(StorageError::OffsetOutOfRange {
                requested: fetch_offset,
                log_start,
                log_end,
            })
        };
        ReadPlan {
            high_watermark,
            last_stable_offset,
            log_start_offset: log_start,
            aborted,
            read,
        }
    }

    /// Records the fetch of follower `replica` (its incarnation `broker_epoch`, -1 for
    /// none) at `fetch_offset`, after `last_fetched_epoch` (-1: none) is checked for
    /// divergence; the high watermark may advance. NOT_LEADER_OR_FOLLOWER (and the epoch
    /// errors of `current_leader_epoch`) when this broker does not lead, or `replica` is
    /// not a follower.
    pub async fn record_follower_fetch(
        &self,
        replica: i32,
        broker_epoch: i64,
        fetch_offset: i64,
        last_fetched_epoch: i32,
        current_leader_epoch: Option<i32>,
        now_ms: i64,
    ) -> Result<FollowerFetch, BrokerError> {
        let state = self.leader(current_leader_epoch)?;
        let log = self.log();
        if last_fetched_epoch >= 0 {
            let (epoch, end_offset) = log.end_offset_for_epoch(last_fetched_epoch).await?;
            if end_offset < fetch_offset || epoch < last_fetched_epoch {
                return Ok(FollowerFetch::Diverging { epoch, end_offset });
            }
        }
        let leader_leo = log.log_end_offset();
        if !state.record_fetch(replica, broker_epoch, fetch_offset, leader_leo, now_ms) {
            return Err(BrokerError::NotLeaderOrFollower {
                topic: self.topic().to_string(),
                partition: self.index(),
                leader: state.node_id(),
                leader_epoch: state.leader_epoch,
            });
        }
        let before = log.high_watermark();
        state.maybe_advance_high_watermark();
        Ok(FollowerFetch::Recorded {
            wake_isr: !state.isr_contains(replica) || log.high_watermark() != before,
        })
    }
}

#[cfg(test)]
mod tests;
