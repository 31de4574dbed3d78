//! ApiVersions, DescribeCluster and DescribeQuorum as a Kafka controller answers them on its
//! controller listener: the APIs served here with their codec ranges and the finalized
//! features; the controllers (KIP-919: voters, and the observers that are controllers, i.e.
//! that joined with a directory id) with the active controller; the quorum as the leader
//! sees it.

use brook_protocol::kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use brook_protocol::kafka_protocol::messages::{
    api_versions_response::ApiVersion, ApiKey, ApiVersionsResponse, BrokerId,
    DescribeClusterRequest, DescribeClusterResponse, DescribeQuorumResponse, ResponseKind,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::versions::codec_range;

use brook_raft::MetadataImage;

use super::ControllerNode;
use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::handlers::{api_versions::feature_keys, describe_quorum::quorum_response};
use crate::metadata::features;

/// The APIs the controller listener serves.
const APIS: [ApiKey; 6] = [
    ApiKey::ApiVersions,
    ApiKey::DescribeQuorum,
    ApiKey::DescribeCluster,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
    ApiKey::UpdateRaftVoter,
];
/// Kafka's "no authorized operations computed" sentinel.
const NO_AUTHORIZED_OPERATIONS: i32 = i32::MIN;

/// The APIs of a controller listener; a SASL one also serves SaslHandshake and
/// SaslAuthenticate, which clients look for in ApiVersions before they log in.
fn api_keys(config: &BrokerConfig) -> Vec<ApiVersion> {
    let sasl: &[ApiKey] = if config.controller_sasl.is_some() {
        &[ApiKey::SaslHandshake, ApiKey::SaslAuthenticate]
    } else {
        &[]
    };
    let mut keys: Vec<ApiVersion> = APIS
        .iter()
        .chain(sasl)
        .map(|&api_key| {
            let range = codec_range(api_key);
            ApiVersion::default()
                .with_api_key(api_key as i16)
                .with_min_version(range.min)
                .with_max_version(range.max)
        })
        .collect();
    keys.sort_by_key(|k| k.api_key);
    keys
}

pub(super) fn api_versions(node: &dyn ControllerNode) -> ApiVersionsResponse {
    api_versions_of(node.config(), &node.quorum().image())
}

/// ApiVersions of a controller listener with `config` and metadata `image`.
pub(super) fn api_versions_of(config: &BrokerConfig, image: &MetadataImage) -> ApiVersionsResponse {
    let (supported, finalized) = feature_keys(config, image);
    ApiVersionsResponse::default()
        .with_api_keys(api_keys(config))
        .with_supported_features(supported)
        .with_finalized_features_epoch(features::epoch(image))
        .with_finalized_features(finalized)
}

/// The v0 answer to an ApiVersions version this codec cannot read (KIP-511).
pub(super) fn unsupported_api_versions(config: &BrokerConfig) -> ResponseKind {
    ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(BrokerError::UnsupportedVersion.code().code())
            .with_api_keys(api_keys(config)),
    )
}

/// `host:port` (IPv6 in brackets) split for the wire.
fn host_port(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?))
}

pub(super) async fn describe_cluster(
    node: &dyn ControllerNode,
    _req: &DescribeClusterRequest,
) -> DescribeClusterResponse {
    let quorum = node.quorum();
    let m = quorum.raft_metrics();
    let membership = m.membership_config.membership();
    let voters: Vec<u64> = membership.voter_ids().collect();
    let controllers = membership
        .nodes()
        .filter(|(id, n)| voters.contains(id) || n.directory_id.is_some())
        .filter_map(|(&id, n)| {
            let (host, port) = host_port(&n.addr)?;
            Some(
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(i32::try_from(id).ok()?))
                    .with_host(StrBytes::from_string(host))
                    .with_port(i32::from(port)),
            )
        })
        .collect();
    let controller_id = m
        .current_leader
        .and_then(|l| i32::try_from(l).ok())
        .unwrap_or(-1);
    DescribeClusterResponse::default()
        // KIP-919's EndpointType CONTROLLER.
        .with_endpoint_type(2)
        .with_cluster_id(StrBytes::from_string(
            quorum.image().cluster_id.clone().unwrap_or_default(),
        ))
        .with_controller_id(BrokerId(controller_id))
        .with_brokers(controllers)
        .with_cluster_authorized_operations(NO_AUTHORIZED_OPERATIONS)
}

pub(super) async fn describe_quorum(
    node: &dyn ControllerNode,
    version: i16,
) -> DescribeQuorumResponse {
    let quorum = node.quorum();
    let m = match quorum.leader_metrics().await {
        Ok(leader_view) => leader_view,
        Err(_) => quorum.raft_metrics(),
    };
    let listener = node
        .config()
        .controller_listener_names
        .first()
        .map_or("CONTROLLER", String::as_str);
    quorum_response(&m, version, listener)
}
