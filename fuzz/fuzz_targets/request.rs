//! Request decoding as the broker does it (`brook_protocol::decode_request`: header, the
//! codec's version check, then the body of whichever API and version the header names, so
//! one target covers every request body Brook decodes). A decoded request re-encodes at its
//! version and decodes to the same value.
#![no_main]

// Linked for its `#[global_allocator]`: the targets decode under the broker's allocator.
use brook_fuzz as _;
use brook_protocol::kafka_protocol::protocol::Encodable;
use brook_protocol::{decode_request, Decoded};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Request(request)) = decode_request(Bytes::copy_from_slice(data)) else {
        return;
    };
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
    let Decoded::Request(again) = decode_request(buf.freeze()).expect("re-encoded decodes") else {
        panic!("re-encoded request has an unsupported version");
    };
    assert_eq!(again.header, request.header);
    assert_eq!(again.body, request.body);
});
