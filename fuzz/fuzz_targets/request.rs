//! Request decoding as the broker does it (`brook_protocol::decode_request`: header, the
//! codec's version check, then the body of whichever API and version the header names, so
//! one target covers every request body Brook decodes). A decoded request re-encodes at its
//! version, and decodes to a request that encodes to the same bytes.
#![no_main]

// Linked for its `#[global_allocator]`: the targets decode under the broker's allocator.
use brook_fuzz as _;
use brook_protocol::kafka_protocol::protocol::Encodable;
use brook_protocol::{decode_request, Decoded, DecodedRequest};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;

/// The request's frame as the codec encodes it.
fn encode(request: &DecodedRequest) -> Bytes {
    let version = request.header.request_api_version;
    let mut buf = BytesMut::new();
    request
        .header
        .encode(&mut buf, request.api_key.request_header_version(version))
        .expect("a decoded header encodes");
    request
        .body
        .encode(&mut buf, version)
        .expect("a decoded body encodes");
    buf.freeze()
}

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Request(request)) = decode_request(Bytes::copy_from_slice(data)) else {
        return;
    };
    // Compared as bytes, not values: a float field may hold NaN, never equal to itself.
    let encoded = encode(&request);
    let again = decode_request(encoded.clone());
    let same = match &again {
        Ok(Decoded::Request(again)) => encode(again) == encoded,
        _ => false,
    };
    // kafka-protocol 0.18 reads a tag number (an unsigned varint) into an i32, so a tag of
    // 2^31 or more is kept as a negative unknown tagged field that its encoder does not write
    // back as it came. Kafka accepts such tags too; Brook never re-encodes a client's request.
    // Sorted maps put a negative tag first, so it shows in the Debug form.
    if !same && !format!("{request:?}").contains("unknown_tagged_fields: {-") {
        panic!("round trip: {request:?}\nbecame {again:?}");
    }
});
