//! Response encoding: size prefix, response header (v0 or flexible v1 per API and
//! version), then the body. The crate leaves out tagged fields that hold their default
//! value, as Apache Kafka does; older librdkafka cannot parse them otherwise.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

use crate::ProtocolError;

/// Encodes a whole response frame, size prefix included.
pub fn encode_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, ProtocolError> {
    let encode_err = |e: anyhow::Error| ProtocolError::Encode {
        api_key,
        api_version,
        reason: e.to_string(),
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = api_key.response_header_version(api_version);
    // A fetch response carries whole record batches (up to fetch.max.bytes): sizing the
    // buffer up front copies them once instead of at every doubling of the buffer.
    let body_size = match body {
        ResponseKind::Fetch(fetch) => fetch.compute_size(api_version).unwrap_or(0),
        _ => 0,
    };
    let mut buf = BytesMut::with_capacity(256 + body_size);
    buf.put_i32(0); // size, patched below
    header
        .encode(&mut buf, header_version)
        .map_err(encode_err)?;
    body.encode(&mut buf, api_version).map_err(encode_err)?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| ProtocolError::Encode {
        api_key,
        api_version,
        reason: format!("response of {} bytes is too large", buf.len()),
    })?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}
