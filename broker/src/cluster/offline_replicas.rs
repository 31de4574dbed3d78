//! Reporting this broker's offline replicas to the controller (KIP-858's
//! `BrokerHeartbeat.offlineLogDirs`, reduced to what Brook's metadata can hold).
//!
//! When a log directory fails (or a log failed to open at start), this broker's replicas
//! in it can neither lead nor follow. Kafka's broker reports the directory in its next
//! heartbeat and the controller moves leadership and ISR membership off every replica
//! assigned to it. Brook's partition records carry no directory assignment, so the broker
//! proposes [`Command::MarkReplicasOffline`] with the replicas themselves (as it proposes
//! AlterPartition), fenced by its broker epoch; see `brook_raft::offline_replicas` for
//! what the controller does with them. Reported again whenever the current registration
//! lacks some (a registration made after the report, a proposal that failed).

use brook_raft::{Command, MetadataImage};
use tracing::{info, warn};
use uuid::Uuid;

use crate::broker::Broker;

/// The replicas in `offline` (this broker's logs that are offline) that the image does not
/// yet list offline for registration `broker_epoch`; none until that registration is in
/// the image (the proposal would be refused as stale).
pub fn unreported(
    image: &MetadataImage,
    node_id: i32,
    broker_epoch: u64,
    offline: &[(String, i32)],
) -> Vec<(Uuid, i32)> {
    if image
        .broker(node_id)
        .is_none_or(|b| b.broker_epoch != broker_epoch)
    {
        return Vec::new();
    }
    offline
        .iter()
        .filter_map(|(topic, partition)| {
            let t = image.topic(topic)?;
            t.partitions
                .get(partition)
                .filter(|p| p.replicas.contains(&node_id))?;
            let missing = !image.is_replica_offline(node_id, &t.topic_id, *partition);
            missing.then_some((t.topic_id, *partition))
        })
        .collect()
}

/// Proposes the offline replicas the controller does not know yet. Returns false when the
/// proposal failed (the caller retries).
pub async fn report(broker: &Broker) -> bool {
    let offline = broker.replicas.offline_logs();
    if offline.is_empty() {
        return true;
    }
    let broker_epoch = broker.broker_epoch();
    let partitions = unreported(&broker.image(), broker.node_id, broker_epoch, &offline);
    if partitions.is_empty() {
        return true;
    }
    let count = partitions.len();
    let cmd = Command::MarkReplicasOffline {
        broker_id: broker.node_id,
        broker_epoch,
        partitions,
    };
    match broker.quorum.propose(cmd).await {
        Ok(()) => {
            info!(
                node_id = broker.node_id,
                replicas = count,
                "reported replicas in failed log directories offline to the controller"
            );
            true
        }
        Err(e) => {
            warn!(error = %e, "reporting offline replicas to the controller failed; retrying");
            false
        }
    }
}
