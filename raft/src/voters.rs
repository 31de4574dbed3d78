//! Changing the voters of a dynamic quorum (KIP-853's AddRaftVoter / RemoveRaftVoter) on
//! openraft's membership changes, which go through joint consensus, so the old and the new
//! voter set overlap and no two leaders can be elected during the change.
//!
//! As Kafka's `AddVoterHandler` / `RemoveVoterHandler`: only the leader changes voters, one
//! change at a time (another in progress, or an uncommitted joint configuration, answers
//! "timed out"); a voter is added only once it follows the log as an observer (a raft
//! learner added by its own `AddLearner`) with the directory id named, and is caught up; a
//! removed voter stays a learner, an observer, as a removed Kafka controller keeps fetching.
//! Membership lives in the raft log, so a change survives restarts. A static quorum
//! (`controller.quorum.voters`, voters known by address only) first becomes such a quorum
//! when `kraft.version` is upgraded to 1: its voters' directory ids, which each published
//! to the leader (`update_voter.rs`), are recorded in the membership
//! ([`record_directory_ids`]).
//!
//! Thread-safety: the caller serializes changes (`MetadataQuorum` holds a lock); every wait
//! is bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError};
use openraft::{ChangeMembers, Raft, RaftMetrics};

use crate::{QuorumNode, TypeConfig};

/// How long a new voter may take to catch up with the log before the request is refused.
const CATCH_UP_WAIT: Duration = Duration::from_secs(5);
/// How long the membership change may take to commit.
const CHANGE_WAIT: Duration = Duration::from_secs(10);

/// Why a voter change was refused; the broker maps each to Kafka's error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VoterChangeError {
    /// NOT_CONTROLLER: this node does not lead.
    #[error("this controller is not the active controller")]
    NotLeader,
    /// REQUEST_TIMED_OUT, with Kafka's message.
    #[error("{0}")]
    TimedOut(String),
    /// DUPLICATE_VOTER.
    #[error("{0}")]
    DuplicateVoter(String),
    /// VOTER_NOT_FOUND.
    #[error("{0}")]
    VoterNotFound(String),
    /// INVALID_REQUEST.
    #[error("{0}")]
    Invalid(String),
}

/// Kafka's `ReplicaKey` text, as its messages print it.
fn replica_key(id: u64, directory_id: Option<&str>) -> String {
    match directory_id {
        Some(dir) => format!("ReplicaKey(id={id}, directoryId=Optional[{dir}])"),
        None => format!("ReplicaKey(id={id}, directoryId=Optional.empty)"),
    }
}

fn voter_keys(m: &RaftMetrics<u64, QuorumNode>) -> String {
    let membership = m.membership_config.membership();
    let keys: Vec<String> = membership
        .voter_ids()
        .map(|id| {
            let dir = membership
                .get_node(&id)
                .and_then(|n| n.directory_id.as_deref());
            replica_key(id, dir)
        })
        .collect();
    format!("[{}]", keys.join(", "))
}

fn check_leader_and_settled(
    raft: &Raft<TypeConfig>,
    node_id: u64,
) -> Result<RaftMetrics<u64, QuorumNode>, VoterChangeError> {
    let m = raft.metrics().borrow().clone();
    if m.current_leader != Some(node_id) {
        return Err(VoterChangeError::NotLeader);
    }
    // A joint configuration, or a membership entry past the commit point, is a change still
    // in flight (Kafka: an uncommitted VotersRecord).
    let committed = m.last_applied.map_or(0, |l| l.index);
    let at = m.membership_config.log_id().map_or(0, |l| l.index);
    if m.membership_config.membership().get_joint_config().len() > 1 || at > committed {
        return Err(VoterChangeError::TimedOut(format!(
            "Request timed out waiting for voters to commit the latest voter change at Optional[{at}] with HWM {committed}"
        )));
    }
    Ok(m)
}

/// Makes the observer `id` (a learner with `directory_id`) a voter.
pub(crate) async fn add(
    raft: &Raft<TypeConfig>,
    node_id: u64,
    id: u64,
    directory_id: &str,
) -> Result<(), VoterChangeError> {
    let key = replica_key(id, Some(directory_id));
    let m = check_leader_and_settled(raft, node_id)?;
    let membership = m.membership_config.membership();
    if membership.voter_ids().any(|v| v == id) {
        return Err(VoterChangeError::DuplicateVoter(format!(
            "The voter id for {key} is already part of the set of voters {}.",
            voter_keys(&m)
        )));
    }
    let lagging = || {
        VoterChangeError::TimedOut(format!(
            "Aborted add voter operation for {key} since it is lagging behind"
        ))
    };
    // Kafka adds only a replica it sees fetching with this directory id: here, a learner
    // that joined with it.
    match membership.get_node(&id) {
        Some(node) if node.directory_id.as_deref() == Some(directory_id) => {}
        _ => return Err(lagging()),
    }
    let target = m.last_applied.map_or(0, |l| l.index);
    let caught_up = raft
        .wait(Some(CATCH_UP_WAIT))
        .metrics(
            |m| {
                m.replication
                    .as_ref()
                    .and_then(|r| r.get(&id))
                    .and_then(|matched| *matched)
                    .is_some_and(|l| l.index >= target)
            },
            "new voter caught up",
        )
        .await;
    if caught_up.is_err() {
        return Err(lagging());
    }
    change(
        raft,
        ChangeMembers::AddVoterIds(BTreeSet::from([id])),
        format!(
            "Unable to add {key} to the set of voters {}",
            voter_keys(&m)
        ),
    )
    .await?;
    tracing::info!(voter = id, directory_id, "controller added to the voters");
    Ok(())
}

/// Removes voter `id` (with `directory_id`) from the voters; it stays an observer.
pub(crate) async fn remove(
    raft: &Raft<TypeConfig>,
    node_id: u64,
    id: u64,
    directory_id: Option<&str>,
) -> Result<(), VoterChangeError> {
    let key = replica_key(id, directory_id);
    let m = check_leader_and_settled(raft, node_id)?;
    let membership = m.membership_config.membership();
    let known = membership.voter_ids().any(|v| v == id)
        && membership
            .get_node(&id)
            .is_some_and(|n| n.directory_id.as_deref() == directory_id);
    if !known {
        return Err(VoterChangeError::VoterNotFound(format!(
            "Cannot remove voter {key} from the set of voters {}",
            voter_keys(&m)
        )));
    }
    if membership.voter_ids().count() == 1 {
        return Err(VoterChangeError::Invalid(format!(
            "Cannot remove voter {key} from the set of voters {}: it is the only voter",
            voter_keys(&m)
        )));
    }
    change(
        raft,
        ChangeMembers::RemoveVoters(BTreeSet::from([id])),
        format!(
            "Unable to remove {key} from the set of voters {}",
            voter_keys(&m)
        ),
    )
    .await?;
    tracing::info!(voter = id, "controller removed from the voters");
    if id == node_id {
        step_down(raft, node_id).await;
    }
    Ok(())
}

/// The `kraft.version` 1 upgrade of a static quorum, as Kafka's
/// `LeaderState.maybeAppendUpgradedKRaftVersion` appends the voters it learned from their
/// UpdateRaftVoter requests as a VotersRecord: every voter's entry in the membership gets
/// its directory id from `directory_ids`, so the voters become KIP-853 replica keys that
/// AddRaftVoter / RemoveRaftVoter can change. The membership lives in the raft log, so every
/// node (and each restart) uses it from then on rather than `controller.quorum.voters`.
/// The voter set itself is unchanged: one membership entry, no joint configuration.
pub(crate) async fn record_directory_ids(
    raft: &Raft<TypeConfig>,
    node_id: u64,
    directory_ids: &BTreeMap<u64, String>,
) -> Result<(), VoterChangeError> {
    let m = check_leader_and_settled(raft, node_id)?;
    let membership = m.membership_config.membership();
    let mut nodes = BTreeMap::new();
    for id in membership.voter_ids() {
        let node = membership.get_node(&id).cloned().unwrap_or_default();
        let Some(directory_id) = directory_ids.get(&id) else {
            return Err(VoterChangeError::Invalid(format!(
                "The directory id of {} is not known",
                replica_key(id, None)
            )));
        };
        if node.directory_id.as_ref() != Some(directory_id) {
            nodes.insert(
                id,
                QuorumNode {
                    directory_id: Some(directory_id.clone()),
                    ..node
                },
            );
        }
    }
    if nodes.is_empty() {
        return Ok(());
    }
    change(
        raft,
        ChangeMembers::SetNodes(nodes),
        format!(
            "Unable to record the directory ids of the voters {}",
            voter_keys(&m)
        ),
    )
    .await?;
    tracing::info!(voters = %voter_keys(&raft.metrics().borrow()), "voters recorded with their directory ids (kraft.version 1)");
    Ok(())
}

/// Ends this node's leadership once it has removed itself from the voters, as a Kafka
/// leader resigns once its own removal commits. openraft 0.9 lets a learner go on leading
/// (its leader need not be a voter), so the node grants itself a vote request for the next
/// term: its vote then names another node and is not committed, so it follows; with no
/// more heartbeats the voters elect a leader among themselves, whose appends it follows as
/// the learner it now is. The request carries the highest possible log position so that it
/// is granted whatever this node appended since; it changes nothing but this node's vote.
async fn step_down(raft: &Raft<TypeConfig>, node_id: u64) {
    let (term, successor) = {
        let m = raft.metrics();
        let m = m.borrow();
        let successor = m
            .membership_config
            .membership()
            .voter_ids()
            .find(|&v| v != node_id);
        (m.vote.leader_id().term, successor)
    };
    let Some(successor) = successor else {
        return; // the only voter cannot be removed (checked above)
    };
    let rpc = openraft::raft::VoteRequest {
        vote: openraft::Vote::new(term + 1, successor),
        last_log_id: Some(openraft::LogId::new(
            openraft::CommittedLeaderId::new(term + 1, successor),
            u64::MAX,
        )),
    };
    match raft.vote(rpc).await {
        Ok(reply) if reply.vote_granted => {
            tracing::info!(term = term + 1, "stepped down as the metadata quorum's leader after removing itself from the voters")
        }
        Ok(reply) => {
            tracing::warn!(vote = %reply.vote, "could not step down after removing itself from the voters")
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not step down after removing itself from the voters")
        }
    }
}

async fn change(
    raft: &Raft<TypeConfig>,
    members: ChangeMembers<u64, QuorumNode>,
    unable: String,
) -> Result<(), VoterChangeError> {
    // `retain`: a removed voter stays a learner (an observer).
    match tokio::time::timeout(CHANGE_WAIT, raft.change_membership(members, true)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(openraft::error::RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
            Err(VoterChangeError::NotLeader)
        }
        Ok(Err(openraft::error::RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(_),
        )))) => Err(VoterChangeError::TimedOut(
            crate::service::CHANGE_IN_PROGRESS.into(),
        )),
        Ok(Err(e)) => Err(VoterChangeError::Invalid(format!("{unable}: {e}"))),
        Err(_) => Err(VoterChangeError::TimedOut(unable)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_keys_print_as_kafkas() {
        assert_eq!(
            replica_key(4, Some("JEXY6aqzQY-32P5TStzaFg")),
            "ReplicaKey(id=4, directoryId=Optional[JEXY6aqzQY-32P5TStzaFg])"
        );
        assert_eq!(
            replica_key(1, None),
            "ReplicaKey(id=1, directoryId=Optional.empty)"
        );
    }
}
