//! The classic protocol's embedded consumer protocol (Kafka's `ConsumerProtocol`): the
//! `ConsumerProtocolSubscription` a classic member sends in its JoinGroup metadata and
//! the `ConsumerProtocolAssignment` it gets from SyncGroup, each an `int16` version
//! followed by the message in that version. The coordinator reads them when a classic
//! member is in (or is converted into) a consumer group, and writes the assignment it
//! computed for it. As Kafka's `ConsumerProtocol` does, a version newer than the newest
//! known one is read as the newest (the formats only add fields).
//!
//! Pure: no I/O; decoding never trusts its input.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition as AssignedTopic,
};
use brook_protocol::kafka_protocol::messages::ConsumerProtocolSubscription;
use brook_protocol::kafka_protocol::messages::TopicName;
use brook_protocol::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use bytes::{Buf, Bytes, BytesMut};

use super::assignor::TopicMeta;
use super::member::Assignment;

/// The newest `ConsumerProtocolSubscription` / `ConsumerProtocolAssignment` version.
const HIGHEST: i16 = 3;

/// Partitions by topic name, as the embedded protocol carries them.
pub type NamedPartitions = Vec<(String, Vec<i32>)>;

/// What the coordinator uses of a subscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    pub version: i16,
    pub topics: Vec<String>,
    /// (topic name, partitions) the member says it owns (v1+; eager members send none).
    pub owned: NamedPartitions,
    pub rack_id: Option<String>,
}

/// A subscription from JoinGroup metadata; `None` if it cannot be read.
pub fn decode_subscription(metadata: &[u8]) -> Option<Subscription> {
    let mut buf = Bytes::copy_from_slice(metadata);
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    if version < 0 {
        return None;
    }
    let s = ConsumerProtocolSubscription::decode(&mut buf, version.min(HIGHEST)).ok()?;
    Some(Subscription {
        version,
        topics: s.topics.iter().map(|t| t.to_string()).collect(),
        owned: s
            .owned_partitions
            .iter()
            .map(|tp| (tp.topic.to_string(), tp.partitions.clone()))
            .collect(),
        rack_id: s.rack_id.as_ref().map(|r| r.to_string()),
    })
}

/// An assignment as SyncGroup carried it: (topic name, partitions) and whether it carried
/// user data (a custom assignor's, which a server-side assignment would lose). Empty
/// bytes are the empty assignment. `None` if it cannot be read.
pub fn decode_assignment(bytes: &[u8]) -> Option<(NamedPartitions, bool)> {
    if bytes.is_empty() {
        return Some((Vec::new(), false));
    }
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    if version < 0 {
        return None;
    }
    let a = ConsumerProtocolAssignment::decode(&mut buf, version.min(HIGHEST)).ok()?;
    let user_data = a.user_data.as_ref().is_some_and(|d| !d.is_empty());
    let partitions = a
        .assigned_partitions
        .iter()
        .map(|tp| (tp.topic.to_string(), tp.partitions.clone()))
        .collect();
    Some((partitions, user_data))
}

/// `assignment` (by topic id) as SyncGroup hands it to a classic member, in `version` (its
/// subscription's), topics named from `topics`; a topic no longer known is left out.
pub fn encode_assignment(
    assignment: &Assignment,
    topics: &BTreeMap<String, TopicMeta>,
    version: i16,
) -> Bytes {
    let version = version.clamp(0, HIGHEST);
    let names: BTreeMap<uuid::Uuid, &str> = topics
        .iter()
        .map(|(name, meta)| (meta.topic_id, name.as_str()))
        .collect();
    let assigned_partitions = assignment
        .iter()
        .filter_map(|(id, partitions)| {
            let name = names.get(id)?;
            Some(
                AssignedTopic::default()
                    .with_topic(TopicName(StrBytes::from_string((*name).to_owned())))
                    .with_partitions(partitions.iter().copied().collect()),
            )
        })
        .collect();
    let message =
        ConsumerProtocolAssignment::default().with_assigned_partitions(assigned_partitions);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&version.to_be_bytes());
    // Encoding a message built here cannot fail; an empty assignment is the fallback.
    if message.encode(&mut buf, version).is_err() {
        return Bytes::new();
    }
    buf.freeze()
}

/// (topic name, partitions) as an assignment by topic id; unknown topics are left out.
pub fn by_topic_id(
    partitions: &[(String, Vec<i32>)],
    topics: &BTreeMap<String, TopicMeta>,
) -> Assignment {
    let mut out = Assignment::new();
    for (name, ps) in partitions {
        if let Some(meta) = topics.get(name) {
            out.entry(meta.topic_id).or_default().extend(
                ps.iter()
                    .copied()
                    .filter(|p| (0..meta.partitions).contains(p)),
            );
        }
    }
    super::member::normalized(out)
}

#[cfg(test)]
mod tests {
    use brook_protocol::kafka_protocol::messages::consumer_protocol_subscription::TopicPartition;

    use super::*;

    fn topics() -> BTreeMap<String, TopicMeta> {
        BTreeMap::from([(
            "t".to_owned(),
            TopicMeta {
                topic_id: uuid::Uuid::from_u128(3),
                partitions: 6,
            },
        )])
    }

    #[test]
    fn a_subscription_with_owned_partitions_and_rack_is_read() {
        let s = ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("t")])
            .with_owned_partitions(vec![TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![1, 4])])
            .with_rack_id(Some(StrBytes::from_static_str("r1")));
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&3i16.to_be_bytes());
        s.encode(&mut buf, 3).expect("encode");
        let read = decode_subscription(&buf).expect("decoded");
        assert_eq!(read.topics, vec!["t".to_owned()]);
        assert_eq!(read.owned, vec![("t".to_owned(), vec![1, 4])]);
        assert_eq!(read.rack_id.as_deref(), Some("r1"));
        assert_eq!(
            by_topic_id(&read.owned, &topics()),
            Assignment::from([(uuid::Uuid::from_u128(3), [1, 4].into())])
        );
        assert_eq!(decode_subscription(&[0]), None);
    }

    #[test]
    fn an_assignment_round_trips_by_topic_name() {
        let a = Assignment::from([(uuid::Uuid::from_u128(3), [0, 5].into())]);
        let bytes = encode_assignment(&a, &topics(), 1);
        assert_eq!(&bytes[..2], &[0, 1]);
        let (read, user_data) = decode_assignment(&bytes).expect("decoded");
        assert!(!user_data);
        assert_eq!(by_topic_id(&read, &topics()), a);
        assert_eq!(decode_assignment(&[]), Some((Vec::new(), false)));
    }
}
