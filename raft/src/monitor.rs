//! Watches leadership for the operator: INFO when the known leader changes, and while no
//! leader is known, a WARN every [`WARN_EVERY`] naming the voters this node cannot reach
//! (a TCP connect probe), so a wrong `controller.quorum.voters` or a down majority shows
//! up in the log instead of as a silent hang. Owned by `MetadataQuorum` and aborted at
//! shutdown; it holds no state that needs cleaning up, so abort at any `.await` is fine.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::QuorumNode;
use openraft::RaftMetrics;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// No leader for this long is worth a WARN: with Kafka's default timeouts a leader is
/// replaced within about 1.5 s, a split vote adds well under a second.
const WARN_AFTER: Duration = Duration::from_secs(3);
const WARN_EVERY: Duration = Duration::from_secs(5);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Runs until the raft core stops (its metrics channel closes).
pub(crate) async fn watch_leader(
    node_id: u64,
    mut metrics: watch::Receiver<RaftMetrics<u64, QuorumNode>>,
    voters: BTreeMap<u64, String>,
) {
    let mut leader = metrics.borrow_and_update().current_leader;
    let mut leaderless_since = leader.is_none().then(Instant::now);
    let mut last_warn: Option<Instant> = None;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = metrics.changed() => {
                if changed.is_err() {
                    return;
                }
                let (now_leader, term) = {
                    let m = metrics.borrow_and_update();
                    (m.current_leader, m.current_term)
                };
                if now_leader != leader {
                    match now_leader {
                        Some(id) => tracing::info!(node_id, leader = id, term, "metadata leader known"),
                        None => tracing::info!(node_id, term, "metadata leader lost"),
                    }
                    leader = now_leader;
                    leaderless_since = leader.is_none().then(Instant::now);
                    last_warn = None;
                }
            }
            _ = ticker.tick() => {
                let Some(since) = leaderless_since else { continue };
                let due = last_warn.is_none_or(|at| at.elapsed() >= WARN_EVERY);
                if since.elapsed() >= WARN_AFTER && due {
                    last_warn = Some(Instant::now());
                    let unreachable = probe(node_id, &voters).await;
                    tracing::warn!(
                        node_id,
                        waited_s = since.elapsed().as_secs(),
                        "metadata quorum has no leader yet, retrying: {}",
                        describe(node_id, &unreachable)
                    );
                }
            }
        }
    }
}

/// The voters other than `node_id` that refuse a TCP connection, with the reason.
pub(crate) async fn probe(
    node_id: u64,
    voters: &BTreeMap<u64, String>,
) -> Vec<(u64, String, String)> {
    let mut probes = JoinSet::new();
    for (&id, addr) in voters.iter().filter(|(&id, _)| id != node_id) {
        let addr = addr.clone();
        probes.spawn(async move {
            let outcome =
                tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(&addr)).await;
            let failure = match outcome {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {PROBE_TIMEOUT:?}")),
            };
            (id, addr, failure)
        });
    }
    let mut unreachable = Vec::new();
    while let Some(done) = probes.join_next().await {
        if let Ok((id, addr, Some(reason))) = done {
            unreachable.push((id, addr, reason));
        }
    }
    unreachable.sort();
    unreachable
}

/// "voters 2@h:9093 (connection refused), 3@h:9094 (…) unreachable", or why else.
pub(crate) fn describe(node_id: u64, unreachable: &[(u64, String, String)]) -> String {
    if unreachable.is_empty() {
        return format!(
            "every other voter accepts connections: an election is in progress, or the voters \
             do not know this node as node.id {node_id} at this address (is another process \
             running with node.id {node_id}, or does controller.quorum.voters differ between \
             the nodes?)"
        );
    }
    format!("voters {} unreachable", list(unreachable))
}

/// "2@h:9093 (connection refused), 3@h:9094 (…)".
pub(crate) fn list(failures: &[(u64, String, String)]) -> String {
    let items: Vec<String> = failures
        .iter()
        .map(|(id, addr, reason)| format!("{id}@{addr} ({reason})"))
        .collect();
    items.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_warning_names_each_unreachable_voter_with_its_reason() {
        let open = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let closed_addr = closed.local_addr().expect("addr").to_string();
        drop(closed);
        let voters = BTreeMap::from([
            (1, "127.0.0.1:1".to_string()),
            (2, closed_addr.clone()),
            (3, open.local_addr().expect("addr").to_string()),
        ]);
        // Node 1 is this node: never probed.
        let unreachable = probe(1, &voters).await;
        assert_eq!(unreachable.len(), 1, "{unreachable:?}");
        let text = describe(1, &unreachable);
        assert!(
            text.starts_with(&format!("voters 2@{closed_addr} (")),
            "{text}"
        );
        assert!(text.to_lowercase().contains("refused"), "{text}");
        assert!(text.ends_with(") unreachable"), "{text}");
        assert!(describe(1, &[]).contains("election is in progress"));
        assert!(describe(1, &[]).contains("node.id 1"));
    }
}
