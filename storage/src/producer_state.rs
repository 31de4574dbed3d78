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

use std::collections::{HashMap, VecDeque};

use crate::batch::{increment_sequence, BatchHeader, NO_SEQUENCE};
use crate::error::{Result, StorageError};

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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_epoch: i16,
    pub batches: VecDeque<BatchMetadata>,
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
        let producers = producer_ids
            .into_iter()
            .filter_map(|id| self.producers.get(&id).map(|e| (id, e.clone())))
            .collect();
        ProducerStateManager { producers }
    }

    /// Applies a staged copy after its append was written.
    pub fn merge(&mut self, staged: ProducerStateManager) {
        self.producers.extend(staged.producers);
    }

    /// Every tracked producer, in no particular order (for the producer snapshot file).
    pub fn entries(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> {
        self.producers.iter().map(|(id, e)| (*id, e))
    }

    /// A state holding exactly `entries` (loaded from a producer snapshot file).
    pub fn from_entries(entries: impl IntoIterator<Item = (i64, ProducerEntry)>) -> Self {
        ProducerStateManager {
            producers: entries.into_iter().collect(),
        }
    }

    /// Number of producer ids tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Checks a produce batch (base offset not yet assigned) against the current state.
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceCheck> {
        if !header.has_producer_id() {
            return Ok(SequenceCheck::Append);
        }
        let Some(entry) = self.producers.get(&header.producer_id) else {
            // KIP-360: an unknown producer id accepts any first sequence.
            return Ok(SequenceCheck::Append);
        };
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
        if header.base_sequence == NO_SEQUENCE {
            // Transactional markers and similar carry no sequence; nothing to order.
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
    /// and when replaying the log on recovery.
    pub fn update(&mut self, header: &BatchHeader) {
        if !header.has_producer_id() {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if entry.producer_epoch != header.producer_epoch {
            entry.producer_epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if header.is_control() || header.base_sequence == NO_SEQUENCE {
            return;
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
    }
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
            state.check(&header(7, 0, 42, 1, 0)).ok(),
            Some(SequenceCheck::Append)
        );
    }

    #[test]
    fn a_retry_of_a_recent_batch_is_a_duplicate_with_the_original_offsets() {
        let mut state = ProducerStateManager::new();
        state.update(&header(7, 0, 0, 3, 10));
        state.update(&header(7, 0, 3, 2, 13));
        let Ok(SequenceCheck::Duplicate(meta)) = state.check(&header(7, 0, 0, 3, -1)) else {
            panic!("expected a duplicate");
        };
        assert_eq!((meta.first_offset, meta.last_offset), (10, 12));
        assert_eq!(
            state.check(&header(7, 0, 5, 1, -1)).ok(),
            Some(SequenceCheck::Append)
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut state = ProducerStateManager::new();
        for i in 0..6 {
            state.update(&header(7, 0, i, 1, i64::from(i)));
        }
        assert_eq!(state.entry(7).map(|e| e.batches.len()), Some(5));
        assert!(matches!(
            state.check(&header(7, 0, 0, 1, -1)),
            Err(StorageError::OutOfOrderSequence { .. })
        ));
        assert!(matches!(
            state.check(&header(7, 0, 1, 1, -1)),
            Ok(SequenceCheck::Duplicate(_))
        ));
    }

    #[test]
    fn a_gap_in_sequence_is_out_of_order() {
        let mut state = ProducerStateManager::new();
        state.update(&header(7, 0, 0, 2, 0));
        let err = state.check(&header(7, 0, 3, 1, -1)).err();
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
        state.update(&header(7, 3, 0, 1, 0));
        assert!(matches!(
            state.check(&header(7, 2, 1, 1, -1)),
            Err(StorageError::InvalidProducerEpoch {
                current_epoch: 3,
                received_epoch: 2,
                ..
            })
        ));
        assert!(matches!(
            state.check(&header(7, 4, 5, 1, -1)),
            Err(StorageError::OutOfOrderSequence { .. })
        ));
        assert_eq!(
            state.check(&header(7, 4, 0, 1, -1)).ok(),
            Some(SequenceCheck::Append)
        );
        state.update(&header(7, 4, 0, 1, 1));
        assert_eq!(
            state.entry(7).map(|e| (e.producer_epoch, e.batches.len())),
            Some((4, 1))
        );
    }

    #[test]
    fn sequences_wrap_around_after_i32_max() {
        let mut state = ProducerStateManager::new();
        state.update(&header(7, 0, i32::MAX - 1, 2, 0));
        assert_eq!(
            state.check(&header(7, 0, 0, 1, -1)).ok(),
            Some(SequenceCheck::Append)
        );
        assert!(state.check(&header(7, 0, 1, 1, -1)).is_err());
    }
}
