//! DescribeAcls: the ACLs matching a filter. Brook has no authorizer yet
//! ([`crate::auth::authorizer`]), so it answers as Kafka's `AclApis` does without one:
//! a top-level SECURITY_DISABLED, no resources. MirrorMaker 2's ACL sync takes that
//! answer quietly; an unsupported API would make it log an ERROR every sync.

use brook_protocol::kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth;
use crate::broker::Broker;
use crate::error::BrokerError;

/// Kafka's message for DescribeAcls without an authorizer (its create and delete say
/// "No Authorizer is configured.").
const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

pub fn handle(broker: &Broker, _req: DescribeAclsRequest, _version: i16) -> DescribeAclsResponse {
    match auth::authorizer(broker) {
        None => security_disabled(),
        Some(authorizer) => match *authorizer {},
    }
}

fn security_disabled() -> DescribeAclsResponse {
    let e = BrokerError::SecurityDisabled(NO_AUTHORIZER);
    DescribeAclsResponse::default()
        .with_error_code(e.code().code())
        .with_error_message(Some(StrBytes::from_string(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_authorizer_the_whole_request_is_security_disabled() {
        let r = security_disabled();
        assert_eq!(r.error_code, 54);
        assert_eq!(
            r.error_message.as_deref(),
            Some("No Authorizer is configured on the broker")
        );
        assert!(r.resources.is_empty());
    }
}
