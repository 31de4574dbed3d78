//! Control records (KIP-98): the one record of a transaction marker batch (attributes
//! transactional | control) that ends a producer's transaction on a partition.
//!
//! Layout of the record (Kafka's `ControlRecordType` key and `EndTransactionMarker`
//! value), big-endian inside the record's key and value bytes:
//! key = version i16 (0) | type i16 (0 ABORT, 1 COMMIT); value = version i16 (0) |
//! coordinator epoch i32. As Kafka, a newer key or value version is read by its v0
//! prefix. Markers are written uncompressed with one record; anything else (compressed,
//! no record, a short or negative-version key, another control type, a short value) is
//! malformed: a `BatchError`, never a panic. Pure.

use crate::batch::{BatchError, BatchHeader, Compression, BATCH_HEADER_LEN};
use crate::cleaner::record::read_varlong;

/// What a transaction marker says about the producer's open transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlType {
    Abort,
    Commit,
}

/// A decoded end-of-transaction marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub control_type: ControlType,
    /// The epoch of the transaction coordinator that wrote it (fences zombie coordinators).
    pub coordinator_epoch: i32,
}

fn malformed(reason: &'static str) -> BatchError {
    BatchError::InvalidControlRecord { reason }
}

/// Reads a zig-zag varint length field (`-1` = null) and the bytes it covers.
fn read_field<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, BatchError> {
    let len = read_varlong(buf, pos).ok_or(malformed("truncated record"))?;
    if len < 0 {
        return Ok(None);
    }
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .ok_or(malformed("record field too long"))?;
    let bytes = buf.get(*pos..end).ok_or(malformed("truncated record"))?;
    *pos = end;
    Ok(Some(bytes))
}

/// Decodes the end-transaction marker of a whole control batch (`batch` starts with the
/// batch header `header` describes).
pub fn parse_end_txn_marker(
    batch: &[u8],
    header: &BatchHeader,
) -> Result<EndTxnMarker, BatchError> {
    if header.compression() != Compression::None {
        return Err(malformed("compressed control batch"));
    }
    if header.records_count < 1 {
        return Err(malformed("control batch without a record"));
    }
    let payload = batch
        .get(BATCH_HEADER_LEN..header.size().min(batch.len()))
        .ok_or(malformed("truncated control batch"))?;
    let mut pos = 0usize;
    let length = read_varlong(payload, &mut pos).ok_or(malformed("truncated record"))?;
    let end = usize::try_from(length)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .ok_or(malformed("negative record length"))?;
    let body = payload.get(pos..end).ok_or(malformed("truncated record"))?;
    let mut at = 1usize; // record attributes
    for _ in 0..2 {
        // timestampDelta, offsetDelta
        read_varlong(body, &mut at).ok_or(malformed("truncated record"))?;
    }
    let key = read_field(body, &mut at)?.ok_or(malformed("control record without key"))?;
    let value = read_field(body, &mut at)?;
    let [v0, v1, t0, t1, ..] = *key else {
        return Err(malformed("control record key shorter than 4 bytes"));
    };
    if i16::from_be_bytes([v0, v1]) < 0 {
        return Err(malformed("negative control record key version"));
    }
    let control_type = match i16::from_be_bytes([t0, t1]) {
        0 => ControlType::Abort,
        1 => ControlType::Commit,
        _ => return Err(malformed("control record is not a transaction marker")),
    };
    let epoch = value
        .and_then(|v| v.get(2..6))
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .ok_or(malformed("transaction marker value shorter than 6 bytes"))?;
    Ok(EndTxnMarker {
        control_type,
        coordinator_epoch: i32::from_be_bytes(epoch),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_batch;
    use crate::testing::{encode_batch, TestBatch, TestRecord};

    fn parse(batch: &TestBatch) -> Result<EndTxnMarker, BatchError> {
        let bytes = encode_batch(batch);
        let header = validate_batch(&bytes).expect("valid test batch");
        parse_end_txn_marker(&bytes, &header)
    }

    #[test]
    fn commit_and_abort_markers_decode_with_their_coordinator_epoch() {
        assert_eq!(
            parse(&TestBatch::marker(7, 1, ControlType::Commit, 5)),
            Ok(EndTxnMarker {
                control_type: ControlType::Commit,
                coordinator_epoch: 5
            })
        );
        assert_eq!(
            parse(&TestBatch::marker(7, 1, ControlType::Abort, 0)).map(|m| m.control_type),
            Ok(ControlType::Abort)
        );
    }

    #[test]
    fn malformed_markers_are_errors() {
        let with_record = |key: Option<Vec<u8>>, value: Option<Vec<u8>>| {
            let mut batch = TestBatch::marker(7, 1, ControlType::Commit, 5);
            batch.records = vec![TestRecord {
                key,
                value,
                timestamp_delta: 0,
            }];
            parse(&batch)
        };
        assert!(with_record(None, Some(vec![0; 6])).is_err());
        assert!(with_record(Some(vec![0, 0, 0]), Some(vec![0; 6])).is_err());
        assert!(with_record(Some(vec![0, 0, 0, 2]), Some(vec![0; 6])).is_err());
        assert!(with_record(Some(vec![0xff, 0xff, 0, 1]), Some(vec![0; 6])).is_err());
        assert!(with_record(Some(vec![0, 0, 0, 1]), Some(vec![0; 5])).is_err());
        assert!(with_record(Some(vec![0, 0, 0, 1]), None).is_err());
        let mut none = TestBatch::marker(7, 1, ControlType::Commit, 5);
        none.records.clear();
        assert!(parse(&none).is_err());
        let mut compressed = TestBatch::marker(7, 1, ControlType::Commit, 5);
        compressed.attributes |= 1;
        assert!(parse(&compressed).is_err());
        // Cut bytes: every prefix of the record area fails cleanly.
        let bytes = encode_batch(&TestBatch::marker(7, 1, ControlType::Commit, 5));
        let header = validate_batch(&bytes).expect("valid");
        for cut in BATCH_HEADER_LEN..bytes.len() {
            assert!(
                parse_end_txn_marker(&bytes[..cut], &header).is_err(),
                "cut {cut}"
            );
        }
    }
}
