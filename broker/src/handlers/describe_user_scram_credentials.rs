//! DescribeUserScramCredentials (KIP-554): each user's SCRAM mechanisms and iterations,
//! never a salt or key. No user list (or an empty one) describes every user with a
//! credential; a named user without one gets RESOURCE_NOT_FOUND, a user named twice
//! DUPLICATE_RESOURCE, as Kafka answers.

use brook_protocol::kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use brook_protocol::kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeUserScramCredentialsRequest,
    _version: i16,
) -> DescribeUserScramCredentialsResponse {
    // Kafka's handleDescribeUserScramCredentialsRequest: DESCRIBE on the cluster.
    if !Access::new(broker, session).cluster(AclOperation::Describe) {
        let e = BrokerError::NotAuthorized(Denied::Cluster);
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(e.code().code())
            .with_error_message(Some(StrBytes::from_string(e.to_string())));
    }
    let image = broker.image();
    let names: Vec<String> = match &req.users {
        Some(users) if !users.is_empty() => users.iter().map(|u| u.name.to_string()).collect(),
        _ => image.scram_credentials.keys().cloned().collect(),
    };
    let results = names
        .iter()
        .enumerate()
        .map(|(i, user)| {
            let result =
                DescribeUserScramCredentialsResult::default().with_user(StrBytes::from_string(user.clone()));
            if names[..i].contains(user) || names[i + 1..].contains(user) {
                return result
                    .with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "Cannot describe SCRAM credentials for the same user twice in a single request",
                    )));
            }
            match image.scram_credentials.get(user) {
                Some(by_mechanism) => result.with_credential_infos(
                    by_mechanism
                        .iter()
                        .map(|(mechanism, c)| {
                            CredentialInfo::default()
                                .with_mechanism(*mechanism)
                                .with_iterations(c.iterations)
                        })
                        .collect(),
                ),
                None => result
                    .with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    )))),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
