//! CreateAcls: add ACL bindings. Brook has no authorizer yet ([`crate::auth::authorizer`]),
//! so, as Kafka's `AclApis` does without one, every creation fails with SECURITY_DISABLED,
//! one result per creation in request order.

use brook_protocol::kafka_protocol::messages::create_acls_response::AclCreationResult;
use brook_protocol::kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth;
use crate::broker::Broker;
use crate::error::BrokerError;

/// Kafka's message (its `SecurityDisabledException`) for CreateAcls and DeleteAcls.
pub(super) const NO_AUTHORIZER: &str = "No Authorizer is configured.";

pub fn handle(broker: &Broker, req: CreateAclsRequest, _version: i16) -> CreateAclsResponse {
    match auth::authorizer(broker) {
        None => security_disabled(&req),
        Some(authorizer) => match *authorizer {},
    }
}

fn security_disabled(req: &CreateAclsRequest) -> CreateAclsResponse {
    let e = BrokerError::SecurityDisabled(NO_AUTHORIZER);
    let results = req
        .creations
        .iter()
        .map(|_| {
            AclCreationResult::default()
                .with_error_code(e.code().code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())))
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_protocol::kafka_protocol::messages::create_acls_request::AclCreation;

    #[test]
    fn without_an_authorizer_each_creation_is_security_disabled() {
        let req = CreateAclsRequest::default()
            .with_creations(vec![AclCreation::default(), AclCreation::default()]);
        let r = security_disabled(&req);
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
