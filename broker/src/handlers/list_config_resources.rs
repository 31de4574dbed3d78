//! ListConfigResources (KIP-1142; v0 was ListClientMetricsResources): the config resources
//! an admin may describe, as `kafka-configs --describe --entity-type groups` asks for the
//! groups that have dynamic configs.
//!
//! Kafka 4.4's `KafkaApis.handleListConfigResources`: DESCRIBE_CONFIGS on the cluster
//! (else CLUSTER_AUTHORIZATION_FAILED); v0 lists client-metrics subscriptions only, v1
//! also groups with configs, brokers, broker loggers and topics; no type asked means
//! every type the version knows, an unknown one UNSUPPORTED_VERSION. Listed in Kafka's
//! order: groups, client-metrics subscriptions (Brook has none), broker loggers and
//! brokers (the active ones on this listener), topics.

use brook_protocol::kafka_protocol::messages::list_config_resources_response::ConfigResource;
use brook_protocol::kafka_protocol::messages::{
    ListConfigResourcesRequest, ListConfigResourcesResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::handlers::describe_configs::{BROKER, BROKER_LOGGER, GROUP, TOPIC};
use crate::server::session::Session;

pub const CLIENT_METRICS: i8 = 16;

/// The resource types a version lists (`ListConfigResourcesRequest.supportedResourceTypes`).
fn supported(version: i16) -> &'static [i8] {
    if version == 0 {
        &[CLIENT_METRICS]
    } else {
        &[TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP]
    }
}

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    let refused =
        |error: ResponseError| ListConfigResourcesResponse::default().with_error_code(error.code());
    if !Access::new(broker, session).cluster(AclOperation::DescribeConfigs) {
        return refused(ResponseError::ClusterAuthorizationFailed);
    }
    let supported = supported(version);
    if req.resource_types.iter().any(|t| !supported.contains(t)) {
        return refused(ResponseError::UnsupportedVersion);
    }
    let wanted = |t: i8| {
        (req.resource_types.is_empty() && supported.contains(&t)) || req.resource_types.contains(&t)
    };
    let image = broker.image();
    let resource = |resource_type: i8, name: &str| {
        ConfigResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
    };
    let mut resources = Vec::new();
    if wanted(GROUP) {
        resources.extend(image.group_configs.keys().map(|g| resource(GROUP, g)));
    }
    let brokers: Vec<String> = image
        .active_brokers()
        .filter(|b| b.endpoint(&session.listener_name).is_some())
        .map(|b| b.broker_id.to_string())
        .collect();
    for resource_type in [BROKER_LOGGER, BROKER] {
        if wanted(resource_type) {
            resources.extend(brokers.iter().map(|id| resource(resource_type, id)));
        }
    }
    if wanted(TOPIC) {
        resources.extend(image.topics.keys().map(|t| resource(TOPIC, t)));
    }
    ListConfigResourcesResponse::default().with_config_resources(resources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v0_lists_client_metrics_only_and_v1_every_config_resource_type() {
        assert_eq!(supported(0), &[CLIENT_METRICS]);
        assert_eq!(supported(1), &[2, 4, 8, 16, 32]);
    }
}
