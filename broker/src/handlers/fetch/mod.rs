//! Fetch: whole record batches served as stored bytes, never decoded. Split by concern:
//!
//! - here, the request and the response: who fetches (a consumer, or a follower by its
//!   replica id and broker epoch), the partitions wanted, their answers in request order;
//! - `session`: incremental fetch sessions (KIP-227);
//! - `wait`: the long poll — fewer than `min_bytes` gathered waits on the partitions
//!   (`partition::delayed`) until an append wakes it or `max_wait_ms` passes;
//! - `plan`: per partition, the checks (leadership, epochs) and the planned read
//!   (`Partition::plan_read`: up to the high watermark, the last stable offset for
//!   read_committed, the log end for followers);
//! - `read`: the reads, zero-copy where the bytes allow (`sendfile` of record sets left in
//!   their segment files);
//! - `follower`: a follower's fetch recorded on the leader's `Partition` (its log end
//!   offset, divergence).

use std::time::Duration;

use brook_protocol::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, NodeEndpoint,
};
use brook_protocol::kafka_protocol::messages::{
    FetchRequest, FetchResponse, ResponseKind, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::handlers::{leader_hint, Reply};
use crate::metrics;
use crate::server::session::Session;
use crate::server::write::FileChunk;
use session::SessionPartition;

mod follower;
mod leader_throttle;
mod plan;
mod read;
pub mod session;
mod wait;

/// Longest a fetch waits for `min_bytes`, whatever the client asks.
const MAX_WAIT: Duration = Duration::from_secs(30);

pub(super) struct Wanted {
    pub(super) key: SessionPartition,
    pub(super) fetch_offset: i64,
    pub(super) partition_max_bytes: i32,
    /// KIP-320's `current_leader_epoch` (-1: unchecked).
    pub(super) current_leader_epoch: i32,
    /// A follower's epoch of its last batch (v12+; -1: none), for divergence detection.
    pub(super) last_fetched_epoch: i32,
    /// The session may not read it (answered TOPIC_AUTHORIZATION_FAILED, nothing read).
    pub(super) denied: bool,
}

/// Who fetches: a consumer (id -1) or a follower broker and the broker epoch of its
/// registration (v15's `ReplicaState`; -1 before); and whether a consumer reads only
/// committed transactional data (`isolation_level` 1: up to the last stable offset).
#[derive(Debug, Clone, Copy)]
pub(super) struct Replica {
    pub(super) id: i32,
    pub(super) epoch: i64,
    pub(super) read_committed: bool,
}

pub async fn handle(broker: &Broker, session: &Session, req: FetchRequest, version: i16) -> Reply {
    let by_id = version >= 13;
    let read_committed = req.isolation_level == 1;
    // A follower names itself: `ReplicaState` (with its broker epoch) from v15,
    // `replica_id` before.
    let replica = if version >= 15 {
        Replica {
            id: req.replica_state.replica_id.0,
            epoch: req.replica_state.replica_epoch,
            read_committed,
        }
    } else {
        Replica {
            id: req.replica_id.0,
            epoch: -1,
            read_committed,
        }
    };
    let image = broker.image();
    let key_of = |name: &TopicName, id: &uuid::Uuid, partition: i32| {
        let topic = if by_id {
            image.topic_name(id).unwrap_or_default().to_string()
        } else {
            name.to_string()
        };
        SessionPartition {
            topic,
            topic_id: if by_id { *id } else { uuid::Uuid::nil() },
            partition,
        }
    };
    let asked: Vec<Wanted> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| Wanted {
                    key: key_of(&t.topic, &t.topic_id, p.partition),
                    fetch_offset: p.fetch_offset,
                    partition_max_bytes: p.partition_max_bytes,
                    current_leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: p.last_fetched_epoch,
                    denied: false,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let forgotten: Vec<SessionPartition> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| key_of(&t.topic, &t.topic_id, p))
                .collect::<Vec<_>>()
        })
        .collect();

    let (session_id, incremental, mut wanted) =
        match session::resolve(&broker.fetch_sessions, &req, by_id, asked, forgotten) {
            Ok(resolved) => resolved,
            Err(code) => {
                return ResponseKind::Fetch(FetchResponse::default().with_error_code(code.code()))
                    .into()
            }
        };

    // Kafka's handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster, a
    // consumer READ on each topic; refused partitions are TOPIC_AUTHORIZATION_FAILED.
    let access = Access::new(broker, session);
    let follower_allowed = replica.id >= 0 && access.cluster(AclOperation::ClusterAction);
    for w in &mut wanted {
        w.denied = if replica.id >= 0 {
            !follower_allowed
        } else {
            !w.key.topic.is_empty() && !access.topic(AclOperation::Read, &w.key.topic)
        };
    }
    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT);
    let deadline = Instant::now() + wait;
    // Kafka caps min_bytes at the response's byte limit (`KafkaApis.handleFetchRequest`).
    let min_bytes = req.min_bytes.max(0).min(req.max_bytes.max(0)) as usize;
    let limits = wait::Limits {
        deadline,
        min_bytes,
        max_bytes: req.max_bytes.max(0) as usize,
    };
    let (slots, files) = wait::gather(broker, &wanted, replica, limits).await;
    let results = wanted
        .iter()
        .zip(slots)
        .zip(files)
        .filter_map(|((w, data), f)| data.map(|d| (w.key.clone(), d, f)));
    let mut sent_files = Vec::new();

    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut hinted_leaders = std::collections::BTreeSet::new();
    for (key, mut data, in_files) in results {
        if data.current_leader.leader_id.0 >= 0 {
            hinted_leaders.insert(data.current_leader.leader_id.0);
        }
        // read_uncommitted answers null (Kafka's `FetchResponse`); read_committed the
        // aborted transactions `prepare` collected.
        if !read_committed {
            data.aborted_transactions = None;
        }
        let has_records = data.records.as_ref().is_some_and(|r| !r.is_empty());
        if session_id != 0 {
            let changed = broker.fetch_sessions.record_sent(
                session_id,
                &key,
                data.high_watermark,
                data.log_start_offset,
            );
            if incremental && !has_records && !changed && data.error_code == 0 {
                continue;
            }
        }
        if let Some(records) = &data.records {
            metrics::record_fetch(&key.topic, records.len());
            if let Some(in_files) = in_files {
                sent_files.push((records.clone(), FileChunk(in_files)));
            }
        }
        let same_topic = topics.last().is_some_and(|t| {
            if by_id {
                t.topic_id == key.topic_id
            } else {
                t.topic.0.as_str() == key.topic
            }
        });
        if !same_topic {
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_string(key.topic.clone())))
                    .with_topic_id(key.topic_id),
            );
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(data);
        }
    }
    let mut response = FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(topics);
    if version >= 16 && !hinted_leaders.is_empty() {
        let image = broker.image();
        let endpoints = leader_hint::endpoints(&image, hinted_leaders)
            .map(|b| {
                let (id, host, port, rack) = super::leader_hint::endpoint_fields(b);
                NodeEndpoint::default()
                    .with_node_id(id)
                    .with_host(host)
                    .with_port(port)
                    .with_rack(rack)
            })
            .collect();
        response = response.with_node_endpoints(endpoints);
    }
    Reply {
        body: ResponseKind::Fetch(response),
        files: sent_files,
    }
}
