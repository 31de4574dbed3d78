//! SASL outcomes (`auth::sasl`): one counter, `brook_sasl_authentications_total`, by
//! `result`: `success` (a new session), `reauthentication` (KIP-368, same connection) or
//! `failure`.

use metrics::counter;

pub fn record_authentication(result: &'static str) {
    counter!("brook_sasl_authentications_total", "result" => result).increment(1);
}
