//! Opening a segment below the recovery point without scanning it (Kafka's `LogLoader`
//! skipping segments before the recovery point): the `.log` size, the last offset- and
//! time-index entries and the batch headers after the last offset-index entry (at most
//! about one `index.interval.bytes`) give everything a full `recover` would compute.
//!
//! The indexes are checked, never trusted blindly: whole entries, strictly increasing,
//! positions inside the file, the batch at the last entry's position keyed by that
//! entry's offset, no more than one index interval of log after it, and the headers
//! after it chaining exactly to the end of the file. Any doubt makes the caller fall
//! back to a full `recover`. Batch CRCs are not checked: the data below the recovery
//! point was fsynced and validated when it was written or last recovered.

use crate::batch::{BatchHeader, BATCH_HEADER_LEN};
use crate::config::LogConfig;
use crate::error::{io_err, Result};
use crate::index::offset::OFFSET_ENTRY_SIZE;
use crate::index::time::{self, TIME_ENTRY_SIZE};
use crate::segment::{IndexCursor, Segment};

impl Segment {
    /// Loads the scan state from the indexes and the last interval of batch headers.
    /// Returns `false` (state untouched) when the files are not consistent enough to
    /// trust: call `recover` then.
    pub(crate) fn load_trusted(&mut self, config: &LogConfig) -> Result<bool> {
        let offsets = self.offset_index.entries();
        let times = self.time_index.entries();
        let whole_entries = self.offset_index.file_len()
            == (offsets.len() * OFFSET_ENTRY_SIZE) as u64
            && self.time_index.file_len() == (times.len() * TIME_ENTRY_SIZE) as u64;
        let increasing = offsets
            .windows(2)
            .all(|w| w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position)
            && times.windows(2).all(|w| time::accepts(Some(&w[0]), &w[1]));
        // A full time index may have missed entries of a multi-batch append (the segment
        // rolled right after), so its last entry would not bound the max timestamp.
        if !whole_entries || !increasing || self.time_index.is_full() {
            return Ok(false);
        }
        let last_entry = offsets.last().copied();
        let start = last_entry.map_or(0, |e| u64::from(e.position));
        if self.size == 0 {
            return Ok(if last_entry.is_none() && times.is_empty() {
                self.next_offset = self.base_offset;
                true
            } else {
                false
            });
        }
        if start >= self.size {
            return Ok(false);
        }
        let mut max_timestamp = times
            .last()
            .map(|e| (e.timestamp, self.base_offset + i64::from(e.relative_offset)));
        let mut position = start;
        let mut bytes_since_last_entry = 0u64;
        let mut next_offset: Option<i64> = None;
        while position < self.size {
            let Some(header) = self.trusted_header_at(position)? else {
                return Ok(false);
            };
            let keyed_by_entry = match (position == start, last_entry) {
                (true, Some(e)) => {
                    header.last_offset() == self.base_offset + i64::from(e.relative_offset)
                }
                _ => true,
            };
            // Index entries are due after every `index.interval.bytes`: a longer stretch
            // without one means the offset index lost entries (unless it is full).
            let entry_missing = position != start
                && bytes_since_last_entry > config.index_interval_bytes
                && !self.offset_index.is_full();
            let end = position + header.size() as u64;
            let ordered = next_offset.is_none_or(|n| header.base_offset >= n)
                && header.base_offset >= self.base_offset
                && header.last_offset_delta >= 0
                && header.last_offset() - self.base_offset <= i64::from(u32::MAX);
            if !keyed_by_entry || entry_missing || !ordered || end > self.size {
                return Ok(false);
            }
            if max_timestamp.is_none_or(|(ts, _)| header.max_timestamp > ts) {
                max_timestamp = Some((header.max_timestamp, header.last_offset()));
            }
            bytes_since_last_entry += header.size() as u64;
            next_offset = Some(header.next_offset());
            position = end;
        }
        let Some(next_offset) = next_offset else {
            return Ok(false);
        };
        if times
            .last()
            .is_some_and(|e| self.base_offset + i64::from(e.relative_offset) >= next_offset)
        {
            return Ok(false);
        }
        let Some(first) = self.trusted_header_at(0)? else {
            return Ok(false);
        };
        self.cursor = IndexCursor {
            bytes_since_last_entry,
            max_timestamp,
        };
        self.first_batch_timestamp = Some(first.max_timestamp);
        self.next_offset = next_offset;
        Ok(true)
    }

    /// The header at `position`, or `None` when fewer than a header's bytes remain or
    /// they do not parse (an inconsistency, not an error: the caller recovers instead).
    fn trusted_header_at(&self, position: u64) -> Result<Option<BatchHeader>> {
        if self.size.saturating_sub(position) < BATCH_HEADER_LEN as u64 {
            return Ok(None);
        }
        let mut buf = [0u8; BATCH_HEADER_LEN];
        let file = self.log.get()?;
        std::os::unix::fs::FileExt::read_exact_at(&*file, &mut buf, position)
            .map_err(io_err("read segment", self.log.path()))?;
        Ok(BatchHeader::parse(&buf).ok())
    }
}
