//! Atomic replacement of cleaned segments, and its recovery at open.
//!
//! A clean of a group of segments (the first based at `B`) proceeds as:
//! 1. write `B.log.cleaned`, fsync it, then its indexes as `B.index.cleaned` and
//!    `B.timeindex.cleaned`, built from the batches as they were written, fsynced too
//!    (without the partition lock: `CleanedWriter`, leaving a `CleanedFile`);
//! 2. rename it `B.log.swap`, fsync the directory: from here the clean is committed
//!    (under the lock, once the log was checked to be unchanged: `CleanedFile::commit`);
//! 3. rename every replaced segment's files to `*.deleted` (the delayed deletion of
//!    retention, so readers holding them keep working);
//! 4. rename the `.cleaned` indexes to `B.index` and `B.timeindex`, then `B.log.swap`
//!    to `B.log`, fsync the directory. The segment opens with those indexes as they are
//!    (`Segment::open_cleaned`): nothing of it is scanned under the lock.
//!
//! The directory fsyncs are the caller's, so that a pass of many groups does steps 2, 3
//! and 4 for all of them with one fsync after step 2 and one after step 4 (each group's
//! steps are independent: recovery completes every swap on its own).
//!
//! A `.cleaned` file that is never committed (the log changed during the unlocked build,
//! the build failed, the log was closed) is removed when its `CleanedFile` is dropped, or
//! at the next open after a crash.
//!
//! Recovery (`complete_interrupted_cleans`, before the segments are scanned): every
//! `*.cleaned` file is deleted (step 1 never committed: the old segments are intact); for
//! every `B.log.swap`, the segments it replaces (base offsets in `[B, swap's next
//! offset)`) are deleted if still there, and the rename of step 4 is completed. Index
//! files at `B` go with the replaced segments' files, whichever they were: the open
//! rebuilds them from the new `B.log`. The
//! cleaner always keeps the last batch of a group (possibly emptied) so the swap's
//! offset range is exactly the replaced segments' range. A crash at any instant thus
//! leaves either the old segments or the new one, never a mix.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::batch::{BatchHeader, BATCH_HEADER_LEN};
use crate::config::LogConfig;
use crate::error::{io_err, Result, StorageError};
use crate::recovery::{read_valid_batch, segment_file_name, sync_dir};
use crate::segment::{file_name, Rebuild};

/// Suffix of a cleaned segment being written.
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Suffix of a cleaned segment that replaces its group once renamed.
pub const SWAP_SUFFIX: &str = ".swap";

fn cleaned_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{}{CLEANED_SUFFIX}", file_name(base_offset, "log")))
}

/// `B.index.cleaned` and `B.timeindex.cleaned`.
fn cleaned_index_paths(dir: &Path, base_offset: i64) -> [PathBuf; 2] {
    INDEX_EXTENSIONS.map(|ext| dir.join(format!("{}{CLEANED_SUFFIX}", file_name(base_offset, ext))))
}

const INDEX_EXTENSIONS: [&str; 2] = ["index", "timeindex"];

fn remove_if_there(path: &Path, what: &str) {
    match fs::remove_file(path) {
        Ok(()) => {}
        // The log (and its directory) was deleted meanwhile, or the file was never made.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "removing {what} failed"),
    }
}

/// Renames `from` to `to` if `from` exists (step 4's optional files).
fn rename_if_there(from: &Path, to: &Path) -> Result<()> {
    match fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("install cleaned file", from)(e)),
    }
}

fn swap_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{}{SWAP_SUFFIX}", file_name(base_offset, "log")))
}

fn txn_swap_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!(
        "{}{SWAP_SUFFIX}",
        file_name(base_offset, crate::txn_index::EXTENSION)
    ))
}

/// Writes and fsyncs the cleaned group's aborted transaction index as
/// `B.txnindex.swap` (before the group's step 2; the caller fsyncs the directory).
pub(crate) fn write_txn_index_swap(
    dir: &Path,
    base_offset: i64,
    entries: &[crate::txn_index::AbortedTxn],
) -> Result<()> {
    crate::txn_index::write_file(&txn_swap_path(dir, base_offset), entries)
}

/// Writes one cleaned segment (step 1).
#[derive(Debug)]
pub(crate) struct CleanedWriter {
    // Before `file`: a writer dropped on error flushes its buffer, then the file goes.
    out: BufWriter<File>,
    file: CleanedFile,
    /// The indexes and scan state of what was written so far (its size: the bytes
    /// written).
    rebuild: Rebuild,
}

impl CleanedWriter {
    pub fn create(dir: &Path, base_offset: i64, config: &LogConfig) -> Result<Self> {
        let path = cleaned_path(dir, base_offset);
        let out = File::create(&path).map_err(io_err("create cleaned segment", &path))?;
        Ok(CleanedWriter {
            out: BufWriter::with_capacity(1 << 20, out),
            file: CleanedFile {
                dir: dir.to_path_buf(),
                base_offset,
                path,
                committed: false,
                rebuild: None,
            },
            rebuild: Rebuild::new(base_offset, config),
        })
    }

    pub fn write(&mut self, batch: &[u8]) -> Result<()> {
        let header = BatchHeader::parse(batch).map_err(|reason| StorageError::CorruptLog {
            path: self.file.path.clone(),
            position: self.rebuild.size(),
            reason,
        })?;
        self.rebuild.observe(&header);
        self.out
            .write_all(batch)
            .map_err(io_err("write cleaned segment", &self.file.path))?;
        Ok(())
    }

    pub fn written(&self) -> u64 {
        self.rebuild.size()
    }

    /// Flushes and fsyncs the file, then writes and fsyncs its indexes: step 1 done. On
    /// error the partial files are removed (by the `CleanedFile`'s drop).
    pub fn finish(self) -> Result<CleanedFile> {
        let CleanedWriter {
            out,
            mut file,
            rebuild,
            ..
        } = self;
        let out = out
            .into_inner()
            .map_err(|e| io_err("flush cleaned segment", &file.path)(e.into_error()))?;
        out.sync_all()
            .map_err(io_err("fsync cleaned segment", &file.path))?;
        let [offset_index, time_index] = cleaned_index_paths(&file.dir, file.base_offset);
        rebuild.write_index_files(&offset_index, &time_index)?;
        file.rebuild = Some(rebuild);
        Ok(file)
    }
}

/// A fully written and fsynced `B.log.cleaned` with its `.cleaned` indexes, not yet
/// committed. Dropped uncommitted, it removes its files (a failed or abandoned clean).
#[derive(Debug)]
pub(crate) struct CleanedFile {
    dir: PathBuf,
    base_offset: i64,
    path: PathBuf,
    committed: bool,
    /// What the writer observed, for `Segment::open_cleaned` (set once the indexes are
    /// written).
    rebuild: Option<Rebuild>,
}

impl CleanedFile {
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Step 2: renames the file `.swap`. Under the partition lock. The caller fsyncs the
    /// directory before renaming any replaced segment: that fsync is the commit point,
    /// after which recovery completes the replacement. Returns what the segment opens
    /// with after step 4; its `.cleaned` indexes stay until `install` (or the next open).
    pub fn commit(mut self) -> Result<Rebuild> {
        let rebuild = self
            .rebuild
            .take()
            .ok_or_else(|| StorageError::TaskFailed {
                reason: format!("{} committed before it was finished", self.path.display()),
            })?;
        let swap = swap_path(&self.dir, self.base_offset);
        fs::rename(&self.path, &swap).map_err(io_err("rename cleaned segment", &self.path))?;
        self.committed = true;
        Ok(rebuild)
    }
}

/// Takes back a step 2 whose directory fsync has not happened yet (a later group of the
/// same pass failed its own step 2): best effort, a `.swap` left over is completed at
/// the next open, which is also correct as long as its segments are unchanged.
pub(crate) fn uncommit(dir: &Path, base_offset: i64) {
    for swap in [swap_path(dir, base_offset), txn_swap_path(dir, base_offset)] {
        remove_if_there(&swap, "an uncommitted swap segment");
    }
    for index in cleaned_index_paths(dir, base_offset) {
        remove_if_there(&index, "an uncommitted cleaned index");
    }
}

impl Drop for CleanedFile {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        remove_if_there(&self.path, "an abandoned cleaned segment");
        for index in cleaned_index_paths(&self.dir, self.base_offset) {
            remove_if_there(&index, "an abandoned cleaned index");
        }
    }
}

/// Step 4: `B.index.cleaned` and `B.timeindex.cleaned` (at a commit; recovery has
/// removed them) become the indexes, `B.txnindex.swap` (if any) becomes `B.txnindex`,
/// then `B.log.swap` becomes `B.log` (the caller fsyncs the directory).
pub(crate) fn install(dir: &Path, base_offset: i64) -> Result<()> {
    for (cleaned, ext) in cleaned_index_paths(dir, base_offset)
        .iter()
        .zip(INDEX_EXTENSIONS)
    {
        rename_if_there(cleaned, &dir.join(file_name(base_offset, ext)))?;
    }
    rename_if_there(
        &txn_swap_path(dir, base_offset),
        &crate::txn_index::path(dir, base_offset),
    )?;
    let swap = swap_path(dir, base_offset);
    let log = dir.join(file_name(base_offset, "log"));
    fs::rename(&swap, &log).map_err(io_err("install cleaned segment", &swap))
}

/// The offset after the last valid batch of a swap file.
fn next_offset_of(path: &Path, base_offset: i64) -> Result<i64> {
    let file = File::open(path).map_err(io_err("open swap segment", path))?;
    let mut remaining = file
        .metadata()
        .map_err(io_err("stat swap segment", path))?
        .len();
    let mut reader = BufReader::new(file);
    let mut buf = vec![0u8; BATCH_HEADER_LEN];
    let mut next = base_offset;
    while let Some(header) = read_valid_batch(&mut reader, &mut buf, remaining, next, base_offset) {
        remaining -= header.size() as u64;
        next = header.next_offset();
    }
    Ok(next)
}

/// Finishes or rolls back cleans interrupted by a crash (see the module doc).
pub(crate) fn complete_interrupted_cleans(dir: &Path) -> Result<()> {
    let mut swaps = Vec::new();
    let mut segment_files: Vec<(i64, PathBuf)> = Vec::new();
    let mut txn_swaps = Vec::new();
    let mut txn_files: Vec<(i64, PathBuf)> = Vec::new();
    let mut changed = false;
    for entry in fs::read_dir(dir).map_err(io_err("list log dir", dir))? {
        let entry = entry.map_err(io_err("list log dir", dir))?;
        let name = entry.file_name();
        let Some((base, ext)) = name.to_str().and_then(segment_file_name) else {
            continue;
        };
        match ext {
            "log.cleaned" | "index.cleaned" | "timeindex.cleaned" => {
                let path = entry.path();
                fs::remove_file(&path).map_err(io_err("remove cleaned segment", &path))?;
                changed = true;
            }
            "log.swap" => swaps.push(base),
            "txnindex.swap" => txn_swaps.push(base),
            "log" | "index" | "timeindex" => segment_files.push((base, entry.path())),
            "txnindex" => txn_files.push((base, entry.path())),
            _ => {}
        }
    }
    for base in txn_swaps.iter().filter(|b| !swaps.contains(b)) {
        // Written before its group's step 2, which never happened.
        let path = txn_swap_path(dir, *base);
        fs::remove_file(&path).map_err(io_err("remove uncommitted txn index", &path))?;
        changed = true;
    }
    for base in swaps {
        let end = next_offset_of(&swap_path(dir, base), base)?;
        let replaced_txn_indexes = txn_files.iter().filter(|(b, _)| *b != base);
        for (_, path) in segment_files
            .iter()
            .chain(replaced_txn_indexes)
            .filter(|(b, _)| (base..end.max(base + 1)).contains(b))
        {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove replaced segment", path)(e)),
            }
        }
        tracing::info!(dir = %dir.display(), base_offset = base, next_offset = end, "completing an interrupted clean");
        install(dir, base)?;
        changed = true;
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(())
}
