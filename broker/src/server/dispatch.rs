//! Routes one frame: decode, check the version against what Brook serves, run the
//! handler inside a request span with its timer, encode the response.
//!
//! ApiVersions at a version Brook does not know is answered in v0 format with
//! `UNSUPPORTED_VERSION` and the supported list (KIP-511), so newer clients can
//! downgrade. Any other request at a version Brook does not serve gets an error response
//! in its own format where the API has an error field; bytes that are not a Kafka
//! request close the connection.

use std::time::{Duration, Instant};

use brook_protocol::error_response::unsupported_response;
use brook_protocol::kafka_protocol::messages::{ApiKey, RequestHeader};
use brook_protocol::{decode_request, encode_response_chunks, Decoded, DecodedRequest};
use bytes::Bytes;
use tracing::{debug, Instrument};

use crate::broker::Broker;
use crate::handlers::{self, api_versions, Reply};
use crate::metrics;
use crate::quota::{enforce, request_time};
use crate::server::session::Session;
use crate::server::write::ResponseChunk;

/// What the connection does after a frame.
pub enum Outcome {
    /// The response frame as chunks to write in order (a fetch's record sets are chunks
    /// of their own, never copied: `brook_protocol::chunked`, `server::write`), and how
    /// long to read nothing more once it is sent (a client quota's throttle, KIP-219).
    Respond(Vec<ResponseChunk>, Duration),
    /// Produce with acks=0: the client expects no response (but may be throttled).
    NoResponse(Duration),
    Close(String),
}

pub async fn handle_frame(broker: &Broker, session: &Session, frame: Bytes) -> Outcome {
    // The size prefix counts too: Kafka meters `request.sizeInBytes`, the whole request.
    let frame_len = frame.len() + 4;
    let request = match decode_request(frame) {
        Ok(Decoded::Request(request)) => request,
        Ok(Decoded::UnsupportedVersion { api_key, header }) => {
            return unsupported_version(api_key, &header)
        }
        Err(e) => return Outcome::Close(e.to_string()),
    };
    let DecodedRequest {
        api_key,
        header,
        body,
    } = *request;
    let version = header.request_api_version;
    if !handlers::serves(api_key, version) {
        return match unsupported_response(&body) {
            Some(response) => encode(api_key, &header, response.into()),
            None => Outcome::Close(format!(
                "{api_key:?} v{version} is not supported and has no error field to say so"
            )),
        };
    }
    let span = tracing::debug_span!(
        "request",
        api = ?api_key,
        version,
        correlation_id = header.correlation_id,
        client_id = header.client_id.as_deref().unwrap_or(""),
    );
    let metered = enforce::meter(broker, &body, frame_len);
    // request_percentage: the handler's polling time, measured only under a quota.
    let timed = broker.client_quotas.enabled() && !request_time::exempt(api_key, &body);
    let started = Instant::now();
    let handling =
        std::pin::pin!(handlers::handle(broker, session, &header, body).instrument(span));
    let (mut result, busy) = request_time::Timed::new(handling, timed).await;
    metrics::record_request(api_key, started.elapsed());
    let request_throttle = if timed {
        enforce::record_request_time(broker, session, &header, busy)
    } else {
        0
    };
    let throttle = match (&mut result, metered) {
        (Ok(reply), Some(metered)) => Duration::from_millis(enforce::apply(
            broker,
            session,
            &header,
            metered,
            reply.as_mut(),
            request_throttle,
        )),
        (Ok(Some(reply)), None) => {
            if request_throttle > 0 {
                let ms = i32::try_from(request_throttle).unwrap_or(i32::MAX);
                request_time::set_throttle_time(&mut reply.body, ms);
            }
            let admin = enforce::admin_throttle_ms(broker, reply);
            Duration::from_millis(admin.max(request_throttle))
        }
        (Ok(None), None) => Duration::from_millis(request_throttle),
        _ => Duration::ZERO,
    };
    match result {
        Ok(Some(reply)) => match encode(api_key, &header, reply) {
            Outcome::Respond(chunks, _) => Outcome::Respond(chunks, throttle),
            other => other,
        },
        Ok(None) => Outcome::NoResponse(throttle),
        Err(e) => {
            // The connection's close line (`server::closed`) carries the error.
            debug!(api = ?api_key, error = %e, "request failed");
            Outcome::Close(e.to_string())
        }
    }
}

fn unsupported_version(api_key: ApiKey, header: &RequestHeader) -> Outcome {
    let version = header.request_api_version;
    if api_key == ApiKey::ApiVersions {
        let response = api_versions::unsupported_version_response();
        return encode_at(api_key, 0, header.correlation_id, response.into());
    }
    debug!(api = ?api_key, version, "version outside the codec's range");
    Outcome::Close(format!("{api_key:?} v{version} cannot be decoded"))
}

fn encode(api_key: ApiKey, header: &RequestHeader, reply: Reply) -> Outcome {
    encode_at(
        api_key,
        header.request_api_version,
        header.correlation_id,
        reply,
    )
}

fn encode_at(api_key: ApiKey, version: i16, correlation_id: i32, reply: Reply) -> Outcome {
    match encode_response_chunks(api_key, version, correlation_id, &reply.body, reply.files) {
        Ok(chunks) => {
            metrics::record_bytes_out(chunks.iter().map(ResponseChunk::len).sum());
            Outcome::Respond(chunks, Duration::ZERO)
        }
        Err(e) => Outcome::Close(e.to_string()),
    }
}
