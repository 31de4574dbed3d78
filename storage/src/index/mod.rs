//! Sparse segment indexes (Kafka's `OffsetIndex` and `TimeIndex`) and the small file
//! wrapper they share.
//!
//! Indexes are hints: they are kept in memory, appended to their file as entries are
//! added, and rebuilt by recovery whenever they disagree with the log. Only a segment
//! below the recovery point keeps them without a scan, after the consistency checks of
//! `segment/trusted.rs`. Plain positional file I/O through the file pool, no mmap.

pub mod offset;
pub mod time;

pub use offset::{OffsetEntry, OffsetIndex};
pub use time::{TimeEntry, TimeIndex};

use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{io_err, Result};
use crate::file_pool::PooledFile;

/// An append-only file of fixed-size entries, opened through the file pool.
#[derive(Debug)]
pub(crate) struct IndexFile {
    file: PooledFile,
    len: u64,
}

impl IndexFile {
    /// Opens (creating if missing) and returns the file plus its whole content.
    pub(crate) fn open(path: &Path) -> Result<(Self, Vec<u8>)> {
        let pooled = PooledFile::open_or_create(path, "index")?;
        let file = pooled.get()?;
        let len = file.metadata().map_err(io_err("read index", path))?.len();
        let mut content = vec![0u8; usize::try_from(len).unwrap_or(0)];
        if !content.is_empty() {
            file.read_exact_at(&mut content, 0)
                .map_err(io_err("read index", path))?;
        }
        // An index is kept in memory and appended to once per `index.interval.bytes` of
        // log: its descriptor goes back to the pool at once, leaving the room to the
        // `.log` files that every append and read use.
        drop(file);
        pooled.release();
        Ok((IndexFile { file: pooled, len }, content))
    }

    pub(crate) fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.mark_dirty();
        crate::write_fault::write_all_at(&*self.file.get()?, bytes, self.len)
            .map_err(io_err("append index", self.file.path()))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Replaces the whole content (used by recovery when the index was wrong).
    pub(crate) fn rewrite(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.mark_dirty();
        let file = self.file.get()?;
        file.set_len(0)
            .map_err(io_err("truncate index", self.file.path()))?;
        file.write_all_at(bytes, 0)
            .map_err(io_err("rewrite index", self.file.path()))?;
        self.len = bytes.len() as u64;
        Ok(())
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Forgets everything appended after the first `len` bytes (a failed segment append
    /// undone): the next append writes at `len` again, and the file is shrunk to `len`
    /// (also dropping a torn entry a failed write left past it) so a restart does not read
    /// undone entries back. Shrinking needs no free space.
    pub(crate) fn rollback(&mut self, len: u64) -> Result<()> {
        self.len = self.len.min(len);
        self.file
            .get()?
            .set_len(len)
            .map_err(io_err("truncate index", self.file.path()))
    }

    pub(crate) fn sync(&self) -> Result<()> {
        self.file.sync_data()
    }

    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }
}

/// Index of the last element of `items` whose key is `<= target` (binary search over
/// keys that strictly increase).
pub(crate) fn floor_index<T>(items: &[T], target: i64, key: impl Fn(&T) -> i64) -> Option<usize> {
    let idx = items.partition_point(|e| key(e) <= target);
    idx.checked_sub(1)
}
