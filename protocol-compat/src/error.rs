//! Errors of the wire layer. Each says whether the connection can go on: a frame that
//! is not a Kafka request at all closes the connection; a known request at a version
//! Brook does not serve gets an error response in that API's own format.

use kafka_protocol::messages::ApiKey;

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("frame of {size} bytes exceeds socket.request.max.bytes ({max})")]
    FrameTooLarge { size: i64, max: usize },
    #[error("frame size {size} is negative or too small for a request header")]
    InvalidFrameSize { size: i32 },
    #[error("unknown api key {api_key}")]
    UnknownApiKey { api_key: i16 },
    #[error("malformed request header: {reason}")]
    MalformedHeader { reason: String },
    #[error(
        "malformed {api_key:?} v{api_version} request (correlation id {correlation_id}): {reason}"
    )]
    MalformedBody {
        api_key: ApiKey,
        api_version: i16,
        correlation_id: i32,
        reason: String,
    },
    #[error("cannot encode {api_key:?} v{api_version} response: {reason}")]
    Encode {
        api_key: ApiKey,
        api_version: i16,
        reason: String,
    },
}
