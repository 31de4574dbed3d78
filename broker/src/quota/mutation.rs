//! `controller_mutation_rate` (KIP-599): partitions created, added or deleted per second by a
//! user / client id, with the byte-rate quotas' precedence (`resolve`). Kafka measures it
//! with a token bucket (`TokenBucket`, `ControllerMutationQuotaManager`): the bucket holds
//! up to `quota × 11 windows × 1 s` tokens, refills at the quota, starts full, and each
//! mutation takes its partition count (it may go below zero).
//!
//! CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ are strict: before each topic
//! the bucket is checked, and once it is below zero that topic is refused with
//! THROTTLING_QUOTA_EXCEEDED and the time to refill the deficit (the topic that took it
//! below zero still went through). Older versions are permissive: every topic goes through,
//! and a bucket left below zero throttles the response. Either way the response carries
//! the last throttle time (less the time since it was computed) and the connection reads
//! nothing for that long (KIP-219), as Kafka's `sendResponseMaybeThrottleWithControllerQuota`.
//!
//! Kafka measures on its active controller, so the quota is cluster-wide; Brook measures on
//! the broker that receives the request (the same on one node). Admin requests are rare:
//! each resolves its quota anew, under the sensor map's lock, outside any `.await`.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::rate::{SAMPLES, WINDOW_MS};

/// One sensor's bucket, shared by the requests of every client it measures.
pub type SharedBucket = Arc<Mutex<TokenBucket>>;

/// Kafka's `TokenBucket` on a caller's clock (ms).
#[derive(Debug, Default, Clone)]
pub struct TokenBucket {
    tokens: f64,
    /// `None` until first used: Kafka's bucket starts at time 0 with no tokens, so its first
    /// refill fills it.
    last_ms: Option<u64>,
}

impl TokenBucket {
    fn refill(&mut self, quota: f64, now_ms: u64) {
        let burst = burst(quota);
        self.tokens = match self.last_ms {
            None => burst,
            Some(last) => {
                let elapsed_s = now_ms.saturating_sub(last) as f64 / 1000.0;
                (self.tokens + quota * elapsed_s).min(burst)
            }
        };
        self.last_ms = Some(now_ms);
    }

    /// The throttle time in ms if the bucket is below zero now (Kafka's `checkQuotas` and
    /// `throttleTimeMs`: `-tokens / quota` seconds).
    pub fn check(&mut self, quota: f64, now_ms: u64) -> Option<u64> {
        self.refill(quota, now_ms);
        (self.tokens < 0.0).then(|| throttle_ms(self.tokens, quota))
    }

    pub fn record(&mut self, quota: f64, value: f64, now_ms: u64) {
        self.refill(quota, now_ms);
        self.tokens = (self.tokens - value).min(burst(quota));
    }

    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

fn burst(quota: f64) -> f64 {
    SAMPLES as f64 * (WINDOW_MS as f64 / 1000.0) * quota
}

fn throttle_ms(tokens: f64, quota: f64) -> u64 {
    let ms = (-tokens / quota * 1000.0).round();
    if ms.is_finite() && ms > 0.0 {
        ms as u64
    } else {
        0
    }
}

/// Whether a request version refuses topics over the quota or only throttles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Strict,
    Permissive,
}

impl Mode {
    /// Strict from the version KIP-599 gave the API THROTTLING_QUOTA_EXCEEDED.
    pub fn for_version(version: i16, strict_since: i16) -> Mode {
        if version >= strict_since {
            Mode::Strict
        } else {
            Mode::Permissive
        }
    }
}

/// The topic is refused: the quota is exceeded for this long (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaExceeded {
    pub throttle_ms: u64,
}

/// One request's controller mutation quota (Kafka's `ControllerMutationQuota`).
pub struct MutationQuota {
    bucket: Option<(SharedBucket, f64)>,
    mode: Mode,
    throttle_ms: u64,
    recorded_at: Instant,
}

impl MutationQuota {
    /// No quota applies.
    pub fn unbounded() -> MutationQuota {
        MutationQuota {
            bucket: None,
            mode: Mode::Permissive,
            throttle_ms: 0,
            recorded_at: Instant::now(),
        }
    }

    pub(super) fn new(bucket: SharedBucket, quota: f64, mode: Mode) -> MutationQuota {
        MutationQuota {
            bucket: Some((bucket, quota)),
            ..MutationQuota::unbounded()
        }
        .with_mode(mode)
    }

    fn with_mode(mut self, mode: Mode) -> MutationQuota {
        self.mode = mode;
        self
    }

    /// Kafka's `applyPartitionChangeQuota` for a topic mutating `partitions` partitions:
    /// `Err` (strict only) when the topic must be refused.
    pub fn apply(&mut self, partitions: usize) -> Result<(), QuotaExceeded> {
        let Some((bucket, quota)) = &self.bucket else {
            return Ok(());
        };
        let now = super::now_ms();
        let mut bucket = bucket.lock();
        match self.mode {
            Mode::Strict => {
                if let Some(throttle_ms) = bucket.check(*quota, now) {
                    self.throttle_ms = throttle_ms;
                    self.recorded_at = Instant::now();
                    return Err(QuotaExceeded { throttle_ms });
                }
                bucket.record(*quota, partitions as f64, now);
            }
            Mode::Permissive => {
                bucket.record(*quota, partitions as f64, now);
                if let Some(throttle_ms) = bucket.check(*quota, now) {
                    self.throttle_ms = throttle_ms;
                    self.recorded_at = Instant::now();
                }
            }
        }
        Ok(())
    }

    /// The throttle time for the response: the last one computed, less the time since
    /// (Kafka's `throttleTime`: the request may have waited meanwhile).
    pub fn throttle_ms(&self) -> u64 {
        let elapsed = u64::try_from(self.recorded_at.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.throttle_ms.saturating_sub(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_bucket_holds_eleven_seconds_of_quota_and_refills_at_the_quota() {
        let mut bucket = TokenBucket::default();
        assert_eq!(bucket.check(2.0, 50_000), None);
        assert_eq!(bucket.tokens(), 22.0);
        bucket.record(2.0, 30.0, 50_000);
        assert_eq!(bucket.tokens(), -8.0);
        // 8 tokens short at 2 a second: 4 s.
        assert_eq!(bucket.check(2.0, 50_000), Some(4_000));
        assert_eq!(bucket.check(2.0, 51_000), Some(3_000));
        assert_eq!(bucket.check(2.0, 54_000), None);
        // Never above the burst.
        assert_eq!(bucket.check(2.0, 500_000), None);
        assert_eq!(bucket.tokens(), 22.0);
    }

    #[test]
    fn strict_refuses_the_topics_after_the_one_that_emptied_the_bucket() {
        let bucket = Arc::new(Mutex::new(TokenBucket::default()));
        let mut quota = MutationQuota::new(bucket.clone(), 1.0, Mode::Strict);
        // 11 tokens: a topic of 20 partitions goes through and leaves -9.
        assert_eq!(quota.apply(20), Ok(()));
        assert_eq!(quota.throttle_ms(), 0);
        let refused = quota.apply(1).expect_err("below zero");
        assert!(
            (8_900..=9_000).contains(&refused.throttle_ms),
            "{refused:?}"
        );
        assert!(quota.throttle_ms() > 8_000);
    }

    #[test]
    fn permissive_lets_every_topic_through_and_throttles_the_response() {
        let bucket = Arc::new(Mutex::new(TokenBucket::default()));
        let mut quota = MutationQuota::new(bucket, 1.0, Mode::Permissive);
        assert_eq!(quota.apply(10), Ok(()));
        assert_eq!(quota.throttle_ms(), 0);
        assert_eq!(quota.apply(5), Ok(()));
        assert!((3_900..=4_000).contains(&quota.throttle_ms()));
        assert_eq!(Mode::for_version(5, 6), Mode::Permissive);
        assert_eq!(Mode::for_version(6, 6), Mode::Strict);
    }
}
