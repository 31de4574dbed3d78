//! Transaction markers: the COMMIT or ABORT control batch that ends a transaction in
//! each of its partitions.
//!
//! [`write_local`] is the one place a marker is appended, used both by this broker's
//! coordinator for partitions it leads and by the WriteTxnMarkers handler for other
//! coordinators (and `kafka-transactions.sh abort`). The leader appends one control batch
//! (attributes transactional | control, the transaction's producer id and epoch, base
//! sequence -1, one record with key `int16 0, int16 type` and value `int16 0, int32
//! coordinator epoch`: Kafka's `EndTransactionMarker`) with its own leader epoch, waits
//! for the high watermark to pass it (markers are written with acks=all), and on a
//! `__consumer_offsets` partition hands the outcome to the group coordinator, which then
//! applies or drops the transaction's offsets.
//!
//! [`write_all`] is the coordinator side: local partitions in-process, the others through
//! a WriteTxnMarkers request to their leader. Partitions of deleted topics count as done.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use brook_protocol::kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use brook_protocol::kafka_protocol::messages::{
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::records::{Record, TimestampType};
use bytes::{Bytes, BytesMut};
use futures_util::future::join_all;
use tracing::{debug, warn};

use super::state::TopicPartition;
use crate::coordinator::group::records::OFFSETS_TOPIC;
use crate::coordinator::handles::CoordinatorHandles;
use crate::coordinator::writer::{Durability, WriteError};
use crate::error::BrokerError;
use crate::replication::client::PeerConnection;

/// How long a marker waits for the ISR (Kafka's coordinator uses `request.timeout.ms`).
const MARKER_TIMEOUT: Duration = Duration::from_secs(30);
/// The WriteTxnMarkers version every Kafka broker since 2.8 serves.
const WRITE_TXN_MARKERS_VERSION: i16 = 1;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The control record types of `ControlRecordType`.
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// One transaction's end, as every partition of it records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    /// The leader epoch of the coordinator's `__transaction_state` partition: lets a
    /// partition refuse markers from a coordinator that has been replaced.
    pub coordinator_epoch: i32,
}

/// The control batch of `marker` (uncompressed, base offset 0: the log stamps it).
pub fn encode(marker: &Marker, now_ms: i64) -> Result<BytesMut, BrokerError> {
    let kind = if marker.commit { COMMIT } else { ABORT };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: marker.producer_id,
        producer_epoch: marker.producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now_ms,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(value)),
        headers: Default::default(),
    };
    crate::coordinator::encode_uncompressed_batch(std::slice::from_ref(&record))
        .map_err(|e| BrokerError::ServerFault(format!("encoding a transaction marker: {e}")))
}

/// Appends `marker` to `topic`-`partition`, which this broker must lead, and waits until
/// it is replicated; then completes the transaction's offsets on `__consumer_offsets`.
pub async fn write_local(
    cx: &CoordinatorHandles<'_>,
    topic: &str,
    partition: i32,
    marker: &Marker,
) -> Result<(), BrokerError> {
    let now_ms = brook_storage::log_manager::now_ms();
    let batch = encode(marker, now_ms)?;
    cx.writer
        .write(
            topic,
            partition,
            None,
            batch,
            Durability::Replicated,
            MARKER_TIMEOUT,
            cx.stopping,
        )
        .await
        .map_err(marker_error)?;
    if topic == OFFSETS_TOPIC {
        cx.groups
            .complete_transaction(partition, marker.producer_id, marker.commit)
            .await?;
    }
    Ok(())
}

/// WriteTxnMarkers' answers: the leader's own error, or the wait's as an acks=all
/// produce's (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT).
fn marker_error(e: WriteError) -> BrokerError {
    match e {
        WriteError::Partition(e) => e,
        WriteError::NotCommitted(e) => BrokerError::NotReplicated(e),
        // Not reached: markers are written at whatever epoch this broker leads.
        WriteError::EpochChanged { expected, current } => BrokerError::FencedLeaderEpoch {
            requested: expected,
            current,
        },
    }
}

/// Writes `marker` to every partition in `partitions`; returns those still to do (the
/// caller retries them after a pause). Partitions whose topic is gone are done.
pub async fn write_all(
    cx: &CoordinatorHandles<'_>,
    marker: &Marker,
    partitions: &BTreeSet<TopicPartition>,
) -> BTreeSet<TopicPartition> {
    let image = cx.image();
    let mut by_leader: BTreeMap<i32, Vec<&TopicPartition>> = BTreeMap::new();
    let mut left = BTreeSet::new();
    for tp in partitions {
        match image.partition(&tp.0, tp.1) {
            None => debug!(topic = %tp.0, partition = tp.1, "no marker for a deleted partition"),
            Some(p) if p.has_leader() && image.is_active(p.leader) => {
                by_leader.entry(p.leader).or_default().push(tp)
            }
            Some(_) => {
                left.insert(tp.clone());
            }
        }
    }
    // Every leader at once, and every local partition at once (Kafka keeps one marker
    // channel per destination cx): the transaction stays Prepare* until the slowest
    // one is replicated, and a producer's next transaction waits for that.
    let local = by_leader.remove(&cx.node_id).unwrap_or_default();
    let local = join_all(local.into_iter().map(|tp| async move {
        match write_local(cx, &tp.0, tp.1, marker).await {
            Ok(()) | Err(BrokerError::UnknownTopicOrPartition { .. }) => None,
            Err(e) => {
                debug!(topic = %tp.0, partition = tp.1, error = %e, "marker not written; retrying");
                Some(tp.clone())
            }
        }
    }));
    let remote = join_all(
        by_leader
            .iter()
            .map(|(leader, tps)| write_remote(cx, *leader, marker, tps)),
    );
    let (local, remote) = tokio::join!(local, remote);
    left.extend(local.into_iter().flatten());
    left.extend(remote.into_iter().flatten());
    left
}

/// Sends one WriteTxnMarkers request to `leader`; returns the partitions it did not take.
async fn write_remote(
    cx: &CoordinatorHandles<'_>,
    leader: i32,
    marker: &Marker,
    tps: &[&TopicPartition],
) -> Vec<TopicPartition> {
    let all = || tps.iter().map(|tp| (*tp).clone()).collect::<Vec<_>>();
    let image = cx.image();
    let Some(endpoint) = image.broker(leader) else {
        return all();
    };
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in tps {
        topics.entry(tp.0.as_str()).or_default().push(tp.1);
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(marker.producer_id))
            .with_producer_epoch(marker.producer_epoch)
            .with_transaction_result(marker.commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                            .with_partition_indexes(partitions)
                    })
                    .collect(),
            )]);
    let response: WriteTxnMarkersResponse = match PeerConnection::call_once(
        cx.peers,
        endpoint,
        CONNECT_TIMEOUT,
        ApiKey::WriteTxnMarkers,
        WRITE_TXN_MARKERS_VERSION,
        &request,
        MARKER_TIMEOUT + Duration::from_secs(5),
    )
    .await
    {
        Ok(response) => response,
        Err(e) => {
            debug!(leader, error = %e, "sending transaction markers failed; retrying");
            return all();
        }
    };
    let mut left = Vec::new();
    let mut answered = BTreeSet::new();
    for result in response.markers {
        for topic in result.topics {
            for p in topic.partitions {
                let tp = (topic.name.0.to_string(), p.partition_index);
                answered.insert(tp.clone());
                match p.error_code {
                    0 => {}
                    // The topic went away meanwhile: nothing to mark.
                    3 if image.partition(&tp.0, tp.1).is_none() => {}
                    // PRODUCER_FENCED-like refusals: a newer coordinator or epoch owns the
                    // producer; retrying cannot succeed (Kafka stops sending too).
                    47 | 52 => {
                        warn!(topic = %tp.0, partition = tp.1, code = p.error_code, "marker refused by the leader; giving up on it")
                    }
                    _ => left.push(tp),
                }
            }
        }
    }
    left.extend(
        tps.iter()
            .filter(|tp| !answered.contains(**tp))
            .map(|tp| (*tp).clone()),
    );
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_protocol::kafka_protocol::records::RecordBatchDecoder;

    #[test]
    fn a_marker_is_a_transactional_control_batch_with_kafkas_end_marker_record() {
        let marker = Marker {
            producer_id: 42,
            producer_epoch: 3,
            commit: true,
            coordinator_epoch: 7,
        };
        let bytes = encode(&marker, 1_000).expect("encodes");
        let header = brook_storage::batch::validate_batch(&bytes).expect("a valid batch");
        assert!(header.is_transactional() && header.is_control());
        assert_eq!(header.base_sequence, -1);
        let mut frozen = bytes.freeze();
        let sets = RecordBatchDecoder::decode_all(&mut frozen).expect("decodes");
        let record = &sets[0].records[0];
        assert!(record.control && record.transactional);
        assert_eq!((record.producer_id, record.producer_epoch), (42, 3));
        assert_eq!(record.key.as_deref(), Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(record.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 7][..]));
        let abort = encode(
            &Marker {
                commit: false,
                ..marker
            },
            1_000,
        )
        .expect("encodes");
        let mut frozen = abort.freeze();
        let sets = RecordBatchDecoder::decode_all(&mut frozen).expect("decodes");
        assert_eq!(sets[0].records[0].key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
    }
}
