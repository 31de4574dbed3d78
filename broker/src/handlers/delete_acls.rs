//! DeleteAcls: remove the ACLs matching filters. Brook has no authorizer yet
//! ([`crate::auth::authorizer`]), so, as Kafka's `AclApis` does without one, every filter
//! fails with SECURITY_DISABLED and matches nothing, one result per filter in request order.

use brook_protocol::kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use brook_protocol::kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use super::create_acls::NO_AUTHORIZER;
use crate::auth;
use crate::broker::Broker;
use crate::error::BrokerError;

pub fn handle(broker: &Broker, req: DeleteAclsRequest, _version: i16) -> DeleteAclsResponse {
    match auth::authorizer(broker) {
        None => security_disabled(&req),
        Some(authorizer) => match *authorizer {},
    }
}

fn security_disabled(req: &DeleteAclsRequest) -> DeleteAclsResponse {
    let e = BrokerError::SecurityDisabled(NO_AUTHORIZER);
    let results = req
        .filters
        .iter()
        .map(|_| {
            DeleteAclsFilterResult::default()
                .with_error_code(e.code().code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())))
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_protocol::kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;

    #[test]
    fn without_an_authorizer_each_filter_is_security_disabled_and_matches_nothing() {
        let req = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()]);
        let r = security_disabled(&req);
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
