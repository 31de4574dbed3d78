//! AddRaftVoter (80), RemoveRaftVoter (81) and UpdateRaftVoter (82), KIP-853, as Kafka's
//! `KafkaRaftClient` checks them before the voter change (`brook_raft::voters`): the cluster
//! id (INCONSISTENT_CLUSTER_ID), leadership (NOT_LEADER_OR_FOLLOWER), `kraft.version` 1
//! (UNSUPPORTED_VERSION: a static quorum cannot change), a directory id and an endpoint on the
//! controller listener (INVALID_REQUEST), then the change itself.

use brook_protocol::kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, BrokerId, RemoveRaftVoterRequest,
    RemoveRaftVoterResponse, UpdateRaftVoterRequest, UpdateRaftVoterResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::voters::VoterChangeError;

use super::ControllerNode;
use crate::error::voter_change_code;
use crate::metadata::features::{self, KRAFT_VERSION};
use crate::metadata::meta_properties::uuid_to_kafka_string;

/// A refusal: the code and Kafka's message.
type Refusal = (ResponseError, Option<String>);

/// The checks before any voter change, in Kafka's order.
fn precheck(
    node: &dyn ControllerNode,
    cluster_id: Option<&str>,
    change: &str,
) -> Result<(), Refusal> {
    let image = node.quorum().image();
    let ours = image.cluster_id.clone().unwrap_or_default();
    if let Some(given) = cluster_id {
        if given != ours {
            return Err((
                ResponseError::InconsistentClusterId,
                Some(format!(
                    "The given id \"{given}\" doesn't match the cluster id \"{ours}\""
                )),
            ));
        }
    }
    if !node.quorum().is_leader() {
        return Err((ResponseError::NotLeaderOrFollower, None));
    }
    let kraft_version = features::finalized(node.config(), &image, KRAFT_VERSION);
    if kraft_version < 1 {
        return Err((
            ResponseError::UnsupportedVersion,
            Some(format!(
                "Cluster doesn't support {change} voter because the {KRAFT_VERSION} feature is {kraft_version}"
            )),
        ));
    }
    Ok(())
}

fn refused(e: &VoterChangeError) -> Refusal {
    let message = match e {
        VoterChangeError::NotLeader => None,
        other => Some(other.to_string()),
    };
    (voter_change_code(e), message)
}

pub(super) async fn add(
    node: &dyn ControllerNode,
    req: &AddRaftVoterRequest,
) -> AddRaftVoterResponse {
    let outcome = async {
        precheck(
            node,
            req.cluster_id.as_ref().map(|c| c.as_str()),
            "adding",
        )?;
        let id = u64::try_from(req.voter_id).ok().filter(|_| !req.voter_directory_id.is_nil());
        let Some(id) = id else {
            return Err((
                ResponseError::InvalidRequest,
                Some("Add voter request didn't include a valid voter".to_owned()),
            ));
        };
        let listener = node
            .config()
            .controller_listener_names
            .first()
            .cloned()
            .unwrap_or_default();
        if !req.listeners.iter().any(|l| l.name.as_str() == listener) {
            let given: Vec<String> = req
                .listeners
                .iter()
                .map(|l| format!("{}://{}:{}", l.name.as_str(), l.host.as_str(), l.port))
                .collect();
            return Err((
                ResponseError::InvalidRequest,
                Some(format!(
                    "Add voter request didn't include the endpoint ({}) for the default listener {listener}",
                    given.join(", ")
                )),
            ));
        }
        let directory = uuid_to_kafka_string(req.voter_directory_id);
        node.quorum()
            .add_voter(id, &directory)
            .await
            .map_err(|e| refused(&e))
    }
    .await;
    match outcome {
        Ok(()) => AddRaftVoterResponse::default(),
        Err((code, message)) => AddRaftVoterResponse::default()
            .with_error_code(code.code())
            .with_error_message(message.map(StrBytes::from_string)),
    }
}

pub(super) async fn remove(
    node: &dyn ControllerNode,
    req: &RemoveRaftVoterRequest,
) -> RemoveRaftVoterResponse {
    let outcome = async {
        precheck(
            node,
            req.cluster_id.as_ref().map(|c| c.as_str()),
            "removing",
        )?;
        let Ok(id) = u64::try_from(req.voter_id) else {
            return Err((
                ResponseError::InvalidRequest,
                Some("Remove voter request didn't include a valid voter".to_owned()),
            ));
        };
        let directory = (!req.voter_directory_id.is_nil())
            .then(|| uuid_to_kafka_string(req.voter_directory_id));
        node.quorum()
            .remove_voter(id, directory.as_deref())
            .await
            .map_err(|e| refused(&e))
    }
    .await;
    match outcome {
        Ok(()) => RemoveRaftVoterResponse::default(),
        Err((code, message)) => RemoveRaftVoterResponse::default()
            .with_error_code(code.code())
            .with_error_message(message.map(StrBytes::from_string)),
    }
}

/// A Kafka voter sends this at start to publish its endpoints and kraft.version range.
/// Brook's controllers keep their endpoint in the raft membership (where AddRaftVoter or the
/// initial voter set put it) and never send it; the leader acknowledges a known voter, as
/// nothing needs to change, and names itself.
pub(super) fn update(
    node: &dyn ControllerNode,
    req: &UpdateRaftVoterRequest,
) -> UpdateRaftVoterResponse {
    let quorum = node.quorum();
    let m = quorum.raft_metrics();
    let leader = m
        .current_leader
        .and_then(|l| i32::try_from(l).ok())
        .unwrap_or(-1);
    let current = brook_protocol::kafka_protocol::messages::update_raft_voter_response::CurrentLeader::default()
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(i32::try_from(m.current_term).unwrap_or(i32::MAX));
    let known = u64::try_from(req.voter_id).is_ok_and(|id| {
        m.membership_config
            .membership()
            .voter_ids()
            .any(|v| v == id)
    });
    let code = if !quorum.is_leader() {
        ResponseError::NotLeaderOrFollower.code()
    } else if !known {
        ResponseError::VoterNotFound.code()
    } else {
        0
    };
    UpdateRaftVoterResponse::default()
        .with_error_code(code)
        .with_current_leader(current)
}
