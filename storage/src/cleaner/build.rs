//! Phase 2 of a compaction pass (see `cleaner/job.rs`), without the partition lock:
//! index the dirty section's keys (Kafka's `buildOffsetMap`), then rewrite every group
//! of cleanable segments into a fsynced `.cleaned` file (Kafka's `cleanSegments`).
//! Reads only the segments' captured open files; writes only `.cleaned` files, which
//! nothing else reads or writes (one pass per log at a time).

use crate::batch::BatchHeader;
use crate::cleaner::job::{BuiltClean, BuiltGroup, CapturedSegment, CleanJob};
use crate::cleaner::offset_map::OffsetMap;
use crate::cleaner::plan::{group_segments, SegmentInfo};
use crate::cleaner::record::parse_records;
use crate::cleaner::rewrite::{
    self, delete_horizon, empty_batch, placeholder_batch, FilterContext, Filtered, TxnRole,
};
use crate::cleaner::scan::for_each_batch;
use crate::cleaner::swap::CleanedWriter;
use crate::cleaner::txn::TxnFilter;
use crate::error::Result;
use crate::log::DueDeletions;
use crate::segment::{file_name, SegmentSource, DELETED_SUFFIX};

impl CleanJob {
    /// Builds the pass: blocking file I/O and CPU (decompression, CRC), no lock. On
    /// error every file written so far is removed.
    pub fn build(self) -> Result<BuiltClean> {
        // One transaction state for the whole pass: the groups are written in offset
        // order from the log start (see `cleaner/txn.rs`).
        // Snapshots are written at the log end only: none written from now on lies below
        // a marker of this pass.
        let oldest_snapshot = crate::producer_snapshot::list(&self.dir)?
            .into_iter()
            .min()
            .unwrap_or(i64::MAX);
        let mut txns = TxnFilter::new(&self.aborted, oldest_snapshot);
        let (map, end_offset) = self.build_offset_map(&txns)?;
        let ctx = FilterContext {
            map: &map,
            end_offset,
            now_ms: self.now_ms,
            delete_retention_ms: self.config.delete_retention_ms,
        };
        let cleanable: Vec<&CapturedSegment> = self
            .segments
            .iter()
            .filter(|s| s.info.base_offset < end_offset)
            .collect();
        let infos: Vec<SegmentInfo> = cleanable.iter().map(|s| s.info).collect();
        let mut groups = Vec::new();
        for group in group_segments(&infos, &self.config) {
            let members: Vec<&CapturedSegment> = group
                .iter()
                .filter_map(|i| cleanable.get(*i).copied())
                .collect();
            groups.push(self.build_group(&members, ctx, &mut txns)?);
        }
        self.superseded_deletions(&groups).unlink()?;
        Ok(BuiltClean {
            groups,
            now_ms: self.now_ms,
            end_offset,
            generation: self.generation,
            guard: self.guard,
        })
    }

    /// Indexes the dirty section's keys. Returns the map and the exclusive end of what
    /// it covers: the first uncleanable offset, or the first batch that did not fit.
    /// Batches of aborted transactions stay out of it (Kafka's rule): they go whatever
    /// their keys, and must not shadow an older committed value of one.
    fn build_offset_map(&self, txns: &TxnFilter) -> Result<(OffsetMap, i64)> {
        let plan = &self.plan;
        let mut map = OffsetMap::new(self.dedupe_buffer_bytes);
        let mut end = plan.first_uncleanable_offset;
        let start = plan.first_dirty_offset;
        let dirty = self.segments.iter().filter(|s| {
            s.info.next_offset > start && s.info.base_offset < plan.first_uncleanable_offset
        });
        for segment in dirty {
            let mut full = false;
            let source = SegmentSource {
                position: segment.dirty_position,
                ..segment.source.clone()
            };
            for_each_batch(&source, start, &mut |bytes, header| {
                if header.base_offset >= plan.first_uncleanable_offset {
                    return Ok(false);
                }
                if header.is_control() || txns.is_aborted(header) {
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
                        map.put(key, header.base_offset.saturating_add(r.offset_delta));
                    }
                }
                Ok(true)
            })?;
            if full {
                tracing::warn!(dir = %self.dir.display(), end_offset = end, keys = map.len(), "cleaner key map full; cleaning up to where it filled");
                break;
            }
        }
        Ok((map, end.max(start)))
    }

    /// Rewrites one group of consecutive closed segments into one `.cleaned` file.
    fn build_group(
        &self,
        members: &[&CapturedSegment],
        ctx: FilterContext<'_>,
        txns: &mut TxnFilter,
    ) -> Result<BuiltGroup> {
        let infos: Vec<SegmentInfo> = members.iter().map(|s| s.info).collect();
        let mut built = BuiltGroup {
            members: infos,
            file: None,
            written: 0,
            records_removed: 0,
            unreadable_batches: 0,
            delete_horizon: None,
            aborted: Vec::new(),
        };
        let (Some(first), Some(last)) = (members.first(), members.last()) else {
            return Ok(built);
        };
        if last.info.next_offset == first.info.base_offset {
            built.written = members.iter().map(|s| s.info.size).sum(); // only empty segments
            return Ok(built);
        }
        let group_last_offset = last.info.next_offset - 1;
        // Dropped on error: the partial file is removed.
        let mut writer = CleanedWriter::create(&self.dir, first.info.base_offset, &self.config)?;
        for member in members {
            self.write_segment(
                member,
                ctx,
                txns,
                group_last_offset,
                &mut writer,
                &mut built,
            )?;
        }
        built.written = writer.written();
        built.file = Some(writer.finish()?);
        Ok(built)
    }

    fn write_segment(
        &self,
        member: &CapturedSegment,
        ctx: FilterContext<'_>,
        txns: &mut TxnFilter,
        group_last_offset: i64,
        writer: &mut CleanedWriter,
        built: &mut BuiltGroup,
    ) -> Result<()> {
        for_each_batch(
            &member.source,
            member.info.base_offset,
            &mut |bytes, header| {
                // Past what this pass indexed (the key map's end, the last stable
                // offset) nothing is decided: the state still follows every batch.
                let decided = header.base_offset < ctx.end_offset;
                let role = if header.is_control() {
                    let done = txns.on_marker(header);
                    if done && decided && header.has_producer_id() {
                        TxnRole::MarkerDone
                    } else {
                        TxnRole::Keyed
                    }
                } else if txns.on_data(header) && decided {
                    TxnRole::Aborted
                } else {
                    TxnRole::Keyed
                };
                let mut written = true;
                match rewrite::filter_batch(bytes, header, role, ctx) {
                    Filtered::Unchanged => {
                        if let Some(h) = delete_horizon(header).filter(|h| *h > ctx.now_ms) {
                            built.delete_horizon = built.delete_horizon.max(Some(h));
                        }
                        writer.write(bytes)?;
                    }
                    Filtered::Unreadable => {
                        built.unreadable_batches += 1;
                        writer.write(bytes)?;
                    }
                    Filtered::Rewritten {
                        bytes,
                        records_removed,
                        delete_horizon,
                    } => {
                        built.records_removed += records_removed as u64;
                        built.delete_horizon = built.delete_horizon.max(delete_horizon);
                        writer.write(&bytes)?;
                    }
                    Filtered::Empty { records_removed } => {
                        built.records_removed += records_removed as u64;
                        // The producer's last batch keeps its identity (sequence state);
                        // a group's last batch only its offsets.
                        written = self.is_last_of_producer(header);
                        if written {
                            writer.write(&empty_batch(header))?;
                        } else if header.last_offset() == group_last_offset {
                            writer.write(&placeholder_batch(header))?;
                        }
                    }
                }
                if written {
                    built.aborted.extend(txns.on_written(header));
                } else if header.is_control() {
                    txns.on_dropped_marker(header);
                }
                Ok(true)
            },
        )
    }

    /// The pending `.deleted` files (an earlier pass's or retention's) that the commit
    /// would replace when it renames this pass's replaced segments `.deleted`: a rename
    /// onto an existing file unlinks it, and unlinking a large segment under the
    /// partition lock stalled produce for hundreds of milliseconds (a second pass over a
    /// freshly cleaned 1 GB log). They go now instead, a little before their delay is
    /// over, which the commit would have done anyway; readers hold their files open.
    fn superseded_deletions(&self, groups: &[BuiltGroup]) -> DueDeletions {
        let replaced = groups
            .iter()
            .filter(|g| g.file.is_some())
            .flat_map(|g| g.members.iter())
            .flat_map(|m| {
                ["log", "index", "timeindex"].map(|ext| {
                    self.dir
                        .join(format!("{}{DELETED_SUFFIX}", file_name(m.base_offset, ext)))
                })
            });
        DueDeletions(
            replaced
                .filter(|p| self.pending_deletions.contains(p))
                .collect(),
        )
    }

    /// Whether `header` is its producer's latest batch (kept, even empty, so the
    /// producer's sequence state survives a restart: Kafka's `RETAIN_EMPTY`).
    fn is_last_of_producer(&self, header: &BatchHeader) -> bool {
        header.has_producer_id()
            && self.last_batch_of_producer.get(&header.producer_id) == Some(&header.last_offset())
    }
}
