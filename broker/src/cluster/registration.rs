//! Registering this broker with the quorum, waiting to be unfenced, and the controlled
//! shutdown on SIGTERM.
//!
//! Before registering, the broker asks the controller whether another live process holds
//! its `node.id` (a heartbeat probe; Kafka's DUPLICATE_BROKER_REGISTRATION check): a
//! process restarted after a crash waits at most one session timeout for its old session
//! to lapse, while a second process configured with a node id already in use gives up
//! with a message naming `node.id`.

use std::time::{Duration, Instant};

use anyhow::bail;
use brook_raft::{
    Command, FenceReason, Heartbeat, ListenerEndpoint, ProposeError, REGISTRATION_PROBE,
};
use tracing::{info, warn};

use crate::broker::Broker;
use crate::metadata::clean_shutdown;

/// Extra wait beyond the session timeout before a duplicate node id is an error.
const DUPLICATE_GRACE: Duration = Duration::from_secs(3);
/// How long a SIGTERM waits for the controller to record the shutdown (the last node of a
/// cluster has no quorum left to record it: its session simply lapses).
const SHUTDOWN_PROPOSAL_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between attempts while the quorum has no leader.
const RETRY: Duration = Duration::from_millis(300);

/// Registers a just opened broker and brings its partitions in line with the metadata:
/// the last step of start-up before the listeners.
pub async fn join(broker: &Broker) -> anyhow::Result<()> {
    let previous_broker_epoch = match broker.config.log_dirs.first() {
        Some(dir) => {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || clean_shutdown::take(&dir)).await??
        }
        None => -1,
    };
    let epoch = register(broker, previous_broker_epoch).await?;
    broker.set_broker_epoch(epoch);
    broker.reconcile().await;
    info!(node_id = broker.node_id, cluster_id = %broker.cluster_id, broker_epoch = epoch, "broker started");
    Ok(())
}

/// Registers this incarnation; returns its broker epoch. `previous_broker_epoch` is the
/// epoch of the clean shutdown this process started after (-1 for none), or, when a running
/// process registers again, its current epoch (its logs never stopped).
pub async fn register(broker: &Broker, previous_broker_epoch: i64) -> anyhow::Result<u64> {
    let session = Duration::from_millis(broker.config.broker_session_timeout_ms);
    let started = Instant::now();
    let mut last_warning = Instant::now() - Duration::from_secs(60);
    loop {
        let probe = Heartbeat {
            broker_id: broker.node_id,
            incarnation_id: broker.incarnation_id,
            broker_epoch: REGISTRATION_PROBE,
            applied_index: broker.image().applied_index(),
            want_shutdown: false,
        };
        match broker.quorum.heartbeat(probe).await {
            Ok(reply) if reply.duplicate => {
                if started.elapsed() > session + DUPLICATE_GRACE {
                    bail!(
                        "node.id {} is registered by another live broker (is a second process configured with the same node.id?)",
                        broker.node_id
                    );
                }
                if last_warning.elapsed() > Duration::from_secs(2) {
                    warn!(
                        node_id = broker.node_id,
                        "node.id is held by a live registration; waiting for its session to expire"
                    );
                    last_warning = Instant::now();
                }
            }
            Ok(_) => break,
            Err(e) => {
                if last_warning.elapsed() > Duration::from_secs(5) {
                    warn!(error = %e, "cannot reach the controller to register yet; retrying");
                    last_warning = Instant::now();
                }
            }
        }
        tokio::time::sleep(RETRY).await;
    }
    // Other brokers reach this one on its inter-broker listener; clients on whichever
    // listener they connected to, so every client listener is recorded.
    let Some(advertised) = broker.config.inter_broker_listener() else {
        bail!("no advertised listener for clients (listeners / advertised.listeners)");
    };
    let listeners = broker
        .config
        .advertised_listeners
        .iter()
        .filter(|l| !broker.config.is_controller_listener(&l.name))
        .map(|l| ListenerEndpoint {
            name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
        })
        .collect();
    let cmd = Command::RegisterBroker {
        broker_id: broker.node_id,
        host: advertised.host.clone(),
        port: advertised.port,
        rack: broker.config.broker_rack.clone(),
        incarnation_id: broker.incarnation_id,
        listeners,
        previous_broker_epoch: Some(previous_broker_epoch),
    };
    loop {
        match broker.quorum.propose(cmd.clone()).await {
            Ok(()) => break,
            Err(ProposeError::Apply(e)) => bail!("registration refused: {e}"),
            Err(e) => {
                warn!(error = %e, "registering the broker failed; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    let image = broker.image();
    match image.broker(broker.node_id) {
        Some(reg) if reg.incarnation_id == broker.incarnation_id => {
            info!(
                node_id = broker.node_id,
                broker_epoch = reg.broker_epoch,
                "broker registered"
            );
            Ok(reg.broker_epoch)
        }
        _ => bail!(
            "node.id {} was registered by another process at the same time",
            broker.node_id
        ),
    }
}

/// Waits until the controller has unfenced this incarnation (the first heartbeats do it),
/// as a Kafka broker waits before it opens its listeners.
pub async fn wait_unfenced(broker: &Broker) {
    let mut images = broker.quorum.subscribe();
    let started = Instant::now();
    let mut next_log = Duration::from_secs(5);
    loop {
        let epoch = broker.broker_epoch();
        let active = images
            .borrow()
            .broker(broker.node_id)
            .is_some_and(|b| b.broker_epoch == epoch && b.is_active());
        if active {
            info!(
                node_id = broker.node_id,
                waited_ms = started.elapsed().as_millis() as u64,
                "broker unfenced"
            );
            return;
        }
        if started.elapsed() > next_log {
            warn!(
                node_id = broker.node_id,
                "still fenced: waiting for the controller to accept this broker's heartbeats"
            );
            next_log += Duration::from_secs(5);
        }
        tokio::select! {
            changed = images.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = broker.stopping.cancelled() => return,
        }
    }
}

/// SIGTERM: tells the controller this broker is stopping, so its partitions lose it as
/// leader now rather than after a session timeout (Kafka's controlled shutdown).
pub async fn controlled_shutdown(broker: &Broker) {
    let cmd = Command::FenceBroker {
        broker_id: broker.node_id,
        broker_epoch: broker.broker_epoch(),
        reason: FenceReason::ControlledShutdown,
    };
    match broker
        .quorum
        .propose_within(cmd, SHUTDOWN_PROPOSAL_TIMEOUT)
        .await
    {
        Ok(()) => info!(node_id = broker.node_id, "controlled shutdown recorded"),
        Err(e) => warn!(error = %e, "controlled shutdown not recorded; the session will expire"),
    }
}

/// After every log was flushed and closed: records the clean shutdown of this incarnation
/// for the next start's registration (see [`clean_shutdown`]).
pub async fn record_clean_shutdown(broker: &Broker) {
    let epoch = broker.broker_epoch();
    let Some(dir) = broker.config.log_dirs.first().cloned() else {
        return;
    };
    if epoch == 0 {
        return; // never registered: nothing to vouch for
    }
    match tokio::task::spawn_blocking(move || clean_shutdown::record(&dir, epoch)).await {
        Ok(Ok(())) => info!(broker_epoch = epoch, "clean shutdown recorded"),
        Ok(Err(e)) => warn!(error = %e, "recording the clean shutdown failed"),
        Err(e) => warn!(error = %e, "recording the clean shutdown failed"),
    }
}
