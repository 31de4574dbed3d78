//! One partition's log (Kafka's `LocalLog` + the append/read half of `UnifiedLog`):
//! its segments ordered by base offset, `log_start_offset`, `log_end_offset` and the
//! idempotent producer state.
//!
//! Invariants: segments do not overlap and only the last (active) one is written;
//! `log_end_offset` is the offset after the last batch; an append is validated entirely
//! (batches, sizes, producer sequences) before a byte is written, so a rejected append
//! changes nothing. Synchronous and not thread-safe: `LogHandle` wraps it in a mutex.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};

use crate::config::LogConfig;
use crate::error::{io_err, Result, StorageError};
use crate::producer_state::ProducerStateManager;
use crate::recovery::{scan_segment_files, sync_dir};
use crate::segment::Segment;

mod append;
mod clean;
mod deletion;

pub use deletion::RetentionOutcome;

/// The result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended (or of the original batch for a duplicate).
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker time stamped on the batches, for LogAppendTime topics.
    pub log_append_time: Option<i64>,
    pub log_start_offset: i64,
    /// True when the append was a retry of an idempotent batch: nothing was written.
    pub duplicate: bool,
}

/// Whether a read returns its first batch even when it exceeds `max_bytes`
/// (Kafka's `minOneMessage`, so that consumers always make progress).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinOneBatch {
    Yes,
    No,
}

/// The result of a read: whole batches, untouched, plus the log bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    pub records: Bytes,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// An (offset, timestamp) answer to a ListOffsets-style lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub offset: i64,
    pub timestamp: i64,
}

/// A partition log on disk.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    log_end_offset: i64,
    producers: ProducerStateManager,
    unflushed_messages: u64,
    last_flush_ms: i64,
    /// Renamed `.deleted` segment files and when they may be unlinked.
    pending_deletions: Vec<(i64, PathBuf)>,
    /// Compaction checkpoint and delete horizon (`log/clean.rs`).
    cleaner: crate::cleaner::CleanerState,
}

impl Log {
    /// Opens the log in `dir` (created if missing), recovering every segment: torn or
    /// corrupt tails are truncated (and later segments dropped), indexes rebuilt, and the
    /// producer state replayed from the batch headers.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<Self> {
        fs::create_dir_all(dir).map_err(io_err("create log dir", dir))?;
        // A clean interrupted by a crash is rolled back or completed first.
        crate::cleaner::swap::complete_interrupted_cleans(dir)?;
        let bases = scan_segment_files(dir)?;
        let mut producers = ProducerStateManager::new();
        let mut segments = BTreeMap::new();
        let mut next_offset: Option<i64> = None;
        let mut drop_rest = false;
        for base in bases {
            let mut segment = Segment::open(dir, base, &config, now_ms)?;
            if drop_rest || next_offset.is_some_and(|next| base < next) {
                tracing::warn!(dir = %dir.display(), base_offset = base, "deleting segment after a corrupt or overlapping one");
                segment.delete()?;
                drop_rest = true;
                continue;
            }
            let truncated = segment.recover(&config, &mut |h| producers.update(h))?;
            drop_rest = truncated > 0;
            next_offset = Some(segment.next_offset());
            segments.insert(base, segment);
        }
        if segments.is_empty() {
            let mut segment = Segment::open(dir, 0, &config, now_ms)?;
            segment.recover(&config, &mut |_| {})?;
            segments.insert(0, segment);
            sync_dir(dir)?;
        }
        let log_start_offset = segments.keys().next().copied().unwrap_or_default();
        let log_end_offset = segments
            .values()
            .next_back()
            .map_or(0, Segment::next_offset);
        Ok(Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            log_end_offset,
            producers,
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            pending_deletions: Vec::new(),
            cleaner: crate::cleaner::CleanerState::load(dir),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }

    /// Replaces the topic config; it applies from the next append.
    pub fn set_config(&mut self, config: LogConfig) {
        for segment in self.segments.values_mut() {
            segment.set_config(&config);
        }
        self.config = config;
    }

    /// Closes the active segment (fsynced, as Kafka flushes on roll) and starts a new
    /// one at the log end offset.
    fn roll(&mut self, now_ms: i64) -> Result<()> {
        self.active().flush()?;
        let mut segment = Segment::open(&self.dir, self.log_end_offset, &self.config, now_ms)?;
        // Clears any stale index left by a crashed earlier attempt at this offset.
        segment.recover(&self.config, &mut |_| {})?;
        sync_dir(&self.dir)?;
        tracing::debug!(dir = %self.dir.display(), base_offset = self.log_end_offset, "segment rolled");
        self.segments.insert(self.log_end_offset, segment);
        Ok(())
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has at least one segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has at least one segment")
    }

    /// Reads whole batches from the one holding `start_offset`, up to `max_bytes`, never
    /// returning a batch whose last offset reaches `max_offset_exclusive` (the high
    /// watermark for consumers). A read at the log end offset returns nothing.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
        min_one_batch: MinOneBatch,
    ) -> Result<ReadResult> {
        if start_offset < self.log_start_offset || start_offset > self.log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                requested: start_offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset,
            });
        }
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut remaining = max_bytes as u64;
        if start_offset < self.log_end_offset && start_offset < max_offset_exclusive {
            let from = self
                .segments
                .range(..=start_offset)
                .next_back()
                .map_or(self.log_start_offset, |(base, _)| *base);
            for segment in self.segments.range(from..).map(|(_, s)| s) {
                let first = parts.is_empty() && min_one_batch == MinOneBatch::Yes;
                let read = segment.read(start_offset, remaining, max_offset_exclusive, first)?;
                remaining = remaining.saturating_sub(read.bytes.len() as u64);
                if !read.bytes.is_empty() {
                    parts.push(read.bytes);
                }
                if read.limited {
                    break;
                }
            }
        }
        let records = if parts.len() == 1 {
            Bytes::from(parts.pop().unwrap_or_default())
        } else {
            let mut all = BytesMut::with_capacity(parts.iter().map(Vec::len).sum());
            parts.iter().for_each(|p| all.extend_from_slice(p));
            all.freeze()
        };
        Ok(ReadResult {
            records,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        })
    }

    /// The first record whose timestamp is `>= timestamp` (ListOffsets by time): its
    /// offset (at least the log start) and timestamp; `None` if there is none.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampOffset>> {
        for segment in self.segments.values() {
            if let Some((offset, ts)) =
                segment.find_offset_by_timestamp(timestamp, self.log_start_offset)?
            {
                return Ok(Some(TimestampOffset {
                    offset,
                    timestamp: ts,
                }));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP (KIP-734): the first record holding the largest
    /// timestamp of the log; `None` for an empty log.
    pub fn max_timestamp_offset(&self) -> Result<Option<TimestampOffset>> {
        let mut best: Option<(i64, &Segment)> = None;
        for segment in self.segments.values() {
            if let Some((timestamp, _)) = segment.max_timestamp() {
                if best.is_none_or(|(b, _)| timestamp > b) {
                    best = Some((timestamp, segment));
                }
            }
        }
        let Some((_, segment)) = best else {
            return Ok(None);
        };
        Ok(segment
            .max_timestamp_offset()?
            .map(|(offset, timestamp)| TimestampOffset { offset, timestamp }))
    }

    /// Fsyncs the active segment (older ones were fsynced when they rolled).
    pub fn flush(&mut self, now_ms: i64) -> Result<()> {
        self.active().flush()?;
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// Flushes and closes the log. A log with nothing appended since its last flush (or
    /// since it was opened) is closed without an fsync: on a broker with many quiet
    /// partitions, three fsyncs each made a clean shutdown take seconds.
    pub fn close(mut self, now_ms: i64) -> Result<()> {
        if self.unflushed_messages == 0 {
            return Ok(());
        }
        self.flush(now_ms)
    }

    /// Deletes every file of the log and its directory.
    pub fn delete(self) -> Result<()> {
        drop(self.segments);
        fs::remove_dir_all(&self.dir).map_err(io_err("delete log dir", &self.dir))
    }
}
