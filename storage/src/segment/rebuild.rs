//! Index entries and scan state rebuilt from a segment's batches, in order. Shared by
//! recovery, truncation and the cleaner's writer, so all three produce exactly the
//! indexes a live append would have written.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::batch::BatchHeader;
use crate::config::LogConfig;
use crate::error::{io_err, Result};
use crate::index::{offset, time, OffsetEntry, TimeEntry};
use crate::segment::IndexCursor;

#[derive(Debug)]
pub(crate) struct Rebuild {
    base_offset: i64,
    pub(super) cursor: IndexCursor,
    pub(super) offsets: Vec<OffsetEntry>,
    pub(super) times: Vec<TimeEntry>,
    max_offset_entries: usize,
    max_time_entries: usize,
    interval: u64,
    pub(super) first_ts: Option<i64>,
    pub(super) next_offset: i64,
    /// Bytes observed so far: the position of the next batch.
    size: u64,
}

impl Rebuild {
    pub(crate) fn new(base_offset: i64, config: &LogConfig) -> Self {
        Rebuild {
            base_offset,
            cursor: IndexCursor::default(),
            offsets: Vec::new(),
            times: Vec::new(),
            max_offset_entries: (config.segment_index_bytes / offset::OFFSET_ENTRY_SIZE as u64)
                .max(1) as usize,
            max_time_entries: (config.segment_index_bytes / time::TIME_ENTRY_SIZE as u64).max(1)
                as usize,
            interval: config.index_interval_bytes,
            first_ts: None,
            next_offset: base_offset,
            size: 0,
        }
    }

    /// Observes the next batch, which starts where the previous one ended.
    pub(crate) fn observe(&mut self, header: &BatchHeader) {
        if let Some(((offset, pos), (ts, ts_offset))) =
            self.cursor.observe(header, self.size, self.interval)
        {
            if let Some(e) = OffsetEntry::new(self.base_offset, offset, pos) {
                let increasing = self
                    .offsets
                    .last()
                    .is_none_or(|l| l.relative_offset < e.relative_offset);
                if self.offsets.len() < self.max_offset_entries && increasing {
                    self.offsets.push(e);
                }
            }
            if let Some(e) = TimeEntry::new(self.base_offset, ts, ts_offset) {
                if self.times.len() < self.max_time_entries && time::accepts(self.times.last(), &e)
                {
                    self.times.push(e);
                }
            }
        }
        self.first_ts.get_or_insert(header.max_timestamp);
        self.next_offset = header.next_offset();
        self.size += header.size() as u64;
    }

    /// The bytes of the batches observed.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Writes the offset and time indexes to new files and fsyncs them (the cleaner's
    /// `.cleaned` indexes, written without the partition lock).
    pub(crate) fn write_index_files(&self, offset_path: &Path, time_path: &Path) -> Result<()> {
        let offsets: Vec<u8> = self.offsets.iter().flat_map(offset::encode).collect();
        let times: Vec<u8> = self.times.iter().flat_map(time::encode).collect();
        for (path, bytes) in [(offset_path, offsets), (time_path, times)] {
            let mut file = File::create(path).map_err(io_err("create index", path))?;
            file.write_all(&bytes)
                .and_then(|()| file.sync_all())
                .map_err(io_err("write index", path))?;
        }
        Ok(())
    }
}
