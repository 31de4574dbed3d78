//! Byte-rate quotas applied around a request, as Kafka's `KafkaApis` applies them:
//! - Produce: the request is appended first, then its size (the whole request, as Kafka's
//!   `request.sizeInBytes`) is recorded; over quota, the response carries
//!   `throttle_time_ms`.
//! - Fetch (consumers only; a follower's fetch is not a client's): the response's size is
//!   recorded; over quota, the data is taken back (`unrecordQuotaSensor`) and the client gets
//!   an empty response with `throttle_time_ms` — no partitions, and for a full fetch no
//!   session id (Kafka's `getThrottledResponse`; the Java client then starts its session
//!   again, without a warning).
//!
//! - A consumer's Fetch is capped beforehand at what its quota allows over the window
//!   ([`cap_fetch`]), as Kafka caps `fetch.max.bytes`.
//!
//! - Every request a client sends is also timed against `request_percentage`
//!   ([`record_request_time`], `quota::request_time`); a Produce or Fetch takes the longer
//!   of its two throttles, any other response carries the request quota's.
//!
//! Either way dispatch gets the throttle time and the connection reads nothing more for
//! that long after sending the response (KIP-219).
//!
//! CreateTopics, CreatePartitions and DeleteTopics are measured against
//! `controller_mutation_rate` by their handlers ([`mutation_quota`], `quota::mutation`); their
//! response's `throttle_time_ms` mutes the connection the same way ([`admin_throttle_ms`]).

use brook_protocol::kafka_protocol::messages::{
    FetchRequest, FetchResponse, RequestHeader, RequestKind, ResponseKind,
};
use bytes::Bytes;

use std::time::Duration;

use super::mutation::{Mode, MutationQuota};
use super::{rate, request_time, QuotaKind};
use crate::broker::Broker;
use crate::handlers::Reply;
use crate::server::session::Session;
use crate::server::write::FileChunk;

/// What a request is metered as, noted before its handler consumes it.
#[derive(Debug, Clone, Copy)]
pub enum Metered {
    /// A Produce request of this many bytes.
    Produce { size: usize },
    /// A consumer's Fetch; `full`: not an incremental fetch-session request.
    Fetch { full: bool },
}

/// `None` for requests no byte-rate quota applies to (or none is configured: one atomic
/// load).
pub fn meter(broker: &Broker, body: &RequestKind, frame_len: usize) -> Option<Metered> {
    if !broker.client_quotas.enabled() {
        return None;
    }
    match body {
        RequestKind::Produce(_) => Some(Metered::Produce { size: frame_len }),
        // A follower names itself with a replica id >= 0 (v15: in `replica_state`).
        RequestKind::Fetch(req) if req.replica_id.0 < 0 && req.replica_state.replica_id.0 < 0 => {
            Some(Metered::Fetch {
                full: req.session_epoch <= 0,
            })
        }
        _ => None,
    }
}

/// Caps a consumer's Fetch at what its `consumer_byte_rate` allows over the quota window
/// (Kafka's `getMaxValueInQuotaWindow`: quota × (samples − 1) × window), so that a single
/// fetch cannot take more than a window's worth at once.
pub fn cap_fetch(
    broker: &Broker,
    session: &Session,
    header: &RequestHeader,
    req: &mut FetchRequest,
) {
    if !broker.client_quotas.enabled()
        || req.replica_id.0 >= 0
        || req.replica_state.replica_id.0 >= 0
    {
        return;
    }
    let user = session.principal().name.as_str();
    let client_id = header.client_id.as_deref().unwrap_or("");
    let Some(bound) =
        broker
            .client_quotas
            .bound(&session.quotas, QuotaKind::Fetch, user, client_id)
    else {
        return;
    };
    let window_s = (rate::SAMPLES as f64 - 1.0) * rate::WINDOW_MS as f64 / 1000.0;
    let cap = bound * window_s;
    if cap < f64::from(req.max_bytes) {
        // Below i32::MAX here, and at least 1: quotas are positive.
        req.max_bytes = (cap as i32).max(1);
    }
}

/// The controller mutation quota of an admin request at `version` (strict from
/// `strict_since`: Kafka's KIP-599 versions).
pub fn mutation_quota(
    broker: &Broker,
    session: &Session,
    header: &RequestHeader,
    version: i16,
    strict_since: i16,
) -> MutationQuota {
    let user = session.principal().name.as_str();
    let client_id = header.client_id.as_deref().unwrap_or("");
    let mode = Mode::for_version(version, strict_since);
    // The quotas as the quorum has them now, not as the image loop last applied them (it
    // may still be creating the logs of topics made just before): admin requests are rare.
    broker.client_quotas.update(&broker.image().client_quotas);
    broker.client_quotas.mutation_quota(user, client_id, mode)
}

/// A mutation quota's throttle time for the response.
pub fn ms(quota: &MutationQuota) -> i32 {
    clamp(quota.throttle_ms())
}

/// The throttle time an admin response carries from its controller mutation quota (0 for
/// every other response, and whenever no quota is configured: one atomic load).
pub fn admin_throttle_ms(broker: &Broker, reply: &Reply) -> u64 {
    if !broker.client_quotas.enabled() {
        return 0;
    }
    let ms = match &reply.body {
        ResponseKind::CreateTopics(r) => r.throttle_time_ms,
        ResponseKind::CreatePartitions(r) => r.throttle_time_ms,
        ResponseKind::DeleteTopics(r) => r.throttle_time_ms,
        _ => 0,
    };
    u64::try_from(ms).unwrap_or(0)
}

/// Records a request's handling time against its client's `request_percentage`
/// (`request_time`) and returns the throttle time in ms (0 within its quota, under none, or
/// when no quota is configured: one atomic load).
pub fn record_request_time(
    broker: &Broker,
    session: &Session,
    header: &RequestHeader,
    busy: Duration,
) -> u64 {
    let quotas = &broker.client_quotas;
    if !quotas.enabled() {
        return 0;
    }
    let user = session.principal().name.as_str();
    let client_id = header.client_id.as_deref().unwrap_or("");
    let cache = &session.quotas;
    let kind = QuotaKind::Request;
    let throttle = quotas.record(cache, kind, user, client_id, request_time::percentage(busy));
    if throttle > 0 {
        quotas.throttled(cache, kind, user, client_id, throttle);
    }
    throttle
}

/// Records the request against its client's byte-rate quota and puts the throttle time —
/// the longer of that and `request_throttle` (the request quota's, as Kafka takes the
/// longer of the two) — into the response (`reply` is `None` for acks=0). Returns the
/// throttle time in ms.
pub fn apply(
    broker: &Broker,
    session: &Session,
    header: &RequestHeader,
    metered: Metered,
    reply: Option<&mut Reply>,
    request_throttle: u64,
) -> u64 {
    let quotas = &broker.client_quotas;
    let user = session.principal().name.as_str();
    let client_id = header.client_id.as_deref().unwrap_or("");
    let cache = &session.quotas;
    match metered {
        Metered::Produce { size } => {
            let kind = QuotaKind::Produce;
            let bandwidth = quotas.record(cache, kind, user, client_id, size as f64);
            if bandwidth > 0 {
                quotas.throttled(cache, kind, user, client_id, bandwidth);
            }
            let throttle = bandwidth.max(request_throttle);
            if throttle > 0 {
                if let Some(Reply {
                    body: ResponseKind::Produce(response),
                    ..
                }) = reply
                {
                    response.throttle_time_ms = clamp(throttle);
                }
            }
            throttle
        }
        Metered::Fetch { full } => {
            let Some(reply) = reply else {
                return request_throttle;
            };
            let ResponseKind::Fetch(response) = &mut reply.body else {
                return request_throttle;
            };
            // Errors answered before any read (e.g. an unknown session) are not metered.
            if response.error_code != 0 {
                if request_throttle > 0 {
                    response.throttle_time_ms = clamp(request_throttle);
                }
                return request_throttle;
            }
            let size = response_size(response, &reply.files) as f64;
            let kind = QuotaKind::Fetch;
            let bandwidth = quotas.record(cache, kind, user, client_id, size);
            if bandwidth > 0 {
                quotas.throttled(cache, kind, user, client_id, bandwidth);
            }
            // Throttled by either quota, the fetch returns no data (Kafka's
            // `getThrottledResponse`), and its bytes are taken back.
            let throttle = bandwidth.max(request_throttle);
            if throttle > 0 {
                quotas.unrecord(cache, kind, user, client_id, size);
                let session_id = if full { 0 } else { response.session_id };
                *response = FetchResponse::default()
                    .with_throttle_time_ms(clamp(throttle))
                    .with_session_id(session_id);
                reply.files.clear();
            }
            throttle
        }
    }
}

/// The record bytes a fetch response carries: in-memory record sets, and for record sets
/// left in their files the file ranges instead of their placeholders.
fn response_size(response: &FetchResponse, files: &[(Bytes, FileChunk)]) -> usize {
    let inline: usize = response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.as_ref().map(Bytes::len))
        .sum();
    let placeholders: usize = files.iter().map(|(b, _)| b.len()).sum();
    let in_files: u64 = files.iter().map(|(_, f)| f.0.len()).sum();
    inline.saturating_sub(placeholders) + usize::try_from(in_files).unwrap_or(usize::MAX)
}

fn clamp(ms: u64) -> i32 {
    i32::try_from(ms).unwrap_or(i32::MAX)
}
