//! The leader's ISR task (Kafka's `maybeShrinkIsr` / `maybeExpandIsr` + AlterPartition):
//! for every partition this broker leads it recomputes the high watermark and the ISR it
//! wants (`LeaderPartition::wanted_isr`), and proposes each change to the metadata quorum
//! as `Command::AlterPartition`, a compare-and-set on the leader and partition epochs.
//! A shrink counts only once committed and applied here: until then the committed ISR
//! holds the high watermark, so a leader that cannot reach the quorum never acknowledges
//! alone what its lost followers no longer replicate. An expansion counts from the moment
//! it is proposed (Kafka's maximal ISR, `isr_state`): the controller may commit it, and
//! elect the new member after this leader dies, before this broker applies the image.
//! A proposal whose answer was lost is proposed again before any other change (it may
//! still commit; Kafka retries an unanswered AlterPartition the same way); a refused one
//! stops counting at once.
//!
//! It runs every `replica.lag.time.max.ms / 2` (Kafka's check interval) and whenever a
//! follower fetch says a follower may have caught up (`ReplicaManager::wake_isr_task`),
//! one change per partition at a time, up to `PROPOSALS_IN_FLIGHT` partitions' changes
//! proposed together; a refused proposal (stale epochs, ineligible replica) is simply
//! tried again with the next image.
//!
//! Every proposal says the leader has recovered (KIP-704): after an unclean election the
//! controller keeps the partition recovering, its ISR the leader alone, until the leader's
//! first AlterPartition, which marks it recovered as it lets the ISR grow.

use std::sync::Arc;
use std::time::Duration;

use brook_raft::{ApplyError, Command, LeaderRecoveryState, ProposeError};
use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::broker::Broker;
use crate::replication::leader::LeaderPartition;

pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    let lag_max_ms = broker.config.replica_lag_time_max_ms.max(1) as i64;
    let tick = Duration::from_millis((lag_max_ms as u64 / 2).clamp(100, 5_000));
    let wakeup = broker.replicas.isr_wakeup();
    let mut last_checkpoint = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = wakeup.notified() => {}
            _ = tokio::time::sleep(tick) => {}
        }
        check_all(&broker, lag_max_ms, &shutdown).await;
        // Kafka checkpoints high watermarks every 5 s (`replica.high.watermark.checkpoint
        // .interval.ms`); a restart then exposes nothing beyond what was replicated then.
        if last_checkpoint.elapsed() >= CHECKPOINT_INTERVAL {
            last_checkpoint = tokio::time::Instant::now();
            if let Err(e) = broker.replicas.checkpoint_high_watermarks().await {
                warn!(error = %e, "writing the high-watermark checkpoint failed");
            }
            // Kafka writes recovery points every `log.flush.offset.checkpoint.interval.ms`
            // (60 s); riding on the 5 s high-watermark tick is cheaper than a second timer
            // and only bounds restart work more tightly (no data fsync happens here).
            if let Err(e) = broker.replicas.checkpoint_recovery_points().await {
                warn!(error = %e, "writing the recovery point checkpoint failed");
            }
        }
    }
}

const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);

/// Proposals in flight at once: a restarted follower rejoins the ISR of every partition it
/// follows, and one quorum round trip each (~65 ms here) made that take 163 s at 5,000
/// partitions and 538 s at 10,000 (Kafka sends a leader's pending changes in one
/// AlterPartition: 24 s at 5,000). The quorum commits concurrent proposals together.
const PROPOSALS_IN_FLIGHT: usize = 64;

async fn check_all(broker: &Broker, lag_max_ms: i64, shutdown: &CancellationToken) {
    let node_id = broker.node_id;
    let mut proposals = Vec::new();
    for state in broker.replicas.leaders() {
        if shutdown.is_cancelled() {
            return;
        }
        let image = broker.image();
        let Some(topic) = image.topic(&state.topic) else {
            continue;
        };
        let Some(part) = topic.partitions.get(&state.partition) else {
            continue;
        };
        if part.leader != node_id || part.leader_epoch != state.leader_epoch {
            continue;
        }
        state.maybe_advance_high_watermark();
        let now_ms = brook_storage::log_manager::now_ms();
        // The controller's own rule (`is_active`), plus the fetching incarnation's epoch.
        let eligible = |broker_id: i32, epoch: i64| {
            image.is_active(broker_id)
                && (epoch < 0
                    || image
                        .broker(broker_id)
                        .is_some_and(|b| u64::try_from(epoch) == Ok(b.broker_epoch)))
        };
        let wanted = match state.unresolved_isr_change(part.partition_epoch) {
            Some(unresolved) => unresolved,
            None => state.wanted_isr(part, node_id, now_ms, lag_max_ms, eligible),
        };
        // The same members in another order is no change (`wanted_isr` lists them in
        // replica order, which a reassignment changes).
        if wanted.len() == part.isr.len() && wanted.iter().all(|r| part.isr.contains(r)) {
            continue;
        }
        state.begin_isr_change(part.partition_epoch, &wanted);
        let cmd = Command::AlterPartition {
            topic_id: topic.topic_id,
            partition: state.partition,
            broker_id: node_id,
            broker_epoch: broker.broker_epoch(),
            leader_epoch: part.leader_epoch,
            partition_epoch: part.partition_epoch,
            isr: wanted.clone(),
            // A Kafka leader counts itself recovered once it leads (`makeLeader`): this
            // state ends an unclean election's RECOVERING in the change that grows the ISR.
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        let proposal = Proposal {
            isr_before: part.isr.clone(),
            partition_epoch: part.partition_epoch,
            state,
            wanted,
        };
        proposals.push((proposal, cmd));
        if proposals.len() == PROPOSALS_IN_FLIGHT && !propose_all(broker, &mut proposals).await {
            return;
        }
    }
    propose_all(broker, &mut proposals).await;
}

/// One partition's ISR change, kept to record the outcome of its proposal.
struct Proposal {
    state: Arc<LeaderPartition>,
    isr_before: Vec<i32>,
    partition_epoch: i32,
    wanted: Vec<i32>,
}

/// Proposes `proposals` (one change per partition) together and records each outcome;
/// false when the quorum failed in a way that makes further proposals pointless now.
async fn propose_all(broker: &Broker, proposals: &mut Vec<(Proposal, Command)>) -> bool {
    let batch = std::mem::take(proposals);
    let outcomes = join_all(
        batch
            .into_iter()
            .map(|(p, cmd)| async move { (p, broker.quorum.propose(cmd).await) }),
    )
    .await;
    let mut go_on = true;
    for (p, outcome) in outcomes {
        let Proposal {
            state,
            isr_before: isr,
            partition_epoch,
            wanted,
        } = p;
        match outcome {
            Ok(()) => {
                let shrunk = isr.len() > wanted.len();
                crate::metrics::record_isr_change(shrunk);
                info!(topic = %state.topic, partition = state.partition, from = ?isr, to = ?wanted,
                    "{}", if shrunk { "ISR shrunk" } else { "ISR expanded" });
            }
            Err(ProposeError::Apply(e)) => {
                if !may_follow_an_applied_attempt(&e) {
                    state.isr_change_refused(partition_epoch);
                }
                if matches!(
                    e,
                    ApplyError::InvalidUpdateVersion { .. }
                        | ApplyError::FencedLeaderEpoch { .. }
                        | ApplyError::IneligibleReplica { .. }
                        | ApplyError::StaleBrokerEpoch { .. }
                ) {
                    debug!(topic = %state.topic, partition = state.partition, error = %e, "ISR change refused; retrying with the next image");
                } else {
                    warn!(topic = %state.topic, partition = state.partition, error = %e, "ISR change refused");
                    go_on = false;
                }
            }
            // The outcome is unknown: the change stays in flight (and is proposed again).
            Err(e) => {
                warn!(topic = %state.topic, partition = state.partition, error = %e, "ISR change not committed");
                go_on = false;
            }
        }
    }
    go_on
}

/// Whether a refusal may come from an earlier attempt of the same change having applied:
/// a proposal whose answer was lost is sent again (`forward`), and the copy then fails the
/// epoch checks that the first one passed. Such a change may be in the ISR the controller
/// elects from, so it keeps counting until the image that moved the epochs is applied here.
/// A refusal of the ISR itself (an ineligible replica, a malformed ISR) comes after those
/// checks: the change never applied, and waiting for its replicas would stall the high
/// watermark for nothing.
fn may_follow_an_applied_attempt(e: &ApplyError) -> bool {
    matches!(
        e,
        ApplyError::InvalidUpdateVersion { .. }
            | ApplyError::FencedLeaderEpoch { .. }
            | ApplyError::StaleBrokerEpoch { .. }
    )
}
