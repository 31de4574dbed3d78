//! ApiVersions: the list of (api, min, max) Brook serves, derived from [`HANDLERS`], and
//! the feature flags (`metadata::features`): each supported feature's range, and the
//! finalized levels (a level of 0 is not listed as finalized, as Kafka omits it) with the
//! metadata image's position as their epoch. The KIP-848 APIs are listed only while
//! `consumer` is an enabled rebalance protocol.

use brook_protocol::kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use brook_protocol::kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::versions::{advertised_min, codec_range};

use super::HANDLERS;
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::metadata::features;

pub fn handle(broker: &Broker, req: &ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    if version >= 3
        && !(is_software_name(&req.client_software_name)
            && is_software_name(&req.client_software_version))
    {
        // As Kafka's ApiVersionsRequest.isValid: KIP-511's name and version are metric and log
        // labels, so anything outside the pattern is INVALID_REQUEST (no API list), not served.
        return ApiVersionsResponse::default()
            .with_error_code(BrokerError::InvalidRequest(String::new()).code().code());
    }
    let image = broker.image();
    let (supported_features, finalized) = feature_keys(&broker.config, &image);
    // As Kafka 4.4: the KIP-848 APIs stay listed at group.version 0 (ConsumerGroupHeartbeat
    // then answers UNSUPPORTED_VERSION); only the rebalance protocols config removes them.
    ApiVersionsResponse::default()
        .with_api_keys(supported(broker.config.group_consumer_protocol_enabled))
        .with_supported_features(supported_features)
        .with_finalized_features_epoch(features::epoch(&image))
        .with_finalized_features(finalized)
}

/// Each reported feature's supported range and, when above 0, its finalized level: also
/// what the controller listener's ApiVersions reports (`cluster/controller_api`).
pub fn feature_keys(
    config: &crate::config::BrokerConfig,
    image: &brook_raft::MetadataImage,
) -> (Vec<SupportedFeatureKey>, Vec<FinalizedFeatureKey>) {
    let mut supported_features = Vec::new();
    let mut finalized = Vec::new();
    for (name, min, max) in features::SUPPORTED {
        supported_features.push(
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version(min)
                .with_max_version(max),
        );
        let level = features::finalized(config, image, name);
        if level > 0 {
            finalized.push(
                FinalizedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(name))
                    .with_min_version_level(level)
                    .with_max_version_level(level),
            );
        }
    }
    (supported_features, finalized)
}

/// KIP-511's pattern for a client software name or version: `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn is_software_name(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            edge(first) && edge(last) && b.iter().all(|c| edge(c) || *c == b'-' || *c == b'.')
        }
        _ => false,
    }
}

fn is_consumer_group_api(api_key: ApiKey) -> bool {
    matches!(
        api_key,
        ApiKey::ConsumerGroupHeartbeat | ApiKey::ConsumerGroupDescribe
    )
}

/// The v0-format answer to an ApiVersions request newer than Brook knows (KIP-511).
pub fn unsupported_version_response() -> brook_protocol::kafka_protocol::messages::ResponseKind {
    brook_protocol::kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(BrokerError::UnsupportedVersion.code().code())
            .with_api_keys(supported(true)),
    )
}

/// The APIs served; the KIP-848 ones only while `consumer` is an enabled rebalance protocol
/// (clients such as franz-go and the Java consumer choose the protocol by what is advertised).
fn supported(consumer_groups: bool) -> Vec<ApiVersion> {
    let mut keys: Vec<ApiVersion> = HANDLERS
        .iter()
        .filter(|&&api_key| consumer_groups || !is_consumer_group_api(api_key))
        .map(|&api_key| {
            let range = codec_range(api_key);
            ApiVersion::default()
                .with_api_key(api_key as i16)
                .with_min_version(advertised_min(api_key, range.min))
                .with_max_version(range.max)
        })
        .collect();
    keys.sort_by_key(|k| k.api_key);
    keys
}

#[cfg(test)]
mod software_name_tests {
    use super::is_software_name;

    #[test]
    fn kip_511_pattern() {
        for ok in [
            "apache-kafka-java",
            "4.4.0",
            "librdkafka",
            "2.12.1",
            "a",
            "x.y-z9",
        ] {
            assert!(is_software_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-lead",
            "trail-",
            ".x",
            "x.",
            "bad\nname",
            "sp ace",
            "\u{202e}x",
            "a_b",
        ] {
            assert!(!is_software_name(bad), "{bad:?}");
        }
    }
}
