//! Reads in two steps, so the partition lock is held only for the cheap one (issue #13):
//! `Log::plan_read` checks the offset and captures, under the lock, the segments a read
//! may touch (open file from the file pool, indexed start position, size at that
//! moment; no I/O but for reopening a file the pool closed, which `plan_read_cached`
//! leaves to a blocking thread);
//! `ReadPlan::execute` then reads without the lock.
//!
//! The execution reads each segment's window in large positional reads straight into the
//! one buffer that becomes the response's record set, and finds the batch boundaries by
//! parsing the headers inside that buffer: no read per batch header, no per-segment
//! buffers concatenated afterwards.
//!
//! Why reading without the lock is safe: bytes below a planned segment size are whole
//! batches that are only ever changed in place by a truncation (appends write past the
//! size; retention and compaction rename or replace files, and the planned `Arc<File>`
//! keeps the old inode readable). Truncations bump the log's rewrite generation before
//! touching a file, so a read whose generation moved is discarded and redone under the
//! lock by its caller (`LogHandle`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Buf, BytesMut};

use crate::batch::{BatchHeader, BATCH_HEADER_LEN};
use crate::error::{Result, StorageError};
use crate::file_records::read_full;
use crate::segment::{FileAccess, SegmentSource};

use super::{Log, MinOneBatch, ReadResult};

/// Read ahead of what `max_bytes` needs: the wanted batch lies at most about one index
/// interval (`index.interval.bytes`, 4 KiB by default) past the indexed position, and a
/// read that stops early costs only the unused tail of this window.
const WINDOW_SLACK: u64 = 16 * 1024;

/// A read captured under the partition lock, to run without it.
#[derive(Debug)]
pub struct ReadPlan {
    pub(super) start_offset: i64,
    pub(super) max_bytes: usize,
    pub(super) max_offset_exclusive: i64,
    pub(super) sources: Vec<SegmentSource>,
    pub(super) log_start_offset: i64,
    pub(super) log_end_offset: i64,
    pub(super) generation: u64,
    pub(super) rewrites: Arc<AtomicU64>,
}

impl Log {
    /// Plans a read of whole batches from the one holding `start_offset`, of at most
    /// `max_bytes` (see [`ReadPlan::execute`]), never returning a batch whose last offset
    /// reaches `max_offset_exclusive` (the high watermark for consumers). Fails with
    /// `OffsetOutOfRange` outside [log start, log end]. Memory only.
    pub fn plan_read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
    ) -> Result<ReadPlan> {
        self.plan_read_with(
            start_offset,
            max_bytes,
            max_offset_exclusive,
            FileAccess::Open,
        )?
        .ok_or(StorageError::NotCached)
    }

    /// [`Log::plan_read`] for an async worker: `Ok(None)` when a segment file the read
    /// needs is not open in the file pool (reopening it is a syscall that may wait on the
    /// disk: plan on a blocking thread then).
    pub fn plan_read_cached(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
    ) -> Result<Option<ReadPlan>> {
        self.plan_read_with(
            start_offset,
            max_bytes,
            max_offset_exclusive,
            FileAccess::CachedOnly,
        )
    }

    fn plan_read_with(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
        access: FileAccess,
    ) -> Result<Option<ReadPlan>> {
        if start_offset < self.log_start_offset || start_offset > self.log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                requested: start_offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset,
            });
        }
        let mut sources = Vec::new();
        if start_offset < self.log_end_offset && start_offset < max_offset_exclusive {
            let from = self
                .segments
                .range(..=start_offset)
                .next_back()
                .map_or(self.log_start_offset, |(base, _)| *base);
            // The first segment, then later ones until they alone could fill `max_bytes`
            // (how much of the first one is wanted is unknown before its headers are read).
            let mut later = 0u64;
            for (base, segment) in self.segments.range(from..) {
                let start = if sources.is_empty() {
                    start_offset
                } else {
                    if *base >= max_offset_exclusive || later >= max_bytes as u64 {
                        break;
                    }
                    later += segment.size();
                    *base
                };
                let Some(source) = segment.source(start, max_offset_exclusive, access)? else {
                    return Ok(None);
                };
                sources.push(source);
            }
        }
        Ok(Some(ReadPlan {
            start_offset,
            max_bytes,
            max_offset_exclusive,
            sources,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            generation: self.rewrites.load(Ordering::Acquire),
            rewrites: Arc::clone(&self.rewrites),
        }))
    }

    /// Marks every read planned before now as possibly stale: called before a file is
    /// changed in place (truncation).
    pub(super) fn bump_rewrites(&self) {
        self.rewrites.fetch_add(1, Ordering::AcqRel);
    }
}

impl ReadPlan {
    /// The most bytes this plan was made for.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// At most how many bytes the read can return, from memory: what its segments held
    /// past its first position when it was planned, within `max_bytes`. (The read itself
    /// may return one batch more than `max_bytes` when it must return one.)
    pub fn bytes_at_most(&self) -> u64 {
        let held: u64 = self
            .sources
            .iter()
            .map(|s| s.size.saturating_sub(s.position))
            .sum();
        held.min(self.max_bytes as u64)
    }

    /// The same read done under the log's exclusive access, for a plan that went stale.
    pub fn read_locked(
        &self,
        log: &Log,
        max_bytes: usize,
        min_one_batch: MinOneBatch,
    ) -> Result<ReadResult> {
        log.read(
            self.start_offset,
            max_bytes.min(self.max_bytes),
            self.max_offset_exclusive,
            min_one_batch,
        )
    }

    /// Reads the planned batches, at most `max_bytes` (no more than planned) unless the
    /// first batch alone is larger and `min_one_batch` (Kafka's `minOneMessage`). Blocking
    /// file I/O: call it on a blocking thread. `Ok(None)`: a truncation raced the read and
    /// its bytes cannot be trusted; read again under the lock.
    pub fn execute(
        &self,
        max_bytes: usize,
        min_one_batch: MinOneBatch,
    ) -> Result<Option<ReadResult>> {
        let mut out = BytesMut::new();
        let mut remaining = max_bytes.min(self.max_bytes) as u64;
        for source in &self.sources {
            let first = out.is_empty() && min_one_batch == MinOneBatch::Yes;
            let limits = Limits {
                start_offset: self.start_offset,
                max_bytes: remaining,
                max_offset_exclusive: self.max_offset_exclusive,
                min_one_batch: first,
            };
            let before = out.len();
            let limited = read_segment(source, &limits, &mut out)?;
            remaining = remaining.saturating_sub((out.len() - before) as u64);
            if limited {
                break;
            }
        }
        if self.rewrites.load(Ordering::Acquire) != self.generation {
            return Ok(None);
        }
        Ok(Some(ReadResult {
            records: out.freeze(),
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        }))
    }
}

struct Limits {
    start_offset: i64,
    max_bytes: u64,
    max_offset_exclusive: i64,
    min_one_batch: bool,
}

/// Appends to `out` the whole batches of one segment that the limits allow; true when a
/// limit (bytes or offset) stopped it before the segment's planned end.
fn read_segment(source: &SegmentSource, limits: &Limits, out: &mut BytesMut) -> Result<bool> {
    let base = out.len();
    let mut window = Window {
        source,
        out,
        base,
        filled: 0,
    };
    let available = source.size.saturating_sub(source.position);
    let mut position = 0u64; // relative to `source.position`
    let mut begin: Option<u64> = None;
    let mut end = 0u64;
    let mut limited = false;
    let chunk = limits.max_bytes.saturating_add(WINDOW_SLACK).min(available);
    while position < available {
        if !window.ensure(position + BATCH_HEADER_LEN as u64, chunk)? {
            break; // a partial header: the file was cut under us (the generation tells)
        }
        let at = base + position as usize;
        let header =
            BatchHeader::parse(&window.out[at..at + BATCH_HEADER_LEN]).map_err(|reason| {
                StorageError::CorruptLog {
                    path: source.path.to_path_buf(),
                    position: source.position + position,
                    reason,
                }
            })?;
        let batch_end = position + header.size() as u64;
        if header.last_offset() < limits.start_offset {
            position = batch_end; // before the wanted batch: skipped
            continue;
        }
        let first = *begin.get_or_insert(position);
        let within_bytes =
            batch_end - first <= limits.max_bytes || (end <= first && limits.min_one_batch);
        if header.last_offset() >= limits.max_offset_exclusive || !within_bytes {
            limited = true;
            break;
        }
        if !window.ensure(batch_end, chunk)? {
            break;
        }
        end = batch_end;
        position = batch_end;
    }
    let out = window.out;
    match begin {
        Some(first) if end > first => {
            out.truncate(base + end as usize);
            let skip = first as usize;
            if skip > 0 {
                if base == 0 {
                    out.advance(skip); // O(1): the buffer's start moves
                } else {
                    out.copy_within(base + skip.., base);
                    out.truncate(out.len() - skip);
                }
            }
        }
        _ => out.truncate(base),
    }
    Ok(limited)
}

/// The bytes of one segment read so far: `out[base..base + filled]` holds the file from
/// `source.position`.
struct Window<'a> {
    source: &'a SegmentSource,
    out: &'a mut BytesMut,
    base: usize,
    filled: u64,
}

impl Window<'_> {
    /// Makes sure the first `upto` bytes are in the buffer, reading at least `chunk` at a
    /// time; false when the file ends first.
    fn ensure(&mut self, upto: u64, chunk: u64) -> Result<bool> {
        if upto <= self.filled {
            return Ok(true);
        }
        let available = self.source.size.saturating_sub(self.source.position);
        if upto > available {
            return Ok(false);
        }
        let want = (upto - self.filled).max(chunk).min(available - self.filled);
        let at = self.base + self.filled as usize;
        self.out.resize(at + want as usize, 0);
        let got = read_full(
            &self.source.file,
            &self.source.path,
            &mut self.out[at..],
            self.source.position + self.filled,
        )?;
        self.out.truncate(at + got);
        self.filled += got as u64;
        Ok(upto <= self.filled)
    }
}
