//! The recovery point (Kafka's `LocalLog.recoveryPoint`): the offset below which every
//! byte of the log is known fsynced, so that the next open trusts the segments below it
//! instead of scanning them (`log/load.rs`), plus the producer snapshots that let it
//! skip replaying their batch headers.
//!
//! Rules: a flush fsyncs every segment from the one holding the recovery point to the
//! active one, then moves the recovery point to the log end offset (a roll flushes the
//! same way, so a closed segment is always fsynced before the point passes it). A roll,
//! and a clean shutdown, also write a producer snapshot at the new recovery point (as
//! Kafka snapshots on roll): the state in memory is then exactly the state at the
//! recovery point, since both happen under the log's lock with log end == recovery
//! point. A truncation lowers the recovery point to the new end and deletes the
//! snapshots above it; a log start moved above the point flushes, raising it past the
//! start. The recovery point never claims unflushed data: a snapshot at it, and the next
//! open, rely on that.
//! Persisting the point (`recovery-point-offset-checkpoint`) is the `LogManager`'s job.

use crate::error::Result;
use crate::log::Log;
use crate::producer_snapshot;
use crate::recovery::sync_dir;

impl Log {
    /// The offset below which the log is known fsynced.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    /// The offset of the newest producer snapshot on disk, if any.
    pub fn producer_snapshot_offset(&self) -> Option<i64> {
        self.snapshot_offset
    }

    /// Fsyncs every segment not yet known durable (from the one holding the recovery
    /// point to the active one; fsync of an already clean file costs little) and moves
    /// the recovery point to the log end offset.
    pub(crate) fn flush_to_end(&mut self) -> Result<()> {
        // Before the point moves past a marker whose `.txnindex` entry a full disk kept
        // out: a restart reads the entries below the point from the file, not the log.
        self.repair_txn_index()?;
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        for segment in self.segments.range(from..).map(|(_, s)| s) {
            segment.flush()?;
        }
        // A new log's directory entries, deferred from its creation (Kafka's
        // `LocalLog.flush` likewise fsyncs the directory when new segments are flushed).
        if self.dir_sync_pending {
            sync_dir(&self.dir)?;
            if let Some(parent) = self.dir.parent() {
                sync_dir(parent)?;
            }
            self.dir_sync_pending = false;
        }
        // The epochs of the data now durable, deferred from the appends and leader
        // changes that recorded them.
        self.epochs.flush()?;
        self.recovery_point = self.log_end_offset;
        Ok(())
    }

    /// Writes a producer snapshot at the recovery point if it moved since the last one
    /// and the state in memory is the state there (nothing appended since the flush).
    /// A log with no data below the point needs none: a full scan of nothing is free.
    pub(crate) fn snapshot_at_recovery_point(&mut self) -> Result<()> {
        let has_data_below = self
            .segments
            .keys()
            .next()
            .is_some_and(|first| self.recovery_point > *first);
        if self.recovery_point != self.log_end_offset
            || self.snapshot_offset == Some(self.recovery_point)
            || !has_data_below
        {
            return Ok(());
        }
        producer_snapshot::write(&self.dir, self.recovery_point, &self.producers)?;
        self.snapshot_offset = Some(self.recovery_point);
        Ok(())
    }

    /// The periodic checkpoint's share of the work, under the log's lock: snapshots the
    /// producer state if the recovery point moved to the log end (see
    /// `snapshot_at_recovery_point`) and returns the recovery point to persist. No
    /// fsync of data: the point moves only when the log flushes or rolls.
    pub fn checkpoint_recovery_point(&mut self) -> Result<i64> {
        self.snapshot_at_recovery_point()?;
        Ok(self.recovery_point)
    }

    /// For a clean shutdown: flushes whatever is not yet durable, snapshots the producer
    /// state at the log end, and returns the recovery point (the log end), so the next
    /// open scans nothing. A log already flushed and snapshotted costs no fsync.
    pub fn flush_for_shutdown(&mut self, now_ms: i64) -> Result<i64> {
        if self.unflushed_messages > 0 || self.recovery_point < self.log_end_offset {
            self.flush(now_ms)?;
        }
        self.snapshot_at_recovery_point()?;
        Ok(self.recovery_point)
    }

    /// `flush_for_shutdown` for a caller that fsyncs the log directory (the parent of
    /// this log's directory) itself afterwards: a new log's first flush fsyncs both its
    /// own directory and the parent, and at a shutdown with thousands of new logs that was
    /// thousands of fsyncs of one large directory; `LogManager::shutdown` does it once per
    /// log directory. Also returns whether the parent needs that fsync for this log.
    pub fn flush_for_shutdown_parent_deferred(&mut self, now_ms: i64) -> Result<(i64, bool)> {
        let parent_pending = self.dir_sync_pending;
        if parent_pending {
            sync_dir(&self.dir)?;
            self.dir_sync_pending = false;
        }
        Ok((self.flush_for_shutdown(now_ms)?, parent_pending))
    }

    /// After a truncation: the recovery point goes no higher than the new end, and the
    /// snapshots above it go (durably, before anything new is appended: see
    /// `log/load.rs`).
    pub(crate) fn truncate_recovery_point(&mut self) -> Result<()> {
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        self.snapshot_offset = producer_snapshot::delete_above(&self.dir, self.log_end_offset)?;
        Ok(())
    }

    /// After a restart at a new offset (`truncate_fully_and_start_at`): every snapshot
    /// goes, since the producer state restarts empty, and the recovery point is the new
    /// start (the one segment left is empty and its directory entry fsynced).
    pub(crate) fn reset_recovery_point(&mut self) -> Result<()> {
        producer_snapshot::delete_all(&self.dir)?;
        self.snapshot_offset = None;
        self.recovery_point = self.log_end_offset;
        Ok(())
    }

    /// After the log start moved up (retention, DeleteRecords): the recovery point is
    /// kept at least at the log start. It may only claim what is fsynced (a producer
    /// snapshot there would otherwise vouch for unflushed data), so a start moved above
    /// it first flushes. Retention deletes only closed segments, fsynced when they rolled
    /// (the point already passed them); only DeleteRecords into unflushed data pays.
    pub(crate) fn raise_recovery_point_to_log_start(&mut self) -> Result<()> {
        if self.log_start_offset > self.recovery_point {
            self.flush_to_end()?;
        }
        Ok(())
    }
}
