//! Followers pull from leaders (Kafka's `ReplicaFetcherManager` / `ReplicaFetcherThread`).
//!
//! `run` follows the metadata image the replica manager has applied (never a newer one
//! from the quorum: the partitions' roles match the applied image): for every partition
//! this broker holds a replica of and another live broker leads, it assigns the partition
//! to the fetcher of that leader (one task and one connection per leader broker, on the
//! inter-broker listener with its security: `client`). A fetcher loops over Kafka Fetch v15
//! requests with this broker's replica id and epoch (`ReplicaState`), each partition at
//! its log end offset with the epoch of its last batch (`last_fetched_epoch`), and
//!
//! - appends what the leader returns as it is (`LogHandle::append_as_follower`: offsets,
//!   epochs and producer state kept), then takes the leader's high watermark (capped at
//!   its own LEO) and log start offset;
//! - on a `diverging_epoch` answer truncates to where its log and the leader's agree
//!   (Kafka's `getOffsetTruncationState`), then fetches again: a former leader drops the
//!   tail no ISR member replicated before it serves anything;
//! - on OFFSET_OUT_OF_RANGE asks the leader for its log bounds and truncates to its end,
//!   or starts over at its log start when the leader deleted what it lacks;
//! - on leadership errors waits for the image to move the partition elsewhere.
//!
//! The followed partitions' logs are the replica manager's (`ReplicaManager::get`): opened
//! when it applies the image that assigns them, looked up once per round. A partition is
//! fetched only while its role is "follower of this leader at this epoch", and its log is
//! written (append, truncation) only under `Partition::follower_write`, which checks that
//! role again and holds off role changes: an answer to a fetch sent before the partition
//! changed role is dropped, never written into a leader's log.
//!
//! Fetchers are owned here and drained on shutdown.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use brook_protocol::kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ReplicaState,
};
use brook_protocol::kafka_protocol::messages::fetch_response::PartitionData;
use brook_protocol::kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use brook_protocol::kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::MetadataImage;
use brook_storage::LogHandle;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::client::{PeerConnection, PeerError};
use super::throttle::{self, ReplicationQuota};
use crate::broker::Broker;
use crate::partition::{Partition, Role};

/// The Fetch version followers send: topic ids (v13), `ReplicaState` (v15).
const FETCH_VERSION: i16 = 15;
const LIST_OFFSETS_VERSION: i16 = 4;
/// A whole response's byte budget.
const MAX_RESPONSE_BYTES: i32 = 16 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause after a failed round (connection lost, every partition refused).
const BACKOFF: Duration = Duration::from_millis(200);

/// One followed partition: what the image says about its leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Followed {
    topic: String,
    topic_id: uuid::Uuid,
    partition: i32,
    leader_epoch: i32,
}

type Assignment = BTreeMap<(String, i32), Followed>;

/// The partitions each leader broker serves this broker as a follower.
fn assignments(image: &MetadataImage, node_id: i32) -> BTreeMap<i32, Assignment> {
    let mut out: BTreeMap<i32, Assignment> = BTreeMap::new();
    for topic in image.topics.values() {
        for p in topic.partitions.values() {
            if p.leader < 0 || p.leader == node_id || !p.replicas.contains(&node_id) {
                continue;
            }
            // A replica whose log directory failed is not followed: it must not catch up
            // into the ISR (the controller refuses it anyway) until the broker restarts.
            if !image.is_active(p.leader)
                || image.is_replica_offline(node_id, &topic.topic_id, p.partition)
            {
                continue;
            }
            out.entry(p.leader).or_default().insert(
                (topic.name.clone(), p.partition),
                Followed {
                    topic: topic.name.clone(),
                    topic_id: topic.topic_id,
                    partition: p.partition,
                    leader_epoch: p.leader_epoch,
                },
            );
        }
    }
    out
}

/// Keeps one fetcher per leader broker in step with the image until `shutdown`.
pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    let mut images = broker.replicas.subscribe_applied();
    let mut fetchers: HashMap<i32, (watch::Sender<Assignment>, CancellationToken)> = HashMap::new();
    let mut tasks = JoinSet::new();
    // One follower replication quota for the whole broker, as Kafka's.
    let quota = Arc::new(ReplicationQuota::default());
    loop {
        let image = images.borrow_and_update().clone();
        let mut wanted = assignments(&image, broker.node_id);
        fetchers.retain(|leader, (tx, stop)| match wanted.remove(leader) {
            Some(parts) => {
                tx.send_if_modified(|current| {
                    let changed = *current != parts;
                    *current = parts;
                    changed
                });
                true
            }
            None => {
                stop.cancel();
                false
            }
        });
        for (leader, parts) in wanted {
            let (tx, rx) = watch::channel(parts);
            let stop = shutdown.child_token();
            tasks.spawn(fetch_from(
                broker.clone(),
                leader,
                rx,
                stop.clone(),
                quota.clone(),
            ));
            fetchers.insert(leader, (tx, stop));
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = images.changed() => if changed.is_err() { break },
            // Reap finished fetchers so the set does not grow.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    for (_, (_, stop)) in fetchers.drain() {
        stop.cancel();
    }
    while tasks.join_next().await.is_some() {}
}

/// One fetcher: this broker following `leader` for the partitions in `assignment`.
async fn fetch_from(
    broker: Arc<Broker>,
    leader: i32,
    mut assignment: watch::Receiver<Assignment>,
    stop: CancellationToken,
    quota: Arc<ReplicationQuota>,
) {
    let mut connection: Option<PeerConnection> = None;
    debug!(leader, "fetcher started");
    while !stop.is_cancelled() {
        let parts = assignment.borrow_and_update().clone();
        if parts.is_empty() {
            tokio::select! {
                _ = stop.cancelled() => break,
                changed = assignment.changed() => if changed.is_err() { break },
            }
            continue;
        }
        let round = tokio::select! {
            _ = stop.cancelled() => break,
            round = fetch_round(&broker, leader, &parts, &mut connection, &mut assignment, &quota) => round,
        };
        if let Err(e) = round {
            if matches!(e, RoundError::Peer(_) | RoundError::Reassigned) {
                // A reassigned round left its response unread on the connection.
                connection = None;
            }
            if matches!(e, RoundError::Reassigned) {
                continue;
            }
            debug!(leader, error = %e, "fetch round failed");
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(BACKOFF) => {}
            }
        }
    }
    debug!(leader, "fetcher stopped");
}

#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error(transparent)]
    Peer(#[from] PeerError),
    #[error("leader {0} is not registered")]
    UnknownLeader(i32),
    #[error("fetch refused: {0:?}")]
    Refused(Option<ResponseError>),
    #[error("no partition could be fetched")]
    NothingFetched,
    #[error("the partitions followed from this leader changed during the fetch")]
    Reassigned,
}

async fn fetch_round(
    broker: &Broker,
    leader: i32,
    parts: &Assignment,
    connection: &mut Option<PeerConnection>,
    reassigned: &mut watch::Receiver<Assignment>,
    quota: &ReplicationQuota,
) -> Result<(), RoundError> {
    let image = broker.image();
    if connection.is_none() {
        let endpoint = image
            .broker(leader)
            .ok_or(RoundError::UnknownLeader(leader))?;
        *connection =
            Some(PeerConnection::connect(&broker.peers, endpoint, CONNECT_TIMEOUT).await?);
    }
    let Some(conn) = connection.as_mut() else {
        return Err(RoundError::UnknownLeader(leader));
    };
    let config = &broker.config;
    let mut topics: BTreeMap<uuid::Uuid, FetchTopic> = BTreeMap::new();
    let mut by_id: HashMap<(uuid::Uuid, i32), (&Followed, Arc<Partition>, bool)> = HashMap::new();
    let rate = throttle::follower_rate(&image, broker.node_id);
    let now_ms = brook_storage::log_manager::now_ms();
    let over_quota = rate.is_some_and(|bound| quota.exceeded(bound, now_ms));
    for f in parts.values() {
        // The replica manager opens the replica's log when it applies the image that
        // assigns it; until then (or while its log is offline) it is not fetched.
        let partition = match broker.replicas.get(&f.topic, f.partition) {
            Some(Ok(p)) if p.topic_id() == f.topic_id => p,
            Some(Err(e)) => {
                debug!(topic = %f.topic, partition = f.partition, error = %e, "replica offline");
                continue;
            }
            _ => {
                debug!(topic = %f.topic, partition = f.partition, "replica not applied yet");
                continue;
            }
        };
        if !follows(&partition, leader, f.leader_epoch) {
            debug!(topic = %f.topic, partition = f.partition, "role not applied yet");
            continue;
        }
        let throttled = rate.is_some()
            && throttle::follower_throttled(&image, &f.topic, f.partition, broker.node_id);
        if throttled && over_quota {
            debug!(topic = %f.topic, partition = f.partition, "throttled replica over its quota");
            continue;
        }
        let log = partition.log().clone();
        by_id.insert((f.topic_id, f.partition), (f, partition, throttled));
        topics
            .entry(f.topic_id)
            .or_insert_with(|| FetchTopic::default().with_topic_id(f.topic_id))
            .partitions
            .push(
                FetchPartition::default()
                    .with_partition(f.partition)
                    .with_current_leader_epoch(f.leader_epoch)
                    .with_fetch_offset(log.log_end_offset())
                    .with_last_fetched_epoch(log.latest_epoch().unwrap_or(-1))
                    .with_log_start_offset(log.log_start_offset())
                    .with_partition_max_bytes(config.replica_fetch_max_bytes.max(1)),
            );
    }
    if topics.is_empty() {
        return Err(RoundError::NothingFetched);
    }
    let wait_ms = config.replica_fetch_wait_max_ms.max(0);
    let request = FetchRequest::default()
        .with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(broker.node_id))
                .with_replica_epoch(i64::try_from(broker.broker_epoch()).unwrap_or(i64::MAX)),
        )
        .with_max_wait_ms(wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(MAX_RESPONSE_BYTES)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics.into_values().collect());
    // Past the leader's long-poll wait, a silent leader is a lost one (SIGSTOP, partition).
    let timeout = Duration::from_millis(wait_ms as u64) + Duration::from_secs(5);
    let response: FetchResponse = tokio::select! {
        response = conn.call(ApiKey::Fetch, FETCH_VERSION, &request, timeout) => response?,
        // A partition this leader has just taken over (a failover) must not wait out the
        // long poll of the partitions it already led: its acks=all producers wait for this
        // follower's first fetch in the new epoch. The round is dropped and sent again.
        Ok(()) = reassigned.changed() => return Err(RoundError::Reassigned),
    };
    if response.error_code != 0 {
        return Err(RoundError::Refused(ResponseError::try_from_code(
            response.error_code,
        )));
    }
    let mut progressed = false;
    for topic in response.responses {
        for data in topic.partitions {
            let Some((f, partition, throttled)) =
                by_id.get(&(topic.topic_id, data.partition_index))
            else {
                continue;
            };
            if *throttled {
                let bytes = data.records.as_ref().map_or(0, |r| r.len() as u64);
                quota.record(bytes, brook_storage::log_manager::now_ms());
            }
            match handle_partition(broker, conn, leader, f, partition, data).await {
                Ok(()) => progressed = true,
                Err(e) => {
                    debug!(topic = %f.topic, partition = f.partition, leader, error = %e, "follower fetch of a partition failed")
                }
            }
        }
    }
    if progressed {
        Ok(())
    } else {
        Err(RoundError::NothingFetched)
    }
}

#[derive(Debug, thiserror::Error)]
enum PartitionError {
    #[error("leader answered {0:?}")]
    Leader(Option<ResponseError>),
    #[error("the log still diverges from the leader's at offset {0}")]
    StillDiverging(i64),
    #[error(transparent)]
    Storage(#[from] brook_storage::StorageError),
    #[error(transparent)]
    Peer(#[from] PeerError),
    #[error("the partition's role changed during the fetch")]
    RoleChanged,
}

/// Whether `partition`'s applied role is "follower of `leader` at `leader_epoch`".
fn follows(partition: &Partition, leader: i32, leader_epoch: i32) -> bool {
    matches!(partition.role(), Role::Follower { leader: l, leader_epoch: e } if l == leader && e == leader_epoch)
}

async fn handle_partition(
    broker: &Broker,
    conn: &mut PeerConnection,
    leader: i32,
    f: &Followed,
    partition: &Partition,
    data: PartitionData,
) -> Result<(), PartitionError> {
    let log = partition.log();
    match ResponseError::try_from_code(data.error_code) {
        None => {}
        Some(ResponseError::OffsetOutOfRange) => {
            let bounds = leader_log_bounds(broker, conn, f).await?;
            let _write = partition
                .follower_write(leader, f.leader_epoch)
                .await
                .ok_or(PartitionError::RoleChanged)?;
            return reset_out_of_range(f, log, bounds).await;
        }
        other => return Err(PartitionError::Leader(other)),
    }
    let _write = partition
        .follower_write(leader, f.leader_epoch)
        .await
        .ok_or(PartitionError::RoleChanged)?;
    let diverging = data.diverging_epoch;
    if diverging.epoch >= 0 || diverging.end_offset >= 0 {
        let before = log.log_end_offset();
        let target = truncation_offset(log, diverging.epoch, diverging.end_offset).await?;
        let epoch_before = log.latest_epoch();
        let after = log.truncate_to(target).await?;
        if after == before && log.latest_epoch() == epoch_before {
            // Nothing changed, so the next fetch would diverge the same way: back off
            // (the round counts as no progress) instead of spinning.
            return Err(PartitionError::StillDiverging(after));
        }
        info!(topic = %f.topic, partition = f.partition, leader_epoch = diverging.epoch,
            leader_end_offset = diverging.end_offset, from = before, to = after,
            "truncated a diverging log tail");
        return Ok(());
    }
    if let Some(records) = data.records.filter(|r| !r.is_empty()) {
        let now_ms = brook_storage::log_manager::now_ms();
        log.append_as_follower(records, now_ms).await?;
    }
    let leo = log.log_end_offset();
    log.set_high_watermark(data.high_watermark.min(leo));
    if data.log_start_offset > log.log_start_offset() && data.log_start_offset <= leo {
        let now_ms = brook_storage::log_manager::now_ms();
        log.increment_log_start_offset(data.log_start_offset, now_ms)
            .await?;
    }
    Ok(())
}

/// Where a follower's log stops agreeing with the leader's, given the leader's answer for
/// the follower's last fetched epoch (Kafka's `getOffsetTruncationState`).
async fn truncation_offset(
    log: &LogHandle,
    leader_epoch: i32,
    leader_end_offset: i64,
) -> Result<i64, brook_storage::StorageError> {
    let leo = log.log_end_offset();
    if leader_end_offset < 0 {
        return Ok(log.high_watermark().min(leo));
    }
    if leader_epoch < 0 {
        return Ok(leader_end_offset.min(leo));
    }
    let (epoch, end) = log.end_offset_for_epoch(leader_epoch).await?;
    Ok(if epoch < 0 {
        leader_end_offset.min(leo)
    } else if epoch != leader_epoch {
        // The follower never had the leader's epoch: cut at the end of the last one it
        // shares, and let the next fetch compare again.
        end.min(leo)
    } else {
        leader_end_offset.min(end).min(leo)
    })
}

/// The follower's fetch offset is outside the leader's log: beyond its end (truncate to
/// it) or before its start (start over there).
async fn reset_out_of_range(
    f: &Followed,
    log: &LogHandle,
    (start, end): (i64, i64),
) -> Result<(), PartitionError> {
    let leo = log.log_end_offset();
    if leo > end {
        let after = log.truncate_to(end).await?;
        info!(topic = %f.topic, partition = f.partition, from = leo, to = after, "truncated to the leader's log end");
    } else if leo < start {
        log.truncate_fully_and_start_at(start).await?;
        info!(topic = %f.topic, partition = f.partition, from = leo, to = start, "starting over at the leader's log start");
    }
    Ok(())
}

async fn leader_log_bounds(
    broker: &Broker,
    conn: &mut PeerConnection,
    f: &Followed,
) -> Result<(i64, i64), PartitionError> {
    let mut bounds = [0i64; 2];
    for (slot, timestamp) in [(0, -2i64), (1, -1i64)] {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(broker.node_id))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(f.topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(f.partition)
                    .with_current_leader_epoch(f.leader_epoch)
                    .with_timestamp(timestamp)])]);
        let response: ListOffsetsResponse = conn
            .call(
                ApiKey::ListOffsets,
                LIST_OFFSETS_VERSION,
                &request,
                Duration::from_secs(10),
            )
            .await?;
        let p = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or(PartitionError::Leader(Some(
                ResponseError::UnknownServerError,
            )))?;
        if p.error_code != 0 {
            return Err(PartitionError::Leader(ResponseError::try_from_code(
                p.error_code,
            )));
        }
        bounds[slot] = p.offset;
    }
    Ok((bounds[0], bounds[1]))
}
