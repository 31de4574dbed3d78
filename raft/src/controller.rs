//! The controller's duties that no request triggers: fencing brokers whose heartbeats
//! stopped and unfencing brokers that came back (KRaft's `ReplicationControlManager`
//! fencing, driven by `Liveness`). Every node runs [`run`]; only the quorum leader acts,
//! so exactly one controller proposes at a time.
//!
//! A leader whose process was stopped (SIGSTOP, a VM pause) or starved still believes it
//! leads for a moment after it runs again, and every heartbeat it holds is as old as the
//! stop: all brokers look expired. Its proposals would not just fail — `propose` forwards
//! them to the new leader, which applies them (the broker epochs still match). A seed-13
//! chaos run: node 1, resumed after an 8 s SIGSTOP, fenced the live brokers 2 and 3 and
//! took partition 0 away from its new leader. So after a gap between ticks of half a
//! session timeout the controller acts on nothing and starts a fresh grace period for
//! every broker, as a newly elected leader does; and it checks its leadership again
//! before each proposal.

use std::time::{Duration, Instant};

use crate::command::{Command, FenceReason};
use crate::error::ProposeError;
use crate::liveness::DETACH_GRACE;
use crate::quorum::MetadataQuorum;

/// How often the leader looks for brokers to fence or unfence.
const TICK: Duration = Duration::from_millis(100);
/// Past the grace, so that the check that follows a detach sees it expired.
const GRACE_SLACK: Duration = Duration::from_millis(5);

/// Whether a gap of `gap` between two ticks means this process was stopped or starved
/// long enough for its heartbeat records to be stale (half a session timeout: a shorter
/// stop cannot make a live broker look expired by itself).
fn stalled(gap: Duration, session_timeout: Duration) -> bool {
    gap > session_timeout / 2
}

/// Runs until the future is dropped (the broker selects it against its shutdown token).
pub async fn run(quorum: &MetadataQuorum) {
    let liveness = quorum.liveness();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_tick = Instant::now();
    // A bootstrap the state machine refused is not proposed again every tick.
    let mut bootstrap_refused = false;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            // A broker process died (its attachments closed): fence it once the grace is
            // over instead of up to a tick later; its partitions are leaderless until then.
            _ = liveness.detached() => tokio::time::sleep(DETACH_GRACE + GRACE_SLACK).await,
        }
        let now = Instant::now();
        let gap = now.saturating_duration_since(last_tick);
        last_tick = now;
        if !quorum.is_leader() {
            liveness.lost_leadership();
            continue;
        }
        if stalled(gap, liveness.session_timeout()) {
            tracing::warn!(
                stalled_ms = gap.as_millis() as u64,
                "the controller did not run for a while; brokers get a fresh session before any is fenced"
            );
            liveness.lost_leadership();
            continue;
        }
        if let Some(bootstrap) = quorum.bootstrap_due().filter(|_| !bootstrap_refused) {
            bootstrap_refused = propose_bootstrap(quorum, bootstrap).await;
        }
        let image = quorum.image();
        let due = liveness.due(&image, Instant::now());
        for (broker_id, broker_epoch) in due.fence {
            if !quorum.is_leader() {
                break;
            }
            tracing::warn!(
                broker_id,
                broker_epoch,
                session_timeout_ms = liveness.session_timeout().as_millis() as u64,
                "fencing broker: its connections closed (process gone) or no heartbeat within the session timeout"
            );
            let cmd = Command::FenceBroker {
                broker_id,
                broker_epoch,
                reason: FenceReason::SessionExpired,
            };
            if let Err(e) = quorum.propose(cmd).await {
                tracing::warn!(broker_id, error = %e, "fencing broker failed");
            }
        }
        for (broker_id, broker_epoch) in due.unfence {
            if !quorum.is_leader() {
                break;
            }
            tracing::info!(broker_id, broker_epoch, "unfencing broker");
            let cmd = Command::UnfenceBroker {
                broker_id,
                broker_epoch,
            };
            if let Err(e) = quorum.propose(cmd).await {
                tracing::warn!(broker_id, error = %e, "unfencing broker failed");
            }
        }
        // Proposals may take seconds when the quorum is slow: only the wait for the next
        // tick counts toward a stall.
        last_tick = Instant::now();
    }
}

/// Proposes this leader's [`Command::Bootstrap`] (`bootstrap.rs`); true if the state machine
/// refused it (a failed proposal is retried on a later tick).
async fn propose_bootstrap(quorum: &MetadataQuorum, bootstrap: Command) -> bool {
    let records = match &bootstrap {
        Command::Bootstrap { records } => records.len(),
        _ => 0,
    };
    match quorum.propose(bootstrap).await {
        Ok(()) => {
            if records > 0 {
                tracing::info!(records, "metadata bootstrap records proposed");
            }
            false
        }
        Err(ProposeError::Apply(e)) => {
            tracing::error!(error = ?e, "the metadata bootstrap records were refused");
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "proposing the metadata bootstrap records failed; retrying");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gap_of_half_a_session_timeout_counts_as_a_stall() {
        let session = Duration::from_millis(6_000);
        assert!(!stalled(TICK, session));
        assert!(!stalled(DETACH_GRACE + GRACE_SLACK + TICK, session));
        assert!(!stalled(Duration::from_millis(3_000), session));
        assert!(stalled(Duration::from_millis(3_001), session));
        // The seed-13 SIGSTOP.
        assert!(stalled(Duration::from_millis(8_344), session));
    }
}
