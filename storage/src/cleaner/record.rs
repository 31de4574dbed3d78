//! The records inside a v2 batch's (decompressed) payload, as the cleaner needs them:
//! each record's raw bytes, offset, timestamp, key and whether it is a tombstone.
//!
//! Record layout (Kafka's `DefaultRecord`): length varint, attributes i8,
//! timestampDelta varlong, offsetDelta varint, key (varint length, -1 = null), value
//! (same), header count varint, headers. Varints are zig-zag, as Kafka's `ByteUtils`.
//! Only the prefix up to the value length is decoded; headers are carried as bytes.
//! Malformed input yields `None`, never a panic.

/// One record of a batch, borrowing the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    /// The record's attributes byte (unused by Kafka today, carried as is).
    pub attributes: u8,
    pub timestamp_delta: i64,
    pub offset_delta: i64,
    pub key: Option<&'a [u8]>,
    /// A null value: a tombstone.
    pub is_tombstone: bool,
    /// The whole record, length prefix included (copied as is when nothing changes).
    pub raw: &'a [u8],
    /// The record after its timestampDelta: offsetDelta, key, value, headers.
    pub after_timestamp: &'a [u8],
}

/// Reads a zig-zag varlong at `*pos`, advancing it.
pub(crate) fn read_varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

/// Appends `value` as a zig-zag varlong.
pub(crate) fn write_varlong(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a length-prefixed byte field (`-1` = null).
fn read_bytes<'a>(buf: &'a [u8], pos: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = read_varlong(buf, pos)?;
    if len < 0 {
        return Some(None);
    }
    let end = pos.checked_add(usize::try_from(len).ok()?)?;
    let bytes = buf.get(*pos..end)?;
    *pos = end;
    Some(Some(bytes))
}

/// Parses exactly `count` records filling `payload`; `None` if anything is malformed.
pub(crate) fn parse_records(payload: &[u8], count: i32) -> Option<Vec<Record<'_>>> {
    let mut records = Vec::with_capacity(usize::try_from(count).ok()?.min(1 << 16));
    let mut pos = 0usize;
    for _ in 0..count {
        let start = pos;
        let length = usize::try_from(read_varlong(payload, &mut pos)?).ok()?;
        let end = pos.checked_add(length)?;
        let body = payload.get(pos..end)?;
        let mut at = 0usize;
        let attributes = *body.first()?;
        at += 1;
        let timestamp_delta = read_varlong(body, &mut at)?;
        let after_timestamp = body.get(at..)?;
        // Kafka's offsetDelta is a varint: a value beyond i32 is malformed.
        let offset_delta = read_varlong(body, &mut at).filter(|d| i32::try_from(*d).is_ok())?;
        let key = read_bytes(body, &mut at)?;
        let value = read_bytes(body, &mut at)?;
        records.push(Record {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            is_tombstone: value.is_none(),
            raw: payload.get(start..end)?,
            after_timestamp,
        });
        pos = end;
    }
    (pos == payload.len()).then_some(records)
}

/// Appends `record` with a new timestampDelta (after the batch's base timestamp moved).
pub(crate) fn write_with_timestamp_delta(out: &mut Vec<u8>, record: &Record<'_>, delta: i64) {
    let mut body = Vec::with_capacity(record.raw.len() + 8);
    body.push(record.attributes);
    write_varlong(&mut body, delta);
    body.extend_from_slice(record.after_timestamp);
    write_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BATCH_HEADER_LEN;
    use crate::testing::{encode_batch, TestBatch, TestRecord};

    #[test]
    fn records_parse_with_keys_tombstones_and_deltas() {
        let mut batch = TestBatch::values(1_000, &[]);
        batch.records = vec![
            TestRecord {
                key: Some(b"k1".to_vec()),
                value: Some(b"v".to_vec()),
                timestamp_delta: 0,
            },
            TestRecord {
                key: Some(b"k2".to_vec()),
                value: None,
                timestamp_delta: 300,
            },
            TestRecord {
                key: None,
                value: Some(b"x".to_vec()),
                timestamp_delta: 5,
            },
        ];
        let bytes = encode_batch(&batch);
        let records = parse_records(&bytes[BATCH_HEADER_LEN..], 3).expect("parses");
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].key, Some(b"k1".as_slice()));
        assert!(!records[0].is_tombstone);
        assert_eq!(records[1].key, Some(b"k2".as_slice()));
        assert!(records[1].is_tombstone);
        assert_eq!(records[1].timestamp_delta, 300);
        assert_eq!(records[2].key, None);
        assert_eq!(records[2].offset_delta, 2);
        let total: usize = records.iter().map(|r| r.raw.len()).sum();
        assert_eq!(total, bytes.len() - BATCH_HEADER_LEN);
        assert_eq!(parse_records(&bytes[BATCH_HEADER_LEN..], 4), None);
        assert_eq!(
            parse_records(&bytes[BATCH_HEADER_LEN..bytes.len() - 1], 3),
            None
        );
    }

    #[test]
    fn rewriting_the_timestamp_delta_keeps_the_rest() {
        let bytes = encode_batch(&TestBatch::values(0, &[b"value".as_slice()]));
        let records = parse_records(&bytes[BATCH_HEADER_LEN..], 1).expect("parses");
        let mut out = Vec::new();
        write_with_timestamp_delta(&mut out, &records[0], -70_000);
        let again = parse_records(&out, 1).expect("parses");
        assert_eq!(again[0].timestamp_delta, -70_000);
        assert_eq!(again[0].after_timestamp, records[0].after_timestamp);
    }
}
