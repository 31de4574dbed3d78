//! A follower's fetch as its leader sees it (the leader side of Kafka's
//! `Partition.fetchRecords` for replicas): the partition led at the request's epoch; a
//! `last_fetched_epoch` whose end here is before the fetch offset (or an epoch this leader
//! does not know) answers `diverging_epoch` with nothing read and the follower state
//! untouched; otherwise the fetch is recorded on the `Partition` (its offset becomes the
//! follower's log end offset, the high watermark may advance, the ISR task is woken when
//! the follower may join) and the follower reads up to the log end.

use std::sync::Arc;

use brook_protocol::kafka_protocol::messages::fetch_response::EpochEndOffset;

use super::{Replica, Wanted};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::partition::read::FollowerFetch;
use crate::partition::Partition;

/// What a follower's fetch of one partition gets.
pub(super) enum FollowerView {
    /// Read the partition (up to its log end).
    Read(Arc<Partition>),
    /// Truncate first: the leader's end of the follower's last fetched epoch.
    Diverging {
        epoch_end: EpochEndOffset,
        high_watermark: i64,
        log_start: i64,
    },
}

pub(super) async fn follower_view(
    broker: &Broker,
    w: &Wanted,
    replica: Replica,
) -> Result<FollowerView, BrokerError> {
    let epoch = Some(w.current_leader_epoch);
    let partition = broker
        .replicas
        .leader_partition(&w.key.topic, w.key.partition, epoch)
        .await?;
    let now_ms = brook_storage::log_manager::now_ms();
    let recorded = partition
        .record_follower_fetch(
            replica.id,
            replica.epoch,
            w.fetch_offset,
            w.last_fetched_epoch,
            epoch,
            now_ms,
        )
        .await?;
    match recorded {
        FollowerFetch::Diverging { epoch, end_offset } => {
            let log = partition.log();
            Ok(FollowerView::Diverging {
                epoch_end: EpochEndOffset::default()
                    .with_epoch(epoch)
                    .with_end_offset(end_offset),
                high_watermark: log.high_watermark(),
                log_start: log.log_start_offset(),
            })
        }
        FollowerFetch::Recorded { wake_isr } => {
            if wake_isr {
                broker.replicas.wake_isr_task();
            }
            Ok(FollowerView::Read(partition))
        }
    }
}
