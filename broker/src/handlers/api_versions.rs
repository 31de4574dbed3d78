//! ApiVersions: the list of (api, min, max) Brook serves, derived from [`HANDLERS`].
//! Brook advertises no feature flags: it implements none of the features they gate.

use brook_protocol::kafka_protocol::messages::api_versions_response::ApiVersion;
use brook_protocol::kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use brook_protocol::kafka_protocol::ResponseError;
use brook_protocol::versions::{advertised_min, codec_range};

use super::HANDLERS;

pub fn handle(_req: &ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(supported())
}

/// The v0-format answer to an ApiVersions request newer than Brook knows (KIP-511).
pub fn unsupported_version_response() -> brook_protocol::kafka_protocol::messages::ResponseKind {
    brook_protocol::kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(supported()),
    )
}

fn supported() -> Vec<ApiVersion> {
    let mut keys: Vec<ApiVersion> = HANDLERS
        .iter()
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
