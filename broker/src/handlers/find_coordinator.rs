//! FindCoordinator: a group's coordinator (key type 0) is the leader of its
//! `__consumer_offsets` partition, a transactional id's (key type 1) the leader of its
//! `__transaction_state` partition (`abs(hashCode(key)) % partitions`, as Kafka computes
//! it); the first key of each type creates its topic through the quorum, as Kafka does
//! (and, as Kafka, answers that key COORDINATOR_NOT_AVAILABLE meanwhile).
//! v0-3 carry one key; v4+ batch them in `coordinator_keys` (KIP-699).

use brook_protocol::kafka_protocol::messages::find_coordinator_response::Coordinator;
use brook_protocol::kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use tracing::warn;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::group::records::group_partition;
use crate::coordinator::txn::records::state_partition;
use crate::error::{CoordinatorLookupError, Denied};
use crate::metadata::{offsets_topic, txn_state_topic};
use crate::server::session::Session;

const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

/// The coordinator at its address on the listener the request came in on.
pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    // Kafka's handleFindCoordinatorRequest: DESCRIBE on the group or transactional id.
    let access = Access::new(broker, session);
    let denied = |key: &str| match req.key_type {
        GROUP_KEY => (!access.group(AclOperation::Describe, key)).then_some(Denied::Group),
        TRANSACTION_KEY => (!access.transactional_id(AclOperation::Describe, key))
            .then_some(Denied::TransactionalId),
        _ => None,
    };
    // The coordinator is COORDINATOR_NOT_AVAILABLE while this request creates its
    // internal topic, as Kafka answers: the client asks again once the topic's partitions
    // are led and loaded, rather than meeting COORDINATOR_LOAD_IN_PROGRESS from the
    // coordinator's APIs.
    let created = match req.key_type {
        GROUP_KEY => offsets_topic::ensure(broker).await,
        TRANSACTION_KEY => txn_state_topic::ensure(broker).await,
        _ => Ok(false),
    };
    let ready = created.map(|created| !created);
    let topic_ready = match ready {
        Ok(ready) => ready,
        Err(e) => {
            warn!(key_type = req.key_type, error = %e, "creating an internal topic failed");
            false
        }
    };
    let locate = |key: &str| {
        if let Some(denied) = denied(key) {
            (Some(CoordinatorLookupError::NotAuthorized(denied)), None)
        } else if topic_ready {
            find(broker, &session.listener_name, req.key_type, key)
        } else {
            (Some(CoordinatorLookupError::NotAvailable), None)
        }
    };
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|key| {
                let (error, node) = locate(key);
                let mut c = Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
                    .with_error_code(error.map_or(0, |e| e.code().code()))
                    .with_error_message(error.map(|e| StrBytes::from_string(e.to_string())));
                if let Some((id, host, port)) = node {
                    c = c
                        .with_node_id(BrokerId(id))
                        .with_host(StrBytes::from_string(host))
                        .with_port(port);
                }
                c
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (error, node) = locate(&req.key);
    let mut response = FindCoordinatorResponse::default()
        .with_node_id(BrokerId(-1))
        .with_port(-1)
        .with_error_code(error.map_or(0, |e| e.code().code()));
    if version >= 1 {
        response = response.with_error_message(error.map(|e| StrBytes::from_string(e.to_string())));
    }
    if let Some((id, host, port)) = node {
        response = response
            .with_node_id(BrokerId(id))
            .with_host(StrBytes::from_string(host))
            .with_port(port);
    }
    response
}

type Node = (i32, String, i32);

fn find(
    broker: &Broker,
    listener: &str,
    key_type: i8,
    key: &str,
) -> (Option<CoordinatorLookupError>, Option<Node>) {
    let image = broker.image();
    let partition = match key_type {
        GROUP_KEY => group_partition(&image, key),
        TRANSACTION_KEY => state_partition(&image, key).map(|(_, p)| p),
        _ => return (Some(CoordinatorLookupError::UnknownKeyType), None),
    };
    let Some(leader) = partition.map(|p| p.leader) else {
        return (Some(CoordinatorLookupError::NotAvailable), None);
    };
    let endpoint = image
        .broker(leader)
        .filter(|b| b.is_active())
        .and_then(|b| Some((b.broker_id, b.endpoint(listener)?)));
    match endpoint {
        Some((id, (host, port))) => (None, Some((id, host.to_owned(), i32::from(port)))),
        // No leader, or its broker is fenced: clients retry on this code.
        None => (Some(CoordinatorLookupError::NotAvailable), None),
    }
}
