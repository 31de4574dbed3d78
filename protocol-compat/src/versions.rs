//! Which versions of each API the codec can carry, and what Brook advertises.
//!
//! The `kafka-protocol` crate is generated from Apache Kafka 4.x's JSON schemas, so its
//! version ranges start at the lowest version Kafka 4.0 still accepts (KIP-896) and end
//! at the newest it can encode. The broker registers handlers within these ranges and
//! advertises exactly what it registered.

use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, OffsetCommitRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::{Message, VersionRange};

/// The versions the codec can decode and encode for `api_key`.
pub fn codec_range(api_key: ApiKey) -> VersionRange {
    let range = api_key.valid_versions();
    // kafka-protocol 0.18's `ApiKey` table runs one version ahead of its generated
    // messages for these APIs (OffsetCommit/OffsetFetch v10 with topic ids,
    // InitProducerId v6): advertising it would make clients send what cannot be decoded.
    let message_max = match api_key {
        ApiKey::OffsetCommit => OffsetCommitRequest::VERSIONS.max,
        ApiKey::OffsetFetch => OffsetFetchRequest::VERSIONS.max,
        ApiKey::InitProducerId => InitProducerIdRequest::VERSIONS.max,
        _ => range.max,
    };
    VersionRange {
        min: range.min,
        max: range.max.min(message_max),
    }
}

/// The lowest version to advertise for `api_key`.
///
/// Apache Kafka 4.x advertises Produce from v0 even though it refuses v0-v2: older
/// librdkafka derives its feature flags (message format v1/v2, compression) from the
/// advertised Produce minimum and misbehaves when v0 is missing (KAFKA-18659).
pub fn advertised_min(api_key: ApiKey, registered_min: i16) -> i16 {
    match api_key {
        ApiKey::Produce => 0,
        _ => registered_min,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produce_is_advertised_from_zero_but_decoded_from_three() {
        assert_eq!(codec_range(ApiKey::Produce).min, 3);
        assert_eq!(advertised_min(ApiKey::Produce, 3), 0);
        assert_eq!(advertised_min(ApiKey::Fetch, 4), 4);
    }

    #[test]
    fn no_api_is_advertised_beyond_what_its_message_types_decode() {
        assert_eq!(codec_range(ApiKey::OffsetCommit).max, 9);
        assert_eq!(codec_range(ApiKey::OffsetFetch).max, 9);
        assert_eq!(codec_range(ApiKey::InitProducerId).max, 5);
    }
}
