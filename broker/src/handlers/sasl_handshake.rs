//! SaslHandshake reaching a handler: on a listener without SASL, or on an authenticated
//! connection whose client cannot re-authenticate (`auth::sasl` takes every other one).
//! Kafka's `KafkaApis` answers ILLEGAL_SASL_STATE, with the enabled list empty.

use brook_protocol::kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use brook_protocol::kafka_protocol::ResponseError;

pub fn handle(_req: SaslHandshakeRequest, _version: i16) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}
