//! Request decoding: header, then body, from one frozen frame.
//!
//! Decoding from `Bytes` (not `BytesMut`) lets the crate hand out record batches as
//! zero-copy slices of the frame. A request at a version the codec cannot carry comes
//! back as [`Decoded::UnsupportedVersion`] with its header; whether a decodable version
//! is *served* is the broker's question, so it can answer in that API's own format.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::versions::codec_range;
use crate::ProtocolError;

/// A request whose header and body were both decoded.
#[derive(Debug)]
pub struct DecodedRequest {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: RequestKind,
}

/// What one frame turned out to be.
#[derive(Debug)]
pub enum Decoded {
    /// Boxed: the body is large and most frames are requests, so the box costs one
    /// allocation per request and keeps the error variant small.
    Request(Box<DecodedRequest>),
    /// A known API at a version the codec cannot carry: the header is all we read.
    UnsupportedVersion {
        api_key: ApiKey,
        header: RequestHeader,
    },
}

/// Decodes one frame (without its size prefix).
pub fn decode_request(mut frame: Bytes) -> Result<Decoded, ProtocolError> {
    let (api_key, api_version) = peek_key_and_version(&frame)?;
    let header_version = api_key.request_header_version(api_version);
    let header = RequestHeader::decode(&mut frame, header_version).map_err(|e| {
        ProtocolError::MalformedHeader {
            reason: e.to_string(),
        }
    })?;
    let range = codec_range(api_key);
    if api_version < range.min || api_version > range.max {
        return Ok(Decoded::UnsupportedVersion { api_key, header });
    }
    let body = RequestKind::decode(api_key, &mut frame, api_version).map_err(|e| {
        ProtocolError::MalformedBody {
            api_key,
            api_version,
            correlation_id: header.correlation_id,
            reason: e.to_string(),
        }
    })?;
    Ok(Decoded::Request(Box::new(DecodedRequest {
        api_key,
        header,
        body,
    })))
}

fn peek_key_and_version(frame: &[u8]) -> Result<(ApiKey, i16), ProtocolError> {
    let (Some(key), Some(version)) = (frame.get(0..2), frame.get(2..4)) else {
        return Err(ProtocolError::MalformedHeader {
            reason: format!("{} bytes is too short for a request header", frame.len()),
        });
    };
    let key = i16::from_be_bytes([key[0], key[1]]);
    let version = i16::from_be_bytes([version[0], version[1]]);
    let api_key =
        ApiKey::try_from(key).map_err(|()| ProtocolError::UnknownApiKey { api_key: key })?;
    Ok((api_key, version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn frame_of<T: Encodable>(api_key: ApiKey, version: i16, body: &T) -> Bytes {
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("test")));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, api_key.request_header_version(version))
            .expect("encode header");
        body.encode(&mut buf, version).expect("encode body");
        buf.freeze()
    }

    #[test]
    fn decodes_every_version_of_api_versions_and_metadata() {
        for version in 0..=4 {
            let frame = frame_of(ApiKey::ApiVersions, version, &ApiVersionsRequest::default());
            let Decoded::Request(req) = decode_request(frame).expect("decodes") else {
                panic!("expected a request");
            };
            assert_eq!(req.header.correlation_id, 7);
            assert!(matches!(req.body, RequestKind::ApiVersions(_)));
        }
        for version in 0..=13 {
            let frame = frame_of(ApiKey::Metadata, version, &MetadataRequest::default());
            let decoded = decode_request(frame).expect("decodes");
            assert!(matches!(decoded, Decoded::Request(_)), "v{version}");
        }
    }

    #[test]
    fn a_version_the_codec_cannot_carry_keeps_the_header() {
        let mut frame =
            BytesMut::from(&frame_of(ApiKey::Metadata, 3, &MetadataRequest::default())[..]);
        frame[2..4].copy_from_slice(&99i16.to_be_bytes());
        let decoded = decode_request(frame.freeze()).expect("decodes");
        let Decoded::UnsupportedVersion { api_key, header } = decoded else {
            panic!("expected unsupported");
        };
        assert_eq!(api_key, ApiKey::Metadata);
        assert_eq!(header.correlation_id, 7);
    }

    #[test]
    fn an_unknown_api_key_is_an_error() {
        let frame = Bytes::from_static(&[0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert!(matches!(
            decode_request(frame),
            Err(ProtocolError::UnknownApiKey { api_key: 0x7f00 })
        ));
    }

    /// Found again by the `request` fuzz target (run without the broker's allocator, it
    /// aborted): kafka-protocol 0.18 reserves an array's claimed length before reading its
    /// elements (Kafka checks it against the bytes left first), so 14 bytes claiming 2^31 - 1
    /// quota entries ask for ~50 GB. Under `alloc::BrookAllocator` (this crate's tests, the
    /// broker, the fuzz targets) that is an untouched mapping and the decode fails at the first
    /// missing element: a malformed body, the connection closed, the process alive.
    #[test]
    fn an_array_claiming_more_elements_than_bytes_left_is_a_malformed_body() {
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&49i16.to_be_bytes()); // AlterClientQuotas
        frame.extend_from_slice(&0i16.to_be_bytes()); // v0, request header v1
        frame.extend_from_slice(&1i32.to_be_bytes()); // correlation id
        frame.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
        frame.extend_from_slice(&i32::MAX.to_be_bytes()); // entries: 2^31 - 1 of them
        assert!(matches!(
            decode_request(frame.freeze()),
            Err(ProtocolError::MalformedBody { .. })
        ));
    }

    #[test]
    fn a_truncated_body_is_an_error_not_a_panic() {
        let full = frame_of(ApiKey::Metadata, 12, &MetadataRequest::default());
        for cut in 4..full.len() - 1 {
            let _ = decode_request(full.slice(..cut));
        }
    }
}
