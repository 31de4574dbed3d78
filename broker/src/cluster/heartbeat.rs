//! The broker's heartbeat to the controller every `broker.heartbeat.interval.ms`. The
//! first heartbeat goes at once (it is what unfences a starting broker). A reply saying
//! the epoch is stale means a newer registration holds this node id: if it is another
//! process, this one stops (two brokers must never serve as one id); if the controller
//! lost this registration, the broker registers again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use brook_raft::Heartbeat;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, warn};

use crate::broker::Broker;

/// Runs until `shutdown`; owned by the process's task tracker.
pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    let interval = Duration::from_millis(broker.config.broker_heartbeat_interval_ms.max(50));
    let mut last_warning = Instant::now() - Duration::from_secs(60);
    loop {
        let hb = Heartbeat {
            broker_id: broker.node_id,
            incarnation_id: broker.incarnation_id,
            broker_epoch: broker.broker_epoch(),
            applied_index: broker.image().applied_index(),
            want_shutdown: false,
        };
        // A heartbeat is one bounded RPC; the stop token must not wait for it.
        let reply = tokio::select! {
            _ = shutdown.cancelled() => return,
            reply = broker.quorum.heartbeat(hb) => reply,
        };
        match reply {
            Ok(reply) if reply.stale_epoch => {
                let image = broker.image();
                let taken = image
                    .broker(broker.node_id)
                    .is_some_and(|b| b.incarnation_id != broker.incarnation_id);
                if taken {
                    error!(
                        node_id = broker.node_id,
                        "another process registered this node.id; stopping this broker"
                    );
                    broker.stopping.cancel();
                    return;
                }
                warn!("the controller does not know this registration; registering again");
                let current = i64::try_from(broker.broker_epoch()).unwrap_or(-1);
                match super::registration::register(&broker, current).await {
                    Ok(epoch) => broker.set_broker_epoch(epoch),
                    Err(e) => warn!(error = %e, "re-registration failed"),
                }
            }
            Ok(reply) => debug!(fenced = reply.fenced, "heartbeat answered"),
            Err(e) => {
                if last_warning.elapsed() > Duration::from_secs(10) {
                    warn!(error = %e, "heartbeat to the controller failed");
                    last_warning = Instant::now();
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
