//! Group and consumer-lag metrics, published every few seconds by one owned task:
//! per group its members, state and generation (each completed rebalance bumps it),
//! and per committed partition the consumer lag (log end offset − committed offset) —
//! what Kafka operators otherwise need an external exporter for. The lag is also
//! offered under the kafka-exporter names (`kafka_consumergroup_lag`,
//! `kafka_consumergroup_members`) so existing dashboards work unchanged.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::coordinator::group::GroupState;
use crate::coordinator::handles::{CoordinatorHandles, CoordinatorHost};
use crate::metrics;

/// How often the figures are refreshed.
const INTERVAL: Duration = Duration::from_secs(2);

const STATES: [GroupState; 5] = [
    GroupState::Empty,
    GroupState::PreparingRebalance,
    GroupState::CompletingRebalance,
    GroupState::Stable,
    GroupState::Dead,
];

pub async fn run<H: CoordinatorHost>(host: Arc<H>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(INTERVAL) => {}
        }
        publish(&host.coordinator_handles());
    }
}

/// One refresh; cheap (in-memory group state, atomics for log end offsets).
pub fn publish(cx: &CoordinatorHandles<'_>) {
    for (group_id, _protocol_type, state) in cx.groups.list() {
        let (members, generation) = cx
            .groups
            .with_group(&group_id, |g| g.map(|g| (g.members.len(), g.generation_id)))
            .unwrap_or((0, 0));
        metrics::set_group(&group_id, members, generation);
        for s in STATES {
            metrics::set_group_state(&group_id, s.name(), s == state);
        }
        for ((topic, partition), committed) in cx.groups.fetch_offsets(&group_id) {
            if let Some(log) = cx.writer.replicas().existing(&topic, partition) {
                let lag = (log.high_watermark() - committed.offset).max(0);
                metrics::set_consumer_lag(&group_id, &topic, partition, lag);
            }
        }
    }
}
