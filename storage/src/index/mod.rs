//! Sparse segment indexes (Kafka's `OffsetIndex` and `TimeIndex`) and the small file
//! wrapper they share.
//!
//! Indexes are hints: they are kept in memory, appended to their file as entries are
//! added, and rebuilt by recovery whenever they disagree with the log. Only a segment
//! below the recovery point keeps them without a scan, after the consistency checks of
//! `segment/trusted.rs`. Plain positional file I/O, no mmap.

pub mod offset;
pub mod time;

pub use offset::{OffsetEntry, OffsetIndex};
pub use time::{TimeEntry, TimeIndex};

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{io_err, Result};

/// An append-only file of fixed-size entries.
#[derive(Debug)]
pub(crate) struct IndexFile {
    path: PathBuf,
    file: File,
    len: u64,
}

impl IndexFile {
    /// Opens (creating if missing) and returns the file plus its whole content.
    pub(crate) fn open(path: &Path) -> Result<(Self, Vec<u8>)> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err("open index", path))?;
        let mut content = Vec::new();
        file.read_to_end(&mut content)
            .map_err(io_err("read index", path))?;
        let len = content.len() as u64;
        Ok((
            IndexFile {
                path: path.to_path_buf(),
                file,
                len,
            },
            content,
        ))
    }

    pub(crate) fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all_at(bytes, self.len)
            .map_err(io_err("append index", &self.path))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Replaces the whole content (used by recovery when the index was wrong).
    pub(crate) fn rewrite(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .set_len(0)
            .map_err(io_err("truncate index", &self.path))?;
        self.file
            .write_all_at(bytes, 0)
            .map_err(io_err("rewrite index", &self.path))?;
        self.len = bytes.len() as u64;
        Ok(())
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(io_err("fsync index", &self.path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Index of the last element of `items` whose key is `<= target` (binary search over
/// keys that strictly increase).
pub(crate) fn floor_index<T>(items: &[T], target: i64, key: impl Fn(&T) -> i64) -> Option<usize> {
    let idx = items.partition_point(|e| key(e) <= target);
    idx.checked_sub(1)
}
