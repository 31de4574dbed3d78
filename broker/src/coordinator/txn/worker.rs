//! The coordinator's one owned background task (started by `main`, stopped by the
//! broker's shutdown token; its sub-tasks live in a `JoinSet` and are aborted when it
//! stops — an unfinished transaction is still Prepare* in the log and completed after the
//! restart):
//!
//! - follows the metadata image: loads the `__transaction_state` partitions this broker
//!   starts leading (Kafka's `onElection`) and forgets those it stops leading
//!   (`onResignation`);
//! - completes prepared transactions: markers to every partition, then the Complete*
//!   record, retried until done or until the partition is no longer this broker's; this
//!   also finishes the Prepare* transactions a load finds (a crash between EndTxn and its
//!   markers);
//! - every `transaction.abort.timed.out.transaction.cleanup.interval.ms` fences and aborts
//!   Ongoing transactions past their timeout;
//! - every `transaction.remove.expired.transaction.cleanup.interval.ms` writes a tombstone
//!   for ids idle longer than `transactional.id.expiration.ms`.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::markers::{self, Marker};
use super::records::TXN_STATE_TOPIC;
use super::state::TxnState;
use super::TxnError;
use crate::coordinator::handles::{CoordinatorHandles, CoordinatorHost};

/// How often prepared transactions are looked for even without a wake-up (retries).
const SCAN: Duration = Duration::from_millis(250);
/// Pause between rounds of markers some partitions refused.
const MARKER_BACKOFF: Duration = Duration::from_millis(200);

pub async fn run<H: CoordinatorHost>(host: Arc<H>, shutdown: CancellationToken) {
    let txn = host.coordinator_handles().txn;
    let mut images = host.coordinator_handles().quorum.subscribe();
    let mut tasks = JoinSet::new();
    let mut scan = tokio::time::interval(SCAN);
    let mut abort = tokio::time::interval(Duration::from_millis(txn.config.abort_interval_ms));
    let mut expire = tokio::time::interval(Duration::from_millis(txn.config.expire_interval_ms));
    for timer in [&mut scan, &mut abort, &mut expire] {
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    follow_leadership(&host, &mut tasks);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = images.changed() => {
                if changed.is_err() {
                    break;
                }
                follow_leadership(&host, &mut tasks);
            }
            _ = txn.prepared.notified() => complete_prepared(&host, &mut tasks),
            _ = scan.tick() => {
                // Also retries a load that failed.
                follow_leadership(&host, &mut tasks);
                complete_prepared(&host, &mut tasks);
            }
            _ = abort.tick() => abort_timed_out(&host, &mut tasks),
            _ = expire.tick() => expire_idle(&host, &mut tasks),
            Some(joined) = tasks.join_next() => {
                if let Err(e) = joined {
                    if e.is_panic() {
                        warn!(error = %e, "a transaction coordinator task panicked");
                    }
                }
            }
        }
    }
    tasks.shutdown().await;
}

/// Loads newly led `__transaction_state` partitions and drops the others (the runtime
/// decides which).
fn follow_leadership<H: CoordinatorHost>(host: &Arc<H>, tasks: &mut JoinSet<()>) {
    let cx = host.coordinator_handles();
    let followed = cx.txn.runtime.follow(&cx.image(), cx.txn);
    for (partition, epoch) in followed.to_load {
        let host = host.clone();
        let count = followed.count;
        tasks.spawn(async move {
            load_partition(&host.coordinator_handles(), partition, epoch, count).await
        });
    }
}

async fn load_partition(cx: &CoordinatorHandles<'_>, partition: i32, epoch: i32, count: i32) {
    let txn = cx.txn;
    let loaded = match cx.writer.led_log(TXN_STATE_TOPIC, partition).await {
        Ok(log) => txn
            .runtime
            .load(txn, &log, partition, epoch, count)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => {
            txn.runtime.abandon(partition, epoch);
            Err(e.to_string())
        }
    };
    if let Err(e) = loaded {
        warn!(partition, error = %e, "loading transaction states failed; retried at the next metadata change");
    }
}

/// Starts the completion of every Prepare* transaction not being completed already.
fn complete_prepared<H: CoordinatorHost>(host: &Arc<H>, tasks: &mut JoinSet<()>) {
    let txn = host.coordinator_handles().txn;
    let ready: Vec<String> = {
        let txns = txn.txns.lock();
        let mut in_flight = txn.in_flight.lock();
        txns.values()
            .filter(|m| m.state.is_prepared() && m.pending.is_none())
            .filter(|m| in_flight.insert(m.transactional_id.clone()))
            .map(|m| m.transactional_id.clone())
            .collect()
    };
    for id in ready {
        let host = host.clone();
        tasks.spawn(async move {
            let cx = host.coordinator_handles();
            if let Err(e) = complete(&cx, &id).await {
                debug!(transactional_id = %id, error = %e, "completing the transaction failed; retrying");
                tokio::time::sleep(MARKER_BACKOFF).await;
            }
            cx.txn.in_flight.lock().remove(&id);
        });
    }
}

/// Writes the markers of prepared transaction `id`, then its Complete* record.
async fn complete(cx: &CoordinatorHandles<'_>, id: &str) -> Result<(), TxnError> {
    let txn = cx.txn;
    let started = std::time::Instant::now();
    let at = txn.coordinates(cx, id)?;
    let (marker, mut left) = {
        let txns = txn.txns.lock();
        let meta = txns.get(id).ok_or(TxnError::NotCoordinator)?;
        if !meta.state.is_prepared() || meta.pending.is_some() {
            return Ok(());
        }
        let marker = Marker {
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            commit: meta.state == TxnState::PrepareCommit,
            coordinator_epoch: at.1,
        };
        (marker, meta.partitions.clone())
    };
    while !left.is_empty() {
        left = markers::write_all(cx, &marker, &left).await;
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(MARKER_BACKOFF).await;
        // Stop when the partition moved: its new coordinator completes the transaction.
        if txn.coordinates(cx, id)? != at {
            return Err(TxnError::NotCoordinator);
        }
    }
    let now_ms = brook_storage::log_manager::now_ms();
    let transit = {
        let mut txns = txn.txns.lock();
        let meta = txns.get_mut(id).ok_or(TxnError::NotCoordinator)?;
        meta.prepare_complete(now_ms)?
    };
    txn.persist(cx, id, at, transit, false).await?;
    debug!(
        transactional_id = %id,
        commit = marker.commit,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "transaction completed"
    );
    Ok(())
}

/// Fences and aborts Ongoing transactions past their timeout (Kafka's
/// `abortTimedOutTransactions`): the epoch bump makes the late producer's EndTxn and
/// produce fail with PRODUCER_FENCED.
fn abort_timed_out<H: CoordinatorHost>(host: &Arc<H>, tasks: &mut JoinSet<()>) {
    let now_ms = brook_storage::log_manager::now_ms();
    let txn = host.coordinator_handles().txn;
    let due: Vec<String> = txn
        .txns
        .lock()
        .values()
        .filter(|m| m.timed_out(now_ms))
        .map(|m| m.transactional_id.clone())
        .collect();
    for id in due {
        let host = host.clone();
        tasks.spawn(async move {
            let cx = host.coordinator_handles();
            let txn = cx.txn;
            let Ok(at) = txn.coordinates(&cx, &id) else {
                return;
            };
            let transit = {
                let mut txns = txn.txns.lock();
                let Some(meta) = txns.get_mut(&id).filter(|m| m.timed_out(now_ms)) else {
                    return;
                };
                match meta.prepare_fence_abort(now_ms) {
                    Ok(t) => t,
                    Err(_) => return,
                }
            };
            match txn.persist(&cx, &id, at, transit, true).await {
                Ok(()) => {
                    info!(transactional_id = %id, "aborting a transaction past its timeout");
                    txn.prepared.notify_one();
                }
                Err(e) => debug!(transactional_id = %id, error = %e, "timeout abort not written; retried at the next sweep"),
            }
        });
    }
}

/// Tombstones ids idle past `transactional.id.expiration.ms`.
fn expire_idle<H: CoordinatorHost>(host: &Arc<H>, tasks: &mut JoinSet<()>) {
    let now_ms = brook_storage::log_manager::now_ms();
    let txn = host.coordinator_handles().txn;
    let expiration_ms = txn.config.id_expiration_ms;
    let due: Vec<String> = txn
        .txns
        .lock()
        .values()
        .filter(|m| m.expired(now_ms, expiration_ms))
        .map(|m| m.transactional_id.clone())
        .collect();
    if due.is_empty() {
        return;
    }
    let host = host.clone();
    tasks.spawn(async move {
        let cx = host.coordinator_handles();
        let txn = cx.txn;
        for id in due {
            let Ok(at) = txn.coordinates(&cx, &id) else {
                continue;
            };
            let transit = {
                let mut txns = txn.txns.lock();
                let Some(meta) = txns
                    .get_mut(&id)
                    .filter(|m| m.expired(now_ms, expiration_ms))
                else {
                    continue;
                };
                match meta.prepare_dead() {
                    Ok(t) => t,
                    Err(_) => continue,
                }
            };
            match txn.persist(&cx, &id, at, transit, false).await {
                Ok(()) => info!(transactional_id = %id, "transactional id expired"),
                Err(e) => debug!(transactional_id = %id, error = %e, "expiry not written; retried at the next sweep"),
            }
        }
    });
}
