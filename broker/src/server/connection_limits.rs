//! Counting client connections against `max.connections` and `max.connections.per.ip`
//! (Kafka's `ConnectionQuotas`). An accept loop first reserves a place under the broker-wide
//! limit — at the limit it waits, leaving new connections in the kernel's listen queue, as
//! Kafka's acceptor pauses — then admits the accepted peer's address, or refuses it when
//! the address already holds its limit (Kafka closes that connection at once). The limits
//! follow dynamic updates (`kafka-configs --alter --entity-type brokers`): `set_limits`.
//! Counts sit under one short mutex taken per accept and per close, never per request.
//! Connection creation rates (`max.connection.creation.rate`, per listener, per IP) are
//! measured beside the counts, in `connection_rate`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use tokio::sync::Notify;

use super::connection_rate::ConnectionRates;
use crate::config::connections::{canonical, ConnectionLimits};

#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

#[derive(Default)]
pub struct ConnectionQuotas {
    limits: parking_lot::RwLock<Arc<ConnectionLimits>>,
    counts: parking_lot::Mutex<Counts>,
    /// Woken when a connection closes or the limits change.
    freed: Notify,
    /// Connection creation rates: broker-wide, per listener, per IP.
    pub rates: ConnectionRates,
}

/// A place under `max.connections`, not yet given to an address.
pub struct Reservation {
    quotas: Arc<ConnectionQuotas>,
    /// Whether the place is still this reservation's to release.
    held: bool,
}

/// A served connection's places; released on drop.
pub struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
}

/// The address already holds `limit` connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyFromAddress {
    pub limit: usize,
}

impl ConnectionQuotas {
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        let rates = ConnectionRates::default();
        rates.set_limits(&limits);
        Arc::new(ConnectionQuotas {
            rates,
            limits: parking_lot::RwLock::new(Arc::new(limits)),
            ..Default::default()
        })
    }

    /// New limits from a dynamic update; connections already served stay.
    pub fn set_limits(&self, limits: &ConnectionLimits) {
        if **self.limits.read() == *limits {
            return;
        }
        self.rates.set_limits(limits);
        *self.limits.write() = Arc::new(limits.clone());
        self.freed.notify_waiters();
    }

    pub fn limits(&self) -> Arc<ConnectionLimits> {
        self.limits.read().clone()
    }

    /// Waits for a place under `max.connections` and takes it.
    pub async fn reserve(self: &Arc<Self>) -> Reservation {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so a close in between still wakes this wait.
            freed.as_mut().enable();
            {
                let max = self.limits().max_connections;
                let mut counts = self.counts.lock();
                if counts.total < max {
                    counts.total += 1;
                    return Reservation {
                        quotas: self.clone(),
                        held: true,
                    };
                }
            }
            freed.await;
        }
    }

    /// Connections served now: all, and from `ip`.
    pub fn count(&self, ip: IpAddr) -> (usize, usize) {
        let counts = self.counts.lock();
        let from = counts.per_ip.get(&canonical(ip)).copied().unwrap_or(0);
        (counts.total, from)
    }
}

impl Reservation {
    /// Gives the place to a connection from `ip`, unless that address is at its limit (the
    /// place is then released).
    pub fn admit(mut self, ip: IpAddr) -> Result<ConnectionSlot, TooManyFromAddress> {
        let ip = canonical(ip);
        let limit = self.quotas.limits().for_ip(ip);
        let quotas = self.quotas.clone();
        let mut counts = quotas.counts.lock();
        let from = counts.per_ip.entry(ip).or_insert(0);
        if *from >= limit {
            if *from == 0 {
                counts.per_ip.remove(&ip);
            }
            drop(counts);
            // Dropping the reservation releases its place under max.connections.
            return Err(TooManyFromAddress { limit });
        }
        *from += 1;
        drop(counts);
        // The place now belongs to the slot: the reservation must not release it too.
        self.held = false;
        Ok(ConnectionSlot { quotas, ip })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        self.quotas.counts.lock().total -= 1;
        self.quotas.freed.notify_waiters();
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        {
            let mut counts = self.quotas.counts.lock();
            counts.total -= 1;
            if let Some(from) = counts.per_ip.get_mut(&self.ip) {
                *from -= 1;
                if *from == 0 {
                    counts.per_ip.remove(&self.ip);
                }
            }
        }
        self.quotas.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;

    fn limits(max: usize, per_ip: usize, overrides: &[(&str, usize)]) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: max,
            per_ip,
            per_ip_overrides: overrides
                .iter()
                .map(|(ip, n)| (ip.parse().expect("ip"), *n))
                .collect::<BTreeMap<_, _>>(),
            max_idle: None,
            ..ConnectionLimits::default()
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[tokio::test]
    async fn an_address_past_its_limit_is_refused_and_its_place_released() {
        let quotas = ConnectionQuotas::new(limits(10, 2, &[("127.0.0.2", 1)]));
        let a = quotas
            .reserve()
            .await
            .admit(ip("127.0.0.1"))
            .expect("first");
        let _b = quotas
            .reserve()
            .await
            .admit(ip("127.0.0.1"))
            .expect("second");
        assert_eq!(
            quotas.reserve().await.admit(ip("127.0.0.1")).err(),
            Some(TooManyFromAddress { limit: 2 })
        );
        let _c = quotas
            .reserve()
            .await
            .admit(ip("::ffff:127.0.0.2"))
            .expect("override");
        assert_eq!(
            quotas.reserve().await.admit(ip("127.0.0.2")).err(),
            Some(TooManyFromAddress { limit: 1 })
        );
        assert_eq!(quotas.count(ip("127.0.0.1")), (3, 2));
        drop(a);
        assert_eq!(quotas.count(ip("127.0.0.1")), (2, 1));
        quotas
            .reserve()
            .await
            .admit(ip("127.0.0.1"))
            .expect("freed");
    }

    #[tokio::test(start_paused = true)]
    async fn at_max_connections_a_reservation_waits_for_a_close_or_a_higher_limit() {
        let quotas = ConnectionQuotas::new(limits(1, 10, &[]));
        let first = quotas
            .reserve()
            .await
            .admit(ip("127.0.0.1"))
            .expect("first");
        let waiting = tokio::spawn({
            let quotas = quotas.clone();
            async move { quotas.reserve().await.admit(ip("127.0.0.1")).map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        drop(first);
        assert_eq!(waiting.await.expect("task"), Ok(()));

        let _held = quotas
            .reserve()
            .await
            .admit(ip("127.0.0.1"))
            .expect("again");
        let waiting = tokio::spawn({
            let quotas = quotas.clone();
            async move { quotas.reserve().await.admit(ip("127.0.0.1")).is_ok() }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        quotas.set_limits(&limits(2, 10, &[]));
        assert!(waiting.await.expect("task"));
    }
}
