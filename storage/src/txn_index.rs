//! The aborted transaction index (Kafka's `TransactionIndex`, `<20-digit base>.txnindex`
//! next to its segment): one entry per aborted transaction whose ABORT marker lies in
//! that segment, in marker order, so a `read_committed` fetch learns which records to
//! drop without scanning the log.
//!
//! Entry (34 bytes, big-endian, Kafka's format): version i16 = 0 | producer id i64 |
//! first offset i64 | last offset i64 (the marker's offset) | last stable offset i64
//! (the LSO right after the abort). The file exists only once a segment has an entry
//! (as Kafka creates it lazily); it is written with its segment (buffered positional
//! writes) and fsynced with it, so below the recovery point it is as durable as the log.
//! A torn or corrupt tail (partial entry, unknown version, offsets outside the segment or
//! going backwards) ends the valid entries; recovery rewrites the file from what it
//! keeps. Not thread-safe: the owning `Segment` serialises access.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{io_err, Result};
use crate::file_pool::PooledFile;
use crate::recovery::sync_dir;

/// The extension of an aborted transaction index file.
pub const EXTENSION: &str = "txnindex";
/// Bytes per entry.
pub const ENTRY_SIZE: usize = 34;
const VERSION: i16 = 0;

/// One aborted transaction of a partition (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// Offset of the transaction's first record on this partition.
    pub first_offset: i64,
    /// Offset of its ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset right after the abort: the first offset of
    /// the oldest other ongoing transaction, or `last_offset + 1` if there was none.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut out = [0u8; ENTRY_SIZE];
        out[..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Decodes one entry; `None` for a short buffer or another version.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let field = |at: usize| -> Option<i64> {
            Some(i64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
        };
        let version = i16::from_be_bytes(bytes.get(..2)?.try_into().ok()?);
        (version == VERSION).then_some(())?;
        Some(AbortedTxn {
            producer_id: field(2)?,
            first_offset: field(10)?,
            last_offset: field(18)?,
            last_stable_offset: field(26)?,
        })
    }
}

/// A transaction still open on a partition (for DescribeProducers and hanging
/// transaction detection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OngoingTxn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Offset of the transaction's first record on this partition.
    pub first_offset: i64,
    /// Epoch of the coordinator of the producer's last marker, -1 if none yet.
    pub coordinator_epoch: i32,
}

/// Aborted transactions of `entries` (sorted by last offset) overlapping the fetch
/// range `[start, end)` (Kafka's `collectAbortedTxns`): last offset `>= start` and first
/// offset `< end`.
pub fn collect(entries: &[AbortedTxn], start: i64, end: i64) -> Vec<AbortedTxn> {
    let from = entries.partition_point(|e| e.last_offset < start);
    let mut out = Vec::new();
    for entry in entries.get(from..).unwrap_or_default() {
        if entry.first_offset < end {
            out.push(*entry);
        }
        // Every transaction aborted later started at or after this entry's last stable
        // offset (it was ongoing then, or began after), so none can start below `end`.
        if entry.last_stable_offset >= end {
            break;
        }
    }
    out
}

/// The valid entries of an index file's bytes for a segment covering `[base, next)`:
/// whole entries of version 0, last offsets inside the range and increasing.
pub fn decode_valid(bytes: &[u8], base: i64, next: i64) -> Vec<AbortedTxn> {
    let mut out: Vec<AbortedTxn> = Vec::with_capacity(bytes.len() / ENTRY_SIZE);
    for chunk in bytes.chunks_exact(ENTRY_SIZE) {
        let Some(entry) = AbortedTxn::decode(chunk) else {
            break;
        };
        let in_range = (base..next).contains(&entry.last_offset)
            && entry.first_offset <= entry.last_offset
            && out.last().is_none_or(|l| l.last_offset < entry.last_offset);
        if !in_range {
            break;
        }
        out.push(entry);
    }
    out
}

/// The `.txnindex` file of one segment.
#[derive(Debug)]
pub(crate) struct TxnIndexFile {
    path: PathBuf,
    /// Registered in the file pool once the file exists.
    file: Option<PooledFile>,
    entries: usize,
}

impl TxnIndexFile {
    /// The index of the segment at `base_offset` in `dir` (not opened nor created).
    pub fn new(dir: &Path, base_offset: i64) -> Self {
        TxnIndexFile {
            path: path(dir, base_offset),
            file: None,
            entries: 0,
        }
    }

    /// Reads the file's bytes (empty when it does not exist).
    pub fn read(&self) -> Result<Vec<u8>> {
        match fs::read(&self.path) {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(io_err("read txn index", &self.path)(e)),
        }
    }

    /// Makes the file hold exactly `entries` (loaded or rebuilt on open), rewriting it
    /// only if it differs; a segment without entries keeps no file. Not fsynced: the
    /// segment's next flush does it.
    pub fn reset(&mut self, entries: &[AbortedTxn]) -> Result<()> {
        let current = self.read()?;
        self.reset_from(entries, current)
    }

    /// [`Self::reset`] with the file's bytes (`current`) already read.
    pub fn reset_from(&mut self, entries: &[AbortedTxn], current: Vec<u8>) -> Result<()> {
        let wanted: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        self.file = None;
        self.entries = entries.len();
        if current == wanted {
            if !wanted.is_empty() {
                self.open()?;
            }
            return Ok(());
        }
        if wanted.is_empty() {
            return self.remove();
        }
        let path = self.path.clone();
        let pooled = self.open()?;
        pooled.mark_dirty();
        let file = pooled.get()?;
        file.set_len(0)
            .and_then(|()| file.write_all_at(&wanted, 0))
            .map_err(io_err("rewrite txn index", &path))?;
        Ok(())
    }

    fn open(&mut self) -> Result<&PooledFile> {
        let file = match self.file.take() {
            Some(file) => file,
            None => PooledFile::open_or_create(&self.path, "txn index")?,
        };
        Ok(self.file.insert(file))
    }

    /// Appends entries after the existing ones (creating the file on the first).
    pub fn append(&mut self, entries: &[AbortedTxn]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        let at = (self.entries * ENTRY_SIZE) as u64;
        let created = self.file.is_none();
        let path = self.path.clone();
        let pooled = self.open()?;
        pooled.mark_dirty();
        crate::write_fault::write_all_at(&*pooled.get()?, &bytes, at)
            .map_err(io_err("append to txn index", &path))?;
        self.entries += entries.len();
        if created {
            if let Some(dir) = self.path.parent() {
                sync_dir(dir)?;
            }
        }
        Ok(())
    }

    /// Keeps the first `entries` entries (a truncation), fsynced.
    pub fn truncate(&mut self, entries: usize) -> Result<()> {
        if entries >= self.entries {
            return Ok(());
        }
        self.entries = entries;
        let path = self.path.clone();
        if let Some(pooled) = &self.file {
            let file = pooled.get()?;
            file.set_len((entries * ENTRY_SIZE) as u64)
                .and_then(|()| file.sync_all())
                .map_err(io_err("truncate txn index", &path))?;
        }
        Ok(())
    }

    /// Fsyncs the file if there is one (cheap when nothing changed).
    pub fn flush(&self) -> Result<()> {
        match &self.file {
            Some(file) => file.sync_data(),
            None => Ok(()),
        }
    }

    fn remove(&mut self) -> Result<()> {
        self.file = None;
        self.entries = 0;
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("delete txn index", &self.path)(e)),
        }
    }
}

/// The path of the index of the segment at `base_offset` in `dir`.
pub fn path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(crate::segment::file_name(base_offset, EXTENSION))
}

/// Writes `entries` to `path` and fsyncs it (a compacted group's index, before its
/// commit point).
pub(crate) fn write_file(path: &Path, entries: &[AbortedTxn]) -> Result<()> {
    let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
    let mut file = File::create(path).map_err(io_err("create txn index", path))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_err("write txn index", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn an_entry_is_34_bytes_in_kafkas_layout() {
        let e = entry(7, 10, 20, 21);
        let bytes = e.encode();
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &7i64.to_be_bytes());
        assert_eq!(&bytes[26..], &21i64.to_be_bytes());
        assert_eq!(AbortedTxn::decode(&bytes), Some(e));
        let mut v1 = bytes;
        v1[1] = 1;
        assert_eq!(AbortedTxn::decode(&v1), None);
        assert_eq!(AbortedTxn::decode(&bytes[..33]), None);
    }

    #[test]
    fn decoding_stops_at_a_torn_or_out_of_range_entry() {
        let entries = [entry(1, 0, 5, 6), entry(2, 3, 8, 9), entry(3, 9, 12, 13)];
        let mut bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        assert_eq!(decode_valid(&bytes, 0, 20), entries.to_vec());
        assert_eq!(decode_valid(&bytes, 0, 10), entries[..2].to_vec());
        bytes.truncate(bytes.len() - 1);
        assert_eq!(decode_valid(&bytes, 0, 20), entries[..2].to_vec());
    }

    #[test]
    fn collect_returns_the_entries_overlapping_the_range() {
        let entries = [entry(1, 0, 5, 6), entry(2, 3, 8, 9), entry(3, 9, 12, 13)];
        assert_eq!(collect(&entries, 6, 9), vec![entries[1]]);
        assert_eq!(collect(&entries, 0, 1), vec![entries[0]]);
        assert_eq!(collect(&entries, 5, 10), entries.to_vec());
        assert_eq!(collect(&entries, 13, 20), vec![]);
        assert_eq!(collect(&entries, 0, 0), vec![]);
    }

    #[test]
    fn the_file_appends_truncates_and_is_removed_when_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut index = TxnIndexFile::new(dir.path(), 0);
        assert!(index.read().expect("read").is_empty());
        index.append(&[entry(1, 0, 5, 6)]).expect("append");
        index.append(&[entry(2, 3, 8, 9)]).expect("append");
        index.flush().expect("flush");
        assert_eq!(index.read().expect("read").len(), 2 * ENTRY_SIZE);
        index.truncate(1).expect("truncate");
        assert_eq!(
            decode_valid(&index.read().expect("read"), 0, 10),
            vec![entry(1, 0, 5, 6)]
        );
        index.append(&[entry(3, 7, 9, 10)]).expect("append");
        assert_eq!(
            decode_valid(&index.read().expect("read"), 0, 10),
            vec![entry(1, 0, 5, 6), entry(3, 7, 9, 10)]
        );
        index.reset(&[]).expect("reset");
        assert!(!path(dir.path(), 0).exists());
    }
}
