//! The deleting half of a partition log (Kafka's `UnifiedLog.deleteOldSegments`,
//! `maybeIncrementLogStartOffset` and `LocalLog.deleteSegmentFiles`): retention passes,
//! DeleteRecords moving the log start offset, and the delayed unlinking of segment files.
//!
//! Invariants: segments go whole and oldest first; the active segment always stays; the
//! log start offset only moves forward, to at least the first remaining segment's base
//! and at most the log end offset. A deleted segment's files are first renamed
//! `<name>.deleted` and unlinked `file.delete.delay.ms` later (or at the next open), so
//! nothing still holding them sees a file vanish mid-read. Persisting the moved log start
//! (the checkpoint file) is the `LogManager`'s job.

use std::fs;
use std::path::PathBuf;

use crate::error::{io_err, Result, StorageError};
use crate::log::Log;
use crate::recovery::sync_dir;
use crate::retention::{segments_to_delete, DeletionReason, SegmentStats};

/// What a retention pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: usize,
    /// Why the oldest deleted segment went (`None` when nothing was deleted).
    pub reason: Option<DeletionReason>,
    /// The log start offset after the pass.
    pub log_start_offset: i64,
    /// `.deleted` files whose delay expired and that were unlinked.
    pub files_unlinked: usize,
}

/// `.deleted` files to unlink, taken out of the log's pending list: unlinking a large
/// file frees its extents (with online discard, a trim each), which can take tens of
/// milliseconds per file, so callers that can do it after releasing the partition lock
/// do (`LogHandle`'s clean, retention and DeleteRecords).
#[derive(Debug, Default)]
#[must_use = "the files stay on disk until unlinked"]
pub struct DueDeletions(pub(crate) Vec<PathBuf>);

impl DueDeletions {
    /// Unlinks the files (missing ones are skipped); returns how many were unlinked.
    pub fn unlink(self) -> Result<usize> {
        let mut unlinked = 0;
        for path in self.0 {
            match fs::remove_file(&path) {
                Ok(()) => unlinked += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("unlink deleted segment file", &path)(e)),
            }
        }
        Ok(unlinked)
    }
}

impl Log {
    /// What retention needs to know about each segment, oldest first.
    pub fn segment_stats(&self) -> Vec<SegmentStats> {
        self.segments
            .values()
            .map(|s| SegmentStats {
                base_offset: s.base_offset(),
                size: s.size(),
                max_timestamp: s.max_timestamp().map(|(ts, _)| ts),
            })
            .collect()
    }

    /// Total bytes of the log's segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size()).sum()
    }

    /// One retention pass with the current config, then the `.deleted` files whose delay
    /// is over unlinked (see `retention_pass`).
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<RetentionOutcome> {
        let (mut outcome, due) = self.retention_pass(now_ms)?;
        outcome.files_unlinked = due.unlink()?;
        Ok(outcome)
    }

    /// One retention pass with the current config: deletes the segments that time, size
    /// or the log start offset condemn (renamed `.deleted`), and hands back the `.deleted`
    /// files whose delay is over (this pass's own with `file.delete.delay.ms=0`) for the
    /// caller to unlink after releasing the partition lock. `files_unlinked` is 0.
    pub fn retention_pass(&mut self, now_ms: i64) -> Result<(RetentionOutcome, DueDeletions)> {
        let deletion = segments_to_delete(
            &self.segment_stats(),
            &self.config,
            self.log_start_offset,
            now_ms,
        );
        let segments_deleted = match deletion {
            Some(d) => self.delete_oldest(d.count, now_ms)?,
            None => 0,
        };
        if let Some(d) = deletion {
            tracing::info!(
                dir = %self.dir.display(),
                segments = segments_deleted,
                reason = ?d.reason,
                log_start_offset = self.log_start_offset,
                "deleted old segments"
            );
        }
        let outcome = RetentionOutcome {
            segments_deleted,
            reason: deletion.map(|d| d.reason),
            log_start_offset: self.log_start_offset,
            files_unlinked: 0,
        };
        Ok((outcome, self.take_due_deletions(now_ms)))
    }

    /// DeleteRecords (see `advance_log_start_offset`), then the `.deleted` files whose
    /// delay is over unlinked. Returns the new log start offset.
    pub fn increment_log_start_offset(&mut self, offset: i64, now_ms: i64) -> Result<i64> {
        let (start, due) = self.advance_log_start_offset(offset, now_ms)?;
        due.unlink()?;
        Ok(start)
    }

    /// DeleteRecords: moves the log start offset up to `offset` (never down) and deletes
    /// the segments entirely below it (renamed `.deleted`). `offset` above the log end
    /// offset is out of range. Returns the new log start offset (the partition's low
    /// watermark) and the `.deleted` files whose delay is over, for the caller to unlink
    /// after releasing the partition lock.
    pub fn advance_log_start_offset(
        &mut self,
        offset: i64,
        now_ms: i64,
    ) -> Result<(i64, DueDeletions)> {
        if offset > self.log_end_offset || offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset,
            });
        }
        if offset > self.log_start_offset {
            tracing::info!(dir = %self.dir.display(), log_start_offset = offset, "log start offset incremented");
            self.log_start_offset = offset;
        }
        let only_start = crate::config::LogConfig {
            cleanup_delete: false,
            ..self.config.clone()
        };
        if let Some(d) = segments_to_delete(
            &self.segment_stats(),
            &only_start,
            self.log_start_offset,
            now_ms,
        ) {
            self.delete_oldest(d.count, now_ms)?;
        }
        self.trim_epochs_to_log_start()?;
        self.raise_recovery_point_to_log_start()?;
        Ok((self.log_start_offset, self.take_due_deletions(now_ms)))
    }

    /// Applies a checkpointed log start offset after open: the start moves forward to it,
    /// bounded by the log end offset (recovery must not resurrect deleted records).
    /// The epoch cache is trimmed in memory only: an entry below the log start left in
    /// the file is harmless (every open trims again after this call) and is dropped from
    /// the file by the next operation that flushes the cache.
    pub fn restore_log_start_offset(&mut self, offset: i64) {
        let restored = offset.min(self.log_end_offset);
        if restored > self.log_start_offset {
            self.log_start_offset = restored;
        }
        // The recovery point is not raised here: that would need a flush, and a point
        // below the start only means the next open scans a little more.
        self.epochs.truncate_from_start(self.log_start_offset);
    }

    /// Kafka's `maybeIncrementLogStartOffset` also trims the leader epoch cache: epochs
    /// wholly below the log start are forgotten.
    fn trim_epochs_to_log_start(&mut self) -> Result<()> {
        self.epochs.truncate_from_start(self.log_start_offset);
        self.epochs.flush()
    }

    /// Unlinks the `.deleted` files whose `file.delete.delay.ms` is over; returns how many.
    pub fn purge_deleted_files(&mut self, now_ms: i64) -> Result<usize> {
        self.take_due_deletions(now_ms).unlink()
    }

    /// Takes the `.deleted` files whose delay is over out of the pending list, for the
    /// caller to unlink after releasing the partition lock ([`DueDeletions::unlink`]).
    pub fn take_due_deletions(&mut self, now_ms: i64) -> DueDeletions {
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_deletions)
            .into_iter()
            .partition(|(due_ms, _)| *due_ms <= now_ms);
        self.pending_deletions = waiting;
        DueDeletions(due.into_iter().map(|(_, path)| path).collect())
    }

    /// The `.deleted` files still waiting for their delay (the cleaner's capture).
    pub(crate) fn pending_deletion_paths(&self) -> Vec<PathBuf> {
        self.pending_deletions
            .iter()
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Deletes the `count` oldest segments (never the active one), renaming their files
    /// for delayed unlinking (`take_due_deletions`), and moves the log start offset to
    /// the first remaining segment. Returns how many went.
    fn delete_oldest(&mut self, count: usize, now_ms: i64) -> Result<usize> {
        let count = count.min(self.segments.len().saturating_sub(1));
        let due_ms = now_ms.saturating_add(self.config.file_delete_delay_ms);
        let mut deleted = 0;
        let mut result = Ok(());
        for _ in 0..count {
            let Some((_, segment)) = self.segments.pop_first() else {
                break;
            };
            deleted += 1;
            match segment.rename_for_deletion() {
                Ok(paths) => self
                    .pending_deletions
                    .extend(paths.into_iter().map(|p: PathBuf| (due_ms, p))),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if let Some(first) = self.segments.keys().next() {
            self.log_start_offset = self.log_start_offset.max(*first);
        }
        // Their `.txnindex` files went with them.
        self.drop_txns_below_first_segment();
        result?;
        self.raise_recovery_point_to_log_start()?;
        if deleted > 0 {
            sync_dir(&self.dir)?;
            self.trim_epochs_to_log_start()?;
        }
        Ok(deleted)
    }
}
