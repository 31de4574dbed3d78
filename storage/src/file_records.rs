//! A read's record set left in the segment files, for zero-copy sends (issue #13): the
//! file ranges a fetch response carries, which the connection hands to `sendfile`, so
//! record bytes go from the page cache to the socket without entering user memory.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::error::{Result, StorageError};

/// Record sets smaller than this are read into memory instead: a `sendfile` per range
/// costs more than copying a few KiB, and the response encoder shares only chunks at
/// least this large (`brook_protocol::chunked::MIN_SHARED_LEN`).
pub const MIN_ZERO_COPY_BYTES: u64 = 4 * 1024;

/// A fetch's record set: in memory, or left in the segment files for a zero-copy send.
#[derive(Debug, Clone)]
pub enum FetchedRecords {
    Memory(Bytes),
    Files(FileRecords),
}

/// Bytes `[position, position + len)` of one segment file. The `Arc<File>` keeps them
/// readable if the segment is deleted, renamed or replaced by compaction meanwhile.
#[derive(Debug, Clone)]
pub struct FileRange {
    pub file: Arc<File>,
    pub path: Arc<Path>,
    pub position: u64,
    pub len: u64,
}

/// The record set of one partition as ranges of its segment files, in offset order.
/// It starts on a batch boundary and may end inside a batch (as Kafka's do: clients
/// drop a partial last batch and fetch it whole next time).
#[derive(Debug, Clone)]
pub struct FileRecords {
    ranges: Vec<FileRange>,
    len: u64,
    /// The log's rewrite generation when the ranges were found (`log/read.rs`).
    generation: u64,
    rewrites: Arc<AtomicU64>,
}

impl FileRecords {
    pub(crate) fn new(ranges: Vec<FileRange>, generation: u64, rewrites: Arc<AtomicU64>) -> Self {
        let len = ranges.iter().map(|r| r.len).sum();
        FileRecords {
            ranges,
            len,
            generation,
            rewrites,
        }
    }

    /// Total bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn ranges(&self) -> &[FileRange] {
        &self.ranges
    }

    /// True once a truncation may have rewritten these bytes in place since they were
    /// found: they must not be sent (the connection closes instead, and the client
    /// fetches again).
    pub fn is_stale(&self) -> bool {
        self.rewrites.load(Ordering::Acquire) != self.generation
    }

    /// The bytes of the ranges, read into memory (blocking file I/O).
    pub fn load(&self) -> Result<Bytes> {
        let mut out = BytesMut::zeroed(usize::try_from(self.len).unwrap_or(usize::MAX));
        let mut at = 0usize;
        for range in &self.ranges {
            let len = range.len as usize;
            let Some(buf) = out.get_mut(at..at + len) else {
                break;
            };
            let got = read_full(&range.file, &range.path, buf, range.position)?;
            at += got;
            if got < len {
                break; // the file was cut under us: the caller checks `is_stale`
            }
        }
        out.truncate(at);
        Ok(out.freeze())
    }
}

/// `pread` until `buf` is full or the file ends; the number of bytes read.
pub(crate) fn read_full(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(StorageError::Io {
                    context: "read segment",
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    Ok(done)
}
