//! Client quotas (Kafka's `ClientQuotaManager` with its `DefaultQuotaCallback`): byte-rate
//! quotas on Produce and Fetch and the request-time quota (`request_percentage`) on every
//! request a client sends, per broker, by user and client id with Kafka's precedence
//! (`resolve`), measured over Kafka's 11 × 1 s window (`rate`), enforced KIP-219 style: the
//! response carries `throttle_time_ms` and goes out at once, then the connection reads
//! nothing for that long (`server::connection`).
//!
//! Hot path: with no user or client quota configured, a request costs one atomic load
//! ([`ClientQuotas::enabled`]). Otherwise each connection caches what its (principal,
//! client id) resolves to ([`SessionQuotas`]), checked against a generation bumped on every
//! quota change, so a request does one uncontended per-connection lock and one lock of the
//! sensor it records into; the shared sensor map is locked only on a cache miss. No lock is
//! held across an `.await` (there are none here).
//!
//! Sensors are shared as Kafka shares them: by the metric tags the precedence gives (a quota
//! on `user=alice` is one sensor for all of alice's clients; one on `client-id=<default>`
//! one sensor per client id). Only clients under a quota get a sensor; a sensor no
//! connection uses and idle for an hour goes (Kafka expires them after an hour too).
//! Metrics are labelled by the configured entity that applied, so their cardinality is
//! bounded by the configuration, not by clients.

pub mod enforce;
pub mod entity;
pub mod mutation;
pub mod rate;
pub mod request_time;
pub mod resolve;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use brook_raft::ClientQuotasImage;
use parking_lot::{Mutex, RwLock};

use crate::metrics::quota::QuotaProbe;
use rate::Rate;
use resolve::resolve;

/// A byte-rate quota a request is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// `producer_byte_rate`: the size of each Produce request.
    Produce,
    /// `consumer_byte_rate`: the size of each Fetch response.
    Fetch,
    /// `request_percentage`: the time spent handling each request, as a percentage of one
    /// thread's second (Kafka's `ClientRequestQuotaManager`).
    Request,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => entity::PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => entity::CONSUMER_BYTE_RATE,
            QuotaKind::Request => entity::REQUEST_PERCENTAGE,
        }
    }

    /// The metrics label (Kafka's quota type names).
    pub fn label(self) -> &'static str {
        match self {
            QuotaKind::Produce => "produce",
            QuotaKind::Fetch => "fetch",
            QuotaKind::Request => "request",
        }
    }

    const ALL: [QuotaKind; 3] = [QuotaKind::Produce, QuotaKind::Fetch, QuotaKind::Request];

    fn index(self) -> usize {
        match self {
            QuotaKind::Produce => 0,
            QuotaKind::Fetch => 1,
            QuotaKind::Request => 2,
        }
    }
}

/// Sensors idle this long with no connection holding them are dropped.
const SENSOR_IDLE_MS: u64 = 3_600_000;

/// One set of metric tags' measurement (Kafka's quota sensor).
pub struct Sensor {
    rate: Mutex<Rate>,
    last_ms: AtomicU64,
    probe: QuotaProbe,
}

/// What a (principal, client id) resolves to for one quota kind.
#[derive(Clone)]
struct Resolved {
    sensor: Arc<Sensor>,
    bound: f64,
}

/// A connection's cached resolution.
struct Cached {
    generation: u64,
    user: String,
    client_id: String,
    by_kind: [Option<Resolved>; 3],
}

/// Per connection: the quotas its client resolved to, until the quotas or its client id
/// change. Owned by the connection's `Session`.
#[derive(Default)]
pub struct SessionQuotas(Mutex<Option<Cached>>);

impl std::fmt::Debug for SessionQuotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionQuotas")
    }
}

#[derive(Default)]
pub struct ClientQuotas {
    /// Any user or client-id quota configured: false keeps requests off every lock.
    enabled: AtomicBool,
    /// Bumped on every change of the quotas; connection caches compare it.
    generation: AtomicU64,
    quotas: RwLock<ClientQuotasImage>,
    sensors: Mutex<HashMap<(QuotaKind, String, String), Arc<Sensor>>>,
    /// `controller_mutation_rate` buckets by the metric tags the precedence gives.
    mutation_buckets: Mutex<HashMap<(String, String), mutation::SharedBucket>>,
}

impl ClientQuotas {
    /// Whether any user or client-id quota is configured (one atomic load).
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Follows the metadata image: a changed quota set bumps the generation so every
    /// connection re-resolves on its next request.
    pub fn update(&self, image: &ClientQuotasImage) {
        if self.quotas.read().same(image) {
            return;
        }
        let any = image.entities().any(|(e, _)| !e.contains_key(entity::IP));
        *self.quotas.write() = image.clone();
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.enabled.store(any, Ordering::Release);
    }

    /// The `controller_mutation_rate` quota one CreateTopics, CreatePartitions or DeleteTopics
    /// request is measured against (`mutation`).
    pub fn mutation_quota(
        &self,
        user: &str,
        client_id: &str,
        mode: mutation::Mode,
    ) -> mutation::MutationQuota {
        if !self.enabled() {
            return mutation::MutationQuota::unbounded();
        }
        let quotas = self.quotas.read().clone();
        let Some(found) = resolve(&quotas, entity::CONTROLLER_MUTATION_RATE, user, client_id)
        else {
            return mutation::MutationQuota::unbounded();
        };
        let bucket = self
            .mutation_buckets
            .lock()
            .entry((found.user_tag, found.client_tag))
            .or_default()
            .clone();
        mutation::MutationQuota::new(bucket, found.bound, mode)
    }

    /// Records `value` against the client's `kind` quota and returns the throttle time in
    /// ms (0 when within its quota or under none).
    pub fn record(
        &self,
        cache: &SessionQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
    ) -> u64 {
        if !self.enabled() {
            return 0;
        }
        let Some(resolved) = self.resolved(cache, kind, user, client_id) else {
            return 0;
        };
        let now = now_ms();
        resolved.sensor.last_ms.store(now, Ordering::Relaxed);
        if kind != QuotaKind::Request {
            resolved.sensor.probe.bytes(value);
        }
        let mut rate = resolved.sensor.rate.lock();
        let throttle = rate.record_and_throttle_ms(value, resolved.bound, now);
        if kind == QuotaKind::Request {
            // Kafka bounds the request quota's throttle at one window
            // (`ClientRequestQuotaManager.throttleTime`).
            throttle.min(rate::WINDOW_MS)
        } else {
            throttle
        }
    }

    /// Takes back a value recorded for a request answered without it (Kafka's
    /// `unrecordQuotaSensor`: a throttled fetch returns no data).
    pub fn unrecord(
        &self,
        cache: &SessionQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
    ) {
        if let Some(resolved) = self.resolved(cache, kind, user, client_id) {
            resolved.sensor.probe.bytes(-value);
            resolved.sensor.rate.lock().record(-value, now_ms());
        }
    }

    /// The client's `kind` quota in bytes per second, if it has one.
    pub fn bound(
        &self,
        cache: &SessionQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
    ) -> Option<f64> {
        if !self.enabled() {
            return None;
        }
        self.resolved(cache, kind, user, client_id).map(|r| r.bound)
    }

    /// Notes that a client was throttled, for the metrics (Kafka's throttle-time sensor).
    pub fn throttled(
        &self,
        cache: &SessionQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        throttle_ms: u64,
    ) {
        if let Some(resolved) = self.resolved(cache, kind, user, client_id) {
            resolved.sensor.probe.throttled(throttle_ms);
        }
    }

    fn resolved(
        &self,
        cache: &SessionQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
    ) -> Option<Resolved> {
        let generation = self.generation.load(Ordering::Acquire);
        let mut cached = cache.0.lock();
        let fresh = cached.as_ref().is_some_and(|c| {
            c.generation == generation && c.user == user && c.client_id == client_id
        });
        if !fresh {
            *cached = Some(self.resolve_all(generation, user, client_id));
        }
        cached
            .as_ref()
            .and_then(|c| c.by_kind[kind.index()].clone())
    }

    /// The slow path: both kinds' precedence walks, and their sensors found or made.
    fn resolve_all(&self, generation: u64, user: &str, client_id: &str) -> Cached {
        let quotas = self.quotas.read().clone();
        let mut sensors = self.sensors.lock();
        let now = now_ms();
        let mut by_kind: [Option<Resolved>; 3] = [None, None, None];
        for kind in QuotaKind::ALL {
            let Some(found) = resolve(&quotas, kind.key(), user, client_id) else {
                continue;
            };
            let key = (kind, found.user_tag, found.client_tag);
            let sensor = sensors
                .entry(key)
                .or_insert_with(|| {
                    Arc::new(Sensor {
                        rate: Mutex::new(Rate::default()),
                        last_ms: AtomicU64::new(now),
                        probe: QuotaProbe::new(kind.label(), &found.entity_label),
                    })
                })
                .clone();
            by_kind[kind.index()] = Some(Resolved {
                sensor,
                bound: found.bound,
            });
        }
        // Sensors nobody holds (only the map's reference) and long idle go.
        sensors.retain(|_, s| {
            Arc::strong_count(s) > 1
                || now.saturating_sub(s.last_ms.load(Ordering::Relaxed)) < SENSOR_IDLE_MS
        });
        Cached {
            generation,
            user: user.to_owned(),
            client_id: client_id.to_owned(),
            by_kind,
        }
    }
}

/// Milliseconds on a monotonic clock (the rate needs only differences).
pub(crate) fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}
