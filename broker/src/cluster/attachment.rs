//! Keeps this broker attached to every voter of the metadata quorum
//! (`MetadataQuorum::hold_attachments`) under its current broker epoch: when this process
//! dies, its connections close and the controller fences it within a fraction of a second,
//! instead of after `broker.session.timeout.ms` — its partitions get new leaders, and the
//! ISRs it held back shrink, that much sooner. A re-registration (new epoch) re-attaches.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::broker::Broker;

/// How often the broker epoch is compared with the one attached under.
const EPOCH_CHECK: Duration = Duration::from_millis(500);

pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    loop {
        let epoch = broker.broker_epoch();
        let attached = broker.quorum.hold_attachments(broker.node_id, epoch);
        tokio::pin!(attached);
        // `hold_attachments` runs until dropped (with no voter to hold it waits forever),
        // so this loop only moves on a new broker epoch.
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = &mut attached => break,
                _ = tokio::time::sleep(EPOCH_CHECK) => if broker.broker_epoch() != epoch { break },
            }
        }
    }
}
