//! The broker's metric names and small recording functions; handlers never spell a
//! metric name. Names are `brook_<subsystem>_<what>_<unit>`; labels are bounded
//! (API names, topic names, partitions).
//!
//! The per-request and per-partition series are registered once and their handles
//! cached here (keyed by API, topic, partition): registering builds and hashes a label
//! set and takes the registry's lock, which on the produce path cost more than the
//! increment itself. The exporter is installed before the broker starts, so a cached
//! handle is never a no-op one. Caches grow with the APIs and partitions ever seen,
//! like the exporter's own registry.

pub mod cluster;
pub mod inter_broker;
pub mod memory_pool;
pub mod quota;
pub mod sasl;

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::OnceLock;
use std::time::Duration;

use brook_protocol::kafka_protocol::messages::ApiKey;
use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};
use parking_lot::RwLock;

/// A lazily filled map from a label key to registered metric handles.
struct Cache<K, V>(OnceLock<RwLock<HashMap<K, V>>>);

impl<K: Eq + Hash, V: Clone> Cache<K, V> {
    const fn new() -> Self {
        Cache(OnceLock::new())
    }

    fn get<Q>(&self, key: &Q, make: impl FnOnce() -> (K, V)) -> V
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let map = self.0.get_or_init(Default::default);
        if let Some(v) = map.read().get(key) {
            return v.clone();
        }
        let (k, v) = make();
        map.write().entry(k).or_insert(v).clone()
    }
}

#[derive(Clone)]
struct RequestProbe {
    count: Counter,
    duration: Histogram,
}

#[derive(Clone)]
struct TopicProbe {
    bytes_in: Counter,
    messages_in: Counter,
    bytes_out: Counter,
}

static REQUESTS: Cache<ApiKey, RequestProbe> = Cache::new();
static TOPICS: Cache<String, TopicProbe> = Cache::new();
static LOG_END_OFFSETS: Cache<(String, i32), Gauge> = Cache::new();
/// `brook_fetch_zero_copy_bytes_total`, registered once: it is added to per `sendfile`.
static ZERO_COPY_BYTES: OnceLock<Counter> = OnceLock::new();

fn topic_probe(topic: &str) -> TopicProbe {
    TOPICS.get(topic, || {
        let t = topic.to_string();
        let probe = TopicProbe {
            bytes_in: counter!("brook_topic_bytes_in_total", "topic" => t.clone()),
            messages_in: counter!("brook_topic_messages_in_total", "topic" => t.clone()),
            bytes_out: counter!("brook_topic_bytes_out_total", "topic" => t.clone()),
        };
        (t, probe)
    })
}

pub fn record_request(api_key: ApiKey, elapsed: Duration) {
    let probe = REQUESTS.get(&api_key, || {
        let api = format!("{api_key:?}");
        let probe = RequestProbe {
            count: counter!("brook_requests_total", "api" => api.clone()),
            duration: histogram!("brook_request_duration_seconds", "api" => api),
        };
        (api_key, probe)
    });
    probe.count.increment(1);
    probe.duration.record(elapsed.as_secs_f64());
}

pub fn record_bytes_out(bytes: usize) {
    counter!("brook_network_bytes_out_total").increment(bytes as u64);
}

pub fn record_produce(topic: &str, bytes: usize, messages: u64) {
    let probe = topic_probe(topic);
    probe.bytes_in.increment(bytes as u64);
    probe.messages_in.increment(messages);
}

pub fn record_fetch(topic: &str, bytes: usize) {
    topic_probe(topic).bytes_out.increment(bytes as u64);
}

/// Where a fetch read a partition: `page_cache` on its async worker (`RWF_NOWAIT` reads),
/// or `blocking` on the blocking pool (bytes not cached, or the copying path). A rising
/// `blocking` share means consumers or followers read from the disk.
pub fn record_fetch_read(from_page_cache: bool) {
    let path = if from_page_cache {
        "page_cache"
    } else {
        "blocking"
    };
    counter!("brook_fetch_partition_reads_total", "path" => path).increment(1);
}

/// Record-set bytes one `sendfile` call sent from a segment file to a client or follower
/// (`server::write`): one atomic add on a handle registered once. It stays at 0 with
/// `brook.fetch.zero.copy=false` and on TLS listeners, which copy record sets instead.
pub fn record_fetch_zero_copy_bytes(bytes: usize) {
    ZERO_COPY_BYTES
        .get_or_init(|| counter!("brook_fetch_zero_copy_bytes_total"))
        .increment(bytes as u64);
}

/// One log cleaner pass (cold path: registered per call, labelled by topic).
pub fn record_log_cleaned(
    topic: &str,
    records_removed: u64,
    bytes_reclaimed: u64,
    elapsed: Duration,
) {
    let topic = topic.to_string();
    counter!("brook_log_cleaner_passes_total", "topic" => topic.clone()).increment(1);
    counter!("brook_log_cleaner_records_removed_total", "topic" => topic.clone())
        .increment(records_removed);
    counter!("brook_log_cleaner_bytes_reclaimed_total", "topic" => topic.clone())
        .increment(bytes_reclaimed);
    histogram!("brook_log_cleaner_duration_seconds", "topic" => topic)
        .record(elapsed.as_secs_f64());
}

pub fn set_log_end_offset(topic: &str, partition: i32, offset: i64) {
    // Keyed by an owned pair: one small allocation per call, no registry lock.
    let key = (topic.to_string(), partition);
    LOG_END_OFFSETS
        .get(&key, || {
            let gauge = gauge!("brook_partition_log_end_offset", "topic" => topic.to_string(), "partition" => partition.to_string());
            (key.clone(), gauge)
        })
        .set(offset as f64);
}

pub fn set_group(group: &str, members: usize, generation: i32) {
    let g = group.to_string();
    gauge!("brook_group_members", "group" => g.clone()).set(members as f64);
    gauge!("brook_group_generation", "group" => g.clone()).set(f64::from(generation));
    gauge!("kafka_consumergroup_members", "consumergroup" => g).set(members as f64);
}

/// 1 for the group's current state, 0 for the others.
pub fn set_group_state(group: &str, state: &'static str, current: bool) {
    gauge!("brook_group_state", "group" => group.to_string(), "state" => state).set(if current {
        1.0
    } else {
        0.0
    });
}

pub fn set_consumer_lag(group: &str, topic: &str, partition: i32, lag: i64) {
    let (g, t, p) = (group.to_string(), topic.to_string(), partition.to_string());
    gauge!("brook_consumer_lag", "group" => g.clone(), "topic" => t.clone(), "partition" => p.clone()).set(lag as f64);
    gauge!("kafka_consumergroup_lag", "consumergroup" => g, "topic" => t, "partition" => p)
        .set(lag as f64);
}

/// Registers the broker-wide series at start-up, so a scrape before the first
/// connection shows them at 0 instead of leaving them out.
pub fn register_broker_series() {
    gauge!("brook_active_connections").increment(0.0);
    counter!("brook_connections_total").increment(0);
    for path in ["page_cache", "blocking"] {
        counter!("brook_fetch_partition_reads_total", "path" => path).increment(0);
    }
    record_fetch_zero_copy_bytes(0);
}

/// Client connections the broker closed for `reason` (`server::closed`; 0 registers it).
pub fn record_connections_closed(reason: &'static str, n: u64) {
    counter!("brook_connections_closed_total", "reason" => reason).increment(n);
}

/// An accept held back by `max.connection.creation.rate` (Kafka's
/// `connection-accept-throttle-time`), by listener (bounded by the configuration).
pub fn record_accept_throttle(listener: &str, delay: std::time::Duration) {
    histogram!("brook_connection_accept_throttle_seconds", "listener" => listener.to_owned())
        .record(delay.as_secs_f64());
}

/// Counts a connection as active for as long as it lives.
pub struct ConnectionGuard;

impl ConnectionGuard {
    pub fn open() -> Self {
        gauge!("brook_active_connections").increment(1.0);
        counter!("brook_connections_total").increment(1);
        ConnectionGuard
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        gauge!("brook_active_connections").decrement(1.0);
    }
}

/// An ISR change this leader committed (Kafka's `IsrShrinksPerSec` / `IsrExpandsPerSec`,
/// as the JMX exporter names them, next to Brook's own).
pub fn record_isr_change(shrunk: bool) {
    if shrunk {
        counter!("kafka_server_replicamanager_isrshrinks_total").increment(1);
        counter!("brook_replica_isr_shrinks_total").increment(1);
    } else {
        counter!("kafka_server_replicamanager_isrexpands_total").increment(1);
        counter!("brook_replica_isr_expands_total").increment(1);
    }
}
