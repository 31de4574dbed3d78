//! The compaction pass of a partition log (Kafka's `Cleaner.doClean`): plan, index the
//! dirty section's keys, rewrite every cleanable segment group through a swap file,
//! replace the segments in memory, persist the checkpoint. See `crate::cleaner` for the
//! rules; this file holds only the orchestration that needs the log's private state.
//!
//! Runs under the partition lock (via `LogHandle::clean`), synchronously. Producer
//! state is unchanged by a clean: the last batch of every producer is kept (emptied if
//! needed), so replaying the headers at the next open yields the same state.

use crate::batch::{BatchHeader, BatchIter};
use crate::cleaner::offset_map::OffsetMap;
use crate::cleaner::plan::{group_segments, plan, CleanPlan, SegmentInfo};
use crate::cleaner::record::parse_records;
use crate::cleaner::rewrite::{self, delete_horizon, empty_batch, FilterContext, Filtered};
use crate::cleaner::swap::{self, CleanedWriter};
use crate::cleaner::{checkpoint, CleanOutcome};
use crate::error::{Result, StorageError};
use crate::log::Log;
use crate::recovery::sync_dir;
use crate::segment::Segment;

/// How many bytes of a segment are read at a time while scanning it.
const READ_CHUNK: u64 = 1024 * 1024;

/// Calls `f` with each (whole batch bytes, header) of `segment` from `from_offset`.
/// Stops early when `f` returns false.
fn for_each_batch(
    segment: &Segment,
    from_offset: i64,
    f: &mut dyn FnMut(&[u8], &BatchHeader) -> Result<bool>,
) -> Result<()> {
    let mut offset = from_offset.max(segment.base_offset());
    loop {
        let bytes = super::read::segment_batches(segment, offset, READ_CHUNK)?;
        if bytes.is_empty() {
            return Ok(());
        }
        for item in BatchIter::new(&bytes) {
            let (at, header) = item.map_err(|reason| StorageError::CorruptLog {
                path: segment_path(segment),
                position: 0,
                reason,
            })?;
            if !f(&bytes[at..at + header.size()], &header)? {
                return Ok(());
            }
            offset = header.next_offset();
        }
    }
}

fn segment_path(segment: &Segment) -> std::path::PathBuf {
    std::path::PathBuf::from(crate::segment::file_name(segment.base_offset(), "log"))
}

impl Log {
    /// What planning needs about each segment, oldest first (the last is active).
    pub fn segment_infos(&self) -> Vec<SegmentInfo> {
        self.segments
            .values()
            .map(|s| SegmentInfo {
                base_offset: s.base_offset(),
                next_offset: s.next_offset(),
                size: s.size(),
                max_timestamp: s.max_timestamp().map(|(ts, _)| ts),
                first_timestamp: s.roll_state().first_batch_timestamp,
            })
            .collect()
    }

    /// The cleaner's view of this log now.
    pub fn clean_plan(&self, now_ms: i64) -> CleanPlan {
        plan(
            &self.segment_infos(),
            self.cleaner.first_dirty_offset,
            self.log_start_offset,
            &self.config,
            now_ms,
        )
    }

    /// `Some(dirty ratio)` when a compacted log is due for cleaning (the cleaner cleans
    /// the dirtiest first); `None` otherwise. Cheap: no I/O.
    pub fn cleaning_priority(&self, now_ms: i64) -> Option<f64> {
        if !self.config.cleanup_compact {
            return None;
        }
        let plan = self.clean_plan(now_ms);
        let horizon_due = self
            .cleaner
            .latest_delete_horizon
            .is_some_and(|h| h <= now_ms);
        (plan.needs_cleaning(&self.config) || horizon_due).then(|| plan.dirty_ratio())
    }

    /// One clean pass if the log is due (see `cleaning_priority`), with a key map of at
    /// most `dedupe_buffer_bytes`.
    pub fn clean(&mut self, now_ms: i64, dedupe_buffer_bytes: usize) -> Result<CleanOutcome> {
        if self.cleaning_priority(now_ms).is_none() {
            return Ok(CleanOutcome::default());
        }
        let plan = self.clean_plan(now_ms);
        let (map, end_offset) = self.build_offset_map(&plan, dedupe_buffer_bytes)?;
        let ctx = FilterContext {
            map: &map,
            end_offset,
            now_ms,
            delete_retention_ms: self.config.delete_retention_ms,
        };
        let infos: Vec<SegmentInfo> = self
            .segment_infos()
            .into_iter()
            .take(self.segments.len().saturating_sub(1))
            .filter(|s| s.base_offset < end_offset)
            .collect();
        let mut outcome = CleanOutcome {
            cleaned: true,
            segments_before: infos.len(),
            bytes_before: infos.iter().map(|s| s.size).sum(),
            first_dirty_offset: end_offset,
            ..CleanOutcome::default()
        };
        let mut horizon: Option<i64> = None;
        for group in group_segments(&infos, &self.config) {
            let members: Vec<SegmentInfo> = group
                .iter()
                .filter_map(|i| infos.get(*i).copied())
                .collect();
            let written = self.clean_group(&members, ctx, &mut outcome, &mut horizon)?;
            outcome.bytes_after += written;
            outcome.segments_after += 1;
        }
        self.cleaner.first_dirty_offset = Some(end_offset);
        self.cleaner.latest_delete_horizon = horizon;
        checkpoint::write(&self.dir, end_offset)?;
        self.purge_deleted_files(now_ms)?;
        Ok(outcome)
    }

    /// Indexes the dirty section's keys. Returns the map and the exclusive end of what
    /// it covers: the first uncleanable offset, or the first batch that did not fit.
    fn build_offset_map(&self, plan: &CleanPlan, budget: usize) -> Result<(OffsetMap, i64)> {
        let mut map = OffsetMap::new(budget);
        let mut end = plan.first_uncleanable_offset;
        let start = plan.first_dirty_offset;
        let dirty = self
            .segments
            .values()
            .filter(|s| s.next_offset() > start && s.base_offset() < plan.first_uncleanable_offset);
        'segments: for segment in dirty {
            let mut full = false;
            for_each_batch(segment, start, &mut |bytes, header| {
                if header.base_offset >= plan.first_uncleanable_offset {
                    return Ok(false);
                }
                if header.is_control() {
                    return Ok(true);
                }
                let Some(payload) = rewrite::payload(bytes, header) else {
                    return Ok(true);
                };
                let Some(records) = parse_records(&payload, header.records_count) else {
                    return Ok(true);
                };
                let new: Vec<&[u8]> = records
                    .iter()
                    .filter_map(|r| r.key)
                    .filter(|k| map.get(k).is_none())
                    .collect();
                if !map.has_room_for(new.len(), new.iter().map(|k| k.len()).sum()) {
                    // Kafka's rule: clean only up to where the map was full.
                    end = header.base_offset;
                    full = true;
                    return Ok(false);
                }
                for r in &records {
                    if let Some(key) = r.key {
                        map.put(key, header.base_offset + r.offset_delta);
                    }
                }
                Ok(true)
            })?;
            if full {
                tracing::warn!(dir = %self.dir.display(), end_offset = end, keys = map.len(), "cleaner key map full; cleaning up to where it filled");
                break 'segments;
            }
        }
        Ok((map, end.max(start)))
    }

    /// Rewrites one group of consecutive closed segments into one, through a swap file,
    /// and replaces them in memory. Returns the new segment's size.
    fn clean_group(
        &mut self,
        members: &[SegmentInfo],
        ctx: FilterContext<'_>,
        outcome: &mut CleanOutcome,
        horizon: &mut Option<i64>,
    ) -> Result<u64> {
        let (Some(first), Some(last)) = (members.first(), members.last()) else {
            return Ok(0);
        };
        let group_last_offset = last.next_offset - 1;
        if last.next_offset == first.base_offset {
            return Ok(members.iter().map(|s| s.size).sum()); // only empty segments
        }
        // Dropped on error: the partial file is removed.
        let mut writer = CleanedWriter::create(&self.dir, first.base_offset)?;
        self.write_group(
            members,
            ctx,
            group_last_offset,
            &mut writer,
            outcome,
            horizon,
        )?;
        let written = writer.written();
        writer.finish()?.commit()?;
        // Committed: from here a crash is completed by `swap::complete_interrupted_cleans`.
        let due_ms = ctx.now_ms.saturating_add(self.config.file_delete_delay_ms);
        for member in members {
            if let Some(old) = self.segments.remove(&member.base_offset) {
                let paths = old.rename_for_deletion()?;
                self.pending_deletions
                    .extend(paths.into_iter().map(|p| (due_ms, p)));
            }
        }
        swap::install(&self.dir, first.base_offset)?;
        let mut segment = Segment::open(&self.dir, first.base_offset, &self.config, ctx.now_ms)?;
        segment.recover(&self.config, &mut |_| {})?;
        segment.flush()?;
        sync_dir(&self.dir)?;
        self.segments.insert(first.base_offset, segment);
        Ok(written)
    }

    fn write_group(
        &self,
        members: &[SegmentInfo],
        ctx: FilterContext<'_>,
        group_last_offset: i64,
        writer: &mut CleanedWriter,
        outcome: &mut CleanOutcome,
        horizon: &mut Option<i64>,
    ) -> Result<()> {
        for member in members {
            let Some(segment) = self.segments.get(&member.base_offset) else {
                continue;
            };
            for_each_batch(segment, member.base_offset, &mut |bytes, header| {
                let mut note_horizon = |h: i64| *horizon = Some(horizon.map_or(h, |x| x.max(h)));
                match rewrite::filter_batch(bytes, header, ctx) {
                    Filtered::Unchanged => {
                        if let Some(h) = delete_horizon(header).filter(|h| *h > ctx.now_ms) {
                            note_horizon(h);
                        }
                        writer.write(bytes)?;
                    }
                    Filtered::Unreadable => {
                        outcome.unreadable_batches += 1;
                        writer.write(bytes)?;
                    }
                    Filtered::Rewritten {
                        bytes,
                        records_removed,
                        delete_horizon,
                    } => {
                        outcome.records_removed += records_removed as u64;
                        if let Some(h) = delete_horizon {
                            note_horizon(h);
                        }
                        writer.write(&bytes)?;
                    }
                    Filtered::Empty { records_removed } => {
                        outcome.records_removed += records_removed as u64;
                        if header.last_offset() == group_last_offset
                            || self.is_last_of_producer(header)
                        {
                            writer.write(&empty_batch(header))?;
                        }
                    }
                }
                Ok(true)
            })?;
        }
        Ok(())
    }

    /// Whether `header` is its producer's latest batch (kept, even empty, so the
    /// producer's sequence state survives a restart: Kafka's `RETAIN_EMPTY`).
    fn is_last_of_producer(&self, header: &BatchHeader) -> bool {
        header.has_producer_id()
            && self
                .producers
                .entry(header.producer_id)
                .and_then(|e| e.batches.back())
                .is_some_and(|b| b.last_offset == header.last_offset())
    }
}
