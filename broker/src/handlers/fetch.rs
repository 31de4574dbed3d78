//! Fetch: whole record batches served as stored bytes, never decoded.
//!
//! Per partition the read is bounded by `partition_max_bytes` and what is left of
//! `max_bytes`; the first partition with data may exceed both by one batch so consumers
//! always progress (Kafka's `minOneMessage`). With fewer than `min_bytes` gathered the
//! request waits — until an append to one of its partitions wakes it to read the
//! partitions that changed again (the others keep what they returned; Kafka's delayed
//! fetch is keyed by partition too), or `max_wait_ms` passes and it answers with what it
//! has. A request with no partition to fetch (once its session is resolved) is answered
//! at once, as are errors and divergences (`answers_now`). Each partition's append watch
//! is subscribed before that partition is read, so an append landing between the read and
//! the wait still wakes it. Incremental fetch sessions (KIP-227) are in `fetch_session`.
//!
//! Each pass checks and plans every partition on the runtime (memory only: the partition
//! lock is held just to capture the segments, `brook_storage::PlannedRead`), then reads
//! them without the partition locks: on the runtime while the bytes are in the page cache
//! (`preadv2(RWF_NOWAIT)`, which fails instead of waiting for the disk), and from the first
//! partition that is not, the rest in one blocking-pool hop. Only batch headers are
//! read: a record set of 4 KiB or more stays in its segment files and is sent with
//! `sendfile` (zero-copy, issue #13; `server::write`), a placeholder of its length
//! standing for it in the encoded response. Such a record set may end inside a batch, as
//! Kafka's do. `brook.fetch.zero.copy=false` reads record sets into memory instead.
//!
//! Consumers read up to the high watermark; `read_committed` ones up to the last stable
//! offset (the first offset of the oldest open transaction, at most the high watermark),
//! and get the aborted transactions overlapping what they read so they can drop those
//! records. A follower (replica id from v15's
//! `ReplicaState`, or `replica_id` before) reads up to the log end, its fetch offset becomes
//! its log end offset at the leader (`replication::leader`), and a `last_fetched_epoch` that
//! ended earlier here is answered with `diverging_epoch` so it truncates first.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use brook_protocol::chunked::placeholder;
use brook_protocol::kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData,
};
use brook_protocol::kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ProducerId, ResponseKind, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::{FetchedRecords, FileRecords, MinOneBatch, PlannedRead};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::fetch_session::{SessionLookup, SessionPartition};
use crate::handlers::{leader_hint, Reply};
use crate::metrics;
use crate::server::write::FileChunk;

/// Longest a fetch waits for `min_bytes`, whatever the client asks.
const MAX_WAIT: Duration = Duration::from_secs(30);

struct Wanted {
    key: SessionPartition,
    fetch_offset: i64,
    partition_max_bytes: i32,
    /// KIP-320's `current_leader_epoch` (-1: unchecked).
    current_leader_epoch: i32,
    /// A follower's epoch of its last batch (v12+; -1: none), for divergence detection.
    last_fetched_epoch: i32,
}

/// Who fetches: a consumer (id -1) or a follower broker and the broker epoch of its
/// registration (v15's `ReplicaState`; -1 before); and whether a consumer reads only
/// committed transactional data (`isolation_level` 1: up to the last stable offset).
#[derive(Debug, Clone, Copy)]
struct Replica {
    id: i32,
    epoch: i64,
    read_committed: bool,
}

pub async fn handle(broker: &Broker, req: FetchRequest, version: i16) -> Reply {
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

    let (session_id, incremental) =
        match broker
            .fetch_sessions
            .lookup(req.session_id, req.session_epoch, by_id)
        {
            SessionLookup::Sessionless => (0, false),
            SessionLookup::New { session_id } => (session_id, false),
            SessionLookup::Incremental { session_id } => (session_id, true),
            SessionLookup::NotFound => {
                let error = ResponseError::FetchSessionIdNotFound.code();
                return ResponseKind::Fetch(FetchResponse::default().with_error_code(error)).into();
            }
            SessionLookup::InvalidEpoch => {
                let error = ResponseError::InvalidFetchSessionEpoch.code();
                return ResponseKind::Fetch(FetchResponse::default().with_error_code(error)).into();
            }
            SessionLookup::TopicIdMismatch => {
                let error = ResponseError::FetchSessionTopicIdError.code();
                return ResponseKind::Fetch(FetchResponse::default().with_error_code(error)).into();
            }
        };
    let wanted = if session_id == 0 {
        asked
    } else {
        // A new session starts from exactly what was asked; an incremental request
        // changes the session's set, and the whole set is fetched. The session keeps
        // offsets and sizes; leader epochs are checked only for the partitions this
        // request names.
        let epochs: std::collections::HashMap<SessionPartition, i32> = asked
            .iter()
            .map(|w| (w.key.clone(), w.current_leader_epoch))
            .collect();
        let requested = asked
            .into_iter()
            .map(|w| (w.key, w.fetch_offset, w.partition_max_bytes))
            .collect();
        let forgotten: &[SessionPartition] = if incremental { &forgotten } else { &[] };
        broker
            .fetch_sessions
            .update(session_id, requested, forgotten)
            .into_iter()
            .map(|(key, s)| Wanted {
                current_leader_epoch: epochs.get(&key).copied().unwrap_or(-1),
                last_fetched_epoch: -1,
                key,
                fetch_offset: s.fetch_offset,
                partition_max_bytes: s.partition_max_bytes,
            })
            .collect()
    };

    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT);
    let deadline = Instant::now() + wait;
    // Kafka caps min_bytes at the response's byte limit (`KafkaApis.handleFetchRequest`).
    let min_bytes = req.min_bytes.max(0).min(req.max_bytes.max(0)) as usize;
    // A long poll reads every partition once; each wake re-reads only the partitions whose
    // log end or high watermark moved, and a timeout answers with what was already read.
    let mut slots: Vec<Option<PartitionData>> = vec![None; wanted.len()];
    // The record sets left in their files, by slot (their `records` are placeholders).
    let mut files: Vec<Option<FileRecords>> = vec![None; wanted.len()];
    let zero_copy = broker.config.fetch_zero_copy;
    let mut watches: Vec<Option<watch::Receiver<i64>>> = (0..wanted.len()).map(|_| None).collect();
    let mut to_read: Vec<usize> = (0..wanted.len()).collect();
    loop {
        let kept = |i: usize| -> usize {
            if to_read.binary_search(&i).is_ok() {
                return 0;
            }
            record_len(slots[i].as_ref())
        };
        let kept_bytes: usize = (0..wanted.len()).map(kept).sum();
        let budget = (req.max_bytes.max(0) as usize).saturating_sub(kept_bytes);
        let had_data = kept_bytes > 0;
        let reads = read_some(
            broker, &wanted, &to_read, budget, had_data, replica, zero_copy,
        )
        .await;
        for (i, data, in_files, watch) in reads {
            slots[i] = Some(data);
            files[i] = in_files;
            watches[i] = watch;
        }
        let gathered: usize = slots.iter().map(|d| record_len(d.as_ref())).sum();
        let any_error = slots
            .iter()
            .flatten()
            .any(|d| d.error_code != 0 || d.diverging_epoch.end_offset >= 0);
        let waited_out = Instant::now() >= deadline;
        if answers_now(wanted.len(), gathered, min_bytes, any_error, waited_out) {
            break;
        }
        let woken = tokio::select! {
            changed = tokio::time::timeout_at(deadline, changed_partitions(&mut watches)) => changed.ok(),
            _ = broker.stopping.cancelled() => None,
        };
        match woken {
            Some(changed) => to_read = changed,
            None => break,
        }
    }
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

/// Whether a fetch is answered now rather than held for more data: Kafka's rule
/// (`ReplicaManager.fetchMessages`) answers at once when the request does not want to wait
/// (`max_wait_ms` <= 0, here `waited_out` from the start), names no partition to fetch
/// once its session is resolved (the Java consumer closes its fetch session with such a
/// request: epoch -1, no topics; an incremental fetch that lists nothing new still fetches
/// its session's partitions, so it waits), has `min_bytes`, or met an error or a
/// divergence in some partition. (Kafka's other case, a preferred read replica, Brook
/// does not have.) The same rule ends the wait after each wake.
fn answers_now(
    partitions: usize,
    gathered: usize,
    min_bytes: usize,
    any_error: bool,
    waited_out: bool,
) -> bool {
    partitions == 0 || gathered >= min_bytes || any_error || waited_out
}

fn record_len(data: Option<&PartitionData>) -> usize {
    data.and_then(|d| d.records.as_ref()).map_or(0, |r| r.len())
}

/// The indexes of the partitions whose watch changed (or whose log went away), once at
/// least one has; never completes when there is nothing to watch.
async fn changed_partitions(watches: &mut [Option<watch::Receiver<i64>>]) -> Vec<usize> {
    let mut pending: Vec<_> = watches
        .iter_mut()
        .enumerate()
        .filter_map(|(i, w)| w.as_mut().map(|w| (i, Box::pin(w.changed()))))
        .collect();
    std::future::poll_fn(|cx| {
        // Every future is polled (no short cut), so all partitions that changed are
        // reported; none is polled again after the call that returns `Ready`.
        let ready: Vec<usize> = pending
            .iter_mut()
            .filter_map(|(i, c)| c.as_mut().poll(cx).is_ready().then_some(*i))
            .collect();
        if ready.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(ready)
        }
    })
    .await
}

/// A partition after the checks, before its read.
enum Prepared {
    /// Answered without reading: an error, a divergence, or nothing to read yet.
    Done(PartitionData),
    /// To read, within `partition_max_bytes` and what is left of the request's budget.
    Read(PartitionData, PlannedRead),
}

/// One partition's read: its data, the record set left in its files if any (then the
/// data's `records` is its placeholder), and its append watch.
type PartitionRead = (
    usize,
    PartitionData,
    Option<FileRecords>,
    Option<watch::Receiver<i64>>,
);

/// Reads the partitions `indexes` of `wanted` (in order), sharing `budget` bytes; the first
/// with data may exceed it by one batch unless `had_data` (data already gathered). Checks
/// and plans each partition here (memory only), then reads them in order: on this thread
/// while their bytes are in the page cache (zero-copy path only: batch headers, or a small
/// record set), and from the first that is not, the rest in one blocking-pool hop. Returns
/// each partition's data with its append watch, subscribed before its read.
async fn read_some(
    broker: &Broker,
    wanted: &[Wanted],
    indexes: &[usize],
    budget: usize,
    had_data: bool,
    replica: Replica,
    zero_copy: bool,
) -> Vec<PartitionRead> {
    let image = broker.image();
    let mut prepared = Vec::with_capacity(indexes.len());
    let mut watches = Vec::with_capacity(indexes.len());
    for &i in indexes {
        let Some(w) = wanted.get(i) else { continue };
        let (p, watch) = prepare(broker, &image, w, replica).await;
        prepared.push((i, p));
        watches.push((i, watch));
    }
    let mut reader = Reader {
        budget,
        any_data: had_data,
        zero_copy,
    };
    let mut datas = Vec::with_capacity(prepared.len());
    let mut pending = prepared.into_iter();
    while let Some((slot, p)) = pending.next() {
        match reader.read_cached(slot, p) {
            Attempt::Answered(data) => datas.push(data),
            Attempt::Uncached(uncached) => {
                let rest: Vec<_> = std::iter::once((slot, uncached)).chain(pending).collect();
                datas.extend(read_blocking(rest, reader, wanted).await);
                break;
            }
        }
    }
    watches
        .into_iter()
        .zip(datas)
        .map(|((i, watch), (data, files))| (i, data, files, watch))
        .collect()
}

/// Runs `prepared` reads in order in one blocking-pool hop.
async fn read_blocking(
    prepared: Vec<(usize, Prepared)>,
    mut reader: Reader,
    wanted: &[Wanted],
) -> Vec<(PartitionData, Option<FileRecords>)> {
    let slots: Vec<usize> = prepared.iter().map(|(slot, _)| *slot).collect();
    let reads = tokio::task::spawn_blocking(move || {
        prepared
            .into_iter()
            .map(|(slot, p)| reader.read(slot, p))
            .collect::<Vec<_>>()
    });
    match reads.await {
        Ok(datas) => datas,
        Err(e) => {
            tracing::error!(error = %e, "fetch read task failed");
            let code = ResponseError::UnknownServerError.code();
            slots
                .iter()
                .map(|&i| {
                    let data = PartitionData::default()
                        .with_partition_index(wanted.get(i).map_or(-1, |w| w.key.partition))
                        .with_error_code(code);
                    (data, None)
                })
                .collect()
        }
    }
}

/// Runs planned reads in order, sharing the response's byte budget. A read's slot (unique
/// within the response) picks the placeholder of a record set left in its files.
struct Reader {
    budget: usize,
    /// Data already gathered: no later read may exceed the budget (`minOneMessage`).
    any_data: bool,
    zero_copy: bool,
}

/// A read tried from the page cache alone.
enum Attempt {
    Answered((PartitionData, Option<FileRecords>)),
    /// The read given back, for the blocking pool.
    Uncached(Prepared),
}

impl Reader {
    /// The read from the page cache alone, on this (async) thread; given back when a byte
    /// it needs is not cached, or on the copying path.
    fn read_cached(&mut self, slot: usize, p: Prepared) -> Attempt {
        let (base, planned) = match p {
            Prepared::Done(data) => return Attempt::Answered((data, None)),
            Prepared::Read(base, planned) if self.zero_copy => (base, planned),
            uncached => return Attempt::Uncached(uncached),
        };
        let (limit, min_one) = self.bounds(&planned);
        match planned.try_execute_for_send_cached(limit, min_one) {
            Ok(Some(sent)) => match placed(sent, slot) {
                Some(read) => {
                    metrics::record_fetch_read(true);
                    Attempt::Answered(self.answer(base, Ok(read)))
                }
                // Too large for a placeholder: the copying path reads it, which blocks.
                None => Attempt::Uncached(Prepared::Read(base, planned)),
            },
            Ok(None) => Attempt::Uncached(Prepared::Read(base, planned)),
            Err(e) => Attempt::Answered(self.answer(base, Err(e))),
        }
    }

    /// The read, blocking on the disk if need be (blocking threads only).
    fn read(&mut self, slot: usize, p: Prepared) -> (PartitionData, Option<FileRecords>) {
        let (base, planned) = match p {
            Prepared::Done(data) => return (data, None),
            Prepared::Read(base, planned) => (base, planned),
        };
        metrics::record_fetch_read(false);
        let (limit, min_one) = self.bounds(&planned);
        let read = if self.zero_copy {
            planned.execute_for_send(limit, min_one).and_then(|sent| {
                // Too large for a placeholder: read by the copying path instead (which
                // also handles a truncation racing it).
                placed(sent, slot).map_or_else(|| copied(&planned, limit, min_one), Ok)
            })
        } else {
            copied(&planned, limit, min_one)
        };
        self.answer(base, read)
    }

    /// The byte limit of the next read, and whether it may exceed it by one batch.
    fn bounds(&self, planned: &PlannedRead) -> (usize, MinOneBatch) {
        let limit = planned.max_bytes().min(self.budget);
        let min_one = if self.any_data {
            MinOneBatch::No
        } else {
            MinOneBatch::Yes
        };
        (limit, min_one)
    }

    /// The partition's answer to a read, charged to the budget.
    fn answer(
        &mut self,
        base: PartitionData,
        read: brook_storage::Result<ReadRecords>,
    ) -> (PartitionData, Option<FileRecords>) {
        match read {
            Ok((records, files, log_start)) => {
                self.budget = self.budget.saturating_sub(records.len());
                self.any_data |= !records.is_empty();
                let data = base
                    .with_log_start_offset(log_start)
                    .with_records(Some(records));
                (data, files)
            }
            Err(e) => (
                base.with_error_code(BrokerError::from(e).code().code()),
                None,
            ),
        }
    }
}

/// A read as the response's `records` (bytes, or the placeholder of a record set left in
/// its files), those files, and the log start offset.
type ReadRecords = (bytes::Bytes, Option<FileRecords>, i64);

/// The copying read (`brook.fetch.zero.copy=false`, or a record set too large for a
/// placeholder). Blocking file I/O.
fn copied(
    planned: &PlannedRead,
    limit: usize,
    min_one: MinOneBatch,
) -> brook_storage::Result<ReadRecords> {
    planned
        .execute(limit, min_one)
        .map(|read| (read.records, None, read.log_start_offset))
}

/// A zero-copy read's answer: its bytes, or its files behind the placeholder of `slot`;
/// `None` when the record set cannot have a placeholder (over `MAX_PLACEHOLDER_LEN`).
fn placed(sent: (FetchedRecords, i64), slot: usize) -> Option<ReadRecords> {
    match sent {
        (FetchedRecords::Memory(bytes), log_start) => Some((bytes, None, log_start)),
        (FetchedRecords::Files(files), log_start) => {
            let len = usize::try_from(files.len()).unwrap_or(usize::MAX);
            placeholder(slot, len).map(|stand_in| (stand_in, Some(files), log_start))
        }
    }
}

/// Checks one wanted partition (topic, leadership, epochs; a follower's state) and plans
/// its read; also returns its append watch, subscribed before the bounds are read so a
/// change after the read still wakes the fetch.
async fn prepare(
    broker: &Broker,
    image: &brook_raft::MetadataImage,
    w: &Wanted,
    replica: Replica,
) -> (Prepared, Option<watch::Receiver<i64>>) {
    let base = PartitionData::default()
        .with_partition_index(w.key.partition)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(BrokerId(-1));
    if w.key.topic.is_empty() {
        let data = base.with_error_code(ResponseError::UnknownTopicId.code());
        return (Prepared::Done(data), None);
    }
    let log = if replica.id >= 0 {
        follower_view(broker, image, w, replica).await
    } else {
        broker
            .replicas
            .partition(
                || broker.effective_config(),
                image,
                broker.node_id,
                &w.key.topic,
                w.key.partition,
                Some(w.current_leader_epoch),
            )
            .await
            .map(Ok)
    };
    let log = match log {
        Ok(Ok(log)) => log,
        Ok(Err(diverging)) => {
            let (epoch_end, high_watermark, log_start) = diverging;
            let data = base
                .with_diverging_epoch(epoch_end)
                .with_high_watermark(high_watermark)
                .with_last_stable_offset(high_watermark)
                .with_log_start_offset(log_start);
            return (Prepared::Done(data), None);
        }
        Err(e) => {
            let mut data = base.with_error_code(e.code().code());
            if let Some((leader, epoch)) = leader_hint::from_error(&e, broker.node_id) {
                data = data.with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(epoch),
                );
            }
            return (Prepared::Done(data), None);
        }
    };
    let watch = Some(log.subscribe_appends());
    let log_end = log.log_end_offset();
    let high_watermark = log.high_watermark();
    let last_stable = log.last_stable_offset();
    // Consumers read up to the high watermark (read_committed ones up to the last stable
    // offset), followers up to the log end.
    let bound = if replica.id >= 0 {
        log_end
    } else if replica.read_committed {
        last_stable
    } else {
        high_watermark
    };
    let mut base = base
        .with_high_watermark(high_watermark)
        .with_last_stable_offset(last_stable)
        .with_log_start_offset(log.log_start_offset());
    if replica.read_committed && w.fetch_offset < bound {
        // The consumer drops the records of these producers from each first offset
        // until their abort marker (Kafka's `collectAbortedTransactions`).
        let aborted = log
            .aborted_transactions(w.fetch_offset, bound)
            .into_iter()
            .map(|t| {
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(t.producer_id))
                    .with_first_offset(t.first_offset)
            })
            .collect();
        base = base.with_aborted_transactions(Some(aborted));
    }
    // An offset between the bound and the log end is valid, just nothing to read yet.
    if w.fetch_offset >= bound && w.fetch_offset <= log_end {
        return (
            Prepared::Done(base.with_records(Some(bytes::Bytes::new()))),
            watch,
        );
    }
    let limit = w.partition_max_bytes.max(0) as usize;
    match log.plan_read(w.fetch_offset, limit, bound).await {
        Ok(planned) => (Prepared::Read(base, planned), watch),
        Err(e) => {
            let data = base.with_error_code(BrokerError::from(e).code().code());
            (Prepared::Done(data), watch)
        }
    }
}

/// What a follower's fetch of one partition sees (the leader side of Kafka's
/// `Partition.fetchRecords` for replicas): the leader state at the request's epoch; a
/// `last_fetched_epoch` whose end here is before the fetch offset (or an epoch this leader
/// does not know) answers `diverging_epoch` with nothing read and the follower state
/// untouched; otherwise the fetch offset becomes the follower's log end offset, the high
/// watermark may advance, and the follower reads up to the log end.
async fn follower_view(
    broker: &Broker,
    image: &brook_raft::MetadataImage,
    w: &Wanted,
    replica: Replica,
) -> Result<Result<brook_storage::LogHandle, (EpochEndOffset, i64, i64)>, BrokerError> {
    let replica_id = replica.id;
    let state = broker
        .replicas
        .leader(
            || broker.effective_config(),
            image,
            broker.node_id,
            &w.key.topic,
            w.key.partition,
            Some(w.current_leader_epoch),
        )
        .await?;
    let log = state.log.clone();
    if w.last_fetched_epoch >= 0 {
        let (epoch, end) = log.end_offset_for_epoch(w.last_fetched_epoch).await?;
        if end < w.fetch_offset || epoch < w.last_fetched_epoch {
            let diverging = EpochEndOffset::default()
                .with_epoch(epoch)
                .with_end_offset(end);
            return Ok(Err((
                diverging,
                log.high_watermark(),
                log.log_start_offset(),
            )));
        }
    }
    let now_ms = brook_storage::log_manager::now_ms();
    if !state.record_fetch(
        replica_id,
        replica.epoch,
        w.fetch_offset,
        log.log_end_offset(),
        now_ms,
    ) {
        return Err(BrokerError::NotLeaderOrFollower {
            topic: w.key.topic.clone(),
            partition: w.key.partition,
            leader: broker.node_id,
            leader_epoch: state.leader_epoch,
        });
    }
    if let Some(part) = image.partition(&w.key.topic, w.key.partition) {
        let before = log.high_watermark();
        state.maybe_advance_high_watermark(part, broker.node_id);
        if !part.isr.contains(&replica_id) || log.high_watermark() != before {
            broker.replicas.wake_isr_task();
        }
    }
    Ok(Ok(log))
}

#[cfg(test)]
mod tests {
    use super::answers_now;

    #[test]
    fn a_fetch_with_no_partitions_is_answered_at_once() {
        // The Java consumer's session close: nothing to fetch, so nothing to wait for.
        assert!(answers_now(0, 0, 1, false, false));
    }

    #[test]
    fn a_fetch_short_of_min_bytes_waits_until_its_deadline() {
        assert!(!answers_now(1, 0, 1, false, false));
        assert!(!answers_now(3, 99, 100, false, false));
        assert!(answers_now(1, 0, 1, false, true));
    }

    #[test]
    fn min_bytes_an_error_or_a_divergence_end_the_wait() {
        assert!(answers_now(2, 100, 100, false, false));
        assert!(answers_now(1, 0, 0, false, false));
        assert!(answers_now(1, 0, 1, true, false));
    }
}
