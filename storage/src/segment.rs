//! One log segment: `<20-digit base offset>.log` plus its `.index` and `.timeindex`
//! (Kafka's `LogSegment`).
//!
//! Invariants: the `.log` file holds whole, CRC-valid batches with increasing offsets
//! from `base_offset`, up to `size` bytes (bytes past `size` are a torn write and are
//! overwritten or truncated); every batch's offsets fit in u32 relative to the base; the
//! indexes are hints rebuilt by `recover`, or, below the recovery point, checked and kept
//! by `load_trusted` (`segment/trusted.rs`). Not thread-safe: the owning `Log` serialises
//! access.

use std::fs::{self, File};
use std::io::BufReader;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{BatchHeader, BATCH_HEADER_LEN};
use crate::config::LogConfig;
use crate::error::{io_err, Result, StorageError};
use crate::file_pool::PooledFile;
use crate::index::{OffsetIndex, TimeIndex};
use crate::records;
use crate::recovery::read_valid_batch;
pub use crate::roll::{roll_reason, IncomingAppend, RollReason, RollState};
use crate::txn_index::{AbortedTxn, TxnIndexFile};

mod rebuild;
mod trusted;

pub(crate) use rebuild::Rebuild;

/// Suffix of a segment file awaiting deletion (`file.delete.delay.ms`).
pub const DELETED_SUFFIX: &str = ".deleted";

/// The file name of a segment file: the base offset on 20 digits plus an extension.
pub fn file_name(base_offset: i64, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

/// Tracks when the next index entries are due (shared by append and recovery, so a
/// rebuilt index equals the one written live).
#[derive(Debug, Clone, Copy, Default)]
struct IndexCursor {
    bytes_since_last_entry: u64,
    max_timestamp: Option<(i64, i64)>,
}

impl IndexCursor {
    /// Observes a batch at `position`; returns the entries due before it, as Kafka's
    /// `LogSegment.append`: when more than `interval` bytes were written since the last
    /// entry, index (last offset → position) and (max timestamp so far → its offset).
    fn observe(
        &mut self,
        header: &BatchHeader,
        position: u64,
        interval: u64,
    ) -> Option<((i64, u64), (i64, i64))> {
        if self
            .max_timestamp
            .is_none_or(|(ts, _)| header.max_timestamp > ts)
        {
            self.max_timestamp = Some((header.max_timestamp, header.last_offset()));
        }
        let due = self.bytes_since_last_entry > interval;
        if due {
            self.bytes_since_last_entry = 0;
        }
        self.bytes_since_last_entry += header.size() as u64;
        let max = self.max_timestamp?;
        due.then_some(((header.last_offset(), position), max))
    }
}

/// A segment as a read sees it after the partition lock is released (`log/read.rs`):
/// the open file (kept readable by the `Arc` even if the segment is deleted, renamed or
/// replaced by compaction meanwhile), where to start scanning, and where to stop.
#[derive(Debug, Clone)]
pub(crate) struct SegmentSource {
    pub file: Arc<File>,
    pub path: Arc<Path>,
    /// The indexed position at or before the wanted batch (0 after the first segment).
    pub position: u64,
    /// The segment's size when the read was planned.
    pub size: u64,
    /// When the read's offset bound (the high watermark) falls inside this segment: the
    /// indexed position at or before it, where a zero-copy read starts looking for the
    /// bound's batch (`log/read_ranges.rs`). `None`: every batch planned is below it.
    pub bound_position: Option<u64>,
}

/// How a read may obtain a segment's file from the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileAccess {
    /// Reopen it if the pool closed it (blocking threads).
    Open,
    /// Only if the pool holds it open (async workers).
    CachedOnly,
}

/// What `Segment::append` restores when a write fails.
struct AppendMark {
    size: u64,
    cursor: IndexCursor,
    first_batch_timestamp: Option<i64>,
    next_offset: i64,
    offset_entries: usize,
    time_entries: usize,
}

/// One segment of a partition log.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    /// The `.log` file, open while the file pool keeps it (`file_pool.rs`); a read gets
    /// an `Arc<File>` that stays valid after the partition lock is released.
    log: PooledFile,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    cursor: IndexCursor,
    first_batch_timestamp: Option<i64>,
    created_ms: i64,
    next_offset: i64,
    /// The aborted transactions whose markers lie in this segment (`.txnindex`).
    txn_index: TxnIndexFile,
}

impl Segment {
    /// Opens (creating if missing) the segment's files without validating them; call
    /// `recover` before use.
    pub fn open(dir: &Path, base_offset: i64, config: &LogConfig, now_ms: i64) -> Result<Self> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log = PooledFile::open_or_create(&log_path, "segment")?;
        let size = log
            .get()?
            .metadata()
            .map_err(io_err("stat segment", &log_path))?
            .len();
        let offset_index = OffsetIndex::open(
            &dir.join(file_name(base_offset, "index")),
            base_offset,
            config.segment_index_bytes,
        )?;
        let time_index = TimeIndex::open(
            &dir.join(file_name(base_offset, "timeindex")),
            base_offset,
            config.segment_index_bytes,
        )?;
        Ok(Segment {
            base_offset,
            log,
            size,
            offset_index,
            time_index,
            cursor: IndexCursor::default(),
            first_batch_timestamp: None,
            created_ms: now_ms,
            next_offset: base_offset,
            txn_index: TxnIndexFile::new(dir, base_offset),
        })
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// The offset after the last batch (the base offset when empty).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The largest batch max timestamp and the last offset of the batch holding it.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        self.cursor.max_timestamp
    }

    pub fn roll_state(&self) -> RollState {
        RollState {
            base_offset: self.base_offset,
            size: self.size,
            first_batch_timestamp: self.first_batch_timestamp,
            created_ms: self.created_ms,
            index_full: self.offset_index.is_full() || self.time_index.is_full(),
        }
    }

    pub fn set_config(&mut self, config: &LogConfig) {
        self.offset_index
            .set_max_index_bytes(config.segment_index_bytes);
        self.time_index
            .set_max_index_bytes(config.segment_index_bytes);
    }

    /// Scans every batch from the start: checks bounds, CRC and increasing offsets,
    /// truncates the file at the first invalid batch (a torn or corrupt tail), rebuilds
    /// the indexes, and calls `on_batch` for each valid batch. Returns the number of bytes
    /// truncated. `on_batch` gets each batch's header and whole bytes (to decode a
    /// control batch's marker). The `.txnindex` is left to the caller (`reset_txn_index`).
    pub fn recover(
        &mut self,
        config: &LogConfig,
        on_batch: &mut dyn FnMut(&BatchHeader, &[u8]),
    ) -> Result<u64> {
        let file_size = self.size;
        let file = self.log.get()?;
        let mut reader = BufReader::with_capacity(64 * 1024, &*file);
        let mut rebuild = Rebuild::new(self.base_offset, config);
        let mut position = 0u64;
        let mut buf = vec![0u8; BATCH_HEADER_LEN];
        while position < file_size {
            let Some(header) = read_valid_batch(
                &mut reader,
                &mut buf,
                file_size - position,
                rebuild.next_offset,
                self.base_offset,
            ) else {
                break;
            };
            rebuild.observe(&header);
            on_batch(&header, &buf);
            position += header.size() as u64;
        }
        let truncated = file_size - position;
        if truncated > 0 {
            tracing::warn!(path = %self.log.path().display(), position, truncated, "truncating invalid tail of segment");
            file.set_len(position)
                .map_err(io_err("truncate segment", self.log.path()))?;
            file.sync_all()
                .map_err(io_err("fsync segment", self.log.path()))?;
        }
        self.install(rebuild, position)?;
        Ok(truncated)
    }

    /// Opens a segment the cleaner wrote, with the index files it wrote and fsynced
    /// beside it, from what its writer observed (`rebuild`): no scan, as this runs under
    /// the partition lock. A file whose size is not what was written is scanned in full.
    pub(crate) fn open_cleaned(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
        rebuild: Rebuild,
    ) -> Result<Self> {
        let mut segment = Segment::open(dir, base_offset, config, now_ms)?;
        let size = rebuild.size();
        if segment.size == size {
            segment.install(rebuild, size)?;
        } else {
            tracing::warn!(path = %segment.log.path().display(), expected = size, found = segment.size, "cleaned segment changed size; scanning it");
            segment.recover(config, &mut |_, _| {})?;
        }
        Ok(segment)
    }

    /// Kafka's `LogSegment.truncateTo`: removes every batch from the first one whose last
    /// offset is `>= offset` (a batch spanning `offset` goes whole), fsyncs the file, and
    /// rebuilds the indexes from the remaining batch headers (no CRC: they were checked on
    /// append or recovery). Returns the number of bytes removed.
    pub fn truncate_to(&mut self, offset: i64, config: &LogConfig) -> Result<u64> {
        let Some((cut, _)) = self.find_batch(offset)? else {
            return Ok(0);
        };
        let mut rebuild = Rebuild::new(self.base_offset, config);
        let mut position = 0u64;
        while position < cut {
            let Some(header) = self.header_at(position)? else {
                break;
            };
            rebuild.observe(&header);
            position += header.size() as u64;
        }
        // The file first: the indexes are hints that recovery rebuilds anyway.
        let file = self.log.get()?;
        file.set_len(cut)
            .map_err(io_err("truncate segment", self.log.path()))?;
        file.sync_all()
            .map_err(io_err("fsync segment", self.log.path()))?;
        let removed = self.size - cut;
        self.install(rebuild, cut)?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        Ok(removed)
    }

    /// Calls `f` with every batch header, in order (positional reads of the headers
    /// only; used to rebuild producer state after a truncation).
    pub fn for_each_header(&self, f: &mut dyn FnMut(&BatchHeader)) -> Result<()> {
        let mut position = 0u64;
        while let Some(header) = self.header_at(position)? {
            f(&header);
            position += header.size() as u64;
        }
        Ok(())
    }

    /// Like `for_each_header`, with the decoded marker of each control batch of a
    /// producer (read whole: markers are tiny). A marker that does not decode is passed
    /// as `None` with a WARN (it was checked when appended; the log is the truth).
    pub fn for_each_producer_batch(
        &self,
        f: &mut dyn FnMut(&BatchHeader, Option<&crate::control::EndTxnMarker>),
    ) -> Result<()> {
        let mut position = 0u64;
        while let Some(header) = self.header_at(position)? {
            if header.is_control() && header.has_producer_id() && header.records_count > 0 {
                let bytes = self.read_batch(position, &header)?;
                let marker = crate::control::parse_end_txn_marker(&bytes, &header);
                if let Err(reason) = &marker {
                    tracing::warn!(path = %self.log.path().display(), position, %reason, "unreadable transaction marker ignored");
                }
                f(&header, marker.ok().as_ref());
            } else {
                f(&header, None);
            }
            position += header.size() as u64;
        }
        Ok(())
    }

    /// The bytes of the `.txnindex` file (empty if there is none).
    pub(crate) fn txn_index_bytes(&self) -> Result<Vec<u8>> {
        self.txn_index.read()
    }

    /// Makes the `.txnindex` hold exactly `entries` (after loading or recovering).
    pub(crate) fn reset_txn_index(&mut self, entries: &[AbortedTxn]) -> Result<()> {
        self.txn_index.reset(entries)
    }

    /// [`Self::reset_txn_index`] when the file's bytes (`current`, empty for no file) were
    /// just read by the caller.
    pub(crate) fn reset_txn_index_from(
        &mut self,
        entries: &[AbortedTxn],
        current: Vec<u8>,
    ) -> Result<()> {
        self.txn_index.reset_from(entries, current)
    }

    /// Records aborted transactions whose markers were just appended to this segment.
    pub(crate) fn append_aborted(&mut self, entries: &[AbortedTxn]) -> Result<()> {
        self.txn_index.append(entries)
    }

    /// Keeps the first `entries` aborted transactions (a truncation), fsynced.
    pub(crate) fn truncate_txn_index(&mut self, entries: usize) -> Result<()> {
        self.txn_index.truncate(entries)
    }

    /// Replaces the indexes and the scan state with a rebuild covering `size` bytes.
    fn install(&mut self, rebuild: Rebuild, size: u64) -> Result<()> {
        self.offset_index.replace(rebuild.offsets)?;
        self.time_index.replace(rebuild.times)?;
        self.size = size;
        self.cursor = rebuild.cursor;
        self.first_batch_timestamp = rebuild.first_ts;
        self.next_offset = rebuild.next_offset;
        Ok(())
    }

    /// Appends already validated and stamped batches (`headers` holds each batch's
    /// position in `buf`), then indexes them.
    ///
    /// All or nothing: when a write fails (ENOSPC on a full disk, EIO), the segment is
    /// put back as it was before the call — size, scan state, index entries — and its
    /// files are shrunk to that size, so nothing of the failed append is served, indexed
    /// or read back by a restart, and the next append writes where this one started.
    /// A write that failed was never acknowledged, so undoing it is safe; an fsync
    /// failure is another matter (`flush`), not handled here.
    pub fn append(
        &mut self,
        buf: &[u8],
        headers: &[(usize, BatchHeader)],
        config: &LogConfig,
    ) -> Result<()> {
        let before = AppendMark {
            size: self.size,
            cursor: self.cursor,
            first_batch_timestamp: self.first_batch_timestamp,
            next_offset: self.next_offset,
            offset_entries: self.offset_index.entries().len(),
            time_entries: self.time_index.entries().len(),
        };
        let result = self.append_unchecked(buf, headers, config);
        if result.is_err() {
            self.undo_append(&before);
        }
        result
    }

    fn append_unchecked(
        &mut self,
        buf: &[u8],
        headers: &[(usize, BatchHeader)],
        config: &LogConfig,
    ) -> Result<()> {
        self.log.mark_dirty();
        crate::write_fault::write_all_at(&*self.log.get()?, buf, self.size)
            .map_err(io_err("append to segment", self.log.path()))?;
        for (at, header) in headers {
            let position = self.size + *at as u64;
            if let Some(((offset, pos), (ts, ts_offset))) =
                self.cursor
                    .observe(header, position, config.index_interval_bytes)
            {
                self.offset_index.append(offset, pos)?;
                self.time_index.maybe_append(ts, ts_offset)?;
            }
            self.first_batch_timestamp
                .get_or_insert(header.max_timestamp);
            self.next_offset = header.next_offset();
        }
        self.size += buf.len() as u64;
        Ok(())
    }

    /// Puts the segment back at `before` after a failed append. Shrinking the files
    /// needs no free space; if it fails anyway, memory is still right (the next append
    /// overwrites the torn bytes, and recovery truncates them after a crash).
    fn undo_append(&mut self, before: &AppendMark) {
        self.size = before.size;
        self.cursor = before.cursor;
        self.first_batch_timestamp = before.first_batch_timestamp;
        self.next_offset = before.next_offset;
        let shrunk = self
            .log
            .get()
            .and_then(|f| {
                f.set_len(before.size)
                    .map_err(io_err("truncate segment", self.log.path()))
            })
            .and(self.offset_index.rollback(before.offset_entries))
            .and(self.time_index.rollback(before.time_entries));
        if let Err(e) = shrunk {
            tracing::warn!(path = %self.log.path().display(), error = %e, "undoing a failed append: files not shrunk");
        }
    }

    /// Reads the header of the batch at `position`, or `None` at the end of the segment.
    fn header_at(&self, position: u64) -> Result<Option<BatchHeader>> {
        if position >= self.size {
            return Ok(None);
        }
        let mut buf = [0u8; BATCH_HEADER_LEN];
        self.log
            .get()?
            .read_exact_at(&mut buf, position)
            .map_err(io_err("read segment", self.log.path()))?;
        let header = BatchHeader::parse(&buf).map_err(|reason| StorageError::CorruptLog {
            path: self.log.path().to_path_buf(),
            position,
            reason,
        })?;
        Ok(Some(header))
    }

    /// The position and header of the first batch whose last offset is `>= offset`.
    fn find_batch(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>> {
        let (_, mut position) = self.offset_index.lookup(offset);
        while let Some(header) = self.header_at(position)? {
            if header.last_offset() >= offset {
                return Ok(Some((position, header)));
            }
            position += header.size() as u64;
        }
        Ok(None)
    }

    /// What a read starting at `start_offset` needs from this segment once the partition
    /// lock is released: the file, the indexed position at or before the batch holding
    /// `start_offset` (in-memory lookup), the size now (bytes past it may be a later
    /// append in progress), and where to look for `bound_offset` if it lies inside. The
    /// file comes from the pool, reopened if it was closed (`FileAccess::Open`), or only
    /// if the pool holds it (`FileAccess::CachedOnly`: `None` otherwise, no syscall).
    pub(crate) fn source(
        &self,
        start_offset: i64,
        bound_offset: i64,
        access: FileAccess,
    ) -> Result<Option<SegmentSource>> {
        let file = match access {
            FileAccess::Open => self.log.get()?,
            FileAccess::CachedOnly => match self.log.get_cached() {
                Some(file) => file,
                None => return Ok(None),
            },
        };
        Ok(Some(self.source_with(file, start_offset, bound_offset)))
    }

    fn source_with(&self, file: Arc<File>, start_offset: i64, bound_offset: i64) -> SegmentSource {
        let (_, position) = self.offset_index.lookup(start_offset);
        let bound_position =
            (bound_offset < self.next_offset).then(|| self.offset_index.lookup(bound_offset).1);
        SegmentSource {
            file,
            path: Arc::clone(self.log.path()),
            position,
            size: self.size,
            bound_position,
        }
    }

    /// [`Self::source`] with the file reopened if needed (blocking threads).
    pub(crate) fn open_source(
        &self,
        start_offset: i64,
        bound_offset: i64,
    ) -> Result<SegmentSource> {
        let file = self.log.get()?;
        Ok(self.source_with(file, start_offset, bound_offset))
    }

    /// The indexed position at or before the batch holding `offset` (memory only).
    pub(crate) fn indexed_position(&self, offset: i64) -> u64 {
        self.offset_index.lookup(offset).1
    }

    /// Whether the pool holds the `.log` file open: an append on an async worker must not
    /// wait on reopening it. The indexes are not asked: they are written once per
    /// `index.interval.bytes` and released after open (`index/mod.rs`), so requiring them
    /// would send nearly every append to the blocking pool; reopening one (a cached
    /// dentry) on the rare append that adds an entry costs microseconds.
    pub(crate) fn files_cached(&self) -> bool {
        self.log.get_cached().is_some()
    }

    /// The first record (at or after `min_offset`) whose timestamp is `>= timestamp`:
    /// its offset and timestamp. Uses the time index, then scans batch headers, then the
    /// records of the batch found (its base offset and max timestamp if compressed).
    pub fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>> {
        if self
            .cursor
            .max_timestamp
            .is_none_or(|(max, _)| max < timestamp)
        {
            return Ok(None);
        }
        let hint = self.time_index.lookup(timestamp).max(min_offset);
        let Some((mut position, _)) = self.find_batch(hint)? else {
            return Ok(None);
        };
        while let Some(header) = self.header_at(position)? {
            if header.max_timestamp >= timestamp {
                let bytes = self.read_batch(position, &header)?;
                let (offset, ts) = records::first_at_or_after(&bytes, &header, timestamp)
                    .unwrap_or((header.base_offset, header.max_timestamp));
                return Ok(Some((offset.max(min_offset), ts)));
            }
            position += header.size() as u64;
        }
        Ok(None)
    }

    /// The offset and timestamp of the first record holding the segment's largest
    /// timestamp (the batch's last offset if its records cannot be read).
    pub fn max_timestamp_offset(&self) -> Result<Option<(i64, i64)>> {
        let Some((max, last_offset)) = self.cursor.max_timestamp else {
            return Ok(None);
        };
        let Some((position, header)) = self.find_batch(last_offset)? else {
            return Ok(None);
        };
        let bytes = self.read_batch(position, &header)?;
        Ok(Some(
            records::with_max_timestamp(&bytes, &header).unwrap_or((last_offset, max)),
        ))
    }

    fn read_batch(&self, position: u64, header: &BatchHeader) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; header.size()];
        self.log
            .get()?
            .read_exact_at(&mut bytes, position)
            .map_err(io_err("read segment", self.log.path()))?;
        Ok(bytes)
    }

    /// Fsyncs the log and both indexes.
    pub fn flush(&self) -> Result<()> {
        self.log.sync_data()?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// Renames the segment's files (log, indexes, `.txnindex`) to `<name>.deleted` (Kafka's async deletion: readers that
    /// still hold them keep working) and returns the new paths, to unlink later. Missing
    /// index files are skipped.
    pub fn rename_for_deletion(self) -> Result<Vec<PathBuf>> {
        let dir = self
            .log
            .path()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let base_offset = self.base_offset;
        drop(self);
        let mut renamed = Vec::with_capacity(4);
        for ext in ["log", "index", "timeindex", crate::txn_index::EXTENSION] {
            let path = dir.join(file_name(base_offset, ext));
            let doomed = dir.join(format!("{}{DELETED_SUFFIX}", file_name(base_offset, ext)));
            match fs::rename(&path, &doomed) {
                Ok(()) => renamed.push(doomed),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("rename segment for deletion", &path)(e)),
            }
        }
        Ok(renamed)
    }

    /// Deletes the segment's files.
    pub fn delete(self) -> Result<()> {
        let dir = self
            .log
            .path()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let base_offset = self.base_offset;
        drop(self);
        for ext in ["log", "index", "timeindex", crate::txn_index::EXTENSION] {
            let path = dir.join(file_name(base_offset, ext));
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("delete segment file", &path)(e)),
            }
        }
        Ok(())
    }
}
