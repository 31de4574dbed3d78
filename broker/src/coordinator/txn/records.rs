//! The records of `__transaction_state` in Kafka's own format, so Kafka's tools
//! (`kafka-dump-log --transaction-log-decoder`) read Brook's topic and Brook could read
//! Kafka's.
//!
//! Layouts follow Kafka's `TransactionLogKey.json` / `TransactionLogValue.json`
//! (`transaction-coordinator/src/main/resources/common/message/`): the key is `int16 0`
//! (the coordinator record type, which doubles as key version 0) then the transactional id
//! as an `int16`-length string. The value is `int16` version, then `ProducerId int64,
//! ProducerEpoch int16, TransactionTimeoutMs int32, TransactionStatus int8,
//! TransactionPartitions [Topic string, PartitionIds [int32]] (nullable),
//! TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64`. Version 1 is
//! the flexible form (compact lengths, tagged fields: 0 PreviousProducerId, 1
//! NextProducerId, 2 ClientTransactionVersion, 3 NextProducerEpoch). Brook writes version
//! 0 for transactions of Transactions V1 clients (byte for byte what Kafka wrote before
//! `transaction.version` existed) and version 1 for Transactions V2 ones, whose client
//! version and next producer id must survive a restart; it reads both. An Empty
//! transaction's partitions are written as null, as Kafka does. A null value is a
//! tombstone (an expired id).
//!
//! Pure: no I/O; decoding never trusts its input.

use std::collections::{BTreeMap, BTreeSet};

use super::state::TxnState;

/// Kafka's internal topic of transaction states.
pub const TXN_STATE_TOPIC: &str = "__transaction_state";

/// The coordinator record type of transaction log keys (`CoordinatorRecordType.TRANSACTION_LOG`).
const KEY_TYPE: i16 = 0;
/// The value versions Brook writes: 0 for Transactions V1 clients, 1 (flexible, tagged
/// fields) for Transactions V2 ones.
const VALUE_VERSION_V0: i16 = 0;
const VALUE_VERSION_V1: i16 = 1;
/// The first client transaction version that bumps the epoch every transaction (KIP-890).
pub const TRANSACTION_VERSION_2: i16 = 2;

/// One transactional id's state as the log stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogValue {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub last_update_timestamp_ms: i64,
    pub start_timestamp_ms: i64,
    /// Version 1's tagged `PreviousProducerId` (-1 when absent, and in version 0).
    pub previous_producer_id: i64,
    /// Version 1's tagged `NextProducerId`: the id a Transactions V2 end whose epoch ran
    /// out hands over to (-1: none).
    pub next_producer_id: i64,
    /// Version 1's tagged `ClientTransactionVersion` (0 in version 0).
    pub client_version: i16,
}

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record truncated")]
    Truncated,
    #[error("unknown transaction log value version {0}")]
    UnknownVersion(i16),
    #[error("unknown transaction status {0}")]
    UnknownStatus(i8),
    #[error("invalid length {0}")]
    InvalidLength(i64),
    #[error("transactional id is not UTF-8")]
    NotUtf8,
}

/// The `__transaction_state` partition of a transactional id: Kafka's
/// `Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount`, the same hash as
/// the groups' (`records::partition_for` of the group coordinator).
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::coordinator::group::records::partition_for(transactional_id, partitions)
}

/// The `__transaction_state` partition (index and image) of `transactional_id` in
/// `image`, if the topic exists: FindCoordinator answers its leader, and only that broker
/// coordinates the id.
pub fn state_partition<'a>(
    image: &'a brook_raft::MetadataImage,
    transactional_id: &str,
) -> Option<(i32, &'a brook_raft::PartitionImage)> {
    let topic = image.topic(TXN_STATE_TOPIC)?;
    let count = i32::try_from(topic.partitions.len()).ok()?;
    let partition = partition_for(transactional_id, count);
    topic.partitions.get(&partition).map(|p| (partition, p))
}

/// The key bytes of `transactional_id`.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&KEY_TYPE.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

/// The value bytes of `value`: version 1 for a Transactions V2 client, else version 0.
pub fn encode_value(value: &TxnLogValue) -> Vec<u8> {
    let flexible = value.client_version >= TRANSACTION_VERSION_2;
    let mut out = Vec::with_capacity(64);
    let version = if flexible {
        VALUE_VERSION_V1
    } else {
        VALUE_VERSION_V0
    };
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&value.producer_id.to_be_bytes());
    out.extend_from_slice(&value.producer_epoch.to_be_bytes());
    out.extend_from_slice(&value.timeout_ms.to_be_bytes());
    out.push(value.state.id() as u8);
    if value.state == TxnState::Empty {
        if flexible {
            put_uvarint(&mut out, 0);
        } else {
            out.extend_from_slice(&(-1i32).to_be_bytes());
        }
    } else {
        let by_topic = group_by_topic(&value.partitions);
        put_len(&mut out, by_topic.len(), flexible);
        for (topic, partitions) in by_topic {
            if flexible {
                put_uvarint(&mut out, topic.len() as u64 + 1);
                out.extend_from_slice(topic.as_bytes());
            } else {
                put_string(&mut out, topic);
            }
            put_len(&mut out, partitions.len(), flexible);
            for p in partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
            if flexible {
                put_uvarint(&mut out, 0); // no tagged fields
            }
        }
    }
    out.extend_from_slice(&value.last_update_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&value.start_timestamp_ms.to_be_bytes());
    if flexible {
        let mut tags: Vec<(u64, Vec<u8>)> = Vec::new();
        if value.previous_producer_id != -1 {
            tags.push((0, value.previous_producer_id.to_be_bytes().to_vec()));
        }
        if value.next_producer_id != -1 {
            tags.push((1, value.next_producer_id.to_be_bytes().to_vec()));
        }
        tags.push((2, value.client_version.to_be_bytes().to_vec()));
        if value.next_producer_id != -1 {
            tags.push((3, 0i16.to_be_bytes().to_vec()));
        }
        put_uvarint(&mut out, tags.len() as u64);
        for (tag, data) in tags {
            put_uvarint(&mut out, tag);
            put_uvarint(&mut out, data.len() as u64);
            out.extend_from_slice(&data);
        }
    }
    out
}

/// An array length: `int32` in version 0, compact (`n + 1` as an unsigned varint) in 1.
fn put_len(out: &mut Vec<u8>, len: usize, flexible: bool) {
    if flexible {
        put_uvarint(out, len as u64 + 1);
    } else {
        out.extend_from_slice(&(len as i32).to_be_bytes());
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The transactional id of a key; `Ok(None)` for keys of another record type (skipped,
/// as Kafka's loader skips them).
pub fn decode_key(key: &[u8]) -> Result<Option<String>, RecordError> {
    let mut r = Reader(key);
    if r.i16()? != KEY_TYPE {
        return Ok(None);
    }
    r.string().map(Some)
}

/// The state in a value; `Ok(None)` for a tombstone.
pub fn decode_value(value: Option<&[u8]>) -> Result<Option<TxnLogValue>, RecordError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let mut r = Reader(value);
    let version = r.i16()?;
    let flexible = match version {
        0 => false,
        1 => true,
        v => return Err(RecordError::UnknownVersion(v)),
    };
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let status = r.i8()?;
    let state = TxnState::from_id(status).ok_or(RecordError::UnknownStatus(status))?;
    let mut partitions = BTreeSet::new();
    let topics = r.array_len(flexible)?;
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible {
            r.compact_string()?
        } else {
            r.string()?
        };
        let count = r.array_len(flexible)?.unwrap_or(0);
        for _ in 0..count {
            partitions.insert((topic.clone(), r.i32()?));
        }
        if flexible {
            r.skip_tagged_fields(|_, _| {})?;
        }
    }
    let last_update_timestamp_ms = r.i64()?;
    let start_timestamp_ms = r.i64()?;
    let mut previous_producer_id = -1;
    let mut next_producer_id = -1;
    let mut client_version = 0;
    if flexible {
        r.skip_tagged_fields(|tag, data| match tag {
            0 | 1 => {
                if let Ok(bytes) = <[u8; 8]>::try_from(data) {
                    let id = i64::from_be_bytes(bytes);
                    if tag == 0 {
                        previous_producer_id = id;
                    } else {
                        next_producer_id = id;
                    }
                }
            }
            2 => {
                if let Ok(bytes) = <[u8; 2]>::try_from(data) {
                    client_version = i16::from_be_bytes(bytes);
                }
            }
            _ => {}
        })?;
    }
    // Kafka ignores the partitions of an Empty transaction.
    if state == TxnState::Empty {
        partitions.clear();
    }
    Ok(Some(TxnLogValue {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_timestamp_ms,
        start_timestamp_ms,
        previous_producer_id,
        next_producer_id,
        client_version,
    }))
}

fn group_by_topic(partitions: &BTreeSet<(String, i32)>) -> BTreeMap<&str, Vec<i32>> {
    let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, p) in partitions {
        out.entry(topic.as_str()).or_default().push(*p);
    }
    out
}

/// A string of at most `i16::MAX` bytes (Kafka's limit; topic names and transactional
/// ids are far shorter), cut at a character boundary rather than written with a wrong length.
fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(i16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as i16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// Bounds-checked big-endian reads.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.0.len() < n {
            return Err(RecordError::Truncated);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        <[u8; N]>::try_from(self.take(N)?).map_err(|_| RecordError::Truncated)
    }
    fn i8(&mut self) -> Result<i8, RecordError> {
        Ok(i8::from_be_bytes(self.array()?))
    }
    fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.array()?))
    }
    fn uvarint(&mut self) -> Result<u64, RecordError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let [b] = self.array::<1>()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::InvalidLength(-1))
    }
    fn utf8(bytes: &[u8]) -> Result<String, RecordError> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| RecordError::NotUtf8)
    }
    fn string(&mut self) -> Result<String, RecordError> {
        let len = self.i16()?;
        let len = usize::try_from(len).map_err(|_| RecordError::InvalidLength(len.into()))?;
        Self::utf8(self.take(len)?)
    }
    fn compact_string(&mut self) -> Result<String, RecordError> {
        let len = self.uvarint()?;
        let len =
            usize::try_from(len.saturating_sub(1)).map_err(|_| RecordError::InvalidLength(-1))?;
        Self::utf8(self.take(len)?)
    }
    /// An array's element count: `None` for null. Counts beyond the bytes left are refused
    /// before anything is allocated.
    fn array_len(&mut self, flexible: bool) -> Result<Option<usize>, RecordError> {
        let len: i64 = if flexible {
            i64::try_from(self.uvarint()?).map_err(|_| RecordError::InvalidLength(-1))? - 1
        } else {
            self.i32()?.into()
        };
        if len < 0 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| RecordError::InvalidLength(len))?;
        if len > self.0.len() {
            return Err(RecordError::InvalidLength(len as i64));
        }
        Ok(Some(len))
    }
    fn skip_tagged_fields(&mut self, mut seen: impl FnMut(u64, &[u8])) -> Result<(), RecordError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| RecordError::Truncated)?;
            seen(tag, self.take(size)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TxnLogValue {
        TxnLogValue {
            producer_id: 4001,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: BTreeSet::from([
                ("a".to_string(), 0),
                ("a".to_string(), 2),
                ("b".into(), 1),
            ]),
            last_update_timestamp_ms: 1_700_000_000_123,
            start_timestamp_ms: 1_700_000_000_000,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_version: 0,
        }
    }

    #[test]
    fn a_value_decodes_to_what_was_encoded() {
        let value = ongoing();
        let bytes = encode_value(&value);
        assert_eq!(decode_value(Some(&bytes)), Ok(Some(value)));
        let key = encode_key("my-txn");
        assert_eq!(decode_key(&key), Ok(Some("my-txn".to_string())));
    }

    #[test]
    fn the_bytes_follow_kafkas_transaction_log_value_v0_layout() {
        let bytes = encode_value(&ongoing());
        let mut expected = vec![0, 0]; // version 0
        expected.extend_from_slice(&4001i64.to_be_bytes());
        expected.extend_from_slice(&3i16.to_be_bytes());
        expected.extend_from_slice(&60_000i32.to_be_bytes());
        expected.push(1); // Ongoing
        expected.extend_from_slice(&2i32.to_be_bytes()); // two topics
        expected.extend_from_slice(&[0, 1, b'a', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2]);
        expected.extend_from_slice(&[0, 1, b'b', 0, 0, 0, 1, 0, 0, 0, 1]);
        expected.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(encode_key("t"), vec![0, 0, 0, 1, b't']);
    }

    #[test]
    fn an_empty_transaction_writes_null_partitions() {
        let mut value = ongoing();
        value.state = TxnState::Empty;
        value.partitions.clear();
        let bytes = encode_value(&value);
        assert_eq!(&bytes[17..21], &(-1i32).to_be_bytes());
        assert_eq!(decode_value(Some(&bytes)), Ok(Some(value)));
    }

    #[test]
    fn a_flexible_v1_value_is_read_with_its_previous_producer_id() {
        let mut v1 = vec![0, 1];
        v1.extend_from_slice(&7i64.to_be_bytes());
        v1.extend_from_slice(&1i16.to_be_bytes());
        v1.extend_from_slice(&1000i32.to_be_bytes());
        v1.push(4); // CompleteCommit
        v1.push(2); // one topic (compact: n + 1)
        v1.extend_from_slice(&[2, b'x', 2, 0, 0, 0, 5, 0]); // "x", [5], no tags
        v1.extend_from_slice(&11i64.to_be_bytes());
        v1.extend_from_slice(&10i64.to_be_bytes());
        v1.extend_from_slice(&[2, 0, 8]); // two tags; tag 0, 8 bytes
        v1.extend_from_slice(&6i64.to_be_bytes());
        v1.extend_from_slice(&[2, 2, 0, 1]); // tag 2 (client version 1)
        let value = decode_value(Some(&v1))
            .expect("decodes")
            .expect("not a tombstone");
        assert_eq!(value.producer_id, 7);
        assert_eq!(value.state, TxnState::CompleteCommit);
        assert_eq!(value.partitions, BTreeSet::from([("x".to_string(), 5)]));
        assert_eq!(value.start_timestamp_ms, 10);
        assert_eq!(value.previous_producer_id, 6);
        assert_eq!(value.client_version, 1);
    }

    #[test]
    fn a_transactions_v2_value_is_written_as_flexible_v1_and_read_back() {
        let mut value = ongoing();
        value.client_version = TRANSACTION_VERSION_2;
        value.previous_producer_id = 4000;
        value.next_producer_id = 4002;
        let bytes = encode_value(&value);
        assert_eq!(&bytes[..2], &[0, 1]);
        // Compact array of two topics, then "a" as a compact string.
        assert_eq!(&bytes[17..20], &[3, 2, b'a']);
        assert_eq!(decode_value(Some(&bytes)), Ok(Some(value.clone())));
        value.state = TxnState::Empty;
        value.partitions.clear();
        let bytes = encode_value(&value);
        assert_eq!(bytes[17], 0, "null partitions");
        assert_eq!(decode_value(Some(&bytes)), Ok(Some(value)));
    }

    #[test]
    fn tombstones_and_foreign_keys_and_garbage_are_handled_without_panics() {
        assert_eq!(decode_value(None), Ok(None));
        assert_eq!(decode_key(&[0, 3, 0, 0]), Ok(None));
        let bytes = encode_value(&ongoing());
        for cut in 0..bytes.len() {
            assert!(decode_value(Some(&bytes[..cut])).is_err(), "cut at {cut}");
        }
        let mut huge = bytes[..17].to_vec();
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_value(Some(&huge)).is_err());
        assert_eq!(
            decode_value(Some(&[0, 9])),
            Err(RecordError::UnknownVersion(9))
        );
    }

    #[test]
    fn transactional_ids_map_to_partitions_with_javas_string_hash() {
        // "hello".hashCode() == 99162322 in Java.
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        assert!((0..50).contains(&partition_for("any-id", 50)));
    }
}
