//! Campaigning early when the metadata leader's process is gone.
//!
//! openraft starts an election only after `leader lease + election timeout` without a
//! heartbeat (about 1.25–1.5 s with Kafka's names at 1000/1000, `config.rs`), and a voter
//! refuses votes while its lease (`election_timeout_max`) lasts. But a follower often
//! *knows* the leader died much sooner: the connection on which the leader sent its
//! AppendEntries closes the moment the kernel reaps the leader's process (kill -9, crash,
//! OOM), as `network/attach.rs` uses for brokers.
//!
//! So when that connection closes and the leader stays silent, this follower campaigns as
//! soon as the other voters' leases have expired (`close + lease + MARGIN`), instead of a
//! random election timeout later. Only the lowest-id surviving voter goes first; the next
//! one waits a [`STAGGER`] more, so two followers do not split the vote. A leader that
//! lives (only a connection broke) keeps heartbeating on a new connection: a heartbeat
//! after the close cancels the early campaign, so a healthy leader is never disturbed. A
//! paused or partitioned leader keeps its connections open and is replaced by openraft's
//! own timeouts, as in KRaft.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use openraft::{Raft, ServerState};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::TypeConfig;

/// After the lease: the other voters' clocks and timers are not exact.
const MARGIN: Duration = Duration::from_millis(50);
/// Between successive survivors' campaigns (in voter id order).
const STAGGER: Duration = Duration::from_millis(200);

#[derive(Default)]
struct State {
    /// When each leader's AppendEntries last reached this node.
    last_heard: HashMap<u64, Instant>,
    /// The latest close of a connection that carried a leader's AppendEntries.
    closed: Option<(u64, Instant)>,
}

/// What this node's peer server saw of the leaders' connections. Shared by `Arc`; the
/// mutex is never held across `.await`.
#[derive(Default)]
pub(crate) struct LeaderContact {
    state: Mutex<State>,
    closed: Notify,
}

impl LeaderContact {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Plain maps: a panic while holding the lock cannot leave them inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An AppendEntries (a heartbeat or entries) from `leader` arrived.
    pub(crate) fn heard(&self, leader: u64) {
        self.state().last_heard.insert(leader, Instant::now());
    }

    /// A connection on which `leader` sent AppendEntries closed.
    pub(crate) fn connection_closed(&self, leader: u64) {
        self.state().closed = Some((leader, Instant::now()));
        self.closed.notify_one();
    }

    async fn next_close(&self) -> (u64, Instant) {
        loop {
            self.closed.notified().await;
            if let Some(closed) = self.state().closed {
                return closed;
            }
        }
    }

    /// Whether `leader` has sent nothing since `at`.
    fn silent_since(&self, leader: u64, at: Instant) -> bool {
        self.state()
            .last_heard
            .get(&leader)
            .is_none_or(|&heard| heard <= at)
    }
}

/// Runs until the raft core stops (or the task is aborted at shutdown; it holds nothing
/// that needs cleaning up). `lease` is openraft's leader lease (`election_timeout_max`).
pub(crate) async fn run(
    node_id: u64,
    raft: Raft<TypeConfig>,
    contact: std::sync::Arc<LeaderContact>,
    lease: Duration,
) {
    loop {
        let (leader, closed_at) = contact.next_close().await;
        // The voters now (a dynamic quorum's change over time, KIP-853), in id order.
        let voters: Vec<u64> = raft
            .metrics()
            .borrow()
            .membership_config
            .voter_ids()
            .collect();
        let Some(rank) = voters
            .iter()
            .filter(|&&id| id != leader)
            .position(|&id| id == node_id)
        else {
            continue; // the leader itself, or not a voter
        };
        let still_following = |raft: &Raft<TypeConfig>| {
            let m = raft.metrics();
            let m = m.borrow();
            m.current_leader == Some(leader) && m.state == ServerState::Follower
        };
        if !still_following(&raft) {
            continue;
        }
        tokio::time::sleep_until(closed_at + lease + MARGIN + STAGGER * rank as u32).await;
        if !still_following(&raft) || !contact.silent_since(leader, closed_at) {
            continue;
        }
        tracing::info!(
            node_id,
            leader,
            "metadata leader's connection closed and it has been silent since: campaigning now"
        );
        if let Err(e) = raft.trigger().elect().await {
            tracing::debug!(error = %e, "raft core stopped");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_close_is_reported_and_a_heartbeat_after_it_shows_the_leader_alive() {
        let contact = LeaderContact::default();
        contact.heard(2);
        tokio::time::sleep(Duration::from_millis(2)).await;
        contact.connection_closed(2);
        let (leader, closed_at) = contact.next_close().await;
        assert_eq!(leader, 2);
        assert!(
            contact.silent_since(2, closed_at),
            "nothing heard since the close"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
        contact.heard(2);
        assert!(
            !contact.silent_since(2, closed_at),
            "a heartbeat on a new connection: the leader lives"
        );
        assert!(contact.silent_since(3, closed_at), "never heard of 3");
    }
}
