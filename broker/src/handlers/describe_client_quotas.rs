//! DescribeClientQuotas: Brook has no client quotas yet, so every filter matches nothing.
//! `kafka-configs --describe --entity-type users` sends it alongside
//! DescribeUserScramCredentials and fails if it is not served.

use brook_protocol::kafka_protocol::messages::{
    DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};

pub fn handle(_req: DescribeClientQuotasRequest, _version: i16) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default().with_entries(Some(Vec::new()))
}
