//! A view over Kafka record batches, magic v2 (KIP-98). The on-disk format equals the
//! wire format, so the storage crate owns it; records are never decoded here.
//!
//! Layout (big-endian): baseOffset i64, batchLength i32, partitionLeaderEpoch i32,
//! magic i8, crc u32, attributes i16, lastOffsetDelta i32, baseTimestamp i64,
//! maxTimestamp i64, producerId i64, producerEpoch i16, baseSequence i32,
//! recordsCount i32, records. `batchLength` counts the bytes after itself. The CRC-32C
//! covers `attributes` to the end of the batch, so baseOffset and partitionLeaderEpoch
//! can be stamped in place without recomputing it; maxTimestamp and attributes cannot.
//!
//! Invariant: every function checks bounds before slicing; malformed input yields a
//! `BatchError`, never a panic.

/// Bytes before the records: the fixed v2 header.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes covered by baseOffset + batchLength (not counted in batchLength).
pub const LOG_OVERHEAD: usize = 12;
/// The only supported magic value.
pub const MAGIC_V2: i8 = 2;
/// Producer id of a non-idempotent batch.
pub const NO_PRODUCER_ID: i64 = -1;
/// Sequence of a non-idempotent batch.
pub const NO_SEQUENCE: i32 = -1;

const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
const MAX_TIMESTAMP_OFFSET: usize = 35;

/// The attribute bits (Kafka's `DefaultRecordBatch`).
pub const COMPRESSION_MASK: i16 = 0x07;
pub const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub const TRANSACTIONAL_BIT: i16 = 0x10;
pub const CONTROL_BIT: i16 = 0x20;
/// KIP-534: the base timestamp is the delete horizon of the batch's tombstones and
/// transaction markers, set by the cleaner.
pub const DELETE_HORIZON_BIT: i16 = 0x40;

/// Which validation check a batch failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("batch truncated: needs {needed} bytes, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("batch length {batch_length} out of bounds")]
    InvalidLength { batch_length: i32 },
    #[error("unsupported magic {magic}")]
    UnsupportedMagic { magic: i8 },
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("records count {records_count} < 1")]
    NoRecords { records_count: i32 },
    #[error("malformed control record: {reason}")]
    InvalidControlRecord { reason: &'static str },
    #[error("lastOffsetDelta {last_offset_delta} != recordsCount {records_count} - 1")]
    OffsetDeltaMismatch {
        last_offset_delta: i32,
        records_count: i32,
    },
}

/// Compression codec from attribute bits 0-2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
    /// Codec ids 5-7 are unassigned; kept as data for the broker to reject.
    Unknown(u8),
}

impl Compression {
    /// The codec of a batch whose attributes are `attributes` (bits 0-2).
    pub fn from_attributes(attributes: i16) -> Compression {
        match (attributes & COMPRESSION_MASK) as u8 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => Compression::Unknown(other),
        }
    }
}

/// Timestamp type from attribute bit 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// The decoded fixed header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

fn be<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    // Callers check `buf.len() >= BATCH_HEADER_LEN` first; `get` keeps this panic-free anyway.
    if let Some(src) = buf.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

impl BatchHeader {
    /// Decodes the fixed header from the start of `buf` and checks the length bounds and
    /// magic. Does not check that the whole batch is present, nor the CRC.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated {
                needed: BATCH_HEADER_LEN,
                available: buf.len(),
            });
        }
        let header = BatchHeader {
            base_offset: i64::from_be_bytes(be(buf, 0)),
            batch_length: i32::from_be_bytes(be(buf, 8)),
            partition_leader_epoch: i32::from_be_bytes(be(buf, PARTITION_LEADER_EPOCH_OFFSET)),
            magic: i8::from_be_bytes(be(buf, MAGIC_OFFSET)),
            crc: u32::from_be_bytes(be(buf, CRC_OFFSET)),
            attributes: i16::from_be_bytes(be(buf, ATTRIBUTES_OFFSET)),
            last_offset_delta: i32::from_be_bytes(be(buf, 23)),
            base_timestamp: i64::from_be_bytes(be(buf, 27)),
            max_timestamp: i64::from_be_bytes(be(buf, MAX_TIMESTAMP_OFFSET)),
            producer_id: i64::from_be_bytes(be(buf, 43)),
            producer_epoch: i16::from_be_bytes(be(buf, 51)),
            base_sequence: i32::from_be_bytes(be(buf, 53)),
            records_count: i32::from_be_bytes(be(buf, 57)),
        };
        // The magic byte sits at the same place in every format; check it before trusting
        // the rest of the layout.
        if header.magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic {
                magic: header.magic,
            });
        }
        if (header.batch_length as i64) < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(BatchError::InvalidLength {
                batch_length: header.batch_length,
            });
        }
        Ok(header)
    }

    /// One whole batch: this header before `records` (already encoded, compressed as the
    /// attributes say), with `batchLength` and the CRC-32C computed here; the header's
    /// own `batch_length` and `crc` are ignored.
    pub fn encode(&self, records: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(BATCH_HEADER_LEN + records.len());
        let batch_length = (BATCH_HEADER_LEN - LOG_OVERHEAD + records.len()) as i32;
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&batch_length.to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.extend_from_slice(&self.magic.to_be_bytes());
        out.extend_from_slice(&[0u8; 4]); // the CRC, sealed below
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.records_count.to_be_bytes());
        out.extend_from_slice(records);
        seal_crc(&mut out);
        out
    }

    /// Total size of the batch on disk, including baseOffset and batchLength.
    pub fn size(&self) -> usize {
        // batch_length >= 49 was checked by `parse`.
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    /// Offset of the last record (valid once the base offset has been stamped).
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// The offset after this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    pub fn compression(&self) -> Compression {
        Compression::from_attributes(self.attributes)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Whether the batch comes from an idempotent / transactional producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id > NO_PRODUCER_ID
    }

    /// Sequence of the last record, wrapping past `i32::MAX` to 0 as Kafka's
    /// `DefaultRecordBatch.incrementSequence` does.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// `sequence + increment` wrapping from `i32::MAX` to 0 (sequences are never negative).
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// Checks one complete batch at the start of `buf`: header, length, CRC-32C.
/// Returns the header; the batch occupies `buf[..header.size()]`.
pub fn validate_batch(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let size = header.size();
    let Some(batch) = buf.get(..size) else {
        return Err(BatchError::Truncated {
            needed: size,
            available: buf.len(),
        });
    };
    let computed = batch
        .get(ATTRIBUTES_OFFSET..)
        .map(crc32c::crc32c)
        .unwrap_or_default();
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// Extra checks for a batch arriving from a producer (Kafka's LogValidator).
pub fn validate_produce_header(header: &BatchHeader) -> Result<(), BatchError> {
    if header.records_count < 1 {
        return Err(BatchError::NoRecords {
            records_count: header.records_count,
        });
    }
    if i64::from(header.last_offset_delta) != i64::from(header.records_count) - 1 {
        return Err(BatchError::OffsetDeltaMismatch {
            last_offset_delta: header.last_offset_delta,
            records_count: header.records_count,
        });
    }
    Ok(())
}

/// Iterates the batches of a buffer of concatenated batches, yielding each batch's
/// position in the buffer and its CRC-checked header. Stops after the first error.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    position: usize,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter {
            buf,
            position: 0,
            failed: false,
        }
    }
}

impl Iterator for BatchIter<'_> {
    type Item = Result<(usize, BatchHeader), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let rest = self.buf.get(self.position..).filter(|r| !r.is_empty())?;
        match validate_batch(rest) {
            Ok(header) => {
                let at = self.position;
                self.position += header.size();
                Some(Ok((at, header)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Overwrites baseOffset and partitionLeaderEpoch of the batch at the start of `batch`.
/// Both lie outside the CRC, so no recomputation is needed.
pub fn stamp_offset_and_epoch(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    if let Some(dst) = batch.get_mut(0..8) {
        dst.copy_from_slice(&base_offset.to_be_bytes());
    }
    if let Some(dst) =
        batch.get_mut(PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4)
    {
        dst.copy_from_slice(&leader_epoch.to_be_bytes());
    }
}

/// Turns the batch at the start of `batch` (exactly one whole batch) into a
/// LogAppendTime batch: sets the timestamp-type bit and maxTimestamp to `now_ms`, then
/// recomputes the CRC since both are covered by it (Kafka's `setMaxTimestamp`).
pub fn stamp_log_append_time(batch: &mut [u8], now_ms: i64) {
    if batch.len() < BATCH_HEADER_LEN {
        return;
    }
    let attributes = i16::from_be_bytes(be(batch, ATTRIBUTES_OFFSET)) | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&now_ms.to_be_bytes());
    seal_crc(batch);
}

/// Recomputes the CRC-32C of the batch at the start of `batch` (exactly one whole batch)
/// after a change to what it covers (attributes onward).
pub fn seal_crc(batch: &mut [u8]) {
    if batch.len() < BATCH_HEADER_LEN {
        return;
    }
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{encode_batch, TestBatch};

    fn sample() -> Vec<u8> {
        encode_batch(&TestBatch::values(1_000, &[b"a".as_slice(), b"bb", b"ccc"]))
    }

    #[test]
    fn an_encoded_header_reparses_with_a_valid_crc() {
        let buf = sample();
        let header = validate_batch(&buf).expect("valid");
        let records = &buf[BATCH_HEADER_LEN..];
        assert_eq!(header.encode(records), buf);
        let rewritten = BatchHeader {
            attributes: header.attributes | TRANSACTIONAL_BIT,
            max_timestamp: 7,
            crc: 0,
            batch_length: 0,
            ..header
        };
        let again = validate_batch(&rewritten.encode(records)).expect("crc sealed");
        assert!(again.is_transactional());
        assert_eq!(again.max_timestamp, 7);
        assert_eq!(again.size(), buf.len());
    }

    #[test]
    fn a_valid_batch_parses_with_its_fields() {
        let buf = sample();
        let header = validate_batch(&buf).expect("valid");
        assert_eq!(header.size(), buf.len());
        assert_eq!(header.records_count, 3);
        assert_eq!(header.last_offset_delta, 2);
        assert_eq!(header.base_timestamp, 1_000);
        assert_eq!(header.compression(), Compression::None);
        assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
        assert!(!header.has_producer_id());
        assert_eq!(validate_produce_header(&header), Ok(()));
    }

    #[test]
    fn a_flipped_record_byte_fails_the_crc() {
        let mut buf = sample();
        let last = buf.len() - 1;
        buf[last] ^= 0xff;
        assert!(matches!(
            validate_batch(&buf),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn stamping_offset_and_epoch_keeps_the_crc_valid() {
        let mut buf = sample();
        stamp_offset_and_epoch(&mut buf, 42, 7);
        let header = validate_batch(&buf).expect("still valid");
        assert_eq!(header.base_offset, 42);
        assert_eq!(header.partition_leader_epoch, 7);
        assert_eq!(header.last_offset(), 44);
    }

    #[test]
    fn log_append_time_sets_the_bit_and_max_timestamp_and_a_new_crc() {
        let mut buf = sample();
        stamp_log_append_time(&mut buf, 99_999);
        let header = validate_batch(&buf).expect("crc recomputed");
        assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(header.max_timestamp, 99_999);
        assert_eq!(header.base_timestamp, 1_000);
    }

    #[test]
    fn wrong_magic_short_buffers_and_bad_lengths_are_rejected() {
        let mut buf = sample();
        buf[MAGIC_OFFSET] = 1;
        assert_eq!(
            BatchHeader::parse(&buf),
            Err(BatchError::UnsupportedMagic { magic: 1 })
        );
        let buf = sample();
        assert!(matches!(
            validate_batch(&buf[..buf.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(
            BatchHeader::parse(&buf[..10]),
            Err(BatchError::Truncated { .. })
        ));
        let mut buf = sample();
        buf[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert_eq!(
            BatchHeader::parse(&buf),
            Err(BatchError::InvalidLength { batch_length: 10 })
        );
    }

    #[test]
    fn produce_checks_reject_empty_and_inconsistent_batches() {
        let mut header = validate_batch(&sample()).expect("valid");
        header.records_count = 0;
        assert_eq!(
            validate_produce_header(&header),
            Err(BatchError::NoRecords { records_count: 0 })
        );
        header.records_count = 5;
        assert!(matches!(
            validate_produce_header(&header),
            Err(BatchError::OffsetDeltaMismatch { .. })
        ));
    }

    #[test]
    fn iterating_concatenated_batches_stops_at_the_first_bad_one() {
        let mut buf = sample();
        buf.extend_from_slice(&sample());
        buf.extend_from_slice(&[0u8; 20]);
        let items: Vec<_> = BatchIter::new(&buf).collect();
        assert_eq!(items.len(), 3);
        assert_eq!(
            items[1].as_ref().map(|(p, _)| *p).ok(),
            Some(sample().len())
        );
        assert!(items[2].is_err());
    }

    #[test]
    fn sequences_wrap_from_max_to_zero() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    }
}
