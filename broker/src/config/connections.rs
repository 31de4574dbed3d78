//! Socket limits with Kafka's keys (`SocketServerConfigs`, enforced as its
//! `ConnectionQuotas` does, in `server::connection_limits`): `max.connections` (the broker
//! stops accepting at the limit), `max.connections.per.ip` and its overrides (a connection
//! past its address's limit is closed), `connections.max.idle.ms` (a connection silent that
//! long is closed), and the request memory pool's size (`queued.max.request.bytes`,
//! `server::memory_pool`). Pure.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// Kafka's default `max.connections` and `max.connections.per.ip`: no limit.
const UNLIMITED: i64 = i32::MAX as i64;

/// Connections served at once when `max.connections` is left at Kafka's "unlimited": each
/// costs a file descriptor, and the log file pool takes its share of the process's limit.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections served at once over every client listener.
    pub max_connections: usize,
    /// Connections from one address, unless an override names it.
    pub per_ip: usize,
    pub per_ip_overrides: BTreeMap<IpAddr, usize>,
    /// `None` for a negative `connections.max.idle.ms` (never closed for idleness).
    pub max_idle: Option<Duration>,
    /// `max.connection.creation.rate`: connections accepted per second over every client
    /// listener; `None` for Kafka's unlimited default (`i32::MAX`).
    pub max_connection_creation_rate: Option<u32>,
    /// `listener.name.<listener>.max.connection.creation.rate`, by upper-case listener name.
    pub listener_creation_rates: BTreeMap<String, u32>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            per_ip: usize::MAX,
            per_ip_overrides: BTreeMap::new(),
            max_idle: Some(Duration::from_millis(600_000)),
            max_connection_creation_rate: None,
            listener_creation_rates: BTreeMap::new(),
        }
    }
}

impl ConnectionLimits {
    /// From the keys' values; the reason names what is wrong (the caller names the key).
    pub fn parse(
        max_connections: i64,
        per_ip: i64,
        per_ip_overrides: &str,
        max_idle_ms: i64,
    ) -> Result<ConnectionLimits, (&'static str, String)> {
        let overrides = parse_per_ip_overrides(per_ip_overrides)
            .map_err(|why| ("max.connections.per.ip.overrides", why))?;
        if per_ip == 0 && overrides.is_empty() {
            // Kafka's rule: a zero default only makes sense with addresses let through.
            return Err((
                "max.connections.per.ip",
                "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set".to_owned(),
            ));
        }
        let count = |n: i64| {
            if n >= UNLIMITED {
                usize::MAX
            } else {
                n.max(0) as usize
            }
        };
        Ok(ConnectionLimits {
            max_connections: if max_connections >= UNLIMITED {
                DEFAULT_MAX_CONNECTIONS
            } else {
                max_connections.max(0) as usize
            },
            per_ip: count(per_ip),
            per_ip_overrides: overrides,
            max_idle: u64::try_from(max_idle_ms).ok().map(Duration::from_millis),
            max_connection_creation_rate: None,
            listener_creation_rates: BTreeMap::new(),
        })
    }

    /// The most connections `ip` may hold.
    pub fn for_ip(&self, ip: IpAddr) -> usize {
        let ip = canonical(ip);
        self.per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.per_ip)
    }
}

/// A `max.connection.creation.rate` value: `None` for Kafka's unlimited `i32::MAX`.
pub fn creation_rate(rate: i64) -> Option<u32> {
    if rate >= UNLIMITED {
        None
    } else {
        Some(u32::try_from(rate.max(0)).unwrap_or(0))
    }
}

/// The request memory pool's size when `queued.max.request.bytes` is Kafka's -1
/// ("unbounded", also 0 and below): 256 MiB is 256 producers' 1 MiB requests in flight at
/// once (far more than a broker's cores handle at a time), and bounds what requests
/// buffer to 256 MiB plus one request (the pool is non-strict) instead of connections ×
/// `socket.request.max.bytes` (10,000 × 100 MiB: no bound at all).
pub const DEFAULT_REQUEST_POOL_BYTES: u64 = 256 * 1024 * 1024;

/// The request memory pool's size from `queued.max.request.bytes`: Kafka's rule that a
/// positive value holds at least one request of `socket.request.max.bytes`; otherwise
/// Brook's bound ([`DEFAULT_REQUEST_POOL_BYTES`], or one largest request if larger).
pub fn request_pool_bytes(
    queued_max_request_bytes: i64,
    socket_request_max_bytes: usize,
) -> Result<u64, String> {
    let max_request = u64::try_from(socket_request_max_bytes).unwrap_or(u64::MAX);
    match u64::try_from(queued_max_request_bytes) {
        Ok(0) | Err(_) => Ok(DEFAULT_REQUEST_POOL_BYTES.max(max_request)),
        Ok(bytes) if bytes < max_request => Err(
            "queued.max.request.bytes must be larger or equal to socket.request.max.bytes"
                .to_owned(),
        ),
        Ok(bytes) => Ok(bytes),
    }
}

/// An IPv4 client reaching a dual-stack listener shows as `::ffff:a.b.c.d`.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `host:count` entries separated by commas (Kafka's format). Hosts are IP addresses or
/// `localhost`: Brook does not resolve names in its configuration (Kafka does, once).
pub fn parse_per_ip_overrides(text: &str) -> Result<BTreeMap<IpAddr, usize>, String> {
    let mut out = BTreeMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| format!("{entry:?} is not host:count"))?;
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| format!("{entry:?}: the count is not a non-negative number"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ips: Vec<IpAddr> = match host {
            "localhost" => vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ],
            other => vec![other.parse().map_err(|_| {
                format!("Invalid host {other:?}: Brook takes IP addresses (or localhost) here")
            })?],
        };
        for ip in ips {
            out.insert(canonical(ip), count);
        }
    }
    Ok(out)
}

/// The validator of `max.connections.per.ip.overrides`.
pub fn check_per_ip_overrides(value: &str) -> Result<(), String> {
    parse_per_ip_overrides(value).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_take_addresses_and_localhost() {
        let limits =
            ConnectionLimits::parse(i32::MAX.into(), 5, "127.0.0.2:1, localhost:7,::5:2", 1000)
                .expect("valid");
        assert_eq!(limits.for_ip("127.0.0.2".parse().expect("ip")), 1);
        assert_eq!(limits.for_ip("127.0.0.1".parse().expect("ip")), 7);
        assert_eq!(limits.for_ip("::ffff:127.0.0.2".parse().expect("ip")), 1);
        assert_eq!(limits.for_ip("::5".parse().expect("ip")), 2);
        assert_eq!(limits.for_ip("10.0.0.1".parse().expect("ip")), 5);
        assert_eq!(limits.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(limits.max_idle, Some(Duration::from_millis(1000)));
    }

    #[test]
    fn the_request_pool_holds_one_largest_request_and_is_bounded_by_default() {
        assert_eq!(request_pool_bytes(-1, 100), Ok(DEFAULT_REQUEST_POOL_BYTES));
        assert_eq!(request_pool_bytes(0, 1 << 30), Ok(1 << 30));
        assert_eq!(request_pool_bytes(2_000_000, 1_000_000), Ok(2_000_000));
        assert_eq!(request_pool_bytes(1_000_000, 1_000_000), Ok(1_000_000));
        assert!(request_pool_bytes(999_999, 1_000_000).is_err());
    }

    #[test]
    fn bad_values_name_their_key() {
        let refused = |overrides: &str, per_ip: i64| {
            ConnectionLimits::parse(10, per_ip, overrides, -1)
                .map(|_| ())
                .map_err(|(key, _)| key)
        };
        assert_eq!(
            refused("example.com:3", 5),
            Err("max.connections.per.ip.overrides")
        );
        assert_eq!(
            refused("127.0.0.1", 5),
            Err("max.connections.per.ip.overrides")
        );
        assert_eq!(
            refused("127.0.0.1:x", 5),
            Err("max.connections.per.ip.overrides")
        );
        assert_eq!(refused("", 0), Err("max.connections.per.ip"));
        assert_eq!(refused("127.0.0.1:3", 0), Ok(()));
        let unlimited = ConnectionLimits::parse(10, i32::MAX.into(), "", -1).expect("valid");
        assert_eq!(unlimited.per_ip, usize::MAX);
        assert_eq!(unlimited.max_connections, 10);
        assert_eq!(unlimited.max_idle, None);
    }
}
