//! The cleaner's sequential scan of one segment, from a `SegmentSource` captured under
//! the partition lock and read without it.
//!
//! Why not `log/read.rs`: a fetch reads a bounded window from an indexed position; the
//! cleaner reads a whole closed segment front to back, twice per pass (offset map, then
//! rewrite), and needs each batch's file position to carry on from where a chunk ended.
//! Reading in large positional chunks keeps it to one `pread` per megabyte.
//!
//! Why reading without the lock is safe: a closed segment's bytes below its captured
//! size are only changed in place by a truncation, which bumps the log's rewrite
//! generation (checked before the result is installed); retention and compaction rename
//! files, and the captured `Arc<File>` keeps the old inode readable. A segment found
//! shorter than captured, or a batch failing its CRC, is an error: a swap file missing
//! the group's tail must never be installed (recovery trusts a swap's offset range).

use std::os::unix::fs::FileExt;

use crate::batch::{validate_batch, BatchHeader, BATCH_HEADER_LEN};
use crate::error::{Result, StorageError};
use crate::segment::SegmentSource;

/// How many bytes are read at a time (more when one batch is larger).
const READ_CHUNK: usize = 1024 * 1024;

/// Calls `f` with each (whole batch bytes, header) of the segment whose last offset is
/// at least `from_offset`, from `source.position` up to `source.size`. Stops early when
/// `f` returns false. Blocking file I/O.
pub(crate) fn for_each_batch(
    source: &SegmentSource,
    from_offset: i64,
    f: &mut dyn FnMut(&[u8], &BatchHeader) -> Result<bool>,
) -> Result<()> {
    let mut position = source.position;
    let mut buf: Vec<u8> = Vec::new();
    let mut want = READ_CHUNK;
    while position < source.size {
        let remaining = source.size - position;
        buf.resize(
            want.min(usize::try_from(remaining).unwrap_or(usize::MAX)),
            0,
        );
        read_exact(source, &mut buf, position)?;
        let mut at = 0usize;
        // The bytes needed at `at` when the chunk ends inside a batch.
        let mut need = None;
        while let Some(rest) = buf.get(at..).filter(|r| !r.is_empty()) {
            let corrupt = |reason| StorageError::CorruptLog {
                path: source.path.to_path_buf(),
                position: position + at as u64,
                reason,
            };
            if rest.len() < BATCH_HEADER_LEN {
                need = Some(BATCH_HEADER_LEN);
                break;
            }
            let size = BatchHeader::parse(rest).map_err(corrupt)?.size();
            let Some(batch) = rest.get(..size) else {
                need = Some(size);
                break;
            };
            let header = validate_batch(batch).map_err(corrupt)?;
            if header.last_offset() >= from_offset && !f(batch, &header)? {
                return Ok(());
            }
            at += size;
        }
        want = match need {
            // Not one whole batch in this chunk: read that batch whole, if it fits.
            Some(need) if at == 0 => {
                if need as u64 > remaining {
                    return Err(short(source, position, need));
                }
                need
            }
            _ => READ_CHUNK,
        };
        position += at as u64;
    }
    Ok(())
}

/// A batch running past the segment's captured end.
fn short(source: &SegmentSource, position: u64, needed: usize) -> StorageError {
    StorageError::CorruptLog {
        path: source.path.to_path_buf(),
        position,
        reason: crate::batch::BatchError::Truncated {
            needed,
            available: usize::try_from(source.size.saturating_sub(position)).unwrap_or(0),
        },
    }
}

/// `pread` exactly `buf.len()` bytes at `offset`; a file shorter than that (cut by a
/// truncation since the capture) is an error.
fn read_exact(source: &SegmentSource, buf: &mut [u8], offset: u64) -> Result<()> {
    source
        .file
        .read_exact_at(buf, offset)
        .map_err(|e| StorageError::Io {
            context: "read segment for cleaning",
            path: source.path.to_path_buf(),
            source: e,
        })
}
