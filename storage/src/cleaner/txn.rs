//! Transactions in a compaction pass (Kafka's `CleanedTransactionMetadata`): which data
//! batches belong to aborted transactions, which markers may go, and the aborted
//! transaction index of the cleaned segments.
//!
//! - A data batch of an aborted transaction (a transactional batch of a producer with an
//!   aborted entry whose range `[first offset, marker)` holds it) is dropped whatever its
//!   keys, and never enters the key map, so it cannot shadow an older committed value.
//! - A marker (commit or abort) stays as long as the pass saw a data batch of its
//!   transaction: a transactional data batch of the same producer since that producer's
//!   previous marker. A marker whose transaction had no batch left gets a delete horizon
//!   (as a tombstone, KIP-534) and goes in the first pass after it. Replaying the log
//!   (recovery) never meets a transaction's data without its marker, so no transaction
//!   reopens; a marker with no data left replays as a marker without a transaction.
//! - The cleaned index keeps an entry for an abort marker that stays with data of its
//!   transaction still written (only an empty batch kept for the producer's sequence
//!   state can be), its first offset moved to the first batch written: what a replay of
//!   the cleaned log rebuilds. The last stable offset is kept (it only bounds searches).
//!
//! - A marker goes only below the oldest producer snapshot: a recovery may load any
//!   snapshot at or below its recovery point, and one taken while the transaction was
//!   open (between its first record and its marker) would reopen it for good if the
//!   replay after it no longer met the marker. Snapshots are only ever written at the
//!   log end, so one written during the pass lies above every marker it sees.
//!
//! The pass walks every cleaned segment from the log start in offset order, so every
//! data batch of a transaction whose marker it meets passes first. Pure, no I/O.

use std::collections::{HashMap, HashSet};

use crate::batch::BatchHeader;
use crate::txn_index::AbortedTxn;

/// The transaction state of one pass.
#[derive(Debug, Default)]
pub(crate) struct TxnFilter {
    /// Aborted transactions per producer, in offset order.
    aborted: HashMap<i64, Vec<AbortedTxn>>,
    /// Producers with a transactional data batch read since their last marker.
    data_read: HashSet<i64>,
    /// Producer → first transactional data batch written since its last marker.
    first_written: HashMap<i64, i64>,
    /// Markers at or above it stay (the oldest producer snapshot's offset).
    marker_bound: i64,
}

impl TxnFilter {
    /// The aborted transactions that may hold data in the cleaned range, and the offset
    /// of the log's oldest producer snapshot (`i64::MAX` without one).
    pub fn new(aborted: &[AbortedTxn], marker_bound: i64) -> Self {
        let mut by_producer: HashMap<i64, Vec<AbortedTxn>> = HashMap::new();
        for entry in aborted {
            by_producer
                .entry(entry.producer_id)
                .or_default()
                .push(*entry);
        }
        for entries in by_producer.values_mut() {
            entries.sort_by_key(|e| e.first_offset);
        }
        TxnFilter {
            aborted: by_producer,
            marker_bound,
            ..TxnFilter::default()
        }
    }

    /// Whether `header` is a data batch of an aborted transaction. Stateless: the key
    /// scan asks it too.
    pub fn is_aborted(&self, header: &BatchHeader) -> bool {
        if header.is_control() || !header.is_transactional() {
            return false;
        }
        let Some(entries) = self.aborted.get(&header.producer_id) else {
            return false;
        };
        let at = header.base_offset;
        // The last entry starting at or before the batch.
        let i = entries.partition_point(|e| e.first_offset <= at);
        i > 0 && entries[i - 1].last_offset > at
    }

    /// A data batch was read: returns whether it is aborted (see [`Self::is_aborted`]).
    pub fn on_data(&mut self, header: &BatchHeader) -> bool {
        if header.is_transactional() && !header.is_control() {
            self.data_read.insert(header.producer_id);
        }
        self.is_aborted(header)
    }

    /// A marker was read: returns whether it may go (no data of its transaction read,
    /// below the oldest producer snapshot).
    pub fn on_marker(&mut self, header: &BatchHeader) -> bool {
        !self.data_read.remove(&header.producer_id) && header.base_offset < self.marker_bound
    }

    /// A batch was written to the cleaned segment (`header` is the original one).
    /// Returns the index entry a kept abort marker carries, if any.
    pub fn on_written(&mut self, header: &BatchHeader) -> Option<AbortedTxn> {
        if !header.is_transactional() {
            return None;
        }
        if !header.is_control() {
            self.first_written
                .entry(header.producer_id)
                .or_insert(header.base_offset);
            return None;
        }
        let first = self.first_written.remove(&header.producer_id)?;
        self.aborted_entry(header).map(|entry| AbortedTxn {
            first_offset: first,
            ..entry
        })
    }

    /// A marker was dropped: its transaction's written data is none.
    pub fn on_dropped_marker(&mut self, header: &BatchHeader) {
        self.first_written.remove(&header.producer_id);
    }

    /// The aborted entry closed by the marker `header`.
    fn aborted_entry(&self, header: &BatchHeader) -> Option<AbortedTxn> {
        self.aborted
            .get(&header.producer_id)?
            .iter()
            .find(|e| e.last_offset == header.base_offset)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{stamp_offset_and_epoch, validate_batch};
    use crate::control::ControlType;
    use crate::testing::{encode_batch, TestBatch};

    fn header(batch: TestBatch, offset: i64) -> BatchHeader {
        let mut bytes = encode_batch(&batch);
        stamp_offset_and_epoch(&mut bytes, offset, 0);
        validate_batch(&bytes).expect("valid")
    }

    fn data(pid: i64, offset: i64) -> BatchHeader {
        header(TestBatch::sized(0, 1, 1).transactional(pid, 0, 0), offset)
    }

    fn marker(pid: i64, offset: i64) -> BatchHeader {
        header(TestBatch::marker(pid, 0, ControlType::Abort, 0), offset)
    }

    fn entry(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        }
    }

    #[test]
    fn only_batches_inside_an_aborted_range_of_their_producer_are_aborted() {
        let filter = TxnFilter::new(
            &[entry(1, 10, 20), entry(1, 30, 40), entry(2, 0, 5)],
            i64::MAX,
        );
        for (pid, at, aborted) in [
            (1, 9, false),
            (1, 10, true),
            (1, 19, true),
            (1, 25, false),
            (1, 35, true),
            (1, 41, false),
            (2, 3, true),
            (3, 12, false),
        ] {
            assert_eq!(filter.is_aborted(&data(pid, at)), aborted, "{pid}@{at}");
        }
        let plain = header(TestBatch::sized(0, 1, 1).with_producer(1, 0, 0), 12);
        assert!(!filter.is_aborted(&plain), "not transactional");
        assert!(!filter.is_aborted(&marker(1, 20)));
    }

    #[test]
    fn a_marker_stays_while_its_transaction_had_data_and_indexes_what_was_written() {
        let mut filter = TxnFilter::new(&[entry(1, 0, 3), entry(1, 4, 6)], 9);
        // First transaction: its data was read (and dropped): the marker stays, unindexed.
        assert!(filter.on_data(&data(1, 0)));
        assert!(!filter.on_marker(&marker(1, 3)));
        assert_eq!(filter.on_written(&marker(1, 3)), None);
        // Second: one batch kept (emptied): the marker stays with an entry from it.
        assert!(filter.on_data(&data(1, 4)));
        assert!(filter.on_data(&data(1, 5)));
        assert_eq!(filter.on_written(&data(1, 5)), None);
        assert!(!filter.on_marker(&marker(1, 6)));
        assert_eq!(filter.on_written(&marker(1, 6)), Some(entry(1, 5, 6)));
        // A marker with no data read before it may go, below the oldest snapshot.
        assert!(filter.on_marker(&marker(1, 8)));
        filter.on_dropped_marker(&marker(1, 8));
        assert!(!filter.on_marker(&marker(1, 9)));
    }
}
