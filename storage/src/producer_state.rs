//! Idempotent producer state (Kafka's `ProducerStateManager`, KIP-98 / KIP-360):
//! per producer id, its epoch and metadata of its last 5 batches, so that retries are
//! recognised as duplicates and gaps are rejected.
//!
//! Rules, checked before anything is written: a duplicate of one of the cached batches
//! (same epoch, same first and last sequence) is acknowledged with its original offsets;
//! an older epoch is fenced; within an epoch the first sequence must follow the last one
//! (wrapping at `i32::MAX`); a new epoch must start at sequence 0; an unknown producer id
//! may start anywhere. Rebuilt on recovery from the latest producer snapshot
//! (`producer_snapshot.rs`) plus the batch headers after it. Pure: no I/O.
//!
//! Transactions (KIP-98, Kafka's `ProducerAppendInfo`): a transactional data batch
//! opens the producer's transaction on this partition if none is open (its base offset
//! is the transaction's first offset); a marker (control batch) closes it, COMMIT or
//! ABORT, and yields a [`CompletedTxn`] if one was open (a marker without an open
//! transaction only moves the epoch). A non-transactional batch while a transaction is
//! open is refused (`InvalidTxnState`), so is a marker from an older producer epoch
//! (`InvalidProducerEpoch`, Kafka's `checkProducerEpoch`) or an older coordinator epoch
//! (`TransactionCoordinatorFenced`). The open transactions, ordered by first offset,
//! give the first unstable offset.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::batch::{increment_sequence, BatchHeader, NO_SEQUENCE};
use crate::control::{ControlType, EndTxnMarker};
use crate::error::{Result, StorageError};
use crate::txn_index::{AbortedTxn, OngoingTxn};

/// How many batches per producer are remembered for duplicate detection (Kafka's
/// `NUM_BATCHES_TO_RETAIN`, matching `max.in.flight.requests.per.connection` <= 5).
pub const BATCHES_TO_RETAIN: usize = 5;

/// What is remembered of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// State of one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_epoch: i16,
    pub batches: VecDeque<BatchMetadata>,
    /// First offset of the producer's open transaction on this partition, if any.
    pub current_txn_first_offset: Option<i64>,
    /// Coordinator epoch of the producer's last marker; -1 before any.
    pub coordinator_epoch: i32,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry {
            producer_epoch: 0,
            batches: VecDeque::new(),
            current_txn_first_offset: None,
            coordinator_epoch: -1,
        }
    }
}

/// A transaction ended by a marker (Kafka's `CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub control_type: ControlType,
}

/// One producer as DescribeProducers shows it (Kafka's `ProducerStateEntry` seen
/// through `UnifiedLog.activeProducers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Last sequence of the newest remembered batch; `None` when none is remembered
    /// (only markers since the last epoch change, which clears the batches as in Kafka).
    pub last_sequence: Option<i32>,
    /// Max timestamp of that batch. Kafka also moves it on a marker; Brook keeps no
    /// per-producer timestamp outside the batches (nor in its snapshot format).
    pub last_timestamp: Option<i64>,
    /// Coordinator epoch of the producer's last marker; -1 before any (Kafka's value).
    pub coordinator_epoch: i32,
    /// First offset of the producer's open transaction on this partition.
    pub current_txn_start_offset: Option<i64>,
}

/// The outcome of checking a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not idempotent, or in sequence: append it.
    Append,
    /// A retry of an already appended batch: write nothing, answer with these offsets.
    Duplicate(BatchMetadata),
}

/// All producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset → producer id (derived from `producers`).
    ongoing: BTreeMap<i64, i64>,
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// A copy of just the entries of `producer_ids`, to stage a multi-batch append
    /// against without touching the real state until the write succeeded.
    pub fn staged(&self, producer_ids: impl IntoIterator<Item = i64>) -> Self {
        Self::from_entries(
            producer_ids
                .into_iter()
                .filter_map(|id| self.producers.get(&id).map(|e| (id, e.clone()))),
        )
    }

    /// Applies a staged copy after its append was written.
    pub fn merge(&mut self, staged: ProducerStateManager) {
        for (id, entry) in staged.producers {
            if let Some(first) = self
                .producers
                .get(&id)
                .and_then(|e| e.current_txn_first_offset)
            {
                self.ongoing.remove(&first);
            }
            if let Some(first) = entry.current_txn_first_offset {
                self.ongoing.insert(first, id);
            }
            self.producers.insert(id, entry);
        }
    }

    /// Every tracked producer, in no particular order (for the producer snapshot file).
    pub fn entries(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> {
        self.producers.iter().map(|(id, e)| (*id, e))
    }

    /// A state holding exactly `entries` (loaded from a producer snapshot file).
    pub fn from_entries(entries: impl IntoIterator<Item = (i64, ProducerEntry)>) -> Self {
        let producers: HashMap<i64, ProducerEntry> = entries.into_iter().collect();
        let ongoing = producers
            .iter()
            .filter_map(|(id, e)| Some((e.current_txn_first_offset?, *id)))
            .collect();
        ProducerStateManager { producers, ongoing }
    }

    /// First offset of the oldest open transaction (Kafka's first unstable offset,
    /// before the high watermark is considered).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// The open transactions, oldest first.
    pub fn ongoing_transactions(&self) -> Vec<OngoingTxn> {
        self.ongoing
            .iter()
            .filter_map(|(first, id)| {
                let entry = self.producers.get(id)?;
                Some(OngoingTxn {
                    producer_id: *id,
                    producer_epoch: entry.producer_epoch,
                    first_offset: *first,
                    coordinator_epoch: entry.coordinator_epoch,
                })
            })
            .collect()
    }

    /// Every tracked producer, by producer id (DescribeProducers). Brook does not
    /// expire producer ids (Kafka's `producer.id.expiration.ms`), so all are active.
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        let mut active: Vec<ActiveProducer> = self
            .producers
            .iter()
            .map(|(id, e)| {
                let last = e.batches.back();
                ActiveProducer {
                    producer_id: *id,
                    producer_epoch: e.producer_epoch,
                    last_sequence: last.map(|b| b.last_sequence),
                    last_timestamp: last.map(|b| b.max_timestamp),
                    coordinator_epoch: e.coordinator_epoch,
                    current_txn_start_offset: e.current_txn_first_offset,
                }
            })
            .collect();
        active.sort_by_key(|p| p.producer_id);
        active
    }

    /// The aborted transaction index entry of `completed` (if it aborted), with the
    /// state right after it applied.
    pub fn aborted_entry(&self, completed: &CompletedTxn) -> Option<AbortedTxn> {
        (completed.control_type == ControlType::Abort).then(|| AbortedTxn {
            producer_id: completed.producer_id,
            first_offset: completed.first_offset,
            last_offset: completed.last_offset,
            last_stable_offset: self.last_stable_offset_after(completed),
        })
    }

    /// The last stable offset to record with an aborted transaction once `completed`
    /// is applied (Kafka's `ProducerStateManager.lastStableOffset(completedTxn)`): the
    /// first offset of the oldest transaction of another producer still open, else the
    /// offset after the marker.
    pub fn last_stable_offset_after(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing
            .iter()
            .find(|(_, id)| **id != completed.producer_id)
            .map_or(completed.last_offset + 1, |(first, _)| *first)
    }

    /// Number of producer ids tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Checks a produce batch (base offset not yet assigned) against the current state;
    /// `marker` is the decoded record of a control batch.
    pub fn check(
        &self,
        header: &BatchHeader,
        marker: Option<&EndTxnMarker>,
    ) -> Result<SequenceCheck> {
        if !header.has_producer_id() {
            return Ok(SequenceCheck::Append);
        }
        let Some(entry) = self.producers.get(&header.producer_id) else {
            // KIP-360: an unknown producer id accepts any first sequence.
            return Ok(SequenceCheck::Append);
        };
        if header.is_control() {
            return check_marker(header, entry, marker);
        }
        let last_sequence = header.last_sequence();
        if entry.producer_epoch == header.producer_epoch {
            if let Some(dup) = entry.batches.iter().find(|b| {
                b.first_sequence == header.base_sequence && b.last_sequence == last_sequence
            }) {
                return Ok(SequenceCheck::Duplicate(*dup));
            }
        }
        if header.producer_epoch < entry.producer_epoch {
            return Err(StorageError::InvalidProducerEpoch {
                producer_id: header.producer_id,
                current_epoch: entry.producer_epoch,
                received_epoch: header.producer_epoch,
            });
        }
        if let (false, Some(first)) = (header.is_transactional(), entry.current_txn_first_offset) {
            return Err(StorageError::InvalidTxnState {
                producer_id: header.producer_id,
                txn_first_offset: first,
            });
        }
        if header.base_sequence == NO_SEQUENCE {
            return Ok(SequenceCheck::Append);
        }
        let current_last = entry.batches.back().map(|b| b.last_sequence);
        let in_sequence = if header.producer_epoch != entry.producer_epoch {
            header.base_sequence == 0
        } else {
            match current_last {
                None => header.base_sequence == 0,
                Some(last) => increment_sequence(last, 1) == header.base_sequence,
            }
        };
        if in_sequence {
            Ok(SequenceCheck::Append)
        } else {
            Err(StorageError::OutOfOrderSequence {
                producer_id: header.producer_id,
                producer_epoch: header.producer_epoch,
                last_sequence: current_last
                    .filter(|_| header.producer_epoch == entry.producer_epoch),
                first_sequence: header.base_sequence,
            })
        }
    }

    /// Records an appended batch (base offset assigned). Used both after a live append
    /// and when replaying the log on recovery; `marker` is the decoded record of a control
    /// batch (`None` for data batches, or a control batch that is not a readable marker:
    /// then only the epoch moves). Returns the transaction a marker completed.
    pub fn update(
        &mut self,
        header: &BatchHeader,
        marker: Option<&EndTxnMarker>,
    ) -> Option<CompletedTxn> {
        if !header.has_producer_id() {
            return None;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if entry.producer_epoch != header.producer_epoch {
            entry.producer_epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if header.is_control() {
            let marker = marker?;
            entry.coordinator_epoch = marker.coordinator_epoch;
            let first_offset = entry.current_txn_first_offset.take()?;
            self.ongoing.remove(&first_offset);
            return Some(CompletedTxn {
                producer_id: header.producer_id,
                first_offset,
                last_offset: header.base_offset,
                control_type: marker.control_type,
            });
        }
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(header.base_offset);
            self.ongoing.insert(header.base_offset, header.producer_id);
        }
        if header.base_sequence == NO_SEQUENCE {
            return None;
        }
        entry.batches.push_back(BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
        });
        while entry.batches.len() > BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        None
    }
}

/// Kafka's `appendEndTxnMarker` checks: the producer epoch may not go back
/// (`checkProducerEpoch`), nor the coordinator epoch (`checkCoordinatorEpoch`).
fn check_marker(
    header: &BatchHeader,
    entry: &ProducerEntry,
    marker: Option<&EndTxnMarker>,
) -> Result<SequenceCheck> {
    if header.producer_epoch < entry.producer_epoch {
        return Err(StorageError::InvalidProducerEpoch {
            producer_id: header.producer_id,
            current_epoch: entry.producer_epoch,
            received_epoch: header.producer_epoch,
        });
    }
    if let Some(m) = marker {
        if m.coordinator_epoch < entry.coordinator_epoch {
            return Err(StorageError::TransactionCoordinatorFenced {
                producer_id: header.producer_id,
                current_epoch: entry.coordinator_epoch,
                received_epoch: m.coordinator_epoch,
            });
        }
    }
    Ok(SequenceCheck::Append)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_batch;
    use crate::testing::{encode_batch, TestBatch};

    fn header(pid: i64, epoch: i16, seq: i32, records: usize, base_offset: i64) -> BatchHeader {
        let bytes = encode_batch(&TestBatch::sized(0, records, 1).with_producer(pid, epoch, seq));
        let mut h = validate_batch(&bytes).expect("valid test batch");
        h.base_offset = base_offset;
        h
    }

    #[test]
    fn an_unknown_producer_accepts_any_first_sequence() {
        let state = ProducerStateManager::new();
        assert_eq!(
            state.check(&header(7, 0, 42, 1, 0), None).ok(),
            Some(SequenceCheck::Append)
        );
    }

    #[test]
    fn a_retry_of_a_recent_batch_is_a_duplicate_with_the_original_offsets() {
        let mut state = ProducerStateManager::new();
        state.update(&header(7, 0, 0, 3, 10), None);
        state.update(&header(7, 0, 3, 2, 13), None);
        let Ok(SequenceCheck::Duplicate(meta)) = state.check(&header(7, 0, 0, 3, -1), None) else {
            panic!("expected a duplicate");
        };
        assert_eq!((meta.first_offset, meta.last_offset), (10, 12));
        assert_eq!(
            state.check(&header(7, 0, 5, 1, -1), None).ok(),
            Some(SequenceCheck::Append)
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut state = ProducerStateManager::new();
        for i in 0..6 {
            state.update(&header(7, 0, i, 1, i64::from(i)), None);
        }
        assert_eq!(state.entry(7).map(|e| e.batches.len()), Some(5));
        assert!(matches!(
            state.check(&header(7, 0, 0, 1, -1), None),
            Err(StorageError::OutOfOrderSequence { .. })
        ));
        assert!(matches!(
            state.check(&header(7, 0, 1, 1, -1), None),
            Ok(SequenceCheck::Duplicate(_))
        ));
    }

    #[test]
    fn a_gap_in_sequence_is_out_of_order() {
        let mut state = ProducerStateManager::new();
        state.update(&header(7, 0, 0, 2, 0), None);
        let err = state.check(&header(7, 0, 3, 1, -1), None).err();
        assert!(matches!(
            err,
            Some(StorageError::OutOfOrderSequence {
                last_sequence: Some(1),
                first_sequence: 3,
                ..
            })
        ));
    }

    #[test]
    fn an_older_epoch_is_fenced_and_a_newer_one_must_start_at_zero() {
        let mut state = ProducerStateManager::new();
        state.update(&header(7, 3, 0, 1, 0), None);
        assert!(matches!(
            state.check(&header(7, 2, 1, 1, -1), None),
            Err(StorageError::InvalidProducerEpoch {
                current_epoch: 3,
                received_epoch: 2,
                ..
            })
        ));
        assert!(matches!(
            state.check(&header(7, 4, 5, 1, -1), None),
            Err(StorageError::OutOfOrderSequence { .. })
        ));
        assert_eq!(
            state.check(&header(7, 4, 0, 1, -1), None).ok(),
            Some(SequenceCheck::Append)
        );
        state.update(&header(7, 4, 0, 1, 1), None);
        assert_eq!(
            state.entry(7).map(|e| (e.producer_epoch, e.batches.len())),
            Some((4, 1))
        );
    }

    #[test]
    fn sequences_wrap_around_after_i32_max() {
        let mut state = ProducerStateManager::new();
        state.update(&header(7, 0, i32::MAX - 1, 2, 0), None);
        assert_eq!(
            state.check(&header(7, 0, 0, 1, -1), None).ok(),
            Some(SequenceCheck::Append)
        );
        assert!(state.check(&header(7, 0, 1, 1, -1), None).is_err());
    }

    fn txn_header(batch: TestBatch, base_offset: i64) -> (BatchHeader, Option<EndTxnMarker>) {
        let bytes = encode_batch(&batch);
        let mut h = validate_batch(&bytes).expect("valid test batch");
        h.base_offset = base_offset;
        let marker = h
            .is_control()
            .then(|| crate::control::parse_end_txn_marker(&bytes, &h).expect("marker"));
        (h, marker)
    }

    fn data(pid: i64, epoch: i16, seq: i32, offset: i64) -> (BatchHeader, Option<EndTxnMarker>) {
        txn_header(
            TestBatch::sized(0, 2, 1).transactional(pid, epoch, seq),
            offset,
        )
    }

    fn marker(
        pid: i64,
        epoch: i16,
        kind: ControlType,
        offset: i64,
    ) -> (BatchHeader, Option<EndTxnMarker>) {
        txn_header(TestBatch::marker(pid, epoch, kind, 0), offset)
    }

    fn apply(
        state: &mut ProducerStateManager,
        (h, m): (BatchHeader, Option<EndTxnMarker>),
    ) -> Option<CompletedTxn> {
        state.check(&h, m.as_ref()).expect("accepted");
        state.update(&h, m.as_ref())
    }

    #[test]
    fn a_transactional_batch_opens_a_transaction_and_a_marker_completes_it() {
        let mut state = ProducerStateManager::new();
        assert_eq!(apply(&mut state, data(7, 0, 0, 10)), None);
        assert_eq!(apply(&mut state, data(7, 0, 2, 12)), None);
        assert_eq!(state.first_unstable_offset(), Some(10));
        assert_eq!(apply(&mut state, data(9, 0, 0, 14)), None);
        let ongoing = state.ongoing_transactions();
        assert_eq!(
            ongoing
                .iter()
                .map(|t| (t.producer_id, t.first_offset))
                .collect::<Vec<_>>(),
            vec![(7, 10), (9, 14)]
        );
        let done = apply(&mut state, marker(7, 0, ControlType::Abort, 16)).expect("completed");
        assert_eq!(
            done,
            CompletedTxn {
                producer_id: 7,
                first_offset: 10,
                last_offset: 16,
                control_type: ControlType::Abort
            }
        );
        // Producer 9's transaction is still open: the abort's LSO is its first offset.
        assert_eq!(state.last_stable_offset_after(&done), 14);
        assert_eq!(state.first_unstable_offset(), Some(14));
        let done = apply(&mut state, marker(9, 0, ControlType::Commit, 17)).expect("completed");
        assert_eq!(state.last_stable_offset_after(&done), 18);
        assert_eq!(state.aborted_entry(&done), None);
        assert_eq!(state.first_unstable_offset(), None);
    }

    #[test]
    fn a_marker_without_an_open_transaction_only_moves_the_epoch() {
        let mut state = ProducerStateManager::new();
        assert_eq!(apply(&mut state, marker(7, 3, ControlType::Abort, 0)), None);
        assert_eq!(state.entry(7).map(|e| e.producer_epoch), Some(3));
        assert_eq!(state.first_unstable_offset(), None);
    }

    #[test]
    fn a_marker_from_an_older_producer_or_coordinator_epoch_is_fenced() {
        let mut state = ProducerStateManager::new();
        apply(&mut state, data(7, 2, 0, 0));
        let (h, m) = marker(7, 1, ControlType::Commit, 2);
        assert!(matches!(
            state.check(&h, m.as_ref()),
            Err(StorageError::InvalidProducerEpoch {
                current_epoch: 2,
                received_epoch: 1,
                ..
            })
        ));
        let (h, m) = txn_header(TestBatch::marker(7, 2, ControlType::Commit, 5), 2);
        apply(&mut state, (h, m));
        apply(&mut state, data(7, 2, 2, 3));
        let (h, m) = txn_header(TestBatch::marker(7, 2, ControlType::Commit, 4), 5);
        assert!(matches!(
            state.check(&h, m.as_ref()),
            Err(StorageError::TransactionCoordinatorFenced {
                current_epoch: 5,
                received_epoch: 4,
                ..
            })
        ));
        // A newer producer epoch (the coordinator bumped it to abort) is accepted.
        let (h, m) = txn_header(TestBatch::marker(7, 3, ControlType::Abort, 5), 5);
        assert_eq!(
            state.check(&h, m.as_ref()).ok(),
            Some(SequenceCheck::Append)
        );
    }

    #[test]
    fn active_producers_show_last_sequence_coordinator_epoch_and_open_transaction() {
        let mut state = ProducerStateManager::new();
        apply(&mut state, data(9, 1, 0, 0));
        apply(&mut state, data(9, 1, 2, 2));
        apply(&mut state, data(7, 0, 0, 4));
        apply(&mut state, marker(7, 0, ControlType::Commit, 6));
        let summary = |p: &ActiveProducer| {
            (
                p.producer_id,
                p.producer_epoch,
                p.last_sequence,
                p.coordinator_epoch,
                p.current_txn_start_offset,
            )
        };
        assert_eq!(
            state
                .active_producers()
                .iter()
                .map(summary)
                .collect::<Vec<_>>(),
            vec![(7, 0, Some(1), 0, None), (9, 1, Some(3), -1, Some(0))]
        );
        // An abort with a bumped epoch (a fenced producer) forgets the batches.
        apply(&mut state, marker(9, 2, ControlType::Abort, 8));
        let nine = state.active_producers()[1];
        assert_eq!(summary(&nine), (9, 2, None, 0, None));
        assert_eq!(nine.last_timestamp, None);
    }

    #[test]
    fn a_non_transactional_batch_during_a_transaction_is_invalid() {
        let mut state = ProducerStateManager::new();
        apply(&mut state, data(7, 0, 0, 0));
        assert!(matches!(
            state.check(&header(7, 0, 2, 1, -1), None),
            Err(StorageError::InvalidTxnState {
                producer_id: 7,
                txn_first_offset: 0
            })
        ));
    }

    #[test]
    fn a_staged_append_merges_its_transactions() {
        let mut state = ProducerStateManager::new();
        apply(&mut state, data(7, 0, 0, 0));
        apply(&mut state, data(9, 0, 0, 2));
        let mut staged = state.staged([7]);
        let (h, m) = marker(7, 0, ControlType::Commit, 4);
        staged.update(&h, m.as_ref());
        staged.update(&data(7, 0, 2, 5).0, None);
        state.merge(staged);
        assert_eq!(state.first_unstable_offset(), Some(2));
        assert_eq!(
            state
                .ongoing_transactions()
                .iter()
                .map(|t| (t.producer_id, t.first_offset))
                .collect::<Vec<_>>(),
            vec![(9, 2), (7, 5)]
        );
    }
}
