//! The appending half of a partition log (Kafka's `UnifiedLog.appendAsLeader`): validate
//! a produce's batches, check producer sequences, stamp offsets and the leader epoch,
//! record a new leader epoch in the epoch cache, roll if needed, write, index, and fsync
//! when the flush policy says so.
//!
//! An append is split in two: `prepare` validates and stamps without changing the log, and
//! `commit` writes. That split lets `try_append_inline` refuse, before anything changed,
//! an append that would roll a segment, fsync, or write the leader epoch checkpoint (file
//! creation and fsync may take milliseconds), so `LogHandle` can run the common case — a buffered write into the page
//! cache — on the calling thread and send only those to the blocking pool.
//!
//! Invariant: a rejected or refused append changes nothing (the producer state is staged
//! and merged only on commit; re-stamping the same batches gives the same bytes).

use crate::batch::{self, BatchHeader, BatchIter, TimestampType};
use crate::control::{parse_end_txn_marker, ControlType};
use crate::error::{Result, StorageError};
use crate::log::{AppendInfo, Log};
use crate::producer_state::{CompletedTxn, ProducerStateManager, SequenceCheck};
use crate::segment::{roll_reason, IncomingAppend};

/// A validated and stamped append, not yet written.
struct Prepared {
    /// Each batch's position in the records and its (stamped) header.
    headers: Vec<(usize, BatchHeader)>,
    staged: ProducerStateManager,
    /// The log end offset after the append.
    next: i64,
    log_append_time: Option<i64>,
    incoming: IncomingAppend,
    /// The leader epoch stamped on the batches.
    leader_epoch: i32,
    /// Transactions the append's markers complete, in order.
    completed: Vec<CompletedTxn>,
}

impl Prepared {
    /// Whether a marker aborts a transaction: its `.txnindex` entry is a write to
    /// another file (maybe its creation), not for the inline path.
    fn aborts(&self) -> bool {
        self.completed
            .iter()
            .any(|c| c.control_type == ControlType::Abort)
    }
}

enum Prepare {
    /// A retry of an idempotent batch already in the log: nothing to write.
    Duplicate(AppendInfo),
    New(Prepared),
}

impl Log {
    /// Appends a produce request's batches as leader: validates all of them, checks
    /// producer sequences, assigns offsets from the log end offset, stamps the leader
    /// epoch (and the time for LogAppendTime topics), rolls if needed, writes, indexes.
    pub fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        match self.prepare(records, leader_epoch, now_ms)? {
            Prepare::Duplicate(info) => Ok(info),
            Prepare::New(prepared) => self.commit(records, prepared, now_ms),
        }
    }

    /// Like [`Log::append`], but returns `Ok(None)` without changing anything when the
    /// append would roll the active segment or be followed by an fsync (flush.messages /
    /// flush.ms): what remains is a positional write into the page cache, cheap enough
    /// for the caller's thread. Errors are the same as `append`'s.
    pub fn try_append_inline(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Option<AppendInfo>> {
        match self.prepare(records, leader_epoch, now_ms)? {
            Prepare::Duplicate(info) => Ok(Some(info)),
            Prepare::New(prepared) if self.needs_roll(&prepared) => Ok(None),
            Prepare::New(prepared) if self.flush_due(&prepared, now_ms) => Ok(None),
            Prepare::New(prepared) if self.is_new_epoch(prepared.leader_epoch) => Ok(None),
            Prepare::New(prepared) if prepared.aborts() => Ok(None),
            // Reopening a file the pool closed may wait on the disk: not on this thread.
            Prepare::New(_) if !self.active().files_cached() => Ok(None),
            Prepare::New(prepared) => self.commit(records, prepared, now_ms).map(Some),
        }
    }

    fn prepare(&self, records: &mut [u8], leader_epoch: i32, now_ms: i64) -> Result<Prepare> {
        let mut headers = self.validate(records)?;
        let mut staged = self
            .producers
            .staged(headers.iter().map(|(_, h)| h.producer_id));
        let mut next = self.log_end_offset;
        let log_append_time =
            (self.config.message_timestamp_type == TimestampType::LogAppendTime).then_some(now_ms);
        let mut completed = Vec::new();
        for (batch_index, (at, header)) in headers.iter_mut().enumerate() {
            let marker = if header.is_control() && header.has_producer_id() {
                let bytes = records.get(*at..*at + header.size()).unwrap_or_default();
                Some(parse_end_txn_marker(bytes, header).map_err(|reason| {
                    StorageError::CorruptBatch {
                        batch_index,
                        reason,
                    }
                })?)
            } else {
                None
            };
            if let SequenceCheck::Duplicate(meta) = staged.check(header, marker.as_ref())? {
                return Ok(Prepare::Duplicate(AppendInfo {
                    base_offset: meta.first_offset,
                    last_offset: meta.last_offset,
                    log_append_time: None,
                    log_start_offset: self.log_start_offset,
                    duplicate: true,
                }));
            }
            header.base_offset = next;
            header.partition_leader_epoch = leader_epoch;
            if let Some(time) = log_append_time {
                header.max_timestamp = time;
            }
            completed.extend(staged.update(header, marker.as_ref()));
            next = header.next_offset();
        }
        for (at, header) in &headers {
            let Some(bytes) = records.get_mut(*at..*at + header.size()) else {
                continue; // unreachable: `validate` checked every batch lies in `records`
            };
            batch::stamp_offset_and_epoch(bytes, header.base_offset, leader_epoch);
            if let Some(time) = log_append_time {
                batch::stamp_log_append_time(bytes, time);
            }
        }
        let incoming = IncomingAppend {
            size: records.len() as u64,
            max_timestamp: headers
                .iter()
                .map(|(_, h)| h.max_timestamp)
                .max()
                .unwrap_or(-1),
            last_offset: next - 1,
            now_ms,
        };
        Ok(Prepare::New(Prepared {
            headers,
            staged,
            next,
            log_append_time,
            incoming,
            leader_epoch,
            completed,
        }))
    }

    /// Whether appending with `leader_epoch` adds an entry to the epoch cache (a file
    /// write and fsync: rare, once per epoch, so never done inline).
    pub(super) fn is_new_epoch(&self, leader_epoch: i32) -> bool {
        leader_epoch >= 0 && self.epochs.latest_epoch().is_none_or(|l| leader_epoch > l)
    }

    fn needs_roll(&self, prepared: &Prepared) -> bool {
        roll_reason(
            &self.active().roll_state(),
            &prepared.incoming,
            &self.config,
        )
        .is_some()
    }

    /// Whether the flush policy asks for an fsync once this append is written.
    fn flush_due(&self, prepared: &Prepared, now_ms: i64) -> bool {
        let unflushed = self.unflushed_messages + (prepared.next - self.log_end_offset) as u64;
        self.config.flush_messages.is_some_and(|n| unflushed >= n)
            || self
                .config
                .flush_ms
                .is_some_and(|ms| now_ms - self.last_flush_ms >= ms)
    }

    fn commit(&mut self, records: &[u8], prepared: Prepared, now_ms: i64) -> Result<AppendInfo> {
        if self.needs_roll(&prepared) {
            self.roll(now_ms)?;
        }
        let flush_due = self.flush_due(&prepared, now_ms);
        // Before the data, as Kafka's `UnifiedLog.append`: an entry starting at the log
        // end offset with no data yet is what a new leader records anyway. The file is
        // written by the next flush (`flush_to_end`); recovery rebuilds what a crash lost
        // from the batch headers above the recovery point.
        self.epochs
            .assign_if_newer(prepared.leader_epoch, self.log_end_offset);
        let config = self.config.clone();
        self.active_mut()
            .append(records, &prepared.headers, &config)?;
        let base_offset = self.log_end_offset;
        self.log_end_offset = prepared.next;
        self.producers.merge(prepared.staged);
        // As Kafka's `UnifiedLog.append`: each aborted entry's last stable offset is
        // taken once the whole append is applied to the producer state.
        let aborted: Vec<_> = prepared
            .completed
            .iter()
            .filter_map(|c| self.aborted_entry(c))
            .collect();
        self.record_completed(&prepared.completed, &aborted)?;
        self.unflushed_messages += (prepared.next - base_offset) as u64;
        if flush_due {
            self.flush(now_ms)?;
        }
        Ok(AppendInfo {
            base_offset,
            last_offset: prepared.next - 1,
            log_append_time: prepared.log_append_time,
            log_start_offset: self.log_start_offset,
            duplicate: false,
        })
    }

    /// Parses and checks every batch of a produce; returns (position, header) pairs.
    fn validate(&self, records: &[u8]) -> Result<Vec<(usize, BatchHeader)>> {
        let mut headers = Vec::new();
        for (batch_index, item) in BatchIter::new(records).enumerate() {
            let corrupt = |reason| StorageError::CorruptBatch {
                batch_index,
                reason,
            };
            let (at, header) = item.map_err(corrupt)?;
            batch::validate_produce_header(&header).map_err(corrupt)?;
            if header.size() as u64 > self.config.max_message_bytes {
                return Err(StorageError::RecordTooLarge {
                    size: header.size() as u64,
                    max: self.config.max_message_bytes,
                });
            }
            headers.push((at, header));
        }
        if headers.is_empty() {
            return Err(StorageError::EmptyAppend);
        }
        if records.len() as u64 > self.config.segment_bytes {
            return Err(StorageError::RecordBatchTooLarge {
                size: records.len() as u64,
                segment_bytes: self.config.segment_bytes,
            });
        }
        Ok(headers)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::LogConfig;
    use crate::log::Log;
    use crate::testing::{encode_batch, TestBatch};

    fn batch() -> Vec<u8> {
        encode_batch(&TestBatch::sized(1_000, 3, 10))
    }

    #[test]
    fn an_inline_append_writes_when_no_roll_or_flush_is_due() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), LogConfig::default(), 0).expect("open");
        // The first append of epoch 7 writes the epoch checkpoint: not inline.
        log.append(&mut batch(), 7, 1_000).expect("first append");
        let info = log
            .try_append_inline(&mut batch(), 7, 1_000)
            .expect("append")
            .expect("done inline");
        assert_eq!((info.base_offset, info.last_offset), (3, 5));
        assert_eq!(log.log_end_offset(), 6);
        assert_eq!(log.segment_count(), 1);
    }

    #[test]
    fn an_inline_append_refuses_a_due_flush_and_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            flush_messages: Some(1),
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path(), config, 0).expect("open");
        let refused = log
            .try_append_inline(&mut batch(), 7, 1_000)
            .expect("valid");
        assert_eq!(refused, None);
        assert_eq!(log.log_end_offset(), 0);
        let info = log.append(&mut batch(), 7, 1_000).expect("append");
        assert_eq!((info.base_offset, log.log_end_offset()), (0, 3));
    }

    #[test]
    fn an_inline_append_refuses_a_roll_and_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let one = batch();
        let config = LogConfig {
            segment_bytes: one.len() as u64 + 1,
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path(), config, 0).expect("open");
        log.append(&mut batch(), 7, 1_000).expect("first append");
        let refused = log
            .try_append_inline(&mut batch(), 7, 1_001)
            .expect("valid");
        assert_eq!(refused, None);
        assert_eq!((log.log_end_offset(), log.segment_count()), (3, 1));
        let info = log.append(&mut batch(), 7, 1_001).expect("rolls");
        assert_eq!((info.base_offset, log.segment_count()), (3, 2));
    }

    #[test]
    fn an_inline_append_refuses_a_new_leader_epoch_and_the_append_records_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), LogConfig::default(), 0).expect("open");
        assert_eq!(
            log.try_append_inline(&mut batch(), 7, 1_000)
                .expect("valid"),
            None
        );
        assert_eq!(log.latest_epoch(), None);
        log.append(&mut batch(), 7, 1_000).expect("append");
        assert_eq!(log.leader_epoch_cache().latest(), Some((7, 0)));
        let info = log
            .try_append_inline(&mut batch(), 7, 1_000)
            .expect("valid")
            .expect("same epoch: inline");
        assert_eq!(info.base_offset, 3);
        log.append(&mut batch(), 9, 1_000).expect("append");
        assert_eq!(log.leader_epoch_cache().latest(), Some((9, 6)));
        assert_eq!(log.end_offset_for_epoch(7), (7, 6));
    }

    #[test]
    fn an_inline_append_still_rejects_a_corrupt_batch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), LogConfig::default(), 0).expect("open");
        let mut bytes = batch();
        if let Some(last) = bytes.last_mut() {
            *last ^= 0xff;
        }
        assert!(log.try_append_inline(&mut bytes, 7, 1_000).is_err());
        assert_eq!(log.log_end_offset(), 0);
    }
}
