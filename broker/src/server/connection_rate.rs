//! Connection creation rates, as Kafka's `ConnectionQuotas` limits them (KIP-612):
//! - `max.connection.creation.rate` (broker-wide) and
//!   `listener.name.<listener>.max.connection.creation.rate`: a connection accepted past the
//!   rate is served late — the accept loop waits until the rate is back under the bound (at
//!   most one quota window, 1 s, per connection), so new connections wait in the listen
//!   queue ([`ConnectionRates::accept_delay`]).
//! - `connection_creation_rate` of an `ips` quota entity (`kafka-configs --entity-type ips`,
//!   a named address or `--entity-default`): a connection from an address past its rate is
//!   not served at all; it is held for the throttle time (so a client cannot retry at once)
//!   and then closed, and it is taken back out of every rate it was counted in
//!   ([`ConnectionRates::ip_throttle`]).
//!
//! Rates are Kafka's quota `Rate` (`quota::rate`: 11 samples of 1 s, a new sensor measured
//! over at least 10 s), and a throttle is `(observed - bound) / bound × window`, capped at
//! one window (`QuotaUtils.boundedThrottleTime`). Only configured rates are measured: with
//! none configured an accept costs one atomic load. Otherwise one short mutex per accept,
//! never per request, never across an `.await`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use brook_raft::ClientQuotasImage;
use parking_lot::Mutex;

use crate::config::connections::{canonical, ConnectionLimits};
use crate::quota::entity;
use crate::quota::rate::{Rate, SAMPLES, WINDOW_MS};

/// Kafka caps a connection's throttle at one quota window.
const MAX_THROTTLE_MS: u64 = WINDOW_MS;

/// A rate with its bound (connections per second).
#[derive(Default)]
struct Bounded {
    bound: f64,
    rate: Rate,
}

impl Bounded {
    /// Counts one connection; the throttle time if that takes the rate past the bound.
    fn record(&mut self, now_ms: u64) -> u64 {
        self.rate
            .record_and_throttle_ms(1.0, self.bound, now_ms)
            .min(MAX_THROTTLE_MS)
    }

    /// Takes back a connection that was not served (Kafka records -1).
    fn unrecord(&mut self, now_ms: u64) {
        self.rate.record(-1.0, now_ms);
    }
}

#[derive(Default)]
struct State {
    broker: Option<Bounded>,
    listeners: HashMap<String, Bounded>,
    ip_default: Option<f64>,
    ip_overrides: HashMap<IpAddr, f64>,
    /// The measured addresses, with the time each last connected.
    ips: HashMap<IpAddr, (Bounded, u64)>,
    last_prune_ms: u64,
}

impl State {
    fn enabled(&self) -> bool {
        self.broker.is_some()
            || !self.listeners.is_empty()
            || self.ip_default.is_some()
            || !self.ip_overrides.is_empty()
    }

    fn ip_bound(&self, ip: IpAddr) -> Option<f64> {
        self.ip_overrides.get(&ip).copied().or(self.ip_default)
    }

    /// Addresses silent for the whole window have nothing left to measure.
    fn prune(&mut self, now_ms: u64) {
        let window = SAMPLES as u64 * WINDOW_MS;
        if now_ms.saturating_sub(self.last_prune_ms) < window {
            return;
        }
        self.last_prune_ms = now_ms;
        self.ips
            .retain(|_, (_, last)| now_ms.saturating_sub(*last) < window);
    }
}

#[derive(Default)]
pub struct ConnectionRates {
    /// Any creation rate configured: false keeps accepts off the lock.
    enabled: AtomicBool,
    state: Mutex<State>,
}

impl ConnectionRates {
    /// The broker-wide and listener rates from the socket limits (a changed bound keeps
    /// what was measured, as Kafka reconfigures its sensor's quota).
    pub fn set_limits(&self, limits: &ConnectionLimits) {
        let mut state = self.state.lock();
        let bounded = |existing: Option<Bounded>, bound: u32| Bounded {
            bound: f64::from(bound),
            rate: existing.map(|b| b.rate).unwrap_or_default(),
        };
        state.broker = limits
            .max_connection_creation_rate
            .map(|bound| bounded(state.broker.take(), bound));
        let mut previous = std::mem::take(&mut state.listeners);
        state.listeners = limits
            .listener_creation_rates
            .iter()
            .map(|(name, bound)| (name.clone(), bounded(previous.remove(name), *bound)))
            .collect();
        self.enabled.store(state.enabled(), Ordering::Release);
    }

    /// The `connection_creation_rate` quotas of the `ips` entities in the metadata image.
    pub fn set_ip_quotas(&self, image: &ClientQuotasImage) {
        let mut default = None;
        let mut overrides = HashMap::new();
        for (quota_entity, values) in image.entities() {
            let Some(ip) = quota_entity.get(entity::IP) else {
                continue;
            };
            let Some(rate) = values.get(entity::CONNECTION_CREATION_RATE).copied() else {
                continue;
            };
            match ip {
                None => default = Some(rate),
                Some(name) => {
                    // Validated when stored (`quota::entity`); an address that does not
                    // parse cannot match a peer anyway.
                    if let Ok(addr) = name.parse::<IpAddr>() {
                        overrides.insert(canonical(addr), rate);
                    }
                }
            }
        }
        let mut state = self.state.lock();
        if state.ip_default == default && state.ip_overrides == overrides {
            return;
        }
        state.ip_default = default;
        state.ip_overrides = overrides;
        let enabled = state.enabled();
        // New bounds apply to the measured addresses; those left without one go.
        let State {
            ips,
            ip_default,
            ip_overrides,
            ..
        } = &mut *state;
        ips.retain(
            |ip, (b, _)| match ip_overrides.get(ip).copied().or(*ip_default) {
                Some(bound) => {
                    b.bound = bound;
                    true
                }
                None => false,
            },
        );
        self.enabled.store(enabled, Ordering::Release);
    }

    /// Counts a connection just accepted on `listener` against the broker-wide and the
    /// listener's rate, and returns how long to wait before serving it (and accepting the
    /// next): the longer of the two throttles.
    pub fn accept_delay(&self, listener: &str) -> Duration {
        if !self.enabled.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        let now = crate::quota::now_ms();
        let mut state = self.state.lock();
        let broker = state.broker.as_mut().map_or(0, |b| b.record(now));
        let listener = state
            .listeners
            .get_mut(listener)
            .map_or(0, |b| b.record(now));
        Duration::from_millis(broker.max(listener))
    }

    /// Counts a connection from `ip` against its address's rate. `Some(throttle)` when it
    /// is past it: the connection is not served, and is taken back out of the address's,
    /// the listener's and the broker's rates (Kafka's `recordIpConnectionMaybeThrottle`).
    pub fn ip_throttle(&self, listener: &str, ip: IpAddr) -> Option<Duration> {
        if !self.enabled.load(Ordering::Acquire) {
            return None;
        }
        let ip = canonical(ip);
        let now = crate::quota::now_ms();
        let mut state = self.state.lock();
        let bound = state.ip_bound(ip)?;
        state.prune(now);
        let (measured, last) = state.ips.entry(ip).or_insert_with(|| {
            (
                Bounded {
                    bound,
                    rate: Rate::default(),
                },
                now,
            )
        });
        *last = now;
        let throttle = measured.record(now);
        if throttle == 0 {
            return None;
        }
        measured.unrecord(now);
        if let Some(b) = state.broker.as_mut() {
            b.unrecord(now);
        }
        if let Some(b) = state.listeners.get_mut(listener) {
            b.unrecord(now);
        }
        Some(Duration::from_millis(throttle))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use brook_raft::QuotaAlteration;

    use super::*;

    fn ip_quotas(entries: &[(Option<&str>, f64)]) -> ClientQuotasImage {
        let mut image = ClientQuotasImage::default();
        let alterations: Vec<QuotaAlteration> = entries
            .iter()
            .map(|(ip, rate)| QuotaAlteration {
                entity: BTreeMap::from([(entity::IP.to_owned(), ip.map(str::to_owned))]),
                set: BTreeMap::from([(entity::CONNECTION_CREATION_RATE.to_owned(), *rate)]),
                remove: Vec::new(),
            })
            .collect();
        image.alter(&alterations);
        image
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[test]
    fn with_no_rate_configured_nothing_is_measured() {
        let rates = ConnectionRates::default();
        rates.set_limits(&ConnectionLimits::default());
        for _ in 0..1_000 {
            assert_eq!(rates.accept_delay("PLAINTEXT"), Duration::ZERO);
            assert_eq!(rates.ip_throttle("PLAINTEXT", ip("127.0.0.1")), None);
        }
        assert!(rates.state.lock().ips.is_empty());
    }

    #[test]
    fn an_address_past_its_rate_is_refused_and_another_is_not() {
        let rates = ConnectionRates::default();
        rates.set_ip_quotas(&ip_quotas(&[(Some("127.0.0.4"), 2.0)]));
        // A new sensor is measured over 10 s: 20 connections fit, the 21st is past 2/s.
        for n in 0..20 {
            assert_eq!(rates.ip_throttle("PLAINTEXT", ip("127.0.0.4")), None, "{n}");
        }
        let refused = rates
            .ip_throttle("PLAINTEXT", ip("::ffff:127.0.0.4"))
            .expect("past the rate");
        assert!(refused > Duration::ZERO && refused <= Duration::from_secs(1));
        // A refused connection is not counted: the next is refused for no longer.
        let again = rates
            .ip_throttle("PLAINTEXT", ip("127.0.0.4"))
            .expect("still past");
        assert!(again <= refused + Duration::from_millis(5));
        for _ in 0..100 {
            assert_eq!(rates.ip_throttle("PLAINTEXT", ip("127.0.0.5")), None);
        }
    }

    #[test]
    fn the_default_applies_to_addresses_without_their_own_rate() {
        let rates = ConnectionRates::default();
        rates.set_ip_quotas(&ip_quotas(&[(None, 1.0), (Some("127.0.0.9"), 1000.0)]));
        let refused = (0..20)
            .filter(|_| rates.ip_throttle("PLAINTEXT", ip("127.0.0.8")).is_some())
            .count();
        assert_eq!(refused, 10);
        assert!((0..200).all(|_| rates.ip_throttle("PLAINTEXT", ip("127.0.0.9")).is_none()));
        // Removing the quotas stops the measuring.
        rates.set_ip_quotas(&ClientQuotasImage::default());
        assert_eq!(rates.ip_throttle("PLAINTEXT", ip("127.0.0.8")), None);
        assert!(rates.state.lock().ips.is_empty());
    }

    #[test]
    fn past_the_broker_rate_accepting_waits_at_most_a_window() {
        let rates = ConnectionRates::default();
        let limits = ConnectionLimits {
            max_connection_creation_rate: Some(5),
            ..ConnectionLimits::default()
        };
        rates.set_limits(&limits);
        let delays: Vec<Duration> = (0..60).map(|_| rates.accept_delay("PLAINTEXT")).collect();
        assert!(delays[..50].iter().all(Duration::is_zero));
        assert!(delays[50..]
            .iter()
            .all(|d| *d > Duration::ZERO && *d <= Duration::from_secs(1)));
    }

    #[test]
    fn a_listener_rate_applies_to_its_own_listener_only() {
        let rates = ConnectionRates::default();
        let limits = ConnectionLimits {
            listener_creation_rates: BTreeMap::from([("INTERNAL".to_owned(), 1)]),
            ..ConnectionLimits::default()
        };
        rates.set_limits(&limits);
        assert!((0..100).all(|_| rates.accept_delay("PLAINTEXT").is_zero()));
        let throttled = (0..20)
            .filter(|_| !rates.accept_delay("INTERNAL").is_zero())
            .count();
        assert_eq!(throttled, 10);
    }
}
