//! DescribeClientQuotas: Brook has no client quotas yet, so every filter matches nothing.
//! `kafka-configs --describe --entity-type users` sends it alongside
//! DescribeUserScramCredentials and fails if it is not served.
//!
//! Authorization (Kafka's `handleDescribeClientQuotasRequest`): DESCRIBE_CONFIGS on the
//! cluster, else `CLUSTER_AUTHORIZATION_FAILED` with its message and no entries.

use brook_protocol::kafka_protocol::messages::{
    DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::Denied;
use crate::server::session::Session;

pub fn handle(
    broker: &Broker,
    session: &Session,
    _req: DescribeClientQuotasRequest,
    _version: i16,
) -> DescribeClientQuotasResponse {
    if !Access::new(broker, session).cluster(AclOperation::DescribeConfigs) {
        return DescribeClientQuotasResponse::default()
            .with_error_code(Denied::Cluster.code().code())
            .with_error_message(Some(StrBytes::from_string(Denied::Cluster.to_string())))
            .with_entries(None);
    }
    DescribeClientQuotasResponse::default().with_entries(Some(Vec::new()))
}
