//! Listener-shaped values: `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map`, `controller.quorum.voters`, `metrics.listener`.
//!
//! Kafka's rules (`SocketServerConfigs.listenerListToEndPoints`): each listener is
//! `NAME://host:port`, names are unique, the host may be empty (bind to every
//! interface) or an IPv6 literal in brackets, and every name needs a security protocol
//! in `listener.security.protocol.map`. The `check_*` functions are the table's
//! validators; the `parse_*` functions build typed values from validated text.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::value::split_list;

/// One `NAME://host:port` listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The listener name, upper-cased as Kafka does (`ListenerName.normalised`).
    pub name: String,
    /// Host as written, without IPv6 brackets; empty means every interface.
    pub host: String,
    pub port: u16,
}

impl Listener {
    /// The address to bind: an empty host binds every IPv4 interface.
    pub fn bind_address(&self) -> String {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            &self.host
        };
        join_host_port(host, self.port)
    }

    /// The same endpoint as a client should reach it: a wildcard host is advertised as
    /// `localhost` (Brook's rule; Kafka would use the canonical host name).
    pub fn advertised(&self) -> Listener {
        let host = match self.host.as_str() {
            "" | "0.0.0.0" | "::" => "localhost".to_owned(),
            other => other.to_owned(),
        };
        Listener {
            name: self.name.clone(),
            host,
            port: self.port,
        }
    }
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}",
            self.name,
            join_host_port(&self.host, self.port)
        )
    }
}

fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Splits `host:port` (host may be empty or a bracketed IPv6 literal).
fn split_host_port(text: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("unclosed '[' in {text}"))?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| format!("missing port in {text}"))?;
        (host, port)
    } else {
        text.rsplit_once(':')
            .ok_or_else(|| format!("missing port in {text}"))?
    };
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("invalid port in {text}"))?;
    Ok((host.to_owned(), port))
}

/// Parses a `listeners`-style list. Kafka's message for a malformed entry is
/// "Unable to parse X to a broker endpoint".
pub fn parse_listeners(value: &str) -> Result<Vec<Listener>, String> {
    let mut out: Vec<Listener> = Vec::new();
    for item in split_list(value) {
        let bad = || format!("Unable to parse {item} to a broker endpoint");
        let (name, rest) = item.split_once("://").ok_or_else(bad)?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad());
        }
        let (host, port) = split_host_port(rest).map_err(|_| bad())?;
        let name = name.to_ascii_uppercase();
        if out.iter().any(|l| l.name == name) {
            return Err(format!(
                "Each listener must have a different name, listeners: {value}"
            ));
        }
        out.push(Listener { name, host, port });
    }
    Ok(out)
}

/// Validator for `listeners` and `advertised.listeners`.
pub fn check_listeners(value: &str) -> Result<(), String> {
    parse_listeners(value).map(|_| ())
}

/// The security protocols Kafka knows; Brook serves PLAINTEXT and SASL_PLAINTEXT
/// itself, the others are accepted in the map so existing files load.
const PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/// Parses `NAME:PROTOCOL,...` into listener name → protocol, both upper-cased.
pub fn parse_protocol_map(value: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for item in split_list(value) {
        let (name, protocol) = item
            .split_once(':')
            .ok_or_else(|| format!("Map entry should be of form <key>:<value>: {item}"))?;
        let protocol = protocol.trim().to_ascii_uppercase();
        if !PROTOCOLS.contains(&protocol.as_str()) {
            return Err(format!("No enum constant for security protocol {protocol}"));
        }
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// Validator for `listener.security.protocol.map`.
pub fn check_protocol_map(value: &str) -> Result<(), String> {
    parse_protocol_map(value).map(|_| ())
}

/// One `{id}@{host}:{port}` entry of `controller.quorum.voters`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumVoter {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
}

/// Parses `controller.quorum.voters`.
pub fn parse_quorum_voters(value: &str) -> Result<Vec<QuorumVoter>, String> {
    split_list(value)
        .into_iter()
        .map(|item| {
            let bad = || format!("Unable to parse {item} as {{id}}@{{host}}:{{port}}");
            let (id, endpoint) = item.split_once('@').ok_or_else(bad)?;
            let node_id = id.parse::<i32>().map_err(|_| bad())?;
            let (host, port) = split_host_port(endpoint).map_err(|_| bad())?;
            if host.is_empty() {
                return Err(bad());
            }
            Ok(QuorumVoter {
                node_id,
                host,
                port,
            })
        })
        .collect()
}

/// Validator for `controller.quorum.voters`: well-formed entries, each node id once.
pub fn check_quorum_voters(value: &str) -> Result<(), String> {
    let voters = parse_quorum_voters(value)?;
    let mut seen = std::collections::BTreeSet::new();
    for v in &voters {
        if !seen.insert(v.node_id) {
            return Err(format!("node id {} appears more than once", v.node_id));
        }
    }
    Ok(())
}

/// Parses `metrics.listener`: empty disables the endpoint.
pub fn parse_metrics_listener(value: &str) -> Result<Option<SocketAddr>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    value.parse::<SocketAddr>().map(Some).map_err(|_| {
        format!("expected host:port with an IP address, e.g. 0.0.0.0:9644, got {value}")
    })
}

/// Validator for `metrics.listener`.
pub fn check_metrics_listener(value: &str) -> Result<(), String> {
    parse_metrics_listener(value).map(|_| ())
}

/// `socket.send.buffer.bytes` / `socket.receive.buffer.bytes`: `None` for -1 (the OS
/// default, with the kernel's autotuning), else the size to set.
pub fn parse_socket_buffer(value: &str) -> Result<Option<usize>, String> {
    let bytes: i64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a number"))?;
    match bytes {
        -1 => Ok(None),
        // Kafka passes these to Java's setSendBufferSize, which refuses them too.
        n if n <= 0 => Err(format!(
            "{n} is not a buffer size: use -1 for the OS default or a positive size"
        )),
        n => usize::try_from(n)
            .map(Some)
            .map_err(|_| format!("{n} is out of range")),
    }
}

pub fn check_socket_buffer(value: &str) -> Result<(), String> {
    parse_socket_buffer(value).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_names_hosts_and_ports() {
        let parsed =
            parse_listeners("PLAINTEXT://:9092, controller://127.0.0.1:9093,EXT://[::1]:9094");
        let expected = vec![
            Listener {
                name: "PLAINTEXT".into(),
                host: String::new(),
                port: 9092,
            },
            Listener {
                name: "CONTROLLER".into(),
                host: "127.0.0.1".into(),
                port: 9093,
            },
            Listener {
                name: "EXT".into(),
                host: "::1".into(),
                port: 9094,
            },
        ];
        assert_eq!(parsed, Ok(expected));
    }

    #[test]
    fn malformed_or_duplicate_listeners_are_refused() {
        assert_eq!(
            parse_listeners("localhost:9092"),
            Err("Unable to parse localhost:9092 to a broker endpoint".to_owned())
        );
        assert!(parse_listeners("PLAINTEXT://:99999").is_err());
        assert!(parse_listeners("A://:1,a://:2").is_err());
    }

    #[test]
    fn wildcard_hosts_bind_everywhere_and_advertise_localhost() {
        let l = Listener {
            name: "PLAINTEXT".into(),
            host: String::new(),
            port: 9092,
        };
        assert_eq!(l.bind_address(), "0.0.0.0:9092");
        assert_eq!(l.advertised().to_string(), "PLAINTEXT://localhost:9092");
        let v6 = Listener {
            name: "X".into(),
            host: "::1".into(),
            port: 1,
        };
        assert_eq!(v6.to_string(), "X://[::1]:1");
    }

    #[test]
    fn the_protocol_map_is_upper_cased_and_checked() {
        let map = parse_protocol_map("controller:plaintext,PLAINTEXT:PLAINTEXT");
        assert_eq!(
            map.ok()
                .and_then(|m| m.get("CONTROLLER").cloned())
                .as_deref(),
            Some("PLAINTEXT")
        );
        assert!(parse_protocol_map("A:TLS").is_err());
        assert!(parse_protocol_map("A").is_err());
    }

    #[test]
    fn quorum_voters_parse_id_host_port() {
        let voters = parse_quorum_voters("1@localhost:9093,2@[::1]:9094");
        assert_eq!(
            voters,
            Ok(vec![
                QuorumVoter {
                    node_id: 1,
                    host: "localhost".into(),
                    port: 9093
                },
                QuorumVoter {
                    node_id: 2,
                    host: "::1".into(),
                    port: 9094
                },
            ])
        );
        assert!(parse_quorum_voters("localhost:9093").is_err());
        assert_eq!(parse_quorum_voters(""), Ok(vec![]));
    }

    #[test]
    fn metrics_listener_is_an_address_or_disabled() {
        assert_eq!(
            parse_metrics_listener("0.0.0.0:9644")
                .ok()
                .flatten()
                .map(|a| a.port()),
            Some(9644)
        );
        assert_eq!(parse_metrics_listener(""), Ok(None));
        assert!(parse_metrics_listener("metrics:9644").is_err());
    }
}
