//! The Kafka wire protocol as Brook speaks it, on top of the `kafka-protocol` crate's
//! generated messages: size-prefixed frames, request decoding (header, version check,
//! body), response encoding (flexible or not per API and version), and the table of
//! API versions Brook accepts.
//!
//! This crate does no I/O: it turns bytes into typed requests and typed responses into
//! bytes. Record batches inside requests stay untouched `Bytes` slices of the frame.

pub mod alloc;
pub mod chunked;
pub mod error;
pub mod error_response;
pub mod frame;
pub mod request;
pub mod response;
pub mod versions;

pub use error::ProtocolError;

/// The unit tests decode as the broker does: under its allocator (see `alloc`).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: alloc::BrookAllocator = alloc::BrookAllocator;
pub use kafka_protocol;
pub use request::{decode_request, Decoded, DecodedRequest};
pub use response::{encode_response, encode_response_chunks};
