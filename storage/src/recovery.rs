//! Recovery helpers: finding segment files in a partition directory, validating the
//! next batch of a segment being scanned, and directory fsync. Nothing here trusts an
//! index; the log is the only truth.

use std::fs;
use std::io::Read;
use std::path::Path;

use crate::batch::{self, BatchHeader, BATCH_HEADER_LEN};
use crate::error::{io_err, Result};

/// Reads the next batch from `reader` and returns its header if it is whole, CRC-valid,
/// starts at or after `min_offset` and fits u32 relative offsets from `base_offset`.
pub(crate) fn read_valid_batch(
    reader: &mut impl Read,
    buf: &mut Vec<u8>,
    remaining: u64,
    min_offset: i64,
    base_offset: i64,
) -> Option<BatchHeader> {
    buf.resize(BATCH_HEADER_LEN, 0);
    reader.read_exact(buf).ok()?;
    let header = BatchHeader::parse(buf).ok()?;
    if header.size() as u64 > remaining || header.last_offset_delta < 0 {
        return None;
    }
    buf.resize(header.size(), 0);
    reader.read_exact(&mut buf[BATCH_HEADER_LEN..]).ok()?;
    batch::validate_batch(buf).ok()?;
    let fits = header.base_offset >= min_offset
        && header.last_offset() - base_offset <= i64::from(u32::MAX);
    fits.then_some(header)
}

/// Splits a segment file name `<20-digit base offset>.<extension>` (extension may be
/// compound: `log.deleted`, `log.swap`); `None` for any other file.
pub(crate) fn segment_file_name(name: &str) -> Option<(i64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    let base = (stem.len() == 20)
        .then(|| stem.parse::<i64>().ok())
        .flatten()?;
    Some((base, ext))
}

/// Base offsets of the `.log` files among `names` (the entries of `dir`), sorted; leftover `.deleted` files are
/// unlinked and index files without a `.log` are removed (they would otherwise be trusted by a future segment at that offset).
pub(crate) fn scan_segment_names<'a>(
    dir: &Path,
    names: impl Iterator<Item = &'a str>,
) -> Result<Vec<i64>> {
    let mut bases = Vec::new();
    let mut index_files = Vec::new();
    for name in names {
        let Some((base, ext)) = segment_file_name(name) else {
            continue;
        };
        match ext {
            "log" => bases.push(base),
            "index" | "timeindex" | "txnindex" => index_files.push((base, dir.join(name))),
            // A segment deleted by retention before a restart: its delay is over.
            "log.deleted" | "index.deleted" | "timeindex.deleted" | "txnindex.deleted" => {
                let path = dir.join(name);
                fs::remove_file(&path).map_err(io_err("remove deleted segment file", &path))?;
            }
            _ => {}
        }
    }
    bases.sort_unstable();
    for (base, path) in index_files {
        if bases.binary_search(&base).is_err() {
            fs::remove_file(&path).map_err(io_err("remove orphan index", &path))?;
        }
    }
    Ok(bases)
}

/// Fsyncs a directory so that created / renamed entries survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync dir", dir))
}
