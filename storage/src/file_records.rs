//! A read's record set left in the segment files, for zero-copy sends (issue #13): the
//! file ranges a fetch response carries, which the connection hands to `sendfile`, so
//! record bytes go from the page cache to the socket without entering user memory.

use std::fs::File;
use std::io::IoSliceMut;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::error::{Result, StorageError};
use crate::file_pool::{self, DescriptorLoan};

/// Record sets smaller than this are read into memory instead: a `sendfile` per range
/// costs more than copying a few KiB, and the response encoder shares only chunks at
/// least this large (`brook_protocol::chunked::MIN_SHARED_LEN`).
pub const MIN_ZERO_COPY_BYTES: u64 = 4 * 1024;

/// How a read may wait for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadWait {
    /// Plain `pread`: may sleep until the disk answers (blocking threads only).
    Block,
    /// `preadv2(RWF_NOWAIT)`: copies what the page cache holds and fails with
    /// [`StorageError::NotCached`] instead of waiting for the disk, so a fetch of recent
    /// data can be answered on its async worker without a blocking-pool hop (issue #13).
    CachedOnly,
}

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
    /// The descriptors this record set holds, counted against the pool's loans once it
    /// is to be sent from its files ([`FileRecords::lend`]).
    loan: Option<Arc<DescriptorLoan>>,
}

impl FileRecords {
    pub(crate) fn new(ranges: Vec<FileRange>, generation: u64, rewrites: Arc<AtomicU64>) -> Self {
        let len = ranges.iter().map(|r| r.len).sum();
        FileRecords {
            ranges,
            len,
            generation,
            rewrites,
            loan: None,
        }
    }

    /// This record set, its descriptors counted against the file pool's loans, for a
    /// zero-copy send; `Err(self)` when the pool has lent all it may (then the bytes are
    /// read into memory and the files let go).
    pub(crate) fn lend(mut self) -> std::result::Result<Self, Self> {
        match file_pool::global().lend(self.ranges.len()) {
            Some(loan) => {
                self.loan = Some(Arc::new(loan));
                Ok(self)
            }
            None => Err(self),
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

    /// The bytes of the ranges, read into memory (blocking file I/O unless `wait` is
    /// [`ReadWait::CachedOnly`]).
    pub fn load(&self, wait: ReadWait) -> Result<Bytes> {
        let mut out = BytesMut::zeroed(usize::try_from(self.len).unwrap_or(usize::MAX));
        let mut at = 0usize;
        for range in &self.ranges {
            let len = range.len as usize;
            let Some(buf) = out.get_mut(at..at + len) else {
                break;
            };
            let got = read_full_in(&range.file, &range.path, buf, range.position, wait)?;
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
    read_full_in(file, path, buf, offset, ReadWait::Block)
}

/// Set once a file system refuses `RWF_NOWAIT` (`EOPNOTSUPP`): cached-only reads then fail
/// at once, without the syscall, and every read takes the blocking path.
static NOWAIT_UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// [`read_full`], or with [`ReadWait::CachedOnly`] its page-cache-only form: a read that
/// would wait for the disk (`EAGAIN`; the kernel may first return the cached part as a
/// short read) fails with [`StorageError::NotCached`].
pub(crate) fn read_full_in(
    file: &File,
    path: &Path,
    buf: &mut [u8],
    offset: u64,
    wait: ReadWait,
) -> Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let at = offset + done as u64;
        let read = match wait {
            ReadWait::Block => file.read_at(&mut buf[done..], at),
            ReadWait::CachedOnly => read_cached(file, &mut buf[done..], at),
        };
        match read {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if wait == ReadWait::CachedOnly && e.kind() == std::io::ErrorKind::WouldBlock =>
            {
                return Err(StorageError::NotCached)
            }
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

/// One `preadv2(RWF_NOWAIT)`; `WouldBlock` when the bytes are not all cached (and nothing
/// was), or when the file system does not support it.
fn read_cached(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    if NOWAIT_UNSUPPORTED.load(Ordering::Relaxed) {
        return Err(std::io::ErrorKind::WouldBlock.into());
    }
    let flags = rustix::io::ReadWriteFlags::NOWAIT;
    match rustix::io::preadv2(file, &mut [IoSliceMut::new(buf)], offset, flags) {
        Ok(n) => Ok(n),
        Err(rustix::io::Errno::AGAIN) => Err(std::io::ErrorKind::WouldBlock.into()),
        Err(rustix::io::Errno::OPNOTSUPP) => {
            NOWAIT_UNSUPPORTED.store(true, Ordering::Relaxed);
            Err(std::io::ErrorKind::WouldBlock.into())
        }
        Err(e) => Err(e.into()),
    }
}
