//! The broker's metric names and small recording functions; handlers never spell a
//! metric name. Names are `brook_<subsystem>_<what>_<unit>`; labels are bounded
//! (API names, topic names, partitions).

use std::time::Duration;

use brook_protocol::kafka_protocol::messages::ApiKey;
use metrics::{counter, gauge, histogram};

pub fn record_request(api_key: ApiKey, elapsed: Duration) {
    let api = format!("{api_key:?}");
    counter!("brook_requests_total", "api" => api.clone()).increment(1);
    histogram!("brook_request_duration_seconds", "api" => api).record(elapsed.as_secs_f64());
}

pub fn record_bytes_out(bytes: usize) {
    counter!("brook_network_bytes_out_total").increment(bytes as u64);
}

pub fn record_produce(topic: &str, bytes: usize, messages: u64) {
    counter!("brook_topic_bytes_in_total", "topic" => topic.to_string()).increment(bytes as u64);
    counter!("brook_topic_messages_in_total", "topic" => topic.to_string()).increment(messages);
}

pub fn record_fetch(topic: &str, bytes: usize) {
    counter!("brook_topic_bytes_out_total", "topic" => topic.to_string()).increment(bytes as u64);
}

pub fn set_log_end_offset(topic: &str, partition: i32, offset: i64) {
    gauge!("brook_partition_log_end_offset", "topic" => topic.to_string(), "partition" => partition.to_string())
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
