//! Filtering one batch for the cleaner (Kafka's `MemoryRecords.filterTo` +
//! `buildRetainedRecordsInto`).
//!
//! A record stays when its key's latest offset in the map is not above its own, when
//! its key is not in the map (the clean section, or past the map's end), or when it has
//! no key (a compacted topic refuses those at produce; one found anyway is kept, never
//! silently lost). A tombstone (null value) additionally goes once the batch's delete
//! horizon has passed (KIP-534): the first pass that keeps a tombstone sets attribute
//! bit 6 and moves the base timestamp to `now + delete.retention.ms`, rewriting every
//! record's timestampDelta so record timestamps do not change.
//!
//! A rewritten batch keeps its base offset AND its lastOffsetDelta (so the producer's
//! last sequence survives, as Kafka's `overrideLastOffset`), producer id/epoch/base
//! sequence, partition leader epoch, codec and timestamp type; maxTimestamp is
//! recomputed from the kept records (CreateTime) and the CRC is recomputed. A batch that
//! keeps every record and needs no horizon is copied byte for byte. Batches that cannot
//! be decoded are kept untouched.
//!
//! Transactions (the pass's `TxnRole` for the batch, see `cleaner/txn.rs`): a data batch
//! of an aborted transaction loses every record whatever the map says; a control batch
//! is kept untouched unless its marker's transaction has no data left, in which case it
//! gets a delete horizon as a tombstone's batch does and goes once it has passed; an
//! empty control batch (as Kafka's cleaner leaves) always may go.

use crate::batch::{
    BatchHeader, TimestampType, BATCH_HEADER_LEN, COMPRESSION_MASK, CONTROL_BIT,
    DELETE_HORIZON_BIT, TRANSACTIONAL_BIT,
};
use crate::cleaner::codec;
use crate::cleaner::offset_map::OffsetMap;
use crate::cleaner::record::{parse_records, write_with_timestamp_delta, Record};

/// Largest decompressed payload the cleaner accepts (a batch beyond it is kept as is).
const MAX_PAYLOAD: usize = 256 * 1024 * 1024;

/// The inputs of a filtering decision.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilterContext<'a> {
    pub map: &'a OffsetMap,
    /// Records at or above it were not indexed by this pass and are kept untouched.
    pub end_offset: i64,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
}

/// What becomes of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Filtered {
    /// Copy the original bytes.
    Unchanged,
    /// The original could not be decoded: copy it, and say so.
    Unreadable,
    /// Replace it with these bytes (a whole batch, CRC set).
    Rewritten {
        bytes: Vec<u8>,
        records_removed: usize,
        /// The delete horizon the new batch carries, if it holds a tombstone.
        delete_horizon: Option<i64>,
    },
    /// Every record goes.
    Empty { records_removed: usize },
}

/// The delete horizon of a batch, if set.
pub(crate) fn delete_horizon(header: &BatchHeader) -> Option<i64> {
    (header.attributes & DELETE_HORIZON_BIT != 0).then_some(header.base_timestamp)
}

/// The decompressed records payload of a whole batch, or `None`.
pub(crate) fn payload(batch: &[u8], header: &BatchHeader) -> Option<Vec<u8>> {
    let data = batch.get(BATCH_HEADER_LEN..header.size())?;
    codec::decompress(header.compression(), data, MAX_PAYLOAD)
}

/// What the pass's transaction state (`cleaner/txn.rs`) says about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnRole {
    /// Not of an aborted transaction: its records compete for their keys (a control
    /// batch in this role is kept as is).
    Keyed,
    /// A data batch of an aborted transaction: every record goes, whatever its key.
    Aborted,
    /// A marker whose transaction has no data left: it gets a delete horizon, and goes
    /// once the horizon has passed.
    MarkerDone,
}

/// Decides the fate of every record of `batch` (exactly one whole batch).
pub(crate) fn filter_batch(
    batch: &[u8],
    header: &BatchHeader,
    role: TxnRole,
    ctx: FilterContext<'_>,
) -> Filtered {
    if header.is_control() {
        return filter_marker(batch, header, role, ctx);
    }
    if role == TxnRole::Aborted {
        return Filtered::Empty {
            records_removed: usize::try_from(header.records_count).unwrap_or(0),
        };
    }
    let Some(payload) = payload(batch, header) else {
        return Filtered::Unreadable;
    };
    let Some(records) = parse_records(&payload, header.records_count) else {
        return Filtered::Unreadable;
    };
    let horizon = delete_horizon(header);
    let horizon_passed = horizon.is_some_and(|h| ctx.now_ms >= h);
    let kept: Vec<&Record<'_>> = records
        .iter()
        .filter(|r| {
            let offset = header.base_offset.saturating_add(r.offset_delta);
            let Some(key) = r.key else {
                return true;
            };
            if offset >= ctx.end_offset {
                return true; // past what this pass indexed: untouched (Kafka's rule)
            }
            let latest = ctx.map.get(key).is_none_or(|o| o <= offset);
            latest && !(r.is_tombstone && horizon_passed)
        })
        .collect();
    let records_removed = records.len() - kept.len();
    if kept.is_empty() {
        return Filtered::Empty { records_removed };
    }
    let has_tombstone = kept.iter().any(|r| r.is_tombstone);
    let new_horizon = match horizon {
        Some(h) => Some(h),
        None if has_tombstone => Some(ctx.now_ms.saturating_add(ctx.delete_retention_ms)),
        None => None,
    };
    if records_removed == 0 && new_horizon == horizon {
        return Filtered::Unchanged;
    }
    match build_batch(header, &kept, new_horizon) {
        Some(bytes) => Filtered::Rewritten {
            bytes,
            records_removed,
            delete_horizon: new_horizon.filter(|_| has_tombstone),
        },
        None => Filtered::Unreadable,
    }
}

/// A control batch: kept as is unless it is a marker with no data left
/// (`TxnRole::MarkerDone`), which first gets a delete horizon (like a tombstone's
/// batch) and goes in a pass after it. An empty control batch (a marker already
/// removed, kept for the segment's offsets) always may go.
fn filter_marker(
    batch: &[u8],
    header: &BatchHeader,
    role: TxnRole,
    ctx: FilterContext<'_>,
) -> Filtered {
    let removed = usize::try_from(header.records_count).unwrap_or(0);
    if header.records_count == 0 {
        return Filtered::Empty { records_removed: 0 };
    }
    if role != TxnRole::MarkerDone {
        return Filtered::Unchanged;
    }
    match delete_horizon(header) {
        Some(h) if ctx.now_ms >= h => Filtered::Empty {
            records_removed: removed,
        },
        Some(_) => Filtered::Unchanged,
        None => {
            let Some(payload) = payload(batch, header) else {
                return Filtered::Unreadable;
            };
            let Some(records) = parse_records(&payload, header.records_count) else {
                return Filtered::Unreadable;
            };
            let horizon = ctx.now_ms.saturating_add(ctx.delete_retention_ms);
            let kept: Vec<&Record<'_>> = records.iter().collect();
            match build_batch(header, &kept, Some(horizon)) {
                Some(bytes) => Filtered::Rewritten {
                    bytes,
                    records_removed: 0,
                    delete_horizon: Some(horizon),
                },
                None => Filtered::Unreadable,
            }
        }
    }
}

/// A new batch holding `kept` with `header`'s identity (see the module doc).
fn build_batch(
    header: &BatchHeader,
    kept: &[&Record<'_>],
    horizon: Option<i64>,
) -> Option<Vec<u8>> {
    let base_timestamp = horizon.unwrap_or(header.base_timestamp);
    let mut records = Vec::new();
    let mut max_timestamp = i64::MIN;
    for record in kept {
        // A delta read off disk can be any i64: a timestamp out of range leaves the batch
        // unreadable (kept as is), never an overflow.
        let timestamp = header.base_timestamp.checked_add(record.timestamp_delta)?;
        max_timestamp = max_timestamp.max(timestamp);
        if base_timestamp == header.base_timestamp {
            records.extend_from_slice(record.raw);
        } else {
            write_with_timestamp_delta(
                &mut records,
                record,
                timestamp.checked_sub(base_timestamp)?,
            );
        }
    }
    if header.timestamp_type() == TimestampType::LogAppendTime {
        max_timestamp = header.max_timestamp;
    }
    let body = codec::compress(header.compression(), &records)?;
    let mut attributes = header.attributes;
    if horizon.is_some() {
        attributes |= DELETE_HORIZON_BIT;
    }
    Some(encode(
        header,
        attributes,
        base_timestamp,
        max_timestamp,
        kept.len(),
        &body,
    ))
}

/// An empty batch standing for `header` (Kafka's `writeEmptyHeader`): it keeps the
/// offsets and producer fields so producer state and segment ranges survive.
pub(crate) fn empty_batch(header: &BatchHeader) -> Vec<u8> {
    let attributes = header.attributes & !COMPRESSION_MASK & !DELETE_HORIZON_BIT;
    encode(
        header,
        attributes,
        header.max_timestamp,
        header.max_timestamp,
        0,
        &[],
    )
}

/// An empty batch that only holds `header`'s offsets (a group's last batch, kept so
/// the cleaned segment spans its group's offsets, see `cleaner/swap.rs`): no producer,
/// neither transactional nor control, so a replay of the log (producer state,
/// transactions) passes over it as if the batch were gone, as in Kafka's cleaned log.
pub(crate) fn placeholder_batch(header: &BatchHeader) -> Vec<u8> {
    let anonymous = BatchHeader {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        ..*header
    };
    let attributes = header.attributes
        & !COMPRESSION_MASK
        & !TRANSACTIONAL_BIT
        & !CONTROL_BIT
        & !DELETE_HORIZON_BIT;
    encode(
        &anonymous,
        attributes,
        header.max_timestamp,
        header.max_timestamp,
        0,
        &[],
    )
}

/// `header` with the rewritten fields, before `body`; the batch module computes the
/// length and the CRC.
fn encode(
    header: &BatchHeader,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    count: usize,
    body: &[u8],
) -> Vec<u8> {
    BatchHeader {
        attributes,
        base_timestamp,
        max_timestamp,
        records_count: count as i32,
        ..*header
    }
    .encode(body)
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
