//! AlterUserScramCredentials (KIP-554): `kafka-configs --alter --entity-type users
//! --add-config 'SCRAM-SHA-512=[iterations=8192,password=…]'` / `--delete-config`.
//! The client sends the salt and the salted password, never the password; the broker keeps
//! StoredKey and ServerKey derived from it (`auth::sasl::scram`). Checked per user as
//! Kafka's controller checks them (`ScramControlManager`): a user named twice in one request
//! DUPLICATE_RESOURCE, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside
//! 4096..=16384 or an empty name UNACCEPTABLE_CREDENTIAL, deleting what does not exist
//! RESOURCE_NOT_FOUND; the accepted changes go to the quorum in one command.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use brook_protocol::kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::{Command, ScramUpsertion};

use crate::auth::acl::AclOperation;
use crate::auth::sasl::credentials::mechanism_of_type;
use crate::auth::sasl::scram::ScramCredential;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

/// Kafka's `ScramMechanism` bounds, the same for both hashes.
const MIN_ITERATIONS: i32 = 4096;
const MAX_ITERATIONS: i32 = 16384;

type Refusal = (ResponseError, &'static str);

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: AlterUserScramCredentialsRequest,
    _version: i16,
) -> AlterUserScramCredentialsResponse {
    // Kafka's handleAlterUserScramCredentialsRequest: ALTER on the cluster, else every
    // user's result CLUSTER_AUTHORIZATION_FAILED.
    if !Access::new(broker, session).cluster(AclOperation::Alter) {
        let e = BrokerError::NotAuthorized(Denied::Cluster);
        let mut users: Vec<StrBytes> = Vec::new();
        for name in req
            .deletions
            .iter()
            .map(|d| &d.name)
            .chain(req.upsertions.iter().map(|u| &u.name))
        {
            if !users.contains(name) {
                users.push(name.clone());
            }
        }
        let results = users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(user)
                    .with_error_code(e.code().code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string())))
            })
            .collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    }
    let image = broker.image();
    // Every user in request order, with the first refusal of any of its entries.
    let mut users: BTreeMap<String, Option<Refusal>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut deletions = Vec::new();
    for d in &req.deletions {
        let user = d.name.to_string();
        note(&mut order, &user);
        users.entry(user.clone()).or_default();
        if !seen.insert((user.clone(), d.mechanism)) {
            refuse(&mut users, &user, DUPLICATE);
            continue;
        }
        if user.is_empty() {
            refuse(
                &mut users,
                &user,
                (
                    ResponseError::UnacceptableCredential,
                    "Username must not be empty",
                ),
            );
        } else if mechanism_of_type(d.mechanism).is_none() {
            refuse(&mut users, &user, UNKNOWN_MECHANISM);
        } else if image
            .scram_credentials
            .get(&user)
            .is_none_or(|m| !m.contains_key(&d.mechanism))
        {
            refuse(
                &mut users,
                &user,
                (
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist",
                ),
            );
        } else {
            deletions.push((user, d.mechanism));
        }
    }
    let mut upsertions = Vec::new();
    for u in &req.upsertions {
        let user = u.name.to_string();
        note(&mut order, &user);
        users.entry(user.clone()).or_default();
        if !seen.insert((user.clone(), u.mechanism)) {
            refuse(&mut users, &user, DUPLICATE);
            continue;
        }
        let Some(mechanism) = mechanism_of_type(u.mechanism) else {
            refuse(&mut users, &user, UNKNOWN_MECHANISM);
            continue;
        };
        if user.is_empty() {
            refuse(
                &mut users,
                &user,
                (
                    ResponseError::UnacceptableCredential,
                    "Username must not be empty",
                ),
            );
        } else if u.iterations < MIN_ITERATIONS {
            refuse(
                &mut users,
                &user,
                (ResponseError::UnacceptableCredential, "Too few iterations"),
            );
        } else if u.iterations > MAX_ITERATIONS {
            refuse(
                &mut users,
                &user,
                (ResponseError::UnacceptableCredential, "Too many iterations"),
            );
        } else {
            let credential =
                ScramCredential::derive(mechanism, &u.salt, &u.salted_password, u.iterations);
            upsertions.push(ScramUpsertion {
                user,
                mechanism: u.mechanism,
                credential: credential.into(),
            });
        }
    }
    // A user with any refused entry changes nothing.
    let accepted = |user: &String| users.get(user).is_some_and(Option::is_none);
    deletions.retain(|(user, _)| accepted(user));
    upsertions.retain(|u| accepted(&u.user));
    let mut outcome: Result<(), (ResponseError, String)> = Ok(());
    if !deletions.is_empty() || !upsertions.is_empty() {
        let command = Command::AlterUserScramCredentials {
            upsertions,
            deletions,
        };
        outcome = broker.quorum.propose(command).await.map_err(|e| {
            let e = BrokerError::from(e);
            (e.code(), e.to_string())
        });
        broker.reconcile().await;
    }
    let results = order
        .into_iter()
        .map(|user| {
            let refusal = users.get(&user).cloned().flatten();
            let (code, message) = match (refusal, &outcome) {
                (Some((code, message)), _) => (code.code(), Some(message.to_owned())),
                (None, Err((code, message))) => (code.code(), Some(message.clone())),
                (None, Ok(())) => (0, None),
            };
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user))
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// Keeps the first refusal of a user's entries.
fn refuse(users: &mut BTreeMap<String, Option<Refusal>>, user: &str, why: Refusal) {
    users.entry(user.to_owned()).or_default().get_or_insert(why);
}

/// Results come back in the order users first appear in the request.
fn note(order: &mut Vec<String>, user: &str) {
    if !order.iter().any(|u| u == user) {
        order.push(user.to_owned());
    }
}

const DUPLICATE: Refusal = (
    ResponseError::DuplicateResource,
    "A user credential cannot be altered twice in the same request",
);
const UNKNOWN_MECHANISM: Refusal = (
    ResponseError::UnsupportedSaslMechanism,
    "Unknown SCRAM mechanism",
);
