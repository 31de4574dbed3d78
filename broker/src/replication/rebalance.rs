//! `auto.leader.rebalance.enable` (Kafka's controller task): every
//! `leader.imbalance.check.interval.seconds` the metadata quorum's leader moves leadership
//! back to each partition's preferred replica (its first) wherever that replica is an
//! active ISR member and does not lead — after a restart, leaders otherwise stay piled on
//! the brokers that never stopped. KRaft ignores `leader.imbalance.per.broker.percentage`;
//! so does Brook. One `ElectLeaders` command per pass.

use std::sync::Arc;
use std::time::Duration;

use brook_raft::{preferred_leader_electable, Command, ElectionType};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::broker::Broker;

pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    if !broker.config.auto_leader_rebalance_enable {
        return;
    }
    let interval =
        Duration::from_secs(broker.config.leader_imbalance_check_interval_seconds.max(1));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        if !broker.quorum.is_leader() {
            continue;
        }
        let image = broker.image();
        let partitions: Vec<(uuid::Uuid, i32)> = image
            .topics
            .values()
            .flat_map(|t| {
                let image = &image;
                t.partitions
                    .values()
                    .filter(move |p| preferred_leader_electable(image, p).is_ok())
                    .map(move |p| (t.topic_id, p.partition))
            })
            .collect();
        if partitions.is_empty() {
            continue;
        }
        let count = partitions.len();
        match broker
            .quorum
            .propose(Command::ElectLeaders {
                partitions,
                election: ElectionType::Preferred,
            })
            .await
        {
            Ok(()) => info!(
                partitions = count,
                "moved leadership back to preferred replicas"
            ),
            Err(e) => warn!(error = %e, "preferred leader election failed"),
        }
    }
}
