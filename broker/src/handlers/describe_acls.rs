//! DescribeAcls: the ACL bindings matching a filter (`kafka-acls.sh --list`), grouped by
//! resource pattern as Kafka's `DescribeAclsResponse.aclsResources` groups them. Without an
//! authorizer ([`crate::auth::authorizer`]) a top-level SECURITY_DISABLED, no resources, as
//! Kafka's `AclApis` answers (MirrorMaker 2's ACL sync takes that answer quietly). With one:
//! DESCRIBE on the cluster is required (CLUSTER_AUTHORIZATION_FAILED); a filter with
//! UNKNOWN fields is INVALID_REQUEST.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource,
};
use brook_protocol::kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::filter::AclFilter;
use crate::auth::acl::{AclOperation, PatternType, PermissionType, ResourceType};
use crate::auth::{self, Access};
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

/// Kafka's message for DescribeAcls without an authorizer (its create and delete say
/// "No Authorizer is configured.").
const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeAclsRequest,
    _version: i16,
) -> DescribeAclsResponse {
    if auth::authorizer(broker).is_none() {
        return failed(BrokerError::SecurityDisabled(NO_AUTHORIZER));
    }
    if !Access::new(broker, session).cluster(AclOperation::Describe) {
        return failed(BrokerError::NotAuthorized(Denied::Cluster));
    }
    let filter = filter(&req);
    if let Err(message) = filter.check() {
        return failed(BrokerError::InvalidRequest(message.to_owned()));
    }
    let image = broker.image();
    let mut by_pattern: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for b in image.acls.bindings().filter(|b| filter.matches(b)) {
        by_pattern
            .entry((b.resource_type, b.resource_name.clone(), b.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(b.principal))
                    .with_host(StrBytes::from_string(b.host))
                    .with_operation(b.operation)
                    .with_permission_type(b.permission_type),
            );
    }
    let resources = by_pattern
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(name))
                .with_pattern_type(pattern_type)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

fn filter(req: &DescribeAclsRequest) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::from_code(req.resource_type_filter),
        resource_name: req.resource_name_filter.as_ref().map(|s| s.to_string()),
        pattern_type: PatternType::from_code(req.pattern_type_filter),
        principal: req.principal_filter.as_ref().map(|s| s.to_string()),
        host: req.host_filter.as_ref().map(|s| s.to_string()),
        operation: AclOperation::from_code(req.operation),
        permission_type: PermissionType::from_code(req.permission_type),
    }
}

fn failed(e: BrokerError) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(e.code().code())
        .with_error_message(Some(StrBytes::from_string(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_authorizer_the_whole_request_is_security_disabled() {
        let r = failed(BrokerError::SecurityDisabled(NO_AUTHORIZER));
        assert_eq!(r.error_code, 54);
        assert_eq!(
            r.error_message.as_deref(),
            Some("No Authorizer is configured on the broker")
        );
        assert!(r.resources.is_empty());
    }
}
