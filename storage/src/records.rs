//! Reading record timestamps inside an uncompressed v2 batch, for ListOffsets by time
//! and MAX_TIMESTAMP, which Kafka answers with the exact record (not the batch).
//!
//! Only the record prefix is decoded: length (varint), attributes (i8), timestampDelta
//! (varlong), offsetDelta (varint); the rest is skipped by length. Compressed batches
//! return `None` (callers fall back to the batch's base offset; only the cleaner
//! decompresses, off the request path). Malformed input returns `None`, never panics.

use crate::batch::{BatchHeader, Compression, TimestampType, BATCH_HEADER_LEN};
use crate::cleaner::record::read_varlong as varlong;

/// (offset, timestamp) of each record of a whole batch, in order; `None` when the
/// records cannot be read without decompression.
fn record_timestamps(batch: &[u8], header: &BatchHeader) -> Option<Vec<(i64, i64)>> {
    if header.timestamp_type() == TimestampType::LogAppendTime {
        // Every record carries the broker's time: the first one is the answer.
        return Some(vec![(header.base_offset, header.max_timestamp)]);
    }
    if header.compression() != Compression::None {
        return None;
    }
    let mut out = Vec::new();
    let mut pos = BATCH_HEADER_LEN;
    for _ in 0..header.records_count.max(0) {
        let length = usize::try_from(varlong(batch, &mut pos)?).ok()?;
        let end = pos.checked_add(length)?;
        let mut field = pos + 1; // skip record attributes
        let timestamp_delta = varlong(batch, &mut field)?;
        let offset_delta = varlong(batch, &mut field)?;
        if field > end || end > batch.len() {
            return None;
        }
        out.push((
            header.base_offset + offset_delta,
            header.base_timestamp + timestamp_delta,
        ));
        pos = end;
    }
    Some(out)
}

/// The first record with timestamp `>= target`.
pub fn first_at_or_after(batch: &[u8], header: &BatchHeader, target: i64) -> Option<(i64, i64)> {
    record_timestamps(batch, header)?
        .into_iter()
        .find(|(_, ts)| *ts >= target)
}

/// The first record holding the batch's max timestamp.
pub fn with_max_timestamp(batch: &[u8], header: &BatchHeader) -> Option<(i64, i64)> {
    record_timestamps(batch, header)?
        .into_iter()
        .find(|(_, ts)| *ts == header.max_timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_batch;
    use crate::testing::{encode_batch, TestBatch, TestRecord};

    fn batch_with_deltas(deltas: &[i64]) -> Vec<u8> {
        let mut b = TestBatch::values(1_000, &[]);
        b.records = deltas
            .iter()
            .map(|d| TestRecord {
                key: Some(vec![1; 200]),
                value: Some(vec![2; 3]),
                timestamp_delta: *d,
            })
            .collect();
        let mut bytes = encode_batch(&b);
        crate::batch::stamp_offset_and_epoch(&mut bytes, 50, 0);
        bytes
    }

    #[test]
    fn finds_the_exact_record_by_timestamp() {
        let bytes = batch_with_deltas(&[0, 30, 10, 500]);
        let header = validate_batch(&bytes).expect("valid");
        assert_eq!(first_at_or_after(&bytes, &header, 1_005), Some((51, 1_030)));
        assert_eq!(first_at_or_after(&bytes, &header, 1_031), Some((53, 1_500)));
        assert_eq!(first_at_or_after(&bytes, &header, 1_501), None);
        assert_eq!(with_max_timestamp(&bytes, &header), Some((53, 1_500)));
    }

    #[test]
    fn compressed_or_truncated_batches_give_none() {
        let bytes = batch_with_deltas(&[0, 1]);
        let mut header = validate_batch(&bytes).expect("valid");
        assert_eq!(first_at_or_after(&bytes[..100], &header, 0), None);
        header.attributes = 1; // gzip
        assert_eq!(first_at_or_after(&bytes, &header, 0), None);
    }

    #[test]
    fn varlongs_decode_zigzag() {
        let mut pos = 0;
        assert_eq!(varlong(&[0x01], &mut pos), Some(-1));
        pos = 0;
        assert_eq!(varlong(&[0xac, 0x02], &mut pos), Some(150));
        pos = 0;
        assert_eq!(varlong(&[0x80], &mut pos), None);
    }
}
