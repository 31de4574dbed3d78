//! A planned read finished as file ranges instead of bytes, for zero-copy fetches (issue
//! #13): only batch headers are read, to find where the record set starts and ends; the
//! connection then sends the ranges with `sendfile`.
//!
//! The bounds are found as Kafka's `LogSegment.read` finds them: the start is the batch
//! holding the fetch offset (offset index, then a header scan); the end is the first
//! batch that reaches the offset bound (the high watermark; index then header scan, only
//! when the byte limit reaches that far), or the byte limit, which may cut the last batch
//! (clients drop a partial last batch). The first batch is whole or absent: it may exceed
//! the limit when the read is the first of its response (`minOneMessage`), and otherwise
//! a read whose first batch does not fit is empty (Kafka's `firstEntryIncomplete`).

use std::sync::atomic::Ordering;

use crate::batch::{BatchHeader, BATCH_HEADER_LEN};
use crate::error::{Result, StorageError};
use crate::file_records::{read_full_in, FileRange, FileRecords, ReadWait};
use crate::segment::SegmentSource;

use super::{MinOneBatch, ReadPlan};

/// Bytes read at a time while scanning headers: a few index intervals' worth, so a
/// scan from an indexed position usually costs one `pread`.
const HEADER_WINDOW: usize = 16 * 1024;

/// The record set of a planned read, left in the files, plus the log bounds.
#[derive(Debug, Clone)]
pub struct RangesRead {
    pub records: FileRecords,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

impl ReadPlan {
    /// Finds the planned read's record set as file ranges, at most `max_bytes` (no more
    /// than planned; see the module docs for the first batch). Reads batch headers only,
    /// blocking unless `wait` is [`ReadWait::CachedOnly`]. `Ok(None)`: a truncation raced
    /// the scan; read again under the lock.
    pub fn execute_ranges(
        &self,
        max_bytes: usize,
        min_one_batch: MinOneBatch,
        wait: ReadWait,
    ) -> Result<Option<RangesRead>> {
        let mut remaining = max_bytes.min(self.max_bytes) as u64;
        let mut ranges: Vec<FileRange> = Vec::new();
        for source in &self.sources {
            let mut headers = HeaderReader::new(source, wait);
            let mut start = source.position;
            let first = loop {
                match headers.at(start)? {
                    Some(h) if h.last_offset() < self.start_offset => start += h.size() as u64,
                    found => break found,
                }
            };
            let Some(first) = first else { continue };
            if first.last_offset() >= self.max_offset_exclusive {
                break;
            }
            let first_size = first.size() as u64;
            let leading = ranges.is_empty();
            let want = if leading && min_one_batch == MinOneBatch::Yes {
                remaining.max(first_size)
            } else {
                remaining
            };
            let end = match source.bound_position {
                Some(hint) if start.saturating_add(want) > hint => {
                    headers.position_reaching(hint.max(start), self.max_offset_exclusive)?
                }
                _ => source.size,
            };
            let available = end.saturating_sub(start);
            let len = want.min(available);
            if len == 0 || (leading && len < first_size) {
                break;
            }
            ranges.push(FileRange {
                file: source.file.clone(),
                path: source.path.clone(),
                position: start,
                len,
            });
            remaining = remaining.saturating_sub(len);
            if len < available || end < source.size || remaining == 0 {
                break;
            }
        }
        if self.rewrites.load(Ordering::Acquire) != self.generation {
            return Ok(None);
        }
        Ok(Some(RangesRead {
            records: FileRecords::new(ranges, self.generation, self.rewrites.clone()),
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        }))
    }
}

/// Batch headers of one planned segment, read a window at a time.
struct HeaderReader<'a> {
    source: &'a SegmentSource,
    wait: ReadWait,
    window: Vec<u8>,
    /// File position of `window[0]`.
    window_start: u64,
}

impl<'a> HeaderReader<'a> {
    fn new(source: &'a SegmentSource, wait: ReadWait) -> Self {
        HeaderReader {
            source,
            wait,
            window: Vec::new(),
            window_start: 0,
        }
    }

    /// The header of the batch at `position`; `None` past the planned size (or a file
    /// cut under us, which the generation check then reports).
    fn at(&mut self, position: u64) -> Result<Option<BatchHeader>> {
        let header_end = position + BATCH_HEADER_LEN as u64;
        if header_end > self.source.size {
            return Ok(None);
        }
        let cached = position >= self.window_start
            && header_end <= self.window_start + self.window.len() as u64;
        if !cached {
            let want = (self.source.size - position).min(HEADER_WINDOW as u64) as usize;
            self.window.resize(want, 0);
            let got = read_full_in(
                &self.source.file,
                &self.source.path,
                &mut self.window,
                position,
                self.wait,
            )?;
            self.window.truncate(got);
            self.window_start = position;
            if got < BATCH_HEADER_LEN {
                return Ok(None);
            }
        }
        let at = (position - self.window_start) as usize;
        let bytes = self
            .window
            .get(at..at + BATCH_HEADER_LEN)
            .unwrap_or_default();
        BatchHeader::parse(bytes)
            .map(Some)
            .map_err(|reason| StorageError::CorruptLog {
                path: self.source.path.to_path_buf(),
                position,
                reason,
            })
    }

    /// The position of the first batch at or after `from` whose last offset reaches
    /// `bound`, or the planned size when none does.
    fn position_reaching(&mut self, from: u64, bound: i64) -> Result<u64> {
        let mut position = from;
        while let Some(header) = self.at(position)? {
            if header.last_offset() >= bound {
                return Ok(position);
            }
            position += header.size() as u64;
        }
        Ok(position.min(self.source.size))
    }
}
