//! Inter-broker connections (`replication::client`): one counter,
//! `brook_inter_broker_connections_total`, by `result`: `success`, `authentication_failed`
//! (the peer refused this broker's SASL login, or could not prove it knows the SCRAM
//! credential), `tls_failed` (handshake refused) or `unreachable` (connect error, timeout).

use metrics::counter;

pub fn record_connection(result: &'static str) {
    counter!("brook_inter_broker_connections_total", "result" => result).increment(1);
}
