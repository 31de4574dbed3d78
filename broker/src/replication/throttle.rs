//! Replication throttles (KIP-73, what `kafka-reassign-partitions --throttle` sets), both
//! sides of Kafka's replication quota, for the moving replicas only:
//! - the follower leaves a partition out of its fetches while its byte rate for throttled
//!   replicas is above `follower.replication.throttled.rate`; a replica is throttled when
//!   the topic's `follower.replication.throttled.replicas` is `*` or lists
//!   `<partition>:<this broker>`, and it is not in the ISR (`fetcher.rs`);
//! - the leader answers a follower's fetch of a partition with no records while its byte
//!   rate for throttled replicas is above `leader.replication.throttled.rate`; a partition
//!   is throttled when the topic's `leader.replication.throttled.replicas` is `*` or lists
//!   `<partition>:<this broker>`, and the fetching follower is not in the ISR (Kafka's
//!   `shouldLeaderThrottle`; `handlers/fetch/leader_throttle.rs`). The records it serves
//!   any follower of a listed partition count against the rate, as in Kafka, so in-sync
//!   followers' traffic leaves less of it to the moving replicas.
//!
//! The tool lists only the replicas of the partitions being moved, so client traffic and
//! the replicas already in sync are never slowed.
//!
//! The rate is measured as Kafka's quotas measure it: bytes over a window of
//! `WINDOW_SAMPLES` one-second samples, divided by the window's length (at least
//! `WINDOW_SAMPLES - 1` seconds, so the first fetches after a quiet spell are not throttled
//! by a short elapsed time).

use std::collections::VecDeque;

use parking_lot::Mutex;

use brook_raft::MetadataImage;

/// Kafka's `replication.quota.window.num` default (samples of one second each).
const WINDOW_SAMPLES: i64 = 11;
const SAMPLE_MS: i64 = 1_000;

/// The per-broker dynamic config bounding the follower's throttled bytes per second.
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
/// The topic config naming the throttled follower replicas.
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";
/// The per-broker dynamic config bounding the leader's throttled bytes per second.
pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
/// The topic config naming the throttled leader replicas.
pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";

/// Whether `value` (a `*.replication.throttled.replicas` config) names replica `broker` of
/// `partition`: `*`, or a `partition:broker` entry.
pub fn lists_replica(value: &str, partition: i32, broker: i32) -> bool {
    let value = value.trim();
    if value == "*" {
        return true;
    }
    value.split(',').any(|entry| {
        let mut parts = entry.trim().splitn(2, ':');
        let p = parts.next().and_then(|p| p.trim().parse::<i32>().ok());
        let b = parts.next().and_then(|b| b.trim().parse::<i32>().ok());
        p == Some(partition) && b == Some(broker)
    })
}

/// This broker's `follower.replication.throttled.rate` from the image (its own dynamic
/// config, else the cluster default); `None` when unset (unthrottled, Kafka's
/// `Long.MAX_VALUE`).
pub fn follower_rate(image: &MetadataImage, node_id: i32) -> Option<u64> {
    broker_rate(image, node_id, FOLLOWER_RATE)
}

/// This broker's `leader.replication.throttled.rate`, as [`follower_rate`].
pub fn leader_rate(image: &MetadataImage, node_id: i32) -> Option<u64> {
    broker_rate(image, node_id, LEADER_RATE)
}

fn broker_rate(image: &MetadataImage, node_id: i32, key: &str) -> Option<u64> {
    [Some(node_id), None].into_iter().find_map(|id| {
        image
            .broker_configs(id)
            .and_then(|c| c.get(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
    })
}

/// Whether this broker's replica of `topic`-`partition` is a throttled follower: listed in
/// the topic's `follower.replication.throttled.replicas` and not in the ISR (Kafka's
/// `shouldFollowerThrottle`: an in-sync replica is never held back).
pub fn follower_throttled(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    node_id: i32,
) -> bool {
    let Some(t) = image.topic(topic) else {
        return false;
    };
    let in_sync = t
        .partitions
        .get(&partition)
        .is_some_and(|p| p.isr.contains(&node_id));
    !in_sync
        && t.configs
            .get(FOLLOWER_REPLICAS)
            .is_some_and(|v| lists_replica(v, partition, node_id))
}

/// Whether this leader's (`node_id`) replica of `topic`-`partition` is listed in the
/// topic's `leader.replication.throttled.replicas`: the bytes it serves any follower count
/// against the leader's rate (Kafka's `sizeOfThrottledPartitions`, in-sync followers
/// included).
pub fn leader_listed(image: &MetadataImage, topic: &str, partition: i32, node_id: i32) -> bool {
    image.topic(topic).is_some_and(|t| {
        t.configs
            .get(LEADER_REPLICAS)
            .is_some_and(|v| lists_replica(v, partition, node_id))
    })
}

/// Whether `follower` is in the ISR of `topic`-`partition`: an in-sync follower is never
/// held back (Kafka's `shouldLeaderThrottle`).
pub fn in_sync(image: &MetadataImage, topic: &str, partition: i32, follower: i32) -> bool {
    image
        .topic(topic)
        .and_then(|t| t.partitions.get(&partition))
        .is_some_and(|p| p.isr.contains(&follower))
}

/// A byte rate over a sliding window of one-second samples.
#[derive(Debug, Default)]
pub struct ReplicationQuota {
    /// (sample start ms, bytes), oldest first.
    samples: Mutex<VecDeque<(i64, u64)>>,
}

impl ReplicationQuota {
    pub fn record(&self, bytes: u64, now_ms: i64) {
        let mut samples = self.samples.lock();
        expire(&mut samples, now_ms);
        let start = now_ms - now_ms.rem_euclid(SAMPLE_MS);
        match samples.back_mut() {
            Some((s, b)) if *s == start => *b = b.saturating_add(bytes),
            _ => samples.push_back((start, bytes)),
        }
    }

    /// The measured rate in bytes per second.
    pub fn rate(&self, now_ms: i64) -> f64 {
        let mut samples = self.samples.lock();
        expire(&mut samples, now_ms);
        let total: u64 = samples.iter().map(|(_, b)| b).sum();
        let elapsed_ms = samples
            .front()
            .map_or(0, |(start, _)| now_ms - start)
            .max((WINDOW_SAMPLES - 1) * SAMPLE_MS);
        total as f64 * 1_000.0 / elapsed_ms as f64
    }

    /// Whether the rate is above `bound` bytes per second.
    pub fn exceeded(&self, bound: u64, now_ms: i64) -> bool {
        self.rate(now_ms) > bound as f64
    }
}

fn expire(samples: &mut VecDeque<(i64, u64)>, now_ms: i64) {
    while samples
        .front()
        .is_some_and(|(start, _)| now_ms - start >= WINDOW_SAMPLES * SAMPLE_MS)
    {
        samples.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_listed_as_kafka_writes_them() {
        assert!(lists_replica("*", 3, 7));
        assert!(lists_replica("0:1, 1:4,2:4", 1, 4));
        assert!(!lists_replica("0:1,1:4", 1, 1));
        assert!(!lists_replica("", 0, 1));
        assert!(!lists_replica("garbage", 0, 1));
    }

    #[test]
    fn the_rate_is_bytes_over_the_window_and_forgets_old_samples() {
        let quota = ReplicationQuota::default();
        let t0 = 1_000_000;
        quota.record(10_000, t0);
        // Averaged over at least ten seconds: 1,000 B/s.
        assert!((quota.rate(t0 + 500) - 1_000.0).abs() < 1.0);
        assert!(quota.exceeded(999, t0 + 500));
        assert!(!quota.exceeded(1_000, t0 + 500));
        // Eleven seconds on, the sample has left the window.
        assert_eq!(quota.rate(t0 + 11_000), 0.0);
        assert!(!quota.exceeded(1, t0 + 11_000));
    }
}
