//! Why the broker closes a client connection, counted and logged in one place. Each reason
//! has its Prometheus counter (`brook_connections_closed_total{reason}`) and a limited log
//! (`logging::sites`): a few lines an interval in full, the rest summarised, so bad input
//! cannot fill the disk with log. Failed logins stay at INFO as Kafka logs them.

use std::fmt::Display;
use std::net::SocketAddr;

use tracing::{debug, info, warn};

use crate::logging::limit::Limited;
use crate::logging::sites;
use crate::metrics;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// A size prefix below the minimum request or above `socket.request.max.bytes`
    /// (or the pre-authentication cap).
    MalformedFrame,
    /// The peer closed with a partial frame buffered.
    TruncatedFrame,
    /// A frame that does not decode as a request Brook serves, or a handler's failure.
    BadRequest,
    /// A request out of place in the SASL exchange (before authentication, or past expiry).
    SaslProtocol,
    /// A SASL login refused (wrong password, unknown user, bad token).
    FailedAuthentication,
    /// The TLS handshake failed or the client certificate gave no principal.
    TlsHandshake,
    /// The peer's address already held `max.connections.per.ip` connections.
    AddressLimit,
    /// Nothing received for `connections.max.idle.ms`.
    Idle,
    /// The peer's address was past its `connection_creation_rate` (closed after the
    /// throttle time, never served).
    ConnectionRate,
}

impl CloseReason {
    pub const ALL: [CloseReason; 9] = [
        CloseReason::MalformedFrame,
        CloseReason::TruncatedFrame,
        CloseReason::BadRequest,
        CloseReason::SaslProtocol,
        CloseReason::FailedAuthentication,
        CloseReason::TlsHandshake,
        CloseReason::AddressLimit,
        CloseReason::Idle,
        CloseReason::ConnectionRate,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            CloseReason::MalformedFrame => "malformed_frame",
            CloseReason::TruncatedFrame => "truncated_frame",
            CloseReason::BadRequest => "bad_request",
            CloseReason::SaslProtocol => "sasl_protocol",
            CloseReason::FailedAuthentication => "failed_authentication",
            CloseReason::TlsHandshake => "tls_handshake",
            CloseReason::AddressLimit => "max_connections_per_ip",
            CloseReason::Idle => "idle",
            CloseReason::ConnectionRate => "connection_creation_rate",
        }
    }

    fn limit(self) -> &'static Limited {
        match self {
            CloseReason::MalformedFrame => &sites::MALFORMED_FRAME,
            CloseReason::TruncatedFrame => &sites::TRUNCATED_FRAME,
            CloseReason::BadRequest => &sites::BAD_REQUEST,
            CloseReason::SaslProtocol => &sites::SASL_PROTOCOL,
            CloseReason::FailedAuthentication => &sites::FAILED_AUTHENTICATION,
            CloseReason::TlsHandshake => &sites::TLS_HANDSHAKE,
            CloseReason::AddressLimit => &sites::ADDRESS_LIMIT,
            CloseReason::Idle => &sites::IDLE,
            CloseReason::ConnectionRate => &sites::CONNECTION_RATE,
        }
    }
}

/// Registers every reason's counter at 0, so a scrape shows them before the first close.
pub fn register_metrics() {
    for reason in CloseReason::ALL {
        metrics::record_connections_closed(reason.label(), 0);
    }
}

/// Counts a connection closed for `reason` and logs it unless this interval's lines for the
/// reason are used up. `detail` may carry client input: the log formatter escapes it.
pub fn connection_closed(reason: CloseReason, peer: SocketAddr, detail: &dyn Display) {
    metrics::record_connections_closed(reason.label(), 1);
    if !reason.limit().allow() {
        return;
    }
    let label = reason.label();
    match reason {
        // Kafka logs failed authentications at INFO ("Failed authentication with …").
        CloseReason::FailedAuthentication | CloseReason::TlsHandshake => {
            info!(%peer, reason = label, %detail, "failed authentication")
        }
        // Kafka: "Rejected connection from …, address already has the configured maximum".
        CloseReason::AddressLimit => info!(%peer, reason = label, %detail, "connection refused"),
        // Kafka: "Delaying closing of connection from … for … ms" (debug), then closes it.
        CloseReason::ConnectionRate => {
            debug!(%peer, reason = label, %detail, "connection refused")
        }
        // Routine housekeeping, as Kafka logs it (debug).
        CloseReason::Idle => debug!(%peer, reason = label, %detail, "closing idle connection"),
        _ => warn!(%peer, reason = label, %detail, "closing connection"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_has_its_own_limit_and_label() {
        for (i, reason) in CloseReason::ALL.iter().enumerate() {
            assert!(std::ptr::eq(reason.limit(), sites::ALL[i]));
            let same_label = CloseReason::ALL
                .iter()
                .filter(|r| r.label() == reason.label());
            assert_eq!(same_label.count(), 1);
        }
    }
}
