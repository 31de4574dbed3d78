//! The leader side of the replication throttle for one follower's fetch
//! (`replication::throttle`): while the bytes this broker served to throttled followers run
//! above `leader.replication.throttled.rate`, a throttled partition is answered with its
//! offsets and no records, as Kafka's `shouldLeaderThrottle` makes `readFromLocalLog` do;
//! the bytes it does serve them are recorded against the rate. Consumers' fetches, and
//! followers without a configured rate, skip all of it.

use std::sync::Arc;

use brook_raft::MetadataImage;

use super::Replica;
use crate::broker::Broker;
use crate::replication::throttle;

pub(super) struct LeaderThrottle<'a> {
    broker: &'a Broker,
    image: Arc<MetadataImage>,
    follower: i32,
    over_quota: bool,
}

impl<'a> LeaderThrottle<'a> {
    /// The throttle of this fetch: `None` for a consumer, or when no leader rate is set.
    pub(super) fn for_fetch(broker: &'a Broker, replica: Replica) -> Option<Self> {
        if replica.id < 0 {
            return None;
        }
        let image = broker.quorum.image();
        let bound = throttle::leader_rate(&image, broker.node_id)?;
        let over_quota = broker
            .leader_replication_quota
            .exceeded(bound, brook_storage::log_manager::now_ms());
        Some(LeaderThrottle {
            broker,
            image,
            follower: replica.id,
            over_quota,
        })
    }

    /// How this fetch treats the partition: `None` when it is not listed; else whether the
    /// follower is held back now (listed, not in sync, and the rate over its bound). Bytes
    /// served for a listed partition are counted either way.
    pub(super) fn classify(&self, topic: &str, partition: i32) -> Option<bool> {
        if !throttle::leader_listed(&self.image, topic, partition, self.broker.node_id) {
            return None;
        }
        Some(self.over_quota && !throttle::in_sync(&self.image, topic, partition, self.follower))
    }

    /// Counts bytes served to the follower for throttled partitions.
    pub(super) fn record(&self, bytes: u64) {
        if bytes > 0 {
            self.broker
                .leader_replication_quota
                .record(bytes, brook_storage::log_manager::now_ms());
        }
    }
}
