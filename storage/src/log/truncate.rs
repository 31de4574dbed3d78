//! Truncation for replication (Kafka's `UnifiedLog.truncateTo` and
//! `truncateFullyAndStartAt`): a follower whose log diverged from the new leader's drops
//! its tail; one that fell below the leader's log start starts over there.
//!
//! Crash safety: segments go from the highest base offset down and the cut segment is
//! truncated with `set_len` then fsynced, so every intermediate state on disk is a prefix
//! of the old log (possibly with an empty segment at its end), which recovery opens as a
//! consistent log; the follower then truncates again. The epoch cache file is trimmed by
//! `Log::open` to whatever data survived. Producer state is rebuilt by reading every
//! remaining batch header (truncation is rare: a leader change with divergence, so a
//! header scan is acceptable); the recovery point is lowered to the new end and the
//! producer snapshots above it are deleted before anything new can be appended.

use crate::error::{Result, StorageError};
use crate::log::Log;
use crate::log_manager::now_ms;
use crate::producer_state::ProducerStateManager;
use crate::recovery::sync_dir;
use crate::segment::Segment;

impl Log {
    /// Removes every batch whose last offset is `>= offset`; returns the new log end
    /// offset. A batch spanning `offset` goes whole (Kafka's `LogSegment.truncateTo`), so
    /// the new log end offset is that batch's base offset (or less across a compaction
    /// gap). No-op when `offset >= log end offset`; `offset <= log start offset` empties
    /// the log and restarts it at `offset` ([`Log::truncate_fully_and_start_at`]).
    pub fn truncate_to(&mut self, offset: i64) -> Result<i64> {
        if offset >= self.log_end_offset {
            // No data to remove, but an epoch this broker started as leader without
            // appending anything (it lost the lead at once) must go, or the follower keeps
            // sending it as `last_fetched_epoch` and the leader keeps answering with the
            // same divergence (Kafka's `truncateTo` does the same).
            self.epochs.truncate_from_end(self.log_end_offset);
            self.epochs.flush()?;
            return Ok(self.log_end_offset);
        }
        self.bump_rewrites();
        if offset <= self.log_start_offset {
            self.truncate_fully_and_start_at(offset)?;
            return Ok(self.log_end_offset);
        }
        // offset > log start >= first base: the first segment always stays.
        let doomed: Vec<i64> = self.segments.range(offset..).map(|(b, _)| *b).collect();
        let deleted = !doomed.is_empty();
        for base in doomed.into_iter().rev() {
            if let Some(segment) = self.segments.remove(&base) {
                segment.delete()?;
            }
        }
        if deleted {
            sync_dir(&self.dir)?;
        }
        let config = self.config.clone();
        let removed = self.active_mut().truncate_to(offset, &config)?;
        let old_end = self.log_end_offset;
        self.log_end_offset = self.active().next_offset();
        // Kafka: `logStartOffset = min(targetOffset, logStartOffset)`; a batch spanning a
        // mid-batch log start may take the end below it.
        self.log_start_offset = self.log_start_offset.min(self.log_end_offset);
        self.truncate_recovery_point()?;
        self.after_truncation()?;
        tracing::info!(
            dir = %self.dir.display(),
            offset,
            old_log_end_offset = old_end,
            log_end_offset = self.log_end_offset,
            bytes_removed = removed,
            "log truncated"
        );
        Ok(self.log_end_offset)
    }

    /// Deletes every segment and restarts the log empty at `offset` (log start = log end
    /// = `offset`), with no producer state and no leader epochs: a follower below the
    /// leader's log start, or truncating below its own.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        if offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset,
            });
        }
        self.bump_rewrites();
        // The segment at `offset` first (emptied in place, or created), so the log never
        // has zero segments even if a later step fails; the others then go from the
        // highest down.
        let config = self.config.clone();
        match self.segments.get_mut(&offset) {
            Some(segment) => {
                segment.truncate_to(offset, &config)?;
            }
            None => {
                let mut segment = Segment::open(&self.dir, offset, &config, now_ms())?;
                segment.recover(&config, &mut |_, _| {})?;
                segment.reset_txn_index(&[])?;
                self.segments.insert(offset, segment);
            }
        }
        let doomed: Vec<i64> = self
            .segments
            .keys()
            .copied()
            .filter(|b| *b != offset)
            .collect();
        for base in doomed.into_iter().rev() {
            if let Some(segment) = self.segments.remove(&base) {
                segment.delete()?;
            }
        }
        sync_dir(&self.dir)?;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.epochs.clear();
        self.reset_recovery_point()?;
        self.after_truncation()?;
        tracing::info!(dir = %self.dir.display(), offset, "log truncated fully");
        Ok(())
    }

    /// What follows any truncation: producer state rebuilt from the remaining headers
    /// (transactions whose markers went are open again), aborted transactions whose
    /// markers went forgotten and the cut segment's `.txnindex` cut, epochs past the
    /// new end dropped, the cleaner checkpoint kept inside the log
    /// (Kafka's `maybeTruncateCheckpoint`), the active segment fsynced.
    fn after_truncation(&mut self) -> Result<()> {
        let mut producers = ProducerStateManager::new();
        for segment in self.segments.values() {
            segment.for_each_producer_batch(&mut |h, marker| {
                producers.update(h, marker);
            })?;
        }
        self.producers = producers;
        self.truncate_txns()?;
        self.epochs.truncate_from_end(self.log_end_offset);
        self.epochs.flush()?;
        if let Some(dirty) = self.cleaner.first_dirty_offset {
            if dirty > self.log_end_offset {
                self.cleaner.first_dirty_offset = Some(self.log_end_offset);
                crate::cleaner::checkpoint::write(&self.dir, self.log_end_offset)?;
            }
        }
        self.active().flush()?;
        self.unflushed_messages = 0;
        Ok(())
    }
}
