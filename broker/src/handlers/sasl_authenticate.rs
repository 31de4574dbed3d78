//! SaslAuthenticate reaching a handler: on a listener without SASL, or after the
//! authentication finished (`auth::sasl` takes those of an authentication in progress).
//! Kafka's `KafkaApis` answers ILLEGAL_SASL_STATE with this message.

use brook_protocol::kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;

pub fn handle(_req: SaslAuthenticateRequest, _version: i16) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )))
}
