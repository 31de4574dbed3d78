//! Log compaction (Kafka's `LogCleaner` / `Cleaner` / `LogCleanerManager`, much
//! smaller): keeps the latest record per key in the closed segments of a
//! `cleanup.policy=compact` log.
//!
//! - `plan`: pure decisions (cleanable range, dirty ratio, lags, grouping);
//! - `offset_map`: key → latest offset of the dirty section, within a memory budget;
//! - `record`, `codec`, `rewrite`: decoding, filtering and re-encoding one batch;
//! - `txn`: aborted transactions' data and markers (Kafka's `CleanedTransactionMetadata`);
//! - `job`, `build`, `scan`: a pass captured under the partition lock, built without
//!   it (reading the segments' open files), committed under it again;
//! - `swap`: the atomic replacement of segments and its crash recovery;
//! - `checkpoint`: the per-log first dirty offset.
//!
//! The pass (`Log::clean`; its locked phases in `log/clean.rs`) holds the partition
//! lock only to capture its inputs and to swap its result in (`cleaner/job.rs`):
//! appends and reads go on while it reads and rewrites segments. No reader ever sees a
//! half-replaced segment: the replacement happens under the lock, and replaced files
//! are renamed `.deleted` and unlinked after `file.delete.delay.ms`, so a reader
//! holding one keeps working.
//!
//! Tombstones follow KIP-534 (delete horizon in the batch). Offsets are kept (gaps are
//! normal). Transactions as Kafka's cleaner: nothing at or past the first offset of an
//! open transaction is cleaned; records of aborted transactions go whatever their keys
//! and stay out of the key map; a marker stays while data of its transaction may
//! remain, then gets a delete horizon like a tombstone and goes after it (`txn`).

mod build;
pub mod checkpoint;
pub(crate) mod codec;
pub(crate) mod job;
pub(crate) mod offset_map;
pub mod plan;
pub(crate) mod record;
pub(crate) mod rewrite;
mod scan;
pub(crate) mod swap;
pub(crate) mod txn;

pub use job::{BuiltClean, CleanJob};
pub use plan::{CleanPlan, SegmentInfo};

/// Kafka's default `log.cleaner.dedupe.buffer.size` (128 MiB).
pub const DEFAULT_DEDUPE_BUFFER_BYTES: usize = 128 * 1024 * 1024;

/// What a clean pass did (all zero when the log needed no cleaning).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanOutcome {
    /// Whether a pass ran and was installed.
    pub cleaned: bool,
    /// A pass ran but was dropped because the log changed underneath it (a truncation,
    /// or retention / DeleteRecords deleting part of a segment group): nothing changed,
    /// the next pass redoes it.
    pub abandoned: bool,
    pub segments_before: usize,
    pub segments_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    /// Batches kept untouched because they could not be decoded.
    pub unreadable_batches: u64,
    /// The new cleaner checkpoint: everything below it is clean.
    pub first_dirty_offset: i64,
}

/// The cleaner's per-log memory: the checkpoint and the latest delete horizon seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerState {
    /// The first dirty offset (`None` = never cleaned, all dirty).
    pub first_dirty_offset: Option<i64>,
    /// The latest delete horizon of a batch still holding a tombstone or a marker, as
    /// of the last pass: once it passes, a pass is due even with no new dirty bytes
    /// (Kafka's `latestDeleteHorizon`). Not persisted: after a restart tombstones and
    /// markers already marked go at the next pass triggered by new writes.
    pub latest_delete_horizon: Option<i64>,
}

impl CleanerState {
    /// Loads the checkpoint of the log in `dir`.
    pub fn load(dir: &std::path::Path) -> Self {
        CleanerState {
            first_dirty_offset: checkpoint::read(dir),
            latest_delete_horizon: None,
        }
    }
}

/// One decoded record: (offset, key, value).
pub type DecodedRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// Decodes every record of a buffer of concatenated whole batches (any codec),
/// skipping control batches; `None` if a batch is malformed. For tests and tools: the
/// serving path never decodes records.
pub fn decode_records(buf: &[u8]) -> Option<Vec<DecodedRecord>> {
    let mut out = Vec::new();
    for item in crate::batch::BatchIter::new(buf) {
        let (at, header) = item.ok()?;
        if header.is_control() {
            continue;
        }
        let batch = buf.get(at..at + header.size())?;
        let payload = rewrite::payload(batch, &header)?;
        for r in record::parse_records(&payload, header.records_count)? {
            let mut pos = 0;
            let body = r.after_timestamp;
            record::read_varlong(body, &mut pos)?;
            let key_len = record::read_varlong(body, &mut pos)?;
            pos += usize::try_from(key_len.max(0)).ok()?;
            let value_len = record::read_varlong(body, &mut pos)?;
            let value = match usize::try_from(value_len) {
                Ok(len) => Some(body.get(pos..pos.checked_add(len)?)?.to_vec()),
                Err(_) => None,
            };
            out.push((
                header.base_offset.saturating_add(r.offset_delta),
                r.key.map(<[u8]>::to_vec),
                value,
            ));
        }
    }
    Some(out)
}
