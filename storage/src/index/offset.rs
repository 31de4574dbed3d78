//! Sparse offset index: relative offset (u32) → byte position in the `.log` file (u32),
//! 8-byte big-endian entries, one every `index.interval.bytes` of log.
//!
//! Invariants: relative offsets strictly increase; at most `max_entries` entries
//! (`segment.index.bytes / 8`); a full index makes the segment roll. Entries point at
//! the start of a batch, keyed by that batch's last offset (as Kafka does), so a lookup
//! yields a position at or before the batch holding any offset `>= key`.

use std::path::Path;

use super::{floor_index, IndexFile};
use crate::error::Result;

/// Size of one entry on disk.
pub const OFFSET_ENTRY_SIZE: usize = 8;

/// One entry: an offset (relative to the segment base) and a file position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

impl OffsetEntry {
    /// The entry of a segment based at `base_offset`, if the offset and position fit
    /// the u32 fields.
    pub fn new(base_offset: i64, offset: i64, position: u64) -> Option<Self> {
        Some(OffsetEntry {
            relative_offset: u32::try_from(offset - base_offset).ok()?,
            position: u32::try_from(position).ok()?,
        })
    }
}

/// The offset index of one segment.
#[derive(Debug)]
pub struct OffsetIndex {
    file: IndexFile,
    base_offset: i64,
    entries: Vec<OffsetEntry>,
    max_entries: usize,
}

impl OffsetIndex {
    /// Opens the index, loading whatever valid-looking entries it holds; recovery decides
    /// whether to keep them.
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: u64) -> Result<Self> {
        let (file, content) = IndexFile::open(path)?;
        let entries = content
            .chunks_exact(OFFSET_ENTRY_SIZE)
            .map(|c| OffsetEntry {
                relative_offset: u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                position: u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        Ok(OffsetIndex {
            file,
            base_offset,
            entries,
            max_entries: max_entries(max_index_bytes),
        })
    }

    pub fn entries(&self) -> &[OffsetEntry] {
        &self.entries
    }

    /// The index file's length in bytes (a trusted open checks it holds whole entries).
    pub(crate) fn file_len(&self) -> u64 {
        self.file.len()
    }

    /// Keeps the first `entries` entries, in memory and in the file (a failed segment
    /// append undone; `IndexFile::rollback`).
    pub(crate) fn rollback(&mut self, entries: usize) -> Result<()> {
        self.entries.truncate(entries);
        self.file.rollback((entries * OFFSET_ENTRY_SIZE) as u64)
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    pub fn set_max_index_bytes(&mut self, max_index_bytes: u64) {
        self.max_entries = max_entries(max_index_bytes);
    }

    /// Adds an entry unless the index is full or the offset does not increase.
    pub fn append(&mut self, offset: i64, position: u64) -> Result<()> {
        let Some(entry) = self.entry(offset, position) else {
            return Ok(());
        };
        if self.is_full()
            || self
                .entries
                .last()
                .is_some_and(|last| last.relative_offset >= entry.relative_offset)
        {
            return Ok(());
        }
        self.file.append(&encode(&entry))?;
        self.entries.push(entry);
        Ok(())
    }

    /// The greatest indexed (offset, position) with offset `<= target`, else the segment
    /// start.
    pub fn lookup(&self, target: i64) -> (i64, u64) {
        floor_index(&self.entries, target - self.base_offset, |e| {
            i64::from(e.relative_offset)
        })
        .and_then(|i| self.entries.get(i))
        .map_or((self.base_offset, 0), |e| {
            (
                self.base_offset + i64::from(e.relative_offset),
                u64::from(e.position),
            )
        })
    }

    /// Replaces the content if it differs from `entries` (recovery's rebuild).
    pub fn replace(&mut self, entries: Vec<OffsetEntry>) -> Result<()> {
        let expected_len = (entries.len() * OFFSET_ENTRY_SIZE) as u64;
        if entries == self.entries && self.file.len() == expected_len {
            return Ok(());
        }
        tracing::info!(path = %self.file.path().display(), "rebuilding offset index");
        let bytes: Vec<u8> = entries.iter().flat_map(encode).collect();
        self.file.rewrite(&bytes)?;
        self.entries = entries;
        Ok(())
    }

    pub fn flush(&self) -> Result<()> {
        self.file.sync()
    }

    /// Builds an entry if the offset and position fit the u32 fields.
    pub fn entry(&self, offset: i64, position: u64) -> Option<OffsetEntry> {
        OffsetEntry::new(self.base_offset, offset, position)
    }
}

fn max_entries(max_index_bytes: u64) -> usize {
    (max_index_bytes / OFFSET_ENTRY_SIZE as u64).max(1) as usize
}

pub(crate) fn encode(entry: &OffsetEntry) -> [u8; OFFSET_ENTRY_SIZE] {
    let mut out = [0u8; OFFSET_ENTRY_SIZE];
    out[..4].copy_from_slice(&entry.relative_offset.to_be_bytes());
    out[4..].copy_from_slice(&entry.position.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_returns_the_greatest_entry_at_or_below_the_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut index = OffsetIndex::open(&dir.path().join("a.index"), 100, 1024).expect("open");
        assert_eq!(index.lookup(150), (100, 0));
        index.append(110, 500).expect("append");
        index.append(120, 900).expect("append");
        index
            .append(115, 950)
            .expect("non-increasing offsets are ignored");
        assert_eq!(index.lookup(105), (100, 0));
        assert_eq!(index.lookup(110), (110, 500));
        assert_eq!(index.lookup(119), (110, 500));
        assert_eq!(index.lookup(1_000), (120, 900));
        let reopened = OffsetIndex::open(&dir.path().join("a.index"), 100, 1024).expect("reopen");
        assert_eq!(reopened.entries(), index.entries());
    }

    #[test]
    fn a_full_index_takes_no_more_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut index = OffsetIndex::open(&dir.path().join("a.index"), 0, 16).expect("open");
        for i in 1..=5 {
            index.append(i * 10, i as u64 * 100).expect("append");
        }
        assert!(index.is_full());
        assert_eq!(index.entries().len(), 2);
    }
}
