//! The follower's append (Kafka's `UnifiedLog.appendAsFollower`): the leader's batches
//! are stored exactly as fetched — offsets, leader epochs and timestamps untouched — so
//! every replica holds the same bytes at the same offsets.
//!
//! Rules: every whole batch is checked (length, magic, CRC); a trailing partial batch (a
//! fetch response cut at `max_bytes`) is ignored; offsets never go backwards (the first
//! base offset is `>=` the log end offset and each batch starts at or after the previous
//! one's next offset; compacted logs have gaps). A rejected append writes nothing.
//! Producer state follows the headers without sequence checks (the leader already
//! checked them, and a future leader must recognise idempotent retries); each newer
//! `partition_leader_epoch` starts an epoch cache entry. `max.message.bytes` is not
//! enforced (Kafka does not on followers). The active segment rolls between batches when
//! needed, each new segment based at the batch's own base offset. Transaction markers
//! update the producer state and the aborted transaction index as on the leader (no
//! epoch checks: the leader made them); a marker that does not decode is refused as a
//! corrupt batch, as the leader would have.

use crate::batch::{self, BatchError, BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD};
use crate::control::{parse_end_txn_marker, ControlType, EndTxnMarker};
use crate::error::{Result, StorageError};
use crate::log::Log;
use crate::roll::RollState;
use crate::segment::{roll_reason, IncomingAppend};

/// The result of a follower append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerAppend {
    /// Base offset of the first batch appended (the log end offset if none was).
    pub first_offset: i64,
    /// Last offset of the last batch appended (`first_offset - 1` if none was).
    pub last_offset: i64,
    /// The log end offset after the append.
    pub log_end_offset: i64,
    /// Whole batches appended; 0 for an empty input or a lone partial batch.
    pub appended_batches: usize,
}

impl Log {
    /// Appends batches fetched from the leader, unchanged. See the module docs.
    pub fn append_as_follower(&mut self, records: &[u8], now_ms: i64) -> Result<FollowerAppend> {
        let batches = self.validate_follower(records)?;
        let first_offset = batches
            .first()
            .map_or(self.log_end_offset, |(_, h)| h.base_offset);
        let flush_due = self.follower_flush_due(&batches, now_ms);
        let mut run_start = 0;
        let mut state = self.active().roll_state();
        for (i, (_, header)) in batches.iter().enumerate() {
            // Decided batch by batch against the segment as it will be once the run so
            // far is written, so a large fetch spreads over segments like leader appends.
            if self.follower_needs_roll(&state, header, now_ms) {
                self.write_follower_run(records, batches.get(run_start..i).unwrap_or(&[]))?;
                self.roll_at(header.base_offset, now_ms)?;
                state = self.active().roll_state();
                run_start = i;
            }
            grow(&mut state, header);
        }
        self.write_follower_run(records, batches.get(run_start..).unwrap_or(&[]))?;
        // The epoch cache file waits for the next flush (`flush_to_end`), as a leader's.
        if flush_due && !batches.is_empty() {
            self.flush(now_ms)?;
        }
        Ok(FollowerAppend {
            first_offset,
            last_offset: self.log_end_offset.max(first_offset) - 1,
            log_end_offset: self.log_end_offset,
            appended_batches: batches.len(),
        })
    }

    /// The common case of [`Log::append_as_follower`] without file work beyond the write
    /// itself, for a caller on a runtime thread (`LogHandle::append_as_follower`): whole
    /// batches that fit the active segment, no fsync due, no new leader epoch (each of
    /// those writes or fsyncs another file). `Ok(None)` means not done, nothing changed.
    pub fn try_append_as_follower_inline(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<Option<FollowerAppend>> {
        let batches = self.validate_follower(records)?;
        let Some(&(_, first)) = batches.first() else {
            return Ok(None);
        };
        // Reopening a file the pool closed may wait on the disk: not on this thread.
        if self.follower_flush_due(&batches, now_ms) || !self.active().files_cached() {
            return Ok(None);
        }
        let mut state = self.active().roll_state();
        for (at, header) in &batches {
            let aborts = marker_of(records, *at, header)
                .is_some_and(|m| m.control_type == ControlType::Abort);
            if self.follower_needs_roll(&state, header, now_ms)
                || self.is_new_epoch(header.partition_leader_epoch)
                || aborts
            {
                return Ok(None);
            }
            grow(&mut state, header);
        }
        self.write_follower_run(records, &batches)?;
        Ok(Some(FollowerAppend {
            first_offset: first.base_offset,
            last_offset: self.log_end_offset - 1,
            log_end_offset: self.log_end_offset,
            appended_batches: batches.len(),
        }))
    }

    /// Whether `header`'s batch must start a new segment after the active one, as `state`
    /// describes it. `roll_reason` never rolls an empty segment, but a batch far beyond an
    /// empty segment's base (a gap) cannot be stored in it either.
    fn follower_needs_roll(&self, state: &RollState, header: &BatchHeader, now_ms: i64) -> bool {
        let incoming = IncomingAppend {
            size: header.size() as u64,
            max_timestamp: header.max_timestamp,
            last_offset: header.last_offset(),
            now_ms,
        };
        let overflows = header.last_offset() - state.base_offset > i64::from(u32::MAX);
        roll_reason(state, &incoming, &self.config).is_some() || overflows
    }

    fn follower_flush_due(&self, batches: &[(usize, BatchHeader)], now_ms: i64) -> bool {
        let offsets: u64 = batches.iter().map(|(_, h)| offset_count(h)).sum();
        self.config
            .flush_messages
            .is_some_and(|n| self.unflushed_messages + offsets >= n)
            || self
                .config
                .flush_ms
                .is_some_and(|ms| now_ms - self.last_flush_ms >= ms)
    }

    /// Writes consecutive batches into the active segment and applies them to the log
    /// end offset, producer state and epoch cache (in memory; the caller flushes it).
    fn write_follower_run(&mut self, records: &[u8], run: &[(usize, BatchHeader)]) -> Result<()> {
        let (Some((start, _)), Some((last_at, last))) = (run.first(), run.last()) else {
            return Ok(());
        };
        let Some(bytes) = records.get(*start..*last_at + last.size()) else {
            return Ok(()); // unreachable: `validate_follower` checked every batch lies in `records`
        };
        let headers: Vec<(usize, BatchHeader)> =
            run.iter().map(|(at, h)| (at - start, *h)).collect();
        let config = self.config.clone();
        self.active_mut().append(bytes, &headers, &config)?;
        let mut completed = Vec::new();
        let mut aborted = Vec::new();
        for (at, header) in run {
            let marker = marker_of(records, *at, header);
            if let Some(c) = self.producers.update(header, marker.as_ref()) {
                // Per batch, as Kafka's recovery: the state right after the marker.
                aborted.extend(self.aborted_entry(&c));
                completed.push(c);
            }
            self.epochs
                .assign_if_newer(header.partition_leader_epoch, header.base_offset);
            self.unflushed_messages += offset_count(header);
        }
        self.log_end_offset = last.next_offset();
        self.record_completed(&completed, &aborted)
    }

    /// Checks the whole batches of a fetched chunk; returns (position, header) pairs.
    fn validate_follower(&self, records: &[u8]) -> Result<Vec<(usize, BatchHeader)>> {
        let mut batches = Vec::new();
        let mut at = 0usize;
        let mut expected = self.log_end_offset;
        while let Some(rest) = records.get(at..) {
            let corrupt = |reason| StorageError::CorruptBatch {
                batch_index: batches.len(),
                reason,
            };
            let Some(length) = rest.get(8..LOG_OVERHEAD) else {
                break; // fewer bytes than a batch length: a cut-off tail (or the end)
            };
            let batch_length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
            if batch_length < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32 {
                return Err(corrupt(BatchError::InvalidLength { batch_length }));
            }
            let size = LOG_OVERHEAD + batch_length as usize;
            let Some(bytes) = rest.get(..size) else {
                break; // a partial last batch: the fetch response hit max_bytes
            };
            let header = batch::validate_batch(bytes).map_err(corrupt)?;
            // An empty control batch is a marker the leader's cleaner removed, kept for
            // its offsets (as Kafka's follower, it does not touch the producer state).
            if header.is_control() && header.has_producer_id() && header.records_count > 0 {
                parse_end_txn_marker(bytes, &header).map_err(corrupt)?;
            }
            // Recovery rejects such batches; accepting one would lose it at restart.
            if header.last_offset_delta < 0 {
                return Err(corrupt(BatchError::OffsetDeltaMismatch {
                    last_offset_delta: header.last_offset_delta,
                    records_count: header.records_count,
                }));
            }
            if header.base_offset < expected {
                return Err(StorageError::NonMonotonicFollowerAppend {
                    expected_at_least: expected,
                    got: header.base_offset,
                });
            }
            if header
                .base_offset
                .checked_add(i64::from(header.last_offset_delta) + 1)
                .is_none()
            {
                return Err(StorageError::OffsetOutOfRange {
                    requested: header.base_offset,
                    log_start: self.log_start_offset,
                    log_end: self.log_end_offset,
                });
            }
            expected = header.next_offset();
            batches.push((at, header));
            at += size;
        }
        Ok(batches)
    }
}

/// The decoded marker of a transaction control batch at `at` in `records` (validated by
/// `validate_follower`).
fn marker_of(records: &[u8], at: usize, header: &BatchHeader) -> Option<EndTxnMarker> {
    if !(header.is_control() && header.has_producer_id()) {
        return None;
    }
    let bytes = records.get(at..at + header.size())?;
    parse_end_txn_marker(bytes, header).ok()
}

/// Offsets a batch spans (what the flush policy counts, as for leader appends).
fn offset_count(header: &BatchHeader) -> u64 {
    u64::try_from(i64::from(header.last_offset_delta) + 1).unwrap_or(0)
}

/// `state` once `header`'s batch is in the segment.
fn grow(state: &mut RollState, header: &BatchHeader) {
    state.size += header.size() as u64;
    state
        .first_batch_timestamp
        .get_or_insert(header.max_timestamp);
}
