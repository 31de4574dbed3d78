//! The controller's duties that no request triggers: fencing brokers whose heartbeats
//! stopped and unfencing brokers that came back (KRaft's `ReplicationControlManager`
//! fencing, driven by `Liveness`). Every node runs [`run`]; only the quorum leader acts,
//! so exactly one controller proposes at a time, and a deposed leader's proposals fail
//! (they are not committed) rather than acting twice.

use std::time::{Duration, Instant};

use crate::command::{Command, FenceReason};
use crate::liveness::DETACH_GRACE;
use crate::quorum::MetadataQuorum;

/// How often the leader looks for brokers to fence or unfence.
const TICK: Duration = Duration::from_millis(100);
/// Past the grace, so that the check that follows a detach sees it expired.
const GRACE_SLACK: Duration = Duration::from_millis(5);

/// Runs until the future is dropped (the broker selects it against its shutdown token).
pub async fn run(quorum: &MetadataQuorum) {
    let liveness = quorum.liveness();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            // A broker process died (its attachments closed): fence it once the grace is
            // over instead of up to a tick later; its partitions are leaderless until then.
            _ = liveness.detached() => tokio::time::sleep(DETACH_GRACE + GRACE_SLACK).await,
        }
        if !quorum.is_leader() {
            liveness.lost_leadership();
            continue;
        }
        let image = quorum.image();
        let due = liveness.due(&image, Instant::now());
        for (broker_id, broker_epoch) in due.fence {
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
            tracing::info!(broker_id, broker_epoch, "unfencing broker");
            let cmd = Command::UnfenceBroker {
                broker_id,
                broker_epoch,
            };
            if let Err(e) = quorum.propose(cmd).await {
                tracing::warn!(broker_id, error = %e, "unfencing broker failed");
            }
        }
    }
}
