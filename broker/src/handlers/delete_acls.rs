//! DeleteAcls: remove the ACL bindings matching filters (`kafka-acls.sh --remove`). Without
//! an authorizer ([`crate::auth::authorizer`]) every filter fails with SECURITY_DISABLED and
//! matches nothing, as Kafka's `AclApis` answers. With one: ALTER on the cluster is required
//! (CLUSTER_AUTHORIZATION_FAILED for every filter); a filter with UNKNOWN fields is
//! INVALID_REQUEST (Kafka's `AclControlManager.validateFilter`); the bindings the valid
//! filters match in the current image are removed by one quorum command and reported per
//! filter, in request order.

use brook_protocol::kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use brook_protocol::kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use brook_protocol::kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::{AclBinding, Command};

use super::create_acls::NO_AUTHORIZER;
use crate::auth::acl::filter::AclFilter;
use crate::auth::acl::{AclOperation, PatternType, PermissionType, ResourceType};
use crate::auth::{self, Access};
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: DeleteAclsRequest,
    _version: i16,
) -> DeleteAclsResponse {
    if auth::authorizer(broker).is_none() {
        return all_failed(&req, &BrokerError::SecurityDisabled(NO_AUTHORIZER));
    }
    if !Access::new(broker, session).cluster(AclOperation::Alter) {
        return all_failed(&req, &BrokerError::NotAuthorized(Denied::Cluster));
    }
    let image = broker.image();
    let matched: Vec<Result<Vec<AclBinding>, BrokerError>> = req
        .filters
        .iter()
        .map(|f| {
            let filter = filter(f);
            filter
                .check()
                .map_err(|m| BrokerError::InvalidRequest(m.to_owned()))?;
            Ok(image
                .acls
                .bindings()
                .filter(|b| filter.matches(b))
                .collect())
        })
        .collect();
    let mut doomed: Vec<AclBinding> = matched
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .flatten()
        .cloned()
        .collect();
    doomed.sort();
    doomed.dedup();
    let proposed = if doomed.is_empty() {
        Ok(())
    } else {
        broker
            .quorum
            .propose(Command::DeleteAcls { bindings: doomed })
            .await
            .map(|_| ())
            .map_err(BrokerError::from)
    };
    let results = matched
        .into_iter()
        .map(|r| match (r, &proposed) {
            (Err(e), _) => failed(&e),
            (Ok(_), Err(e)) => failed(e),
            (Ok(bindings), Ok(())) => DeleteAclsFilterResult::default()
                .with_matching_acls(bindings.into_iter().map(matching).collect()),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

fn filter(f: &DeleteAclsFilter) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::from_code(f.resource_type_filter),
        resource_name: f.resource_name_filter.as_ref().map(|s| s.to_string()),
        pattern_type: PatternType::from_code(f.pattern_type_filter),
        principal: f.principal_filter.as_ref().map(|s| s.to_string()),
        host: f.host_filter.as_ref().map(|s| s.to_string()),
        operation: AclOperation::from_code(f.operation),
        permission_type: PermissionType::from_code(f.permission_type),
    }
}

fn matching(b: AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type)
        .with_resource_name(StrBytes::from_string(b.resource_name))
        .with_pattern_type(b.pattern_type)
        .with_principal(StrBytes::from_string(b.principal))
        .with_host(StrBytes::from_string(b.host))
        .with_operation(b.operation)
        .with_permission_type(b.permission_type)
}

fn failed(e: &BrokerError) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(e.code().code())
        .with_error_message(Some(StrBytes::from_string(e.to_string())))
}

fn all_failed(req: &DeleteAclsRequest, e: &BrokerError) -> DeleteAclsResponse {
    DeleteAclsResponse::default()
        .with_filter_results(req.filters.iter().map(|_| failed(e)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_authorizer_each_filter_is_security_disabled_and_matches_nothing() {
        let req = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()]);
        let r = all_failed(&req, &BrokerError::SecurityDisabled(NO_AUTHORIZER));
        assert_eq!(r.filter_results.len(), 1);
        let only = &r.filter_results[0];
        assert_eq!(only.error_code, 54);
        assert_eq!(
            only.error_message.as_deref(),
            Some("No Authorizer is configured.")
        );
        assert!(only.matching_acls.is_empty());
    }
}
