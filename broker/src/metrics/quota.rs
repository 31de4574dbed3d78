//! Client-quota metrics in the spirit of Kafka's per-client `byte-rate` and
//! `throttle-time` (`kafka.server:type=Produce|Fetch,user=…,client-id=…`), labelled by
//! `quota` (`produce`, `fetch`) and the configured `entity` that applied
//! (`user=alice,client-id=<default>`): bounded by the quota configuration, never by the
//! number of clients.
//!
//! - `brook_quota_bytes_total`: bytes counted against the quota (a rate in PromQL);
//! - `brook_quota_throttle_time_seconds`: each throttle imposed (histogram; its count is
//!   the number of throttled requests).

use metrics::{counter, histogram, Counter, Histogram};

/// One sensor's metric handles, registered once when the sensor is made.
pub struct QuotaProbe {
    bytes: Counter,
    throttle: Histogram,
}

impl QuotaProbe {
    pub fn new(quota: &'static str, entity: &str) -> QuotaProbe {
        let entity = entity.to_owned();
        QuotaProbe {
            bytes: counter!("brook_quota_bytes_total", "quota" => quota, "entity" => entity.clone()),
            throttle: histogram!(
                "brook_quota_throttle_time_seconds",
                "quota" => quota,
                "entity" => entity
            ),
        }
    }

    /// Bytes counted (negative: a throttled fetch's bytes taken back, which a counter
    /// cannot show, so those are left counted as sent-and-unsent).
    pub fn bytes(&self, value: f64) {
        if value > 0.0 {
            // Sizes are whole bytes well below 2^53.
            self.bytes.increment(value as u64);
        }
    }

    pub fn throttled(&self, throttle_ms: u64) {
        self.throttle.record(throttle_ms as f64 / 1000.0);
    }
}
