//! The transactional half of a partition log (Kafka's `ProducerStateManager` transaction
//! bookkeeping plus `LogSegment.updateTxnIndex` / `UnifiedLog.collectAbortedTransactions`):
//! aborted transactions, open transactions and the first unstable offset, kept where a
//! `LogHandle` reads them without the partition lock.
//!
//! Invariants: `TxnShared` is changed only under the log's lock, right after the producer
//! state it mirrors, so readers see it in step with the log (as the log end offset
//! atomics). `aborted` holds every aborted transaction of the log, sorted by marker
//! offset, exactly the concatenation of the segments' `.txnindex` files; it shrinks with
//! retention and truncation. A completed transaction stays "unreplicated" (it still
//! holds the last stable offset at its first offset) until the high watermark passes its
//! marker (Kafka's `unreplicatedTxns`), so `read_committed` consumers never read a
//! transaction whose marker a new leader might not have. Thread-safe: atomics and a
//! short `RwLock`, never held across I/O.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use parking_lot::RwLock;

use crate::error::Result;
use crate::log::Log;
use crate::producer_state::CompletedTxn;
use crate::txn_index::{self, AbortedTxn, OngoingTxn};

/// `ongoing_first` when no transaction is open.
const NONE: i64 = i64::MAX;

#[derive(Debug, Default)]
struct TxnView {
    aborted: Vec<AbortedTxn>,
    ongoing: Vec<OngoingTxn>,
    /// (first offset, marker offset) of completed transactions whose marker may still
    /// be at or above the high watermark, in marker order.
    unreplicated: VecDeque<(i64, i64)>,
}

/// A log's transaction state as readers without the partition lock see it.
#[derive(Debug)]
pub(crate) struct TxnShared {
    ongoing_first: AtomicI64,
    unreplicated: AtomicUsize,
    view: RwLock<TxnView>,
}

impl Default for TxnShared {
    fn default() -> Self {
        TxnShared {
            ongoing_first: AtomicI64::new(NONE),
            unreplicated: AtomicUsize::new(0),
            view: RwLock::default(),
        }
    }
}

impl TxnShared {
    /// Kafka's first unstable offset with the high watermark at `high_watermark`: the
    /// first offset of the oldest open transaction, or of a completed one whose marker is
    /// not yet below the high watermark. Completed ones it passed are forgotten.
    pub fn first_unstable_offset(&self, high_watermark: i64) -> Option<i64> {
        let ongoing = self.ongoing_first.load(Ordering::Acquire);
        let mut first = (ongoing != NONE).then_some(ongoing);
        if self.unreplicated.load(Ordering::Acquire) > 0 {
            let mut view = self.view.write();
            self.forget_replicated(&mut view, high_watermark);
            if let Some(min) = view.unreplicated.iter().map(|(f, _)| *f).min() {
                first = Some(first.map_or(min, |f| f.min(min)));
            }
        }
        first
    }

    /// Forgets the completed transactions whose markers are below the high watermark
    /// (Kafka's `onHighWatermarkUpdated`). Called after every log operation too, so a
    /// partition whose LSO nobody asks for (a follower) does not accumulate them.
    pub fn forget_replicated_below(&self, high_watermark: i64) {
        if self.unreplicated.load(Ordering::Acquire) > 0 {
            self.forget_replicated(&mut self.view.write(), high_watermark);
        }
    }

    fn forget_replicated(&self, view: &mut TxnView, high_watermark: i64) {
        // In marker order: the ones below the high watermark are at the front.
        while view
            .unreplicated
            .front()
            .is_some_and(|(_, last)| *last < high_watermark)
        {
            view.unreplicated.pop_front();
        }
        self.set_unreplicated_len(view);
    }

    /// min(high watermark, first unstable offset), never below the log start (as Kafka's
    /// `updateFirstUnstableOffset`: a transaction whose start was deleted by retention or
    /// DeleteRecords holds the LSO at the log start).
    pub fn last_stable_offset(&self, high_watermark: i64, log_start_offset: i64) -> i64 {
        self.first_unstable_offset(high_watermark)
            .map_or(high_watermark, |first| {
                first.max(log_start_offset).min(high_watermark)
            })
    }

    pub fn aborted_transactions(&self, start: i64, end: i64) -> Vec<AbortedTxn> {
        txn_index::collect(&self.view.read().aborted, start, end)
    }

    pub fn ongoing_transactions(&self) -> Vec<OngoingTxn> {
        self.view.read().ongoing.clone()
    }

    /// Whether the producer has a transaction open here at this epoch (Kafka's
    /// `hasOngoingTransaction`); an atomic load when none is open.
    pub fn has_ongoing(&self, producer_id: i64, producer_epoch: i16) -> bool {
        if self.ongoing_first.load(Ordering::Acquire) == NONE {
            return false;
        }
        self.view
            .read()
            .ongoing
            .iter()
            .any(|t| t.producer_id == producer_id && t.producer_epoch == producer_epoch)
    }

    /// Takes over `other`'s state (a log reopened elsewhere replacing the one this belongs
    /// to: `log/relocate.rs`), so readers holding this one see the new log's.
    pub(crate) fn take_over(&self, other: &TxnShared) {
        let mut view = self.view.write();
        *view = std::mem::take(&mut *other.view.write());
        self.ongoing_first.store(
            other.ongoing_first.load(Ordering::Acquire),
            Ordering::Release,
        );
        self.set_unreplicated_len(&view);
    }

    fn set_unreplicated_len(&self, view: &TxnView) {
        self.unreplicated
            .store(view.unreplicated.len(), Ordering::Release);
    }
}

impl Log {
    /// Aborted transactions overlapping `[start, end)` (see [`txn_index::collect`]):
    /// memory only.
    pub fn aborted_transactions(&self, start: i64, end: i64) -> Vec<AbortedTxn> {
        self.txns.aborted_transactions(start, end)
    }

    /// First offset of the oldest open transaction.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers.first_unstable_offset()
    }

    /// The open transactions, oldest first.
    pub fn ongoing_transactions(&self) -> Vec<OngoingTxn> {
        self.producers.ongoing_transactions()
    }

    /// The log's last stable offset for a high watermark `high_watermark` (within [log
    /// start, log end]): below it, every transaction is decided (see the module docs).
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        self.txns
            .last_stable_offset(high_watermark, self.log_start_offset)
    }

    pub(crate) fn txn_shared(&self) -> std::sync::Arc<TxnShared> {
        std::sync::Arc::clone(&self.txns)
    }

    /// Moves this log's transaction state into `shared` and shares it from now on: a log
    /// opened lazily (`handle/lazy.rs`) joins the `TxnShared` its handle was created with.
    /// Called before the log is published, under the handle's lock.
    pub(crate) fn adopt_txn_shared(&mut self, shared: &std::sync::Arc<TxnShared>) {
        let view = std::mem::take(&mut *self.txns.view.write());
        let mut target = shared.view.write();
        *target = view;
        shared.set_unreplicated_len(&target);
        shared.ongoing_first.store(
            self.txns.ongoing_first.load(Ordering::Acquire),
            Ordering::Release,
        );
        drop(target);
        self.txns = std::sync::Arc::clone(shared);
    }

    /// The aborted entry of a transaction `completed` just ended, given the producer
    /// state after it.
    pub(crate) fn aborted_entry(&self, completed: &CompletedTxn) -> Option<AbortedTxn> {
        self.producers.aborted_entry(completed)
    }

    /// After markers were written to the active segment (and the producer state
    /// updated): indexes the aborted transactions in the active segment and publishes
    /// everything. `aborted` are the entries of `completed`'s aborts, in order.
    pub(crate) fn record_completed(
        &mut self,
        completed: &[CompletedTxn],
        aborted: &[AbortedTxn],
    ) -> Result<()> {
        if completed.is_empty() {
            // Most appends: only a transactional data batch may have opened one.
            self.publish_ongoing();
            return Ok(());
        }
        if !aborted.is_empty() {
            // The markers are in the log and applied to the producer state: the append
            // stands, and failing it now would have the coordinator write them again. The
            // `.txnindex` is derived from the log; memory (below) serves reads, and the
            // file is rewritten before the recovery point passes these markers.
            if let Err(e) = self.active_mut().append_aborted(aborted) {
                let base = self.active().base_offset();
                tracing::warn!(dir = %self.dir.display(), segment = base, error = %e, "aborted transactions not written to the txn index; rewritten at the next flush");
                self.txn_index_behind = Some(self.txn_index_behind.map_or(base, |b| b.min(base)));
            }
        }
        {
            let mut view = self.txns.view.write();
            view.aborted.extend_from_slice(aborted);
            view.unreplicated
                .extend(completed.iter().map(|c| (c.first_offset, c.last_offset)));
            self.txns.set_unreplicated_len(&view);
        }
        self.publish_ongoing();
        Ok(())
    }

    /// Rewrites, from the aborted entries in memory, the `.txnindex` of every segment from
    /// the one whose append could not write its entries (`txn_index_behind`) on; an error
    /// leaves it due, and the caller's flush fails, so the recovery point stays below.
    pub(super) fn repair_txn_index(&mut self) -> Result<()> {
        let Some(from) = self.txn_index_behind else {
            return Ok(());
        };
        let aborted = self.txns.view.read().aborted.clone();
        let bases: Vec<i64> = self.segments.range(from..).map(|(b, _)| *b).collect();
        for (i, base) in bases.iter().enumerate() {
            let end = bases.get(i + 1).copied().unwrap_or(i64::MAX);
            let entries: Vec<AbortedTxn> = aborted
                .iter()
                .filter(|e| (*base..end).contains(&e.last_offset))
                .cloned()
                .collect();
            if let Some(segment) = self.segments.get_mut(base) {
                segment.reset_txn_index(&entries)?;
            }
        }
        self.txn_index_behind = None;
        Ok(())
    }

    /// Publishes the open transactions after the producer state changed.
    pub(crate) fn publish_ongoing(&self) {
        let first = self.producers.first_unstable_offset().unwrap_or(NONE);
        let changed = self.txns.ongoing_first.swap(first, Ordering::AcqRel) != first;
        let view_has_ongoing = !self.txns.view.read().ongoing.is_empty();
        // Rebuilt only while transactions are open (or just closed): a log without
        // transactions pays one atomic swap per append.
        if changed || first != NONE || view_has_ongoing {
            self.txns.view.write().ongoing = self.producers.ongoing_transactions();
        }
    }

    /// Replaces the whole transaction view (open, truncation).
    pub(crate) fn reset_txns(&self, aborted: Vec<AbortedTxn>, unreplicated: VecDeque<(i64, i64)>) {
        {
            let mut view = self.txns.view.write();
            view.aborted = aborted;
            view.unreplicated = unreplicated;
            self.txns.set_unreplicated_len(&view);
        }
        self.publish_ongoing();
    }

    /// After a truncation to the log end offset: forgets aborted entries and completed
    /// transactions whose markers are gone, and cuts the active segment's `.txnindex`
    /// to match (the producer state was rebuilt by the caller).
    pub(crate) fn truncate_txns(&mut self) -> Result<()> {
        let end = self.log_end_offset;
        let active_base = self.active().base_offset();
        // A full truncation also deleted every segment below the new start.
        let first_base = self.segments.keys().next().copied().unwrap_or(end);
        let kept = first_base..end;
        let (aborted, unreplicated, in_active) = {
            let view = self.txns.view.read();
            let aborted: Vec<AbortedTxn> = view
                .aborted
                .iter()
                .filter(|e| kept.contains(&e.last_offset))
                .copied()
                .collect();
            let unreplicated = view
                .unreplicated
                .iter()
                .filter(|(_, last)| kept.contains(last))
                .copied()
                .collect();
            let in_active = aborted
                .iter()
                .filter(|e| e.last_offset >= active_base)
                .count();
            (aborted, unreplicated, in_active)
        };
        self.active_mut().truncate_txn_index(in_active)?;
        self.reset_txns(aborted, unreplicated);
        Ok(())
    }

    /// After the oldest segments were deleted: forgets the aborted entries indexed in
    /// them (every entry lives in the segment holding its marker).
    pub(crate) fn drop_txns_below_first_segment(&self) {
        let Some(first_base) = self.segments.keys().next().copied() else {
            return;
        };
        let mut view = self.txns.view.write();
        view.aborted.retain(|e| e.last_offset >= first_base);
    }

    /// Replaces the aborted entries whose markers lie in `[from, to)` by `entries` (a
    /// cleaned segment's index, markers in that range, in order).
    pub(crate) fn replace_aborted_between(&self, from: i64, to: i64, entries: Vec<AbortedTxn>) {
        let mut view = self.txns.view.write();
        let start = view.aborted.partition_point(|e| e.last_offset < from);
        let end = view.aborted.partition_point(|e| e.last_offset < to);
        view.aborted.splice(start..end, entries);
    }
}
