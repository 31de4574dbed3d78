//! A KIP-848 consumer group's records in `__consumer_offsets`, in Kafka 4.4's format so
//! `kafka-dump-log --offsets-decoder` reads them: record types 3 (group epoch), 5 (member
//! metadata), 6 (target assignment epoch), 7 (a member's target assignment), 8 (a
//! member's current assignment) and 16 (a regex's resolved topics).
//!
//! A key is the `int16` record type, then the key's fields in the non-flexible encoding
//! (`int16`-length strings): the group id first, then the member id or the regex. A value
//! is the `int16` value version (0 for all of these), then the fields in the flexible
//! encoding (compact strings and arrays: unsigned-varint length + 1, tagged fields at the
//! end of every struct). Schemas: Kafka's `ConsumerGroup*Key/Value.json` in
//! `group-coordinator/src/main/resources/common/message/`, checked against the 4.4 jars'
//! generated `SCHEMAS` (tagged fields: `MetadataHash` (tag 0) of type 3, a classic member's
//! `ClassicMemberMetadata` (tag 0) of type 5, the assignment epochs of type 8; Brook skips the
//! tags it reads but does not use).
//!
//! Pure: no I/O; decoding never trusts its input.

use uuid::Uuid;

use super::member::Assignment;

pub const GROUP_METADATA: i16 = 3;
pub const MEMBER_METADATA: i16 = 5;
pub const TARGET_ASSIGNMENT_METADATA: i16 = 6;
pub const TARGET_ASSIGNMENT_MEMBER: i16 = 7;
pub const CURRENT_MEMBER_ASSIGNMENT: i16 = 8;
pub const REGULAR_EXPRESSION: i16 = 16;

const VALUE_VERSION: i16 = 0;

/// What a key names, beyond its group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecordKey {
    GroupMetadata,
    MemberMetadata(String),
    TargetAssignmentMetadata,
    TargetAssignmentMember(String),
    CurrentMemberAssignment(String),
    RegularExpression(String),
}

impl RecordKey {
    pub fn record_type(&self) -> i16 {
        match self {
            RecordKey::GroupMetadata => GROUP_METADATA,
            RecordKey::MemberMetadata(_) => MEMBER_METADATA,
            RecordKey::TargetAssignmentMetadata => TARGET_ASSIGNMENT_METADATA,
            RecordKey::TargetAssignmentMember(_) => TARGET_ASSIGNMENT_MEMBER,
            RecordKey::CurrentMemberAssignment(_) => CURRENT_MEMBER_ASSIGNMENT,
            RecordKey::RegularExpression(_) => REGULAR_EXPRESSION,
        }
    }

    /// The key's bytes for `group`.
    pub fn encode(&self, group: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(6 + group.len());
        out.extend_from_slice(&self.record_type().to_be_bytes());
        put_short_string(&mut out, group);
        match self {
            RecordKey::GroupMetadata | RecordKey::TargetAssignmentMetadata => {}
            RecordKey::MemberMetadata(s)
            | RecordKey::TargetAssignmentMember(s)
            | RecordKey::CurrentMemberAssignment(s)
            | RecordKey::RegularExpression(s) => put_short_string(&mut out, s),
        }
        out
    }
}

/// Whether `key` is a consumer group record's key (its record type).
pub fn is_consumer_group_key(key: &[u8]) -> bool {
    matches!(
        key.get(..2).map(|t| i16::from_be_bytes([t[0], t[1]])),
        Some(
            GROUP_METADATA
                | MEMBER_METADATA
                | TARGET_ASSIGNMENT_METADATA
                | TARGET_ASSIGNMENT_MEMBER
                | CURRENT_MEMBER_ASSIGNMENT
                | REGULAR_EXPRESSION
        )
    )
}

/// The group and what a consumer group record's key names; an error for any other key.
pub fn decode_key(key: &[u8]) -> Result<(String, RecordKey), String> {
    let mut r = Reader(key);
    let record_type = r.i16("record type")?;
    let group = r.short_string("group id")?;
    let named = match record_type {
        GROUP_METADATA => RecordKey::GroupMetadata,
        TARGET_ASSIGNMENT_METADATA => RecordKey::TargetAssignmentMetadata,
        MEMBER_METADATA => RecordKey::MemberMetadata(r.short_string("member id")?),
        TARGET_ASSIGNMENT_MEMBER => RecordKey::TargetAssignmentMember(r.short_string("member id")?),
        CURRENT_MEMBER_ASSIGNMENT => {
            RecordKey::CurrentMemberAssignment(r.short_string("member id")?)
        }
        REGULAR_EXPRESSION => RecordKey::RegularExpression(r.short_string("regex")?),
        other => return Err(format!("record type {other} is not a consumer group's")),
    };
    r.end("key")?;
    Ok((group, named))
}

/// `ConsumerGroupMetadataValue`: the group epoch and (tag 0) the hash of the subscribed
/// topics' metadata the epoch was computed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub epoch: i32,
    pub metadata_hash: i64,
}

/// `ConsumerGroupMemberMetadataValue`; `classic` is its `ClassicMemberMetadata` (tag 0),
/// present for a member that speaks the classic protocol in the group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadataValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub classic: Option<ClassicMemberValue>,
}

/// `ClassicMemberMetadata`: the classic session timeout and the member's JoinGroup
/// protocols, (name, metadata) in its order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberValue {
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, Vec<u8>)>,
}

/// `ConsumerGroupCurrentMemberAssignmentValue`; `state` is Kafka's `MemberState` value
/// (0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS). `assignment_epochs` is
/// the tag (0) of each topic's entry: the epoch at which each partition was assigned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: i8,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
    pub assignment_epochs: AssignmentEpochs,
}

/// The assignment epoch of each (topic id, partition).
pub type AssignmentEpochs = std::collections::BTreeMap<(Uuid, i32), i32>;

/// `ConsumerGroupRegularExpressionValue`: the topics a regex resolved to, the metadata
/// version they were resolved at, and when.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegexValue {
    pub topics: Vec<String>,
    pub version: i64,
    pub timestamp_ms: i64,
}

pub fn group_metadata_value(v: &GroupMetadataValue) -> Vec<u8> {
    let mut w = FlexWriter::new();
    w.i32(v.epoch);
    // Tagged fields: MetadataHash (tag 0, int64).
    w.uvarint(1);
    w.uvarint(0);
    w.uvarint(8);
    w.i64(v.metadata_hash);
    w.0
}

pub fn decode_group_metadata_value(value: &[u8]) -> Result<GroupMetadataValue, String> {
    let mut r = Reader::value(value)?;
    let epoch = r.i32("epoch")?;
    let mut metadata_hash = 0;
    r.tagged_fields(|tag, data| {
        if tag == 0 {
            metadata_hash = Reader(data).i64("metadata hash")?;
        }
        Ok(())
    })?;
    r.end("group metadata value")?;
    Ok(GroupMetadataValue {
        epoch,
        metadata_hash,
    })
}

pub fn member_metadata_value(v: &MemberMetadataValue) -> Vec<u8> {
    let mut w = FlexWriter::new();
    w.nullable_string(v.instance_id.as_deref())
        .nullable_string(v.rack_id.as_deref())
        .string(&v.client_id)
        .string(&v.client_host);
    w.uvarint(v.subscribed_topic_names.len() as u64 + 1);
    for name in &v.subscribed_topic_names {
        w.string(name);
    }
    w.nullable_string(v.subscribed_topic_regex.as_deref())
        .i32(v.rebalance_timeout_ms)
        .nullable_string(v.server_assignor.as_deref());
    match &v.classic {
        None => {
            w.uvarint(0);
        }
        Some(classic) => {
            // A nullable struct in a tag: its presence byte (1), then the struct.
            let mut s = FlexWriter(Vec::new());
            s.uvarint(1).i32(classic.session_timeout_ms);
            s.uvarint(classic.protocols.len() as u64 + 1);
            for (name, metadata) in &classic.protocols {
                s.string(name).compact_bytes(metadata).uvarint(0);
            }
            s.uvarint(0);
            w.uvarint(1).uvarint(0).uvarint(s.0.len() as u64);
            w.0.extend_from_slice(&s.0);
        }
    }
    w.0
}

fn decode_classic_member(data: &[u8]) -> Result<Option<ClassicMemberValue>, String> {
    let mut r = Reader(data);
    if r.uvarint("classic member presence")? == 0 {
        return Ok(None);
    }
    let session_timeout_ms = r.i32("classic session timeout")?;
    let protocols = r.compact_array("classic protocols", |r| {
        let name = r.compact_string("protocol name")?;
        let metadata = r.compact_bytes("protocol metadata")?;
        r.tagged_fields(|_, _| Ok(()))?;
        Ok((name, metadata))
    })?;
    r.tagged_fields(|_, _| Ok(()))?;
    r.end("classic member metadata")?;
    Ok(Some(ClassicMemberValue {
        session_timeout_ms,
        protocols,
    }))
}

pub fn decode_member_metadata_value(value: &[u8]) -> Result<MemberMetadataValue, String> {
    let mut r = Reader::value(value)?;
    let v = MemberMetadataValue {
        instance_id: r.compact_nullable_string("instance id")?,
        rack_id: r.compact_nullable_string("rack id")?,
        client_id: r.compact_string("client id")?,
        client_host: r.compact_string("client host")?,
        subscribed_topic_names: r
            .compact_array("subscribed topics", |r| r.compact_string("topic"))?,
        subscribed_topic_regex: r.compact_nullable_string("regex")?,
        rebalance_timeout_ms: r.i32("rebalance timeout")?,
        server_assignor: r.compact_nullable_string("server assignor")?,
        classic: None,
    };
    let mut classic = None;
    r.tagged_fields(|tag, data| {
        if tag == 0 {
            classic = decode_classic_member(data)?;
        }
        Ok(())
    })?;
    r.end("member metadata value")?;
    Ok(MemberMetadataValue { classic, ..v })
}

pub fn target_assignment_metadata_value(assignment_epoch: i32) -> Vec<u8> {
    let mut w = FlexWriter::new();
    w.i32(assignment_epoch);
    w.uvarint(0);
    w.0
}

pub fn decode_target_assignment_metadata_value(value: &[u8]) -> Result<i32, String> {
    let mut r = Reader::value(value)?;
    let epoch = r.i32("assignment epoch")?;
    r.tagged_fields(|_, _| Ok(()))?;
    r.end("target assignment metadata value")?;
    Ok(epoch)
}

pub fn target_assignment_member_value(partitions: &Assignment) -> Vec<u8> {
    let mut w = FlexWriter::new();
    w.assignment(partitions);
    w.uvarint(0);
    w.0
}

pub fn decode_target_assignment_member_value(value: &[u8]) -> Result<Assignment, String> {
    let mut r = Reader::value(value)?;
    let partitions = r.assignment("target partitions")?;
    r.tagged_fields(|_, _| Ok(()))?;
    r.end("target assignment member value")?;
    Ok(partitions)
}

pub fn current_assignment_value(v: &CurrentAssignmentValue) -> Vec<u8> {
    let mut w = FlexWriter::new();
    w.i32(v.member_epoch).i32(v.previous_member_epoch);
    w.0.push(v.state as u8);
    w.assignment_with_epochs(&v.assigned, Some(&v.assignment_epochs));
    w.assignment_with_epochs(&v.pending_revocation, Some(&v.assignment_epochs));
    w.uvarint(0);
    w.0
}

pub fn decode_current_assignment_value(value: &[u8]) -> Result<CurrentAssignmentValue, String> {
    let mut r = Reader::value(value)?;
    let mut assignment_epochs = AssignmentEpochs::new();
    let v = CurrentAssignmentValue {
        member_epoch: r.i32("member epoch")?,
        previous_member_epoch: r.i32("previous member epoch")?,
        state: r.take(1, "state")?[0] as i8,
        assigned: r.assignment_with_epochs("assigned partitions", &mut assignment_epochs)?,
        pending_revocation: r
            .assignment_with_epochs("partitions pending revocation", &mut assignment_epochs)?,
        assignment_epochs,
    };
    r.tagged_fields(|_, _| Ok(()))?;
    r.end("current member assignment value")?;
    Ok(v)
}

pub fn regex_value(v: &RegexValue) -> Vec<u8> {
    let mut w = FlexWriter::new();
    w.uvarint(v.topics.len() as u64 + 1);
    for topic in &v.topics {
        w.string(topic);
    }
    w.i64(v.version).i64(v.timestamp_ms);
    w.uvarint(0);
    w.0
}

pub fn decode_regex_value(value: &[u8]) -> Result<RegexValue, String> {
    let mut r = Reader::value(value)?;
    let v = RegexValue {
        topics: r.compact_array("topics", |r| r.compact_string("topic"))?,
        version: r.i64("version")?,
        timestamp_ms: r.i64("timestamp")?,
    };
    r.tagged_fields(|_, _| Ok(()))?;
    r.end("regular expression value")?;
    Ok(v)
}

/// An `int16`-length string (keys are not flexible); cut at Kafka's limit rather than
/// written with a wrong length.
fn put_short_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(i16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as i16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// The flexible encoding's writer, starting with the value version.
struct FlexWriter(Vec<u8>);

impl FlexWriter {
    fn new() -> FlexWriter {
        FlexWriter(VALUE_VERSION.to_be_bytes().to_vec())
    }
    fn uvarint(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn string(&mut self, s: &str) -> &mut Self {
        self.uvarint(s.len() as u64 + 1);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn compact_bytes(&mut self, b: &[u8]) -> &mut Self {
        self.uvarint(b.len() as u64 + 1);
        self.0.extend_from_slice(b);
        self
    }
    fn nullable_string(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.string(s),
            None => self.uvarint(0),
        }
    }
    /// `[]TopicPartitions`: topic id, compact `[]int32`, no tagged fields.
    fn assignment(&mut self, a: &Assignment) -> &mut Self {
        self.assignment_with_epochs(a, None)
    }

    /// `[]TopicPartitions` with, given `epochs`, each topic's `AssignmentEpochs` tag (0):
    /// a compact `[]int32` parallel to its partitions.
    fn assignment_with_epochs(
        &mut self,
        a: &Assignment,
        epochs: Option<&AssignmentEpochs>,
    ) -> &mut Self {
        let topics: Vec<_> = a.iter().filter(|(_, ps)| !ps.is_empty()).collect();
        self.uvarint(topics.len() as u64 + 1);
        for (topic, partitions) in topics {
            self.0.extend_from_slice(topic.as_bytes());
            self.uvarint(partitions.len() as u64 + 1);
            for p in partitions {
                self.i32(*p);
            }
            match epochs {
                None => {
                    self.uvarint(0);
                }
                Some(epochs) => {
                    let mut tag = FlexWriter(Vec::new());
                    tag.uvarint(partitions.len() as u64 + 1);
                    for p in partitions {
                        tag.i32(epochs.get(&(*topic, *p)).copied().unwrap_or(-1));
                    }
                    self.uvarint(1).uvarint(0).uvarint(tag.0.len() as u64);
                    self.0.extend_from_slice(&tag.0);
                }
            }
        }
        self
    }
}

/// Reads keys (non-flexible) and values (flexible); every read checks what is left, and
/// no count read from the input allocates more than the input could hold.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// A value's reader past its version, which must be 0.
    fn value(value: &'a [u8]) -> Result<Reader<'a>, String> {
        let mut r = Reader(value);
        match r.i16("value version")? {
            VALUE_VERSION => Ok(r),
            v => Err(format!("value version {v} is not supported")),
        }
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("{what}: needs {n} bytes, {} left", self.0.len()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn end(&self, what: &str) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{what}: {} trailing bytes", self.0.len()))
        }
    }
    fn i16(&mut self, what: &str) -> Result<i16, String> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self, what: &str) -> Result<i32, String> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4, what)?);
        Ok(i32::from_be_bytes(a))
    }
    fn i64(&mut self, what: &str) -> Result<i64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(a))
    }
    fn uvarint(&mut self, what: &str) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1, what)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("{what}: varint too long"))
    }
    fn utf8(bytes: &[u8], what: &str) -> Result<String, String> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| format!("{what}: not UTF-8: {e}"))
    }
    fn short_string(&mut self, what: &str) -> Result<String, String> {
        let len = usize::try_from(self.i16(what)?).map_err(|_| format!("{what}: null"))?;
        let bytes = self.take(len, what)?;
        Reader::utf8(bytes, what)
    }
    /// A compact length: `None` for null (0), else the length.
    fn compact_len(&mut self, what: &str) -> Result<Option<usize>, String> {
        match self.uvarint(what)? {
            0 => Ok(None),
            n => {
                let len = usize::try_from(n - 1).map_err(|_| format!("{what}: too long"))?;
                if len > self.0.len() {
                    return Err(format!(
                        "{what}: {len} more than the {} bytes left",
                        self.0.len()
                    ));
                }
                Ok(Some(len))
            }
        }
    }
    fn compact_nullable_string(&mut self, what: &str) -> Result<Option<String>, String> {
        match self.compact_len(what)? {
            None => Ok(None),
            Some(len) => Reader::utf8(self.take(len, what)?, what).map(Some),
        }
    }
    fn compact_bytes(&mut self, what: &str) -> Result<Vec<u8>, String> {
        match self.compact_len(what)? {
            None => Err(format!("{what}: null where bytes are required")),
            Some(len) => Ok(self.take(len, what)?.to_vec()),
        }
    }
    fn compact_string(&mut self, what: &str) -> Result<String, String> {
        self.compact_nullable_string(what)?
            .ok_or_else(|| format!("{what}: null where a string is required"))
    }
    fn compact_array<T>(
        &mut self,
        what: &str,
        item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        self.compact_nullable_array(what, item)?
            .ok_or_else(|| format!("{what}: null array"))
    }
    fn compact_nullable_array<T>(
        &mut self,
        what: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Option<Vec<T>>, String> {
        // Every item takes at least one byte, so the length bounds the allocation.
        let Some(len) = self.compact_len(what)? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(len);
        for _ in 0..len {
            out.push(item(self)?);
        }
        Ok(Some(out))
    }
    fn assignment(&mut self, what: &str) -> Result<Assignment, String> {
        self.assignment_with_epochs(what, &mut AssignmentEpochs::new())
    }

    /// `[]TopicPartitions`, adding each partition's assignment epoch (tag 0) to `epochs`
    /// where the tag is present and as long as its partitions.
    fn assignment_with_epochs(
        &mut self,
        what: &str,
        epochs: &mut AssignmentEpochs,
    ) -> Result<Assignment, String> {
        let topics = self.compact_array(what, |r| {
            let id = Uuid::from_bytes(
                r.take(16, "topic id")?
                    .try_into()
                    .map_err(|_| "topic id".to_owned())?,
            );
            let partitions = r.compact_array("partitions", |r| r.i32("partition"))?;
            let mut tagged_epochs = None;
            r.tagged_fields(|tag, data| {
                if tag == 0 {
                    tagged_epochs = Reader(data)
                        .compact_nullable_array("assignment epochs", |r| r.i32("epoch"))?;
                }
                Ok(())
            })?;
            Ok((id, partitions, tagged_epochs))
        })?;
        let mut out = Assignment::new();
        for (id, partitions, tagged_epochs) in topics {
            if let Some(list) = tagged_epochs.filter(|l| l.len() == partitions.len()) {
                for (p, e) in partitions.iter().zip(list) {
                    epochs.insert((id, *p), e);
                }
            }
            out.entry(id).or_default().extend(partitions);
        }
        Ok(out)
    }
    /// Tagged fields: a count, then (tag, size, bytes) each, handed to `f`.
    fn tagged_fields(
        &mut self,
        mut f: impl FnMut(u64, &[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        let count = self.uvarint("tagged field count")?;
        for _ in 0..count {
            let tag = self.uvarint("tag")?;
            let size = usize::try_from(self.uvarint("tag size")?)
                .map_err(|_| "tag size too large".to_owned())?;
            let data = self.take(size, "tagged field")?;
            f(tag, data)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn assignment(topic: u128, ps: &[i32]) -> Assignment {
        let mut a = Assignment::new();
        a.insert(
            Uuid::from_u128(topic),
            ps.iter().copied().collect::<BTreeSet<_>>(),
        );
        a
    }

    #[test]
    fn keys_round_trip_and_start_with_the_record_type() {
        for key in [
            RecordKey::GroupMetadata,
            RecordKey::MemberMetadata("m".into()),
            RecordKey::TargetAssignmentMetadata,
            RecordKey::TargetAssignmentMember("m".into()),
            RecordKey::CurrentMemberAssignment("m".into()),
            RecordKey::RegularExpression("^a.*".into()),
        ] {
            let bytes = key.encode("g");
            assert_eq!(i16::from_be_bytes([bytes[0], bytes[1]]), key.record_type());
            assert!(is_consumer_group_key(&bytes));
            assert_eq!(decode_key(&bytes), Ok(("g".to_owned(), key)));
        }
        // ConsumerGroupMetadataKey of "g": type 3, then the group as an int16 string.
        assert_eq!(RecordKey::GroupMetadata.encode("g"), vec![0, 3, 0, 1, b'g']);
        assert!(!is_consumer_group_key(&[0, 2, 0, 1, b'g']));
    }

    #[test]
    fn values_round_trip() {
        let g = GroupMetadataValue {
            epoch: 7,
            metadata_hash: -3,
        };
        assert_eq!(
            decode_group_metadata_value(&group_metadata_value(&g)),
            Ok(g)
        );
        let m = MemberMetadataValue {
            instance_id: Some("i".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["a".into(), "b".into()],
            subscribed_topic_regex: Some("x.*".into()),
            rebalance_timeout_ms: 30_000,
            server_assignor: Some("range".into()),
            classic: None,
        };
        assert_eq!(
            decode_member_metadata_value(&member_metadata_value(&m)),
            Ok(m.clone())
        );
        let classic = MemberMetadataValue {
            classic: Some(ClassicMemberValue {
                session_timeout_ms: 10_000,
                protocols: vec![
                    ("range".into(), vec![0, 3, 1]),
                    ("cooperative-sticky".into(), vec![]),
                ],
            }),
            ..m
        };
        assert_eq!(
            decode_member_metadata_value(&member_metadata_value(&classic)),
            Ok(classic)
        );
        assert_eq!(
            decode_target_assignment_metadata_value(&target_assignment_metadata_value(4)),
            Ok(4)
        );
        let a = assignment(9, &[0, 2]);
        assert_eq!(
            decode_target_assignment_member_value(&target_assignment_member_value(&a)),
            Ok(a.clone())
        );
        let c = CurrentAssignmentValue {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: 1,
            assigned: a,
            pending_revocation: assignment(10, &[1]),
            assignment_epochs: [
                ((Uuid::from_u128(9), 0), 3),
                ((Uuid::from_u128(9), 2), 5),
                ((Uuid::from_u128(10), 1), 2),
            ]
            .into_iter()
            .collect(),
        };
        assert_eq!(
            decode_current_assignment_value(&current_assignment_value(&c)),
            Ok(c)
        );
        let r = RegexValue {
            topics: vec!["t1".into()],
            version: 12,
            timestamp_ms: 99,
        };
        assert_eq!(decode_regex_value(&regex_value(&r)), Ok(r));
    }

    #[test]
    fn the_target_metadata_value_is_kafkas_bytes() {
        // Version 0, AssignmentEpoch 1, no tagged fields.
        assert_eq!(
            target_assignment_metadata_value(1),
            vec![0, 0, 0, 0, 0, 1, 0]
        );
    }

    #[test]
    fn truncated_or_hostile_input_is_an_error_not_a_panic() {
        let value = current_assignment_value(&CurrentAssignmentValue {
            assigned: assignment(1, &[0, 1, 2]),
            ..Default::default()
        });
        for cut in 0..value.len() {
            assert!(decode_current_assignment_value(&value[..cut]).is_err());
        }
        // An array count far beyond the input allocates nothing.
        let hostile = [0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(decode_target_assignment_member_value(&hostile).is_err());
        assert!(decode_key(&[0, 5, 0, 1]).is_err());
        assert!(decode_key(&[0, 2, 0, 1, b'g']).is_err());
    }
}
