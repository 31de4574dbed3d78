//! Sparse time index: timestamp (i64) → relative offset (u32), 12-byte big-endian
//! entries, added alongside offset-index entries when the segment's max timestamp grew.
//!
//! Invariants: timestamps strictly increase and offsets never decrease, so the entry
//! `(t, o)` means "no batch before the one holding `o` has a max timestamp >= t".
//! At most `segment.index.bytes / 12` entries; a full index makes the segment roll.

use std::path::Path;

use super::{floor_index, IndexFile};
use crate::error::Result;

/// Size of one entry on disk.
pub const TIME_ENTRY_SIZE: usize = 12;

/// One entry: a max timestamp so far and the offset where it was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

impl TimeEntry {
    /// The entry of a segment based at `base_offset`, if the offset fits the u32 field.
    pub fn new(base_offset: i64, timestamp: i64, offset: i64) -> Option<Self> {
        Some(TimeEntry {
            timestamp,
            relative_offset: u32::try_from(offset - base_offset).ok()?,
        })
    }
}

/// The time index of one segment.
#[derive(Debug)]
pub struct TimeIndex {
    file: IndexFile,
    base_offset: i64,
    entries: Vec<TimeEntry>,
    max_entries: usize,
}

impl TimeIndex {
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: u64) -> Result<Self> {
        let (file, content) = IndexFile::open(path)?;
        let entries = content
            .chunks_exact(TIME_ENTRY_SIZE)
            .map(|c| TimeEntry {
                timestamp: i64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
                relative_offset: u32::from_be_bytes([c[8], c[9], c[10], c[11]]),
            })
            .collect();
        Ok(TimeIndex {
            file,
            base_offset,
            entries,
            max_entries: max_entries(max_index_bytes),
        })
    }

    pub fn entries(&self) -> &[TimeEntry] {
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
        self.file.rollback((entries * TIME_ENTRY_SIZE) as u64)
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    pub fn set_max_index_bytes(&mut self, max_index_bytes: u64) {
        self.max_entries = max_entries(max_index_bytes);
    }

    /// Adds `(timestamp, offset)` if the timestamp is larger than the last entry's and
    /// the index has room (Kafka's `maybeAppend`).
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) -> Result<()> {
        let Some(entry) = self.entry(timestamp, offset) else {
            return Ok(());
        };
        if self.is_full() || !accepts(self.entries.last(), &entry) {
            return Ok(());
        }
        self.file.append(&encode(&entry))?;
        self.entries.push(entry);
        Ok(())
    }

    /// The offset to start scanning from for the first batch with max timestamp
    /// `>= target`: the entry with the greatest timestamp `<= target`, else the segment base.
    pub fn lookup(&self, target: i64) -> i64 {
        floor_index(&self.entries, target, |e| e.timestamp)
            .and_then(|i| self.entries.get(i))
            .map_or(self.base_offset, |e| {
                self.base_offset + i64::from(e.relative_offset)
            })
    }

    /// Replaces the content if it differs from `entries` (recovery's rebuild).
    pub fn replace(&mut self, entries: Vec<TimeEntry>) -> Result<()> {
        let expected_len = (entries.len() * TIME_ENTRY_SIZE) as u64;
        if entries == self.entries && self.file.len() == expected_len {
            return Ok(());
        }
        tracing::info!(path = %self.file.path().display(), "rebuilding time index");
        let bytes: Vec<u8> = entries.iter().flat_map(encode).collect();
        self.file.rewrite(&bytes)?;
        self.entries = entries;
        Ok(())
    }

    pub fn flush(&self) -> Result<()> {
        self.file.sync()
    }

    pub fn entry(&self, timestamp: i64, offset: i64) -> Option<TimeEntry> {
        TimeEntry::new(self.base_offset, timestamp, offset)
    }
}

/// Whether `entry` may follow `last` (strictly larger timestamp, non-decreasing offset).
pub(crate) fn accepts(last: Option<&TimeEntry>, entry: &TimeEntry) -> bool {
    last.is_none_or(|l| entry.timestamp > l.timestamp && entry.relative_offset >= l.relative_offset)
}

fn max_entries(max_index_bytes: u64) -> usize {
    (max_index_bytes / TIME_ENTRY_SIZE as u64).max(1) as usize
}

pub(crate) fn encode(entry: &TimeEntry) -> [u8; TIME_ENTRY_SIZE] {
    let mut out = [0u8; TIME_ENTRY_SIZE];
    out[..8].copy_from_slice(&entry.timestamp.to_be_bytes());
    out[8..].copy_from_slice(&entry.relative_offset.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_growing_timestamps_are_indexed_and_lookup_floors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.timeindex");
        let mut index = TimeIndex::open(&path, 50, 1200).expect("open");
        assert_eq!(index.lookup(1_000), 50);
        index.maybe_append(1_000, 55).expect("append");
        index
            .maybe_append(900, 60)
            .expect("older timestamp skipped");
        index.maybe_append(2_000, 70).expect("append");
        assert_eq!(index.entries().len(), 2);
        assert_eq!(index.lookup(999), 50);
        assert_eq!(index.lookup(1_500), 55);
        assert_eq!(index.lookup(5_000), 70);
        let reopened = TimeIndex::open(&path, 50, 1200).expect("reopen");
        assert_eq!(reopened.entries(), index.entries());
    }
}
