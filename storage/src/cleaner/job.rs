//! A compaction pass in three phases, so the partition lock is held only for the cheap
//! ones (issue #13; Kafka's cleaner likewise takes the log lock only to swap segments):
//!
//! 1. `Log::prepare_clean`, under the lock, memory only: captures a [`CleanJob`] (the
//!    plan, the closed segments below the first uncleanable offset with their open
//!    files, each producer's last batch, the aborted transactions, the config, the
//!    log's rewrite generation);
//! 2. [`CleanJob::build`] (`cleaner/build.rs`), without the lock: indexes the dirty
//!    section's keys and writes and fsyncs one `.cleaned` file per segment group,
//!    leaving a [`BuiltClean`];
//! 3. `Log::commit_clean`, under the lock: checks that the log did not change in a way
//!    that invalidates the result, then commits the files as swaps, replaces the
//!    segments and persists the checkpoint (`log/clean.rs`).
//!
//! Appends and reads go on during phase 2: appends only touch the active segment,
//! which is never cleaned, and reads hold their own open files. What can invalidate a
//! build is a truncation (the rewrite generation moved) or retention / DeleteRecords
//! deleting cleaned segments; `commit_clean` then drops the groups wholly gone, or
//! abandons the pass when a group was only partly deleted, leaving the log as it was.
//!
//! One pass per log at a time: the `CleaningGuard` is taken in phase 1 and released
//! when the job or its result is dropped. Uncommitted `.cleaned` files are removed when
//! their `CleanedFile` is dropped (declared before the guard, so they go first).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cleaner::plan::{CleanPlan, SegmentInfo};
use crate::cleaner::swap::CleanedFile;
use crate::config::LogConfig;
use crate::segment::SegmentSource;
use crate::txn_index::AbortedTxn;

/// Marks a log as being cleaned; cleared on drop.
#[derive(Debug)]
pub(crate) struct CleaningGuard(Arc<AtomicBool>);

impl CleaningGuard {
    /// `None` when a pass on this log is already in progress.
    pub fn acquire(flag: &Arc<AtomicBool>) -> Option<Self> {
        flag.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| CleaningGuard(Arc::clone(flag)))
    }

    /// Whether this guard was taken on `flag` (a result is committed to its own log).
    pub fn guards(&self, flag: &Arc<AtomicBool>) -> bool {
        Arc::ptr_eq(&self.0, flag)
    }
}

impl Drop for CleaningGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// One closed segment as the pass sees it.
#[derive(Debug, Clone)]
pub(crate) struct CapturedSegment {
    pub info: SegmentInfo,
    /// The whole segment, from position 0.
    pub source: SegmentSource,
    /// The indexed position at or before the first dirty offset (0 for a segment wholly
    /// dirty or wholly clean): where the key scan starts.
    pub dirty_position: u64,
}

/// What a pass captured under the lock (phase 1); build it without the lock.
#[derive(Debug)]
pub struct CleanJob {
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    pub(crate) now_ms: i64,
    pub(crate) dedupe_buffer_bytes: usize,
    pub(crate) plan: CleanPlan,
    /// Closed segments based below the first uncleanable offset, oldest first.
    pub(crate) segments: Vec<CapturedSegment>,
    /// Producer id → last offset of its latest batch (kept even if emptied, so the
    /// producer's sequence state survives: Kafka's `lastRecordsOfActiveProducers`, also
    /// taken once at the start of a pass).
    pub(crate) last_batch_of_producer: HashMap<i64, i64>,
    /// The aborted transactions that may hold data below the first uncleanable offset
    /// (`cleaner/txn.rs`).
    pub(crate) aborted: Vec<AbortedTxn>,
    /// The log's `.deleted` files waiting for `file.delete.delay.ms`: those named after
    /// a segment this pass replaces would be unlinked by the commit's renames, under the
    /// lock; the build unlinks them first (`cleaner/build.rs`).
    pub(crate) pending_deletions: Vec<PathBuf>,
    pub(crate) generation: u64,
    pub(crate) guard: CleaningGuard,
}

impl CleanJob {
    /// The log's rewrite generation when the job was captured (see `Log::clean_failed`).
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// One segment group rewritten (phase 2), to replace `members` at commit.
#[derive(Debug)]
pub(crate) struct BuiltGroup {
    pub members: Vec<SegmentInfo>,
    /// `None` for a group of empty segments, left as they are.
    pub file: Option<CleanedFile>,
    pub written: u64,
    pub records_removed: u64,
    pub unreadable_batches: u64,
    /// The latest delete horizon of a batch still holding a tombstone or a marker.
    pub delete_horizon: Option<i64>,
    /// The cleaned segment's aborted transaction index, in marker order.
    pub aborted: Vec<AbortedTxn>,
}

/// The result of phase 2, to commit under the lock (`Log::commit_clean`). Dropped
/// uncommitted, it removes its files.
#[derive(Debug)]
pub struct BuiltClean {
    // Before `guard`: fields drop in order, so the files go before another pass may start.
    pub(crate) groups: Vec<BuiltGroup>,
    pub(crate) now_ms: i64,
    /// The new checkpoint: the end of what the key map covers.
    pub(crate) end_offset: i64,
    pub(crate) generation: u64,
    pub(crate) guard: CleaningGuard,
}

impl BuiltClean {
    /// The first dirty offset the pass will checkpoint if committed.
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }
}
