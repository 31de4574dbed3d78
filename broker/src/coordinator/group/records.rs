//! The records of `__consumer_offsets` in Kafka's own format, so Kafka's tools
//! (`OffsetsMessageFormatter`, `GroupMetadataMessageFormatter`) read Brook's topic.
//!
//! Keys and values follow Kafka's schemas in `group-coordinator/src/main/resources/common/
//! message/` (kafka-protocol does not generate these): every key and value starts with an
//! `int16` version, then non-flexible fields (`int16`-length strings, `-1` for null,
//! `int32`-length bytes, `int32` array counts). We write `OffsetCommitKey` v1 (group, topic,
//! partition) with `OffsetCommitValue` v3 (offset, leader epoch, metadata, commit
//! timestamp), and `GroupMetadataKey` v2 (group) with `GroupMetadataValue` v3 (see
//! `snapshot`). A null value is a tombstone. The KIP-848 consumer groups' records (types
//! 3–8 and 16, see `consumer_group::records`) are carried whole; other types are skipped.
//!
//! Pure: no I/O; decoding never trusts its input.

use brook_storage::offsets::{CommittedOffset, OffsetRecord};

/// Kafka's internal topic of committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
const GROUP_METADATA_KEY_VERSION: i16 = 2;

/// The `__consumer_offsets` partition of a group: Kafka's
/// `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`, where `hashCode` is
/// Java's `String.hashCode` over UTF-16 code units and `Utils.abs(Integer.MIN_VALUE)` is 0.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = group_id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

/// The `__consumer_offsets` partition coordinating `group_id` in `image`, if the topic
/// exists: FindCoordinator answers its leader, and only that broker serves the group.
pub fn group_partition<'a>(
    image: &'a brook_raft::MetadataImage,
    group_id: &str,
) -> Option<&'a brook_raft::PartitionImage> {
    let index = group_partition_index(image, group_id)?;
    image.topic(OFFSETS_TOPIC)?.partitions.get(&index)
}

/// The index of [`group_partition`] (the partition a transaction adds for the group's
/// offsets), if the topic has partitions.
pub fn group_partition_index(image: &brook_raft::MetadataImage, group_id: &str) -> Option<i32> {
    let partitions = i32::try_from(image.topic(OFFSETS_TOPIC)?.partitions.len()).ok()?;
    (partitions > 0).then(|| partition_for(group_id, partitions))
}

/// Kafka's wire primitives for these schemas (big-endian, non-flexible).
#[derive(Default)]
pub(super) struct Writer(pub Vec<u8>);

impl Writer {
    pub fn i16(&mut self, v: i16) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    /// A string of at most `i16::MAX` bytes (Kafka's limit); longer ones are cut at a
    /// character boundary rather than written with a wrong length.
    pub fn string(&mut self, s: &str) -> &mut Self {
        let mut end = s.len().min(i16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.i16(end as i16);
        self.0.extend_from_slice(&s.as_bytes()[..end]);
        self
    }
    pub fn nullable_string(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.string(s),
            None => self.i16(-1),
        }
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
        self.0.extend_from_slice(b);
        self
    }
}

/// Reads the primitives `Writer` writes; every read checks the remaining length.
pub(super) struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("{what}: needs {n} bytes, {} left", self.0.len()));
        }
        let data: &'a [u8] = self.0;
        let (head, rest) = data.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    pub fn i16(&mut self, what: &str) -> Result<i16, String> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    pub fn i32(&mut self, what: &str) -> Result<i32, String> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4, what)?);
        Ok(i32::from_be_bytes(a))
    }
    pub fn i64(&mut self, what: &str) -> Result<i64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(a))
    }
    pub fn nullable_string(&mut self, what: &str) -> Result<Option<String>, String> {
        let len = self.i16(what)?;
        if len < 0 {
            return Ok(None);
        }
        let bytes = self.take(len as usize, what)?;
        std::str::from_utf8(bytes)
            .map(|s| Some(s.to_owned()))
            .map_err(|e| format!("{what}: not UTF-8: {e}"))
    }
    pub fn string(&mut self, what: &str) -> Result<String, String> {
        self.nullable_string(what)?
            .ok_or_else(|| format!("{what}: null where a string is required"))
    }
    pub fn bytes(&mut self, what: &str) -> Result<Vec<u8>, String> {
        let len = self.i32(what)?;
        let len = usize::try_from(len).map_err(|_| format!("{what}: negative length"))?;
        Ok(self.take(len, what)?.to_vec())
    }
}

/// `OffsetCommitKey` v1.
pub fn offset_commit_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(OFFSET_COMMIT_KEY_VERSION)
        .string(group)
        .string(topic)
        .i32(partition);
    w.0
}

/// `OffsetCommitValue` v3.
pub fn offset_commit_value(offset: &CommittedOffset) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(OFFSET_COMMIT_VALUE_VERSION)
        .i64(offset.offset)
        .i32(offset.leader_epoch)
        .string(&offset.metadata)
        .i64(offset.commit_timestamp_ms);
    w.0
}

/// `GroupMetadataKey` v2.
pub fn group_metadata_key(group: &str) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(GROUP_METADATA_KEY_VERSION).string(group);
    w.0
}

fn decode_offset_commit_value(value: &[u8]) -> Result<CommittedOffset, String> {
    let mut r = Reader(value);
    let version = r.i16("value version")?;
    if !(0..=3).contains(&version) {
        return Err(format!(
            "OffsetCommitValue version {version} is not supported"
        ));
    }
    let offset = r.i64("offset")?;
    let leader_epoch = if version >= 3 {
        r.i32("leader epoch")?
    } else {
        -1
    };
    let metadata = r.string("metadata")?;
    let commit_timestamp_ms = r.i64("commit timestamp")?;
    if version == 1 {
        r.i64("expire timestamp")?;
    }
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

/// The store change one `__consumer_offsets` record means; `None` for record types the
/// classic coordinator does not keep. The group metadata value is kept as its bytes.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<OffsetRecord>, String> {
    let mut r = Reader(key);
    match r.i16("key version")? {
        0 | 1 => {
            let group = r.string("group")?;
            let topic = r.string("topic")?;
            let partition = r.i32("partition")?;
            Ok(Some(match value {
                Some(v) => OffsetRecord::Commit {
                    group,
                    topic,
                    partition,
                    offset: decode_offset_commit_value(v)?,
                },
                None => OffsetRecord::DeleteOffset {
                    group,
                    topic,
                    partition,
                },
            }))
        }
        2 => {
            let group = r.string("group")?;
            Ok(Some(match value {
                Some(v) => OffsetRecord::PutGroup {
                    group,
                    metadata: v.to_vec(),
                },
                None => OffsetRecord::DeleteGroup { group },
            }))
        }
        _ if crate::coordinator::consumer_group::records::is_consumer_group_key(key) => {
            let (group, _) = crate::coordinator::consumer_group::records::decode_key(key)?;
            Ok(Some(match value {
                Some(v) => OffsetRecord::PutGroupRecord {
                    group,
                    key: key.to_vec(),
                    value: v.to_vec(),
                },
                None => OffsetRecord::DeleteGroupRecord {
                    group,
                    key: key.to_vec(),
                },
            }))
        }
        _ => Ok(None),
    }
}

/// The key and value (`None` = tombstone) of the record that carries `record`.
pub fn encode(record: &OffsetRecord) -> (Vec<u8>, Option<Vec<u8>>) {
    match record {
        OffsetRecord::Commit {
            group,
            topic,
            partition,
            offset,
        } => (
            offset_commit_key(group, topic, *partition),
            Some(offset_commit_value(offset)),
        ),
        OffsetRecord::DeleteOffset {
            group,
            topic,
            partition,
        } => (offset_commit_key(group, topic, *partition), None),
        OffsetRecord::PutGroup { group, metadata } => {
            (group_metadata_key(group), Some(metadata.clone()))
        }
        OffsetRecord::DeleteGroup { group } => (group_metadata_key(group), None),
        OffsetRecord::PutGroupRecord { key, value, .. } => (key.clone(), Some(value.clone())),
        OffsetRecord::DeleteGroupRecord { key, .. } => (key.clone(), None),
    }
}

/// The group a record belongs to (which decides its partition).
pub fn group_of(record: &OffsetRecord) -> &str {
    match record {
        OffsetRecord::Commit { group, .. }
        | OffsetRecord::DeleteOffset { group, .. }
        | OffsetRecord::PutGroup { group, .. }
        | OffsetRecord::DeleteGroup { group }
        | OffsetRecord::PutGroupRecord { group, .. }
        | OffsetRecord::DeleteGroupRecord { group, .. } => group,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_partitions_match_java_string_hash_code() {
        // Expected values computed with Java 21: "my-group".hashCode() == -1906497762,
        // "test-group" 627841412, "grüppe" -1233264812; "polygenelubricants".hashCode()
        // is Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
        assert_eq!(partition_for("my-group", 50), 12);
        assert_eq!(partition_for("test-group", 50), 12);
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("grüppe", 50), 12);
        assert_eq!(partition_for("my-group", 7), 1906497762 % 7);
    }

    #[test]
    fn offset_commits_and_tombstones_round_trip() {
        let records = [
            OffsetRecord::Commit {
                group: "g".into(),
                topic: "orders".into(),
                partition: 7,
                offset: CommittedOffset {
                    offset: 42,
                    leader_epoch: 3,
                    metadata: "meta".into(),
                    commit_timestamp_ms: 1_700_000_000_000,
                },
            },
            OffsetRecord::DeleteOffset {
                group: "g".into(),
                topic: "orders".into(),
                partition: 7,
            },
            OffsetRecord::PutGroup {
                group: "g".into(),
                metadata: vec![0, 3, 1, 2],
            },
            OffsetRecord::DeleteGroup { group: "g".into() },
        ];
        for record in records {
            let (key, value) = encode(&record);
            let decoded = decode(&key, value.as_deref()).expect("decodes");
            assert_eq!(decoded, Some(record));
        }
    }

    #[test]
    fn the_offset_commit_layout_is_kafkas() {
        let key = offset_commit_key("g", "t", 1);
        assert_eq!(key, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 1]);
        let value = offset_commit_value(&CommittedOffset {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 9,
        });
        let mut expected = vec![0, 3, 0, 0, 0, 0, 0, 0, 0, 5, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0];
        expected.extend_from_slice(&9i64.to_be_bytes());
        assert_eq!(value, expected);
    }

    #[test]
    fn truncated_records_are_errors_and_unknown_key_versions_are_skipped() {
        let key = offset_commit_key("group", "topic", 3);
        let value = offset_commit_value(&CommittedOffset {
            offset: 1,
            leader_epoch: 0,
            metadata: "m".into(),
            commit_timestamp_ms: 2,
        });
        for cut in 0..key.len() {
            assert!(
                decode(&key[..cut], Some(value.as_slice())).is_err(),
                "key cut at {cut}"
            );
        }
        for cut in 0..value.len() {
            assert!(
                decode(&key, Some(&value[..cut])).is_err(),
                "value cut at {cut}"
            );
        }
        // Type 4 (ConsumerGroupPartitionMetadata, superseded by the metadata hash): skipped.
        assert_eq!(decode(&[0, 4, 0, 0], Some(&[1u8][..])), Ok(None));
        // A consumer group's record is carried whole; one with a cut key is an error.
        let member = [0, 5, 0, 1, b'g', 0, 1, b'm'];
        assert_eq!(
            decode(&member, None),
            Ok(Some(OffsetRecord::DeleteGroupRecord {
                group: "g".into(),
                key: member.to_vec()
            }))
        );
        assert!(decode(&member[..5], None).is_err());
    }
}
