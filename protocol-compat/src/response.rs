//! Response encoding: size prefix, response header (v0 or flexible v1 per API and
//! version), then the body. The crate leaves out tagged fields that hold their default
//! value, as Apache Kafka does; older librdkafka cannot parse them otherwise.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

use crate::chunked::{Chunk, ChunkLen, ChunkedBuf};
use crate::ProtocolError;

/// Encodes a whole response frame, size prefix included, as chunks to write in order: a
/// fetch response's record sets are chunks of their own, the very `Bytes` the handler
/// read, or the `externals` registered for the placeholders it put in their place
/// (`chunked.rs`), so their bytes are never copied into a response buffer.
pub fn encode_response_chunks<E: Clone + ChunkLen>(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
    externals: Vec<(Bytes, E)>,
) -> Result<Vec<Chunk<E>>, ProtocolError> {
    let ResponseKind::Fetch(fetch) = body else {
        return encode_response(api_key, api_version, correlation_id, body)
            .map(|b| vec![Chunk::Bytes(b)]);
    };
    let encode_err = |e: anyhow::Error| ProtocolError::Encode {
        api_key,
        api_version,
        reason: e.to_string(),
    };
    let record_sets = fetch
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter_map(|p| p.records.clone());
    let mut buf = ChunkedBuf::sharing(record_sets);
    for (placeholder, external) in externals {
        buf.external(&placeholder, external);
    }
    buf.put_i32(0); // size, patched below (the first chunk never starts with a record set)
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, api_key.response_header_version(api_version))
        .map_err(encode_err)?;
    fetch.encode(&mut buf, api_version).map_err(encode_err)?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| ProtocolError::Encode {
        api_key,
        api_version,
        reason: format!("response of {} bytes is too large", buf.len()),
    })?;
    let mut chunks = buf.into_chunks();
    if let Some(Chunk::Bytes(first)) = chunks.first_mut() {
        let mut head = BytesMut::from(&first[..]);
        head[..4].copy_from_slice(&size.to_be_bytes());
        *first = head.freeze();
    }
    Ok(chunks)
}

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
