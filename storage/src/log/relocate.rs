//! A log reopened from a copy of itself in another log directory taking the old one's
//! place (`log_move.rs`), under the partition lock.
//!
//! The handle keeps the old log's transaction state object (readers of the last stable
//! offset hold it without the lock), so the new log's state moves into it. Reads planned
//! on the old log run without the lock on its files: its rewrite counter is bumped so they
//! redo under the lock, on the new log. A compaction pass of the old log still building
//! finds, when it comes to swap, that the log is not the one it started on (its cleaning
//! guard is the old log's) and drops its work.

use std::sync::Arc;

use crate::log::Log;

impl Log {
    /// How many times a file of the log was rewritten in place (truncation, compaction):
    /// a move copies only appended tails while it has not changed.
    pub(crate) fn rewrite_generation(&self) -> u64 {
        self.rewrites.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Makes this log, just opened from a copy of `old`, the one that serves in its place.
    pub(crate) fn take_place_of(&mut self, old: &Log) {
        old.txns.take_over(&self.txns);
        self.txns = Arc::clone(&old.txns);
        old.bump_rewrites();
    }
}
