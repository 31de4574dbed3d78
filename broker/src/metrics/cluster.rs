//! Cluster gauges, refreshed from the metadata image every second: brokers registered /
//! unfenced / fenced, whether this node is the active controller (the quorum leader) and
//! who is, the partitions this broker leads and holds, and the partitions without a
//! leader. Every node reports the cluster-wide ones, so a dashboard can read any of them.
//! Replication gauges (under-replicated / under-min-ISR partitions, leader and partition
//! counts, follower lag) are reported by each partition's leader, under the names Kafka's
//! JMX exporter gives them next to Brook's own, so a cluster-wide sum counts each once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use metrics::gauge;
use tokio_util::sync::CancellationToken;

use crate::broker::Broker;

/// Runs until `shutdown`; owned by the process's task tracker.
pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let mut lag_series = HashSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        record(&broker);
        record_follower_lag(&broker, &mut lag_series);
    }
}

/// Follower lag as the leader sees it (Kafka reports it on the follower, as
/// `FetcherLagMetrics`; the leader knows both ends). Series of partitions this broker no
/// longer leads drop to 0 rather than keep a stale lag.
fn record_follower_lag(broker: &Broker, reported: &mut HashSet<[(&'static str, String); 3]>) {
    let now_ms = brook_storage::log_manager::now_ms();
    let mut current = HashSet::new();
    for state in broker.replicas.leaders() {
        let lags = state.follower_lags(now_ms);
        if lags.is_empty() {
            continue;
        }
        let leo = state.log.log_end_offset();
        for (replica, follower_leo, since_caught_up_ms) in lags {
            let labels = [
                ("topic", state.topic.clone()),
                ("partition", state.partition.to_string()),
                ("replica", replica.to_string()),
            ];
            let lag = if follower_leo < 0 {
                leo
            } else {
                (leo - follower_leo).max(0)
            };
            gauge!("brook_replica_follower_lag_messages", &labels).set(lag as f64);
            gauge!("brook_replica_follower_lag_seconds", &labels)
                .set(since_caught_up_ms.max(0) as f64 / 1000.0);
            current.insert(labels);
        }
    }
    for labels in reported.difference(&current) {
        gauge!("brook_replica_follower_lag_messages", labels).set(0.0);
        gauge!("brook_replica_follower_lag_seconds", labels).set(0.0);
    }
    *reported = current;
}

fn record(broker: &Broker) {
    let image = broker.image();
    let registered = image.brokers.len();
    let unfenced = image.active_brokers().count();
    gauge!("brook_cluster_brokers_registered").set(registered as f64);
    gauge!("brook_cluster_brokers_unfenced").set(unfenced as f64);
    gauge!("brook_cluster_brokers_fenced").set((registered - unfenced) as f64);
    let leader = broker.quorum.leader();
    let active = leader == u64::try_from(broker.node_id).ok();
    gauge!("brook_controller_active").set(if active { 1.0 } else { 0.0 });
    gauge!("brook_controller_leader_id").set(leader.map_or(-1.0, |id| id as f64));
    let (mut led, mut held, mut offline) = (0u64, 0u64, 0u64);
    let (mut under_replicated, mut under_min_isr) = (0u64, 0u64);
    // Looked up only for an under-replicated partition (a full ISR is never under its
    // minimum): an idle broker with 100,000 partitions pays no map of them every second.
    let min_isr = |topic: &str, partition: i32| {
        broker
            .replicas
            .get(topic, partition)
            .and_then(Result::ok)
            .and_then(|p| p.leader_state())
            .map_or(1, |l| l.min_isr() as usize)
    };
    for topic in image.topics.values() {
        for p in topic.partitions.values() {
            if p.leader == broker.node_id {
                led += 1;
                // Kafka counts these on the leader, so a cluster sum counts each once.
                if p.isr.len() < p.replicas.len() {
                    under_replicated += 1;
                    if p.isr.len() < min_isr(&topic.name, p.partition).min(p.replicas.len()) {
                        under_min_isr += 1;
                    }
                }
            }
            if p.replicas.contains(&broker.node_id) {
                held += 1;
            }
            if !p.has_leader() {
                offline += 1;
            }
        }
    }
    gauge!("brook_replica_leader_partitions").set(led as f64);
    gauge!("brook_replica_partitions").set(held as f64);
    gauge!("brook_cluster_offline_partitions").set(offline as f64);
    gauge!("brook_replica_under_replicated_partitions").set(under_replicated as f64);
    gauge!("kafka_server_replicamanager_underreplicatedpartitions").set(under_replicated as f64);
    gauge!("kafka_cluster_partition_underminisr").set(under_min_isr as f64);
    gauge!("kafka_server_replicamanager_partitioncount").set(held as f64);
    gauge!("kafka_server_replicamanager_leadercount").set(led as f64);
    gauge!("kafka_controller_kafkacontroller_offlinepartitionscount").set(offline as f64);
}
