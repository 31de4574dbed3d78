//! CreateAcls: add ACL bindings (`kafka-acls.sh --add`). Without an authorizer
//! ([`crate::auth::authorizer`]) every creation fails with SECURITY_DISABLED, as Kafka's
//! `AclApis` answers. With one: ALTER on the cluster is required (else every creation
//! CLUSTER_AUTHORIZATION_FAILED, as Kafka's controller answers); each binding is checked
//! as Kafka's `AclControlManager.validateNewAcl` does (INVALID_REQUEST with its message);
//! the valid ones go to the metadata quorum in one command. One result per creation, in
//! request order.

use brook_protocol::kafka_protocol::messages::create_acls_request::AclCreation;
use brook_protocol::kafka_protocol::messages::create_acls_response::AclCreationResult;
use brook_protocol::kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::{AclBinding, Command};

use crate::auth::acl::filter::check_new_binding;
use crate::auth::acl::AclOperation;
use crate::auth::{self, Access};
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

/// Kafka's message (its `SecurityDisabledException`) for CreateAcls and DeleteAcls.
pub(super) const NO_AUTHORIZER: &str = "No Authorizer is configured.";

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: CreateAclsRequest,
    _version: i16,
) -> CreateAclsResponse {
    if auth::authorizer(broker).is_none() {
        return all_failed(&req, &BrokerError::SecurityDisabled(NO_AUTHORIZER));
    }
    if !Access::new(broker, session).cluster(AclOperation::Alter) {
        return all_failed(&req, &BrokerError::NotAuthorized(Denied::Cluster));
    }
    let checked: Vec<Result<AclBinding, BrokerError>> = req
        .creations
        .iter()
        .map(|c| {
            let binding = binding(c);
            check_new_binding(&binding)
                .map(|()| binding)
                .map_err(BrokerError::InvalidRequest)
        })
        .collect();
    let bindings: Vec<AclBinding> = checked
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .cloned()
        .collect();
    let proposed = if bindings.is_empty() {
        Ok(())
    } else {
        broker
            .quorum
            .propose(Command::CreateAcls { bindings })
            .await
            .map(|_| ())
            .map_err(BrokerError::from)
    };
    let results = checked
        .into_iter()
        .map(|r| match (r, &proposed) {
            (Err(e), _) => failed(&e),
            (Ok(_), Err(e)) => failed(e),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

fn binding(c: &AclCreation) -> AclBinding {
    AclBinding {
        resource_type: c.resource_type,
        resource_name: c.resource_name.to_string(),
        pattern_type: c.resource_pattern_type,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: c.operation,
        permission_type: c.permission_type,
    }
}

fn failed(e: &BrokerError) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(e.code().code())
        .with_error_message(Some(StrBytes::from_string(e.to_string())))
}

fn all_failed(req: &CreateAclsRequest, e: &BrokerError) -> CreateAclsResponse {
    CreateAclsResponse::default().with_results(req.creations.iter().map(|_| failed(e)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_authorizer_each_creation_is_security_disabled() {
        let req = CreateAclsRequest::default()
            .with_creations(vec![AclCreation::default(), AclCreation::default()]);
        let r = all_failed(&req, &BrokerError::SecurityDisabled(NO_AUTHORIZER));
        assert_eq!(r.results.len(), 2);
        for result in &r.results {
            assert_eq!(result.error_code, 54);
            assert_eq!(
                result.error_message.as_deref(),
                Some("No Authorizer is configured.")
            );
        }
    }
}
