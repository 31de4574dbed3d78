//! A voter of a static quorum (`controller.quorum.voters`, whose membership knows the
//! voters by address only) publishes the directory id of its `meta.properties` to each
//! leader, as a Kafka voter sends UpdateRaftVoter at `kraft.version` 0: the leader keeps it
//! for its term, and the `kraft.version` 1 upgrade, which records every voter's directory id
//! in the membership, waits until it knows them all (`service.rs`, `voters.rs`).
//!
//! One task per voter with a directory id, owned by `MetadataQuorum` and aborted at
//! shutdown (it holds nothing to clean up). It publishes once per leader and term, when the
//! membership has no directory id for this node, and retries a failed call after a pause
//! that doubles from [`RETRY`] up to [`MAX_RETRY`] (an older leader, which does not know the
//! request, closes the connection on it); once the membership records its directory id it
//! has nothing left to do.

use std::sync::Arc;
use std::time::Duration;

use openraft::RaftMetrics;
use tokio::sync::watch;

use crate::network::pool::PeerPool;
use crate::network::{LeaderReply, RpcRequest, RpcResponse};
use crate::QuorumNode;

/// First pause before publishing again after a call failed (the leader not ready yet, or
/// gone).
const RETRY: Duration = Duration::from_millis(500);
/// The longest pause between failed calls to one leader.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// The leader to publish to now — its id, term and address — or `None`: this node leads,
/// knows no leader, is no voter, already published to this leader in this term, or is
/// recorded with its directory id already.
fn due(
    node_id: u64,
    m: &RaftMetrics<u64, QuorumNode>,
    published: Option<(u64, u64)>,
) -> Option<(u64, u64, String)> {
    let membership = m.membership_config.membership();
    let leader = m.current_leader.filter(|&l| l != node_id)?;
    let is_voter = membership.voter_ids().any(|id| id == node_id);
    let recorded = membership
        .get_node(&node_id)
        .is_some_and(|n| n.directory_id.is_some());
    if !is_voter || recorded || published == Some((leader, m.current_term)) {
        return None;
    }
    let addr = membership.get_node(&leader)?.addr.clone();
    Some((leader, m.current_term, addr))
}

/// Runs until the raft core stops (its metrics channel closes).
pub(crate) async fn run(
    node_id: u64,
    directory_id: String,
    mut metrics: watch::Receiver<RaftMetrics<u64, QuorumNode>>,
    pool: Arc<PeerPool>,
) {
    let mut published: Option<(u64, u64)> = None;
    // The pause after a failed call, per leader and term.
    let mut backoff: Option<((u64, u64), Duration)> = None;
    loop {
        let target = due(node_id, &metrics.borrow_and_update(), published);
        if let Some((leader, term, addr)) = target {
            let request = RpcRequest::UpdateVoter {
                node_id,
                directory_id: directory_id.clone(),
            };
            match pool.call(&addr, &request, CALL_TIMEOUT).await {
                Ok(RpcResponse::UpdateVoter(LeaderReply::Ok(()))) => {
                    tracing::debug!(
                        leader,
                        term,
                        "directory id published to the metadata leader"
                    );
                    published = Some((leader, term));
                }
                other => {
                    let pause = match backoff {
                        Some((at, pause)) if at == (leader, term) => (pause * 2).min(MAX_RETRY),
                        _ => RETRY,
                    };
                    backoff = Some(((leader, term), pause));
                    tracing::debug!(leader, term, ?pause, answer = ?other.map(|r| format!("{r:?}")), "directory id not published yet, retrying");
                    tokio::time::sleep(pause).await;
                    continue;
                }
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn metrics(
        leader: u64,
        term: u64,
        own_directory: Option<&str>,
    ) -> RaftMetrics<u64, QuorumNode> {
        let nodes: BTreeMap<u64, QuorumNode> = (1..=3)
            .map(|id| {
                let mut node = QuorumNode::new(format!("127.0.0.1:{}", 9000 + id));
                if id == 2 {
                    node.directory_id = own_directory.map(str::to_owned);
                }
                (id, node)
            })
            .collect();
        let membership = openraft::Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes);
        let mut m = RaftMetrics::new_initial(2);
        m.current_leader = Some(leader);
        m.current_term = term;
        m.membership_config = Arc::new(openraft::StoredMembership::new(None, membership));
        m
    }

    #[test]
    fn a_static_voter_publishes_once_per_leader_and_term_until_recorded() {
        let m = metrics(1, 4, None);
        assert_eq!(due(2, &m, None), Some((1, 4, "127.0.0.1:9001".into())));
        assert_eq!(due(2, &m, Some((1, 4))), None);
        // A new term, even under the same leader, starts from the log's voter set again.
        assert_eq!(
            due(2, &metrics(1, 5, None), Some((1, 4))),
            Some((1, 5, "127.0.0.1:9001".into()))
        );
        // The leader publishes nothing to itself; a recorded directory id ends it.
        assert_eq!(due(2, &metrics(2, 5, None), None), None);
        assert_eq!(
            due(2, &metrics(1, 5, Some("JEXY6aqzQY-32P5TStzaFg")), None),
            None
        );
        // Not a voter of the membership (a learner): nothing to publish.
        assert_eq!(due(7, &m, None), None);
    }
}
