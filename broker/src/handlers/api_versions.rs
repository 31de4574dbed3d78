//! ApiVersions: the list of (api, min, max) Brook serves, derived from [`HANDLERS`], and
//! the feature flags: `group.version` (supported 0-1, finalized at 1 when the KIP-848
//! consumer group protocol is enabled by `group.coordinator.rebalance.protocols`), and `transaction.version` (supported 0-2, finalized
//! at `brook.transaction.version`; level 2 is what makes Java 4.x and franz-go clients use
//! Transactions V2, KIP-890). A level of 0 is not listed as finalized, as Kafka omits it.
//! The finalized features' epoch is the process start time in milliseconds, so a restart
//! with another level is newer to clients that saw the old one.

use std::sync::OnceLock;

use brook_protocol::kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use brook_protocol::kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::versions::{advertised_min, codec_range};

use super::HANDLERS;
use crate::broker::Broker;
use crate::error::BrokerError;

const TRANSACTION_VERSION: &str = "transaction.version";
const GROUP_VERSION: &str = "group.version";
/// `group.version` 1: ConsumerGroupHeartbeat/ConsumerGroupDescribe are served.
const GROUP_VERSION_LEVEL: i16 = 1;
/// The highest `transaction.version` Brook implements.
const MAX_TRANSACTION_VERSION: i16 = 2;

pub fn handle(broker: &Broker, _req: &ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    let level = broker.config.transaction_version;
    let consumer_groups = broker.config.group_consumer_protocol_enabled;
    let mut finalized = Vec::new();
    if consumer_groups {
        finalized.push(
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(GROUP_VERSION))
                .with_min_version_level(GROUP_VERSION_LEVEL)
                .with_max_version_level(GROUP_VERSION_LEVEL),
        );
    }
    if level > 0 {
        finalized.push(
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                .with_min_version_level(level)
                .with_max_version_level(level),
        );
    }
    ApiVersionsResponse::default()
        .with_api_keys(supported(consumer_groups))
        .with_supported_features(vec![
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(GROUP_VERSION))
                .with_min_version(0)
                .with_max_version(GROUP_VERSION_LEVEL),
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                .with_min_version(0)
                .with_max_version(MAX_TRANSACTION_VERSION),
        ])
        .with_finalized_features_epoch(features_epoch())
        .with_finalized_features(finalized)
}

fn is_consumer_group_api(api_key: ApiKey) -> bool {
    matches!(
        api_key,
        ApiKey::ConsumerGroupHeartbeat | ApiKey::ConsumerGroupDescribe
    )
}

/// The process start time in milliseconds, fixed at the first call.
fn features_epoch() -> i64 {
    static EPOCH: OnceLock<i64> = OnceLock::new();
    *EPOCH.get_or_init(brook_storage::log_manager::now_ms)
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
