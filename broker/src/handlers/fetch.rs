//! Fetch: whole record batches served as stored bytes, never decoded.
//!
//! Per partition the read is bounded by `partition_max_bytes` and what is left of
//! `max_bytes`; the first partition with data may exceed both by one batch so consumers
//! always progress (Kafka's `minOneMessage`). With fewer than `min_bytes` gathered the
//! request waits — until an append to one of its partitions wakes it to look again
//! (Kafka's delayed fetch is keyed by partition too), or `max_wait_ms` passes. Each
//! partition's append watch is subscribed before that partition is read, so an append
//! landing between the read and the wait still wakes it. Incremental fetch sessions
//! (KIP-227) are in `fetch_session`.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use brook_protocol::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, PartitionData,
};
use brook_protocol::kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::MinOneBatch;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::fetch_session::{SessionLookup, SessionPartition};
use crate::metrics;

/// Longest a fetch waits for `min_bytes`, whatever the client asks.
const MAX_WAIT: Duration = Duration::from_secs(30);

struct Wanted {
    key: SessionPartition,
    fetch_offset: i64,
    partition_max_bytes: i32,
}

pub async fn handle(broker: &Broker, req: FetchRequest, version: i16) -> FetchResponse {
    let by_id = version >= 13;
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
    let requested: Vec<(SessionPartition, i64, i32)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| {
                    (
                        key_of(&t.topic, &t.topic_id, p.partition),
                        p.fetch_offset,
                        p.partition_max_bytes,
                    )
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

    let (session_id, incremental) = match broker
        .fetch_sessions
        .lookup(req.session_id, req.session_epoch)
    {
        SessionLookup::Sessionless => (0, false),
        SessionLookup::New { session_id } => (session_id, false),
        SessionLookup::Incremental { session_id } => (session_id, true),
        SessionLookup::NotFound => {
            return FetchResponse::default()
                .with_error_code(ResponseError::FetchSessionIdNotFound.code())
        }
        SessionLookup::InvalidEpoch => {
            return FetchResponse::default()
                .with_error_code(ResponseError::InvalidFetchSessionEpoch.code())
        }
    };
    let wanted = if session_id == 0 {
        to_wanted(requested)
    } else {
        // A new session starts from exactly what was asked; an incremental request
        // changes the session's set, and the whole set is fetched.
        let forgotten: &[SessionPartition] = if incremental { &forgotten } else { &[] };
        broker
            .fetch_sessions
            .update(session_id, requested, forgotten)
            .into_iter()
            .map(|(key, s)| Wanted {
                key,
                fetch_offset: s.fetch_offset,
                partition_max_bytes: s.partition_max_bytes,
            })
            .collect()
    };

    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT);
    let deadline = Instant::now() + wait;
    let read_committed = req.isolation_level == 1;
    let results = loop {
        let (results, mut appended) = read_all(broker, &wanted, req.max_bytes).await;
        let gathered: usize = results
            .iter()
            .map(|(_, d)| d.records.as_ref().map_or(0, |r| r.len()))
            .sum();
        let any_error = results.iter().any(|(_, d)| d.error_code != 0);
        if gathered >= req.min_bytes.max(0) as usize || any_error || Instant::now() >= deadline {
            break results;
        }
        let woken = tokio::select! {
            changed = tokio::time::timeout_at(deadline, any_changed(&mut appended)) => changed.is_ok(),
            _ = broker.stopping.cancelled() => false,
        };
        if !woken {
            break read_all(broker, &wanted, req.max_bytes).await.0;
        }
    };

    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for (key, mut data) in results {
        if read_committed {
            data.aborted_transactions = Some(Vec::new());
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
    FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(topics)
}

fn to_wanted(requested: Vec<(SessionPartition, i64, i32)>) -> Vec<Wanted> {
    requested
        .into_iter()
        .map(|(key, fetch_offset, partition_max_bytes)| Wanted {
            key,
            fetch_offset,
            partition_max_bytes,
        })
        .collect()
}

/// Completes when any of the watches changes (or its log goes away).
async fn any_changed(watches: &mut [watch::Receiver<i64>]) {
    let mut changes: Vec<_> = watches.iter_mut().map(|w| Box::pin(w.changed())).collect();
    std::future::poll_fn(|cx| {
        let any = changes.iter_mut().any(|c| c.as_mut().poll(cx).is_ready());
        if any {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Reads every wanted partition; also returns the append watches of the partitions read,
/// each subscribed before its read.
async fn read_all(
    broker: &Broker,
    wanted: &[Wanted],
    max_bytes: i32,
) -> (
    Vec<(SessionPartition, PartitionData)>,
    Vec<watch::Receiver<i64>>,
) {
    let image = broker.image();
    let mut budget = max_bytes.max(0) as usize;
    let mut any_data = false;
    let mut out = Vec::with_capacity(wanted.len());
    let mut watches = Vec::with_capacity(wanted.len());
    for w in wanted {
        let base = PartitionData::default()
            .with_partition_index(w.key.partition)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_preferred_read_replica(brook_protocol::kafka_protocol::messages::BrokerId(-1));
        if w.key.topic.is_empty() {
            out.push((
                w.key.clone(),
                base.with_error_code(ResponseError::UnknownTopicId.code()),
            ));
            continue;
        }
        let log = match broker
            .replicas
            .partition(
                || broker.effective_config(),
                &image,
                broker.node_id,
                &w.key.topic,
                w.key.partition,
            )
            .await
        {
            Ok(log) => log,
            Err(e) => {
                out.push((w.key.clone(), base.with_error_code(e.code().code())));
                continue;
            }
        };
        watches.push(log.subscribe_appends());
        let log_end = log.log_end_offset();
        let base = base
            .with_high_watermark(log_end)
            .with_last_stable_offset(log_end)
            .with_log_start_offset(log.log_start_offset());
        if w.fetch_offset == log_end {
            out.push((w.key.clone(), base.with_records(Some(bytes::Bytes::new()))));
            continue;
        }
        let limit = (w.partition_max_bytes.max(0) as usize).min(budget);
        let min_one = if any_data {
            MinOneBatch::No
        } else {
            MinOneBatch::Yes
        };
        match log.read(w.fetch_offset, limit, log_end, min_one).await {
            Ok(read) => {
                budget = budget.saturating_sub(read.records.len());
                any_data |= !read.records.is_empty();
                out.push((
                    w.key.clone(),
                    base.with_log_start_offset(read.log_start_offset)
                        .with_records(Some(read.records)),
                ));
            }
            Err(e) => out.push((
                w.key.clone(),
                base.with_error_code(BrokerError::from(e).code().code()),
            )),
        }
    }
    (out, watches)
}
