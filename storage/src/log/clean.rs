//! The compaction pass of a partition log (Kafka's `Cleaner.doClean`), split so that
//! the partition lock is held only to capture the pass and to install its result (see
//! `cleaner/job.rs` for the phases and `crate::cleaner` for the rules). This file holds
//! the two locked phases, which need the log's private state: `prepare_clean` (memory
//! only) and `commit_clean` (validate, swap, replace in memory, checkpoint).
//!
//! Producer state is unchanged by a clean: the last batch of every producer is kept
//! (emptied if needed), so replaying the headers at the next open yields the same state.
//! Transactions too: no open transaction is cleaned (the plan stops at its first
//! offset), and a marker stays while any batch of its transaction does
//! (`cleaner/txn.rs`), so a replay reopens nothing. The cleaned segments' aborted
//! transaction indexes and the log's aborted list are replaced by what the pass kept.

use std::sync::atomic::Ordering;

use crate::cleaner::job::{BuiltClean, BuiltGroup, CapturedSegment, CleanJob, CleaningGuard};
use crate::cleaner::plan::{plan, CleanPlan, SegmentInfo};
use crate::cleaner::{checkpoint, swap, CleanOutcome};
use crate::error::{Result, StorageError};
use crate::log::Log;
use crate::recovery::sync_dir;
use crate::segment::{Rebuild, Segment, SegmentSource};
use crate::txn_index::AbortedTxn;

fn info_of(s: &Segment) -> SegmentInfo {
    SegmentInfo {
        base_offset: s.base_offset(),
        next_offset: s.next_offset(),
        size: s.size(),
        max_timestamp: s.max_timestamp().map(|(ts, _)| ts),
        first_timestamp: s.roll_state().first_batch_timestamp,
    }
}

/// What became of a built group's segments while the pass ran without the lock.
enum GroupState {
    /// Every member is there as captured: install the group.
    Unchanged,
    /// Every member was deleted (retention, DeleteRecords): nothing to replace.
    Gone,
    /// Some member went or changed: the group's file would resurrect or lose data.
    Changed,
}

impl Log {
    /// What planning needs about each segment, oldest first (the last is active).
    pub fn segment_infos(&self) -> Vec<SegmentInfo> {
        self.segments.values().map(info_of).collect()
    }

    /// The cleaner's view of this log now.
    pub fn clean_plan(&self, now_ms: i64) -> CleanPlan {
        plan(
            &self.segment_infos(),
            self.cleaner.first_dirty_offset,
            self.log_start_offset,
            self.producers.first_unstable_offset(),
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

    /// One whole clean pass if the log is due (see `cleaning_priority`), with a key map
    /// of at most `dedupe_buffer_bytes`: the three phases back to back, under the
    /// caller's exclusive access. `LogHandle::clean` runs the middle one without the lock.
    pub fn clean(&mut self, now_ms: i64, dedupe_buffer_bytes: usize) -> Result<CleanOutcome> {
        let Some(job) = self.prepare_clean(now_ms, dedupe_buffer_bytes) else {
            return Ok(CleanOutcome::default());
        };
        let generation = job.generation();
        let outcome = match job.build() {
            Ok(built) => self.commit_clean(built)?,
            Err(e) => return self.clean_failed(generation, e),
        };
        self.take_due_deletions(now_ms).unlink()?;
        Ok(outcome)
    }

    /// Phase 1: captures a pass if the log is due and no other pass on it is in
    /// progress. Memory only, but for reopening segment files the file pool closed.
    pub fn prepare_clean(&self, now_ms: i64, dedupe_buffer_bytes: usize) -> Option<CleanJob> {
        self.cleaning_priority(now_ms)?;
        let guard = CleaningGuard::acquire(&self.cleaning)?;
        let plan = self.clean_plan(now_ms);
        let active_base = self.active().base_offset();
        let segments = self
            .segments
            .range(..plan.first_uncleanable_offset.min(active_base))
            .map(|(base, s)| {
                Ok(CapturedSegment {
                    info: info_of(s),
                    source: SegmentSource {
                        position: 0,
                        ..s.open_source(*base, i64::MAX)?
                    },
                    dirty_position: s.indexed_position(plan.first_dirty_offset.max(*base)),
                })
            })
            .collect::<Result<Vec<_>>>();
        // A file the pool cannot reopen now (out of descriptors, or a disk error the next
        // read reports anyway) skips this pass; the cleaner tries again later.
        let segments = match segments {
            Ok(segments) => segments,
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "compaction pass skipped: a segment could not be opened");
                return None;
            }
        };
        let last_batch_of_producer = self
            .producers
            .entries()
            .filter_map(|(id, e)| Some((id, e.batches.back()?.last_offset)))
            .collect();
        let aborted = self.aborted_transactions(
            self.log_start_offset,
            plan.first_uncleanable_offset.min(active_base),
        );
        Some(CleanJob {
            dir: self.dir.clone(),
            config: self.config.clone(),
            now_ms,
            dedupe_buffer_bytes,
            plan,
            segments,
            last_batch_of_producer,
            aborted,
            pending_deletions: self.pending_deletion_paths(),
            generation: self.rewrites.load(Ordering::Acquire),
            guard,
        })
    }

    /// Phase 3: installs a built pass, unless the log changed underneath in a way that
    /// invalidates it: a truncation (the rewrite generation moved) or a group partly
    /// deleted by retention / DeleteRecords abandon the whole pass (files removed, log
    /// and checkpoint untouched, `abandoned` set); a group wholly deleted is dropped.
    /// Otherwise exactly the single-phase pass: each group's file becomes a swap, the
    /// old segments are renamed `.deleted`, the new one is opened, then the checkpoint.
    /// `.deleted` files whose delay is over are left to `take_due_deletions`, so that
    /// the caller unlinks them after releasing the lock.
    pub fn commit_clean(&mut self, built: BuiltClean) -> Result<CleanOutcome> {
        if !built.guard.guards(&self.cleaning) {
            return Err(StorageError::TaskFailed {
                reason: format!(
                    "a clean built for another log reached {}",
                    self.dir.display()
                ),
            });
        }
        if self.rewrites.load(Ordering::Acquire) != built.generation {
            return Ok(self.abandon_clean("the log was truncated"));
        }
        let BuiltClean {
            groups,
            now_ms,
            end_offset,
            ..
        } = built;
        let mut installing = Vec::with_capacity(groups.len());
        for group in groups {
            match self.group_state(&group.members) {
                GroupState::Unchanged => installing.push(group),
                GroupState::Gone => {} // its file is removed as it drops
                GroupState::Changed => {
                    return Ok(self.abandon_clean("segments were deleted during the pass"))
                }
            }
        }
        let mut outcome = CleanOutcome {
            cleaned: true,
            first_dirty_offset: end_offset,
            ..CleanOutcome::default()
        };
        let mut horizon: Option<i64> = None;
        for group in &installing {
            outcome.segments_before += group.members.len();
            outcome.bytes_before += group.members.iter().map(|s| s.size).sum::<u64>();
            outcome.segments_after += 1;
            outcome.bytes_after += group.written;
            outcome.records_removed += group.records_removed;
            outcome.unreadable_batches += group.unreadable_batches;
            horizon = horizon.max(group.delete_horizon);
        }
        self.install_groups(installing, now_ms)?;
        self.cleaner.first_dirty_offset = Some(end_offset);
        self.cleaner.latest_delete_horizon = horizon;
        checkpoint::write(&self.dir, end_offset)?;
        Ok(outcome)
    }

    /// What to do when phase 2 failed: a failure caused by a truncation racing the
    /// build (a segment cut under the scan) abandons the pass quietly; any other is
    /// the caller's error. The build's files are already removed.
    pub fn clean_failed(&self, generation: u64, error: StorageError) -> Result<CleanOutcome> {
        if self.rewrites.load(Ordering::Acquire) != generation {
            return Ok(self.abandon_clean("the log was truncated"));
        }
        Err(error)
    }

    fn abandon_clean(&self, reason: &'static str) -> CleanOutcome {
        tracing::info!(dir = %self.dir.display(), reason, "clean pass abandoned; the next pass redoes it");
        CleanOutcome {
            abandoned: true,
            ..CleanOutcome::default()
        }
    }

    fn group_state(&self, members: &[SegmentInfo]) -> GroupState {
        let active_base = self.active().base_offset();
        let mut unchanged = 0;
        let mut gone = 0;
        for member in members {
            match self.segments.get(&member.base_offset) {
                None => gone += 1,
                Some(s) if member.base_offset < active_base && info_of(s) == *member => {
                    unchanged += 1
                }
                Some(_) => {}
            }
        }
        if unchanged == members.len() {
            GroupState::Unchanged
        } else if gone == members.len() {
            GroupState::Gone
        } else {
            GroupState::Changed
        }
    }

    /// Replaces each group's segments by its cleaned file (steps 2-4 of
    /// `cleaner/swap.rs`), every group at once: under the lock, a pass of N groups costs
    /// three directory fsyncs instead of three per group. Renames and opens only: the
    /// files and their indexes were written and fsynced by the build.
    fn install_groups(&mut self, groups: Vec<BuiltGroup>, now_ms: i64) -> Result<()> {
        let mut committed: Vec<(i64, Vec<SegmentInfo>, Vec<AbortedTxn>, Rebuild)> =
            Vec::with_capacity(groups.len());
        for group in groups {
            let Some(file) = group.file else {
                continue; // only empty segments: left as they are
            };
            let base_offset = file.base_offset();
            // The group's aborted transactions as the pass kept them (`cleaner/txn.rs`),
            // as `B.txnindex.swap`, before the commit; empty when the pass dropped every
            // entry of an existing `B.txnindex`, which a crash recovery would otherwise
            // keep with the new `B.log` (it removes only the other members' indexes).
            let aborted = group.aborted;
            let stale_index = crate::txn_index::path(&self.dir, base_offset).exists();
            let written = if aborted.is_empty() && !stale_index {
                Ok(())
            } else {
                swap::write_txn_index_swap(&self.dir, base_offset, &aborted)
            };
            let rebuild = match written.and_then(|()| file.commit()) {
                Ok(rebuild) => rebuild,
                Err(e) => {
                    swap::uncommit(&self.dir, base_offset);
                    for (base, ..) in &committed {
                        swap::uncommit(&self.dir, *base);
                    }
                    return Err(e);
                }
            };
            committed.push((base_offset, group.members, aborted, rebuild));
        }
        if committed.is_empty() {
            return Ok(());
        }
        // The commit point of every group: from here a crash is completed by
        // `swap::complete_interrupted_cleans`.
        sync_dir(&self.dir)?;
        let due_ms = now_ms.saturating_add(self.config.file_delete_delay_ms);
        for (base_offset, members, ..) in &committed {
            for member in members {
                if let Some(old) = self.segments.remove(&member.base_offset) {
                    let paths = old.rename_for_deletion()?;
                    self.pending_deletions
                        .extend(paths.into_iter().map(|p| (due_ms, p)));
                }
            }
            swap::install(&self.dir, *base_offset)?;
        }
        sync_dir(&self.dir)?;
        for (base_offset, members, aborted, rebuild) in committed {
            let mut segment =
                Segment::open_cleaned(&self.dir, base_offset, &self.config, now_ms, rebuild)?;
            // Reads the `.txnindex` installed from its swap (fsynced when written) and
            // finds it equal: no write.
            segment.reset_txn_index(&aborted)?;
            let end = members.last().map_or(base_offset, |m| m.next_offset);
            self.replace_aborted_between(base_offset, end, aborted);
            self.segments.insert(base_offset, segment);
        }
        // The new index files' names.
        sync_dir(&self.dir)
    }
}
