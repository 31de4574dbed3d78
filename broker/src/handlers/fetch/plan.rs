//! One wanted partition's checks and planned read: the topic is known, this broker leads
//! at the request's epoch (a follower's fetch is recorded first: `follower`), and the
//! read up to the reader's bound (`Partition::plan_read`). Memory only.

use brook_protocol::kafka_protocol::messages::fetch_response::{
    AbortedTransaction, LeaderIdAndEpoch, PartitionData,
};
use brook_protocol::kafka_protocol::messages::{BrokerId, ProducerId};
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::PlannedRead;

use super::follower::{follower_view, FollowerView};
use super::{Replica, Wanted};
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::handlers::leader_hint;
use crate::partition::delayed::Watch;
use crate::partition::read::ReadBound;

/// A partition after the checks, before its read.
pub(super) enum Prepared {
    /// Answered without reading: an error, a divergence, or nothing to read yet.
    Done(PartitionData),
    /// To read, within `partition_max_bytes` and what is left of the request's budget.
    Read(PartitionData, PlannedRead),
}

impl Prepared {
    /// The same answer without its read: offsets only, no records (a throttled follower's
    /// fetch, `leader_throttle`).
    pub(super) fn without_records(self) -> Self {
        match self {
            Prepared::Read(base, _) => Prepared::Done(base.with_records(Some(bytes::Bytes::new()))),
            done => done,
        }
    }
}

/// Checks one wanted partition (topic, leadership, epochs; a follower's state) and plans
/// its read, or only its offsets when `read` is false (the response's budget is spent);
/// also returns its watch, subscribed before the bounds are read so a change after the
/// read still wakes the fetch.
pub(super) async fn prepare(
    broker: &Broker,
    w: &Wanted,
    replica: Replica,
    read: bool,
) -> (Prepared, Option<Watch>) {
    let base = PartitionData::default()
        .with_partition_index(w.key.partition)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(BrokerId(-1));
    if w.denied {
        let data = base.with_error_code(Denied::Topic.code().code());
        return (Prepared::Done(data), None);
    }
    if w.key.topic.is_empty() {
        let data = base.with_error_code(ResponseError::UnknownTopicId.code());
        return (Prepared::Done(data), None);
    }
    let found = if replica.id >= 0 {
        follower_view(broker, w, replica).await
    } else {
        broker
            .replicas
            .leader_partition(&w.key.topic, w.key.partition, Some(w.current_leader_epoch))
            .await
            .map(FollowerView::Read)
    };
    let partition = match found {
        Ok(FollowerView::Read(partition)) => partition,
        Ok(FollowerView::Diverging {
            epoch_end,
            high_watermark,
            log_start,
        }) => {
            let data = base
                .with_diverging_epoch(epoch_end)
                .with_high_watermark(high_watermark)
                .with_last_stable_offset(high_watermark)
                .with_log_start_offset(log_start);
            return (Prepared::Done(data), None);
        }
        Err(e) => {
            let mut data = base.with_error_code(e.code().code());
            if let Some((leader, epoch)) = leader_hint::from_error(&e, broker.node_id) {
                data = data.with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(epoch),
                );
            }
            return (Prepared::Done(data), None);
        }
    };
    let watch = Some(Watch::partition(&partition));
    // Consumers read up to the high watermark (read_committed ones up to the last stable
    // offset), followers up to the log end.
    let bound = if replica.id >= 0 {
        ReadBound::LogEnd
    } else if replica.read_committed {
        ReadBound::LastStable
    } else {
        ReadBound::HighWatermark
    };
    let limit = w.partition_max_bytes.max(0) as usize;
    let plan = if read {
        partition.plan_read(w.fetch_offset, limit, bound).await
    } else {
        partition.plan_offsets_only(w.fetch_offset, bound).await
    };
    let mut base = base
        .with_high_watermark(plan.high_watermark)
        .with_last_stable_offset(plan.last_stable_offset)
        .with_log_start_offset(plan.log_start_offset);
    if let Some(aborted) = plan.aborted {
        // The consumer drops the records of these producers from each first offset
        // until their abort marker.
        let aborted = aborted
            .into_iter()
            .map(|t| {
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(t.producer_id))
                    .with_first_offset(t.first_offset)
            })
            .collect();
        base = base.with_aborted_transactions(Some(aborted));
    }
    match plan.read {
        Ok(Some(planned)) => (Prepared::Read(base, planned), watch),
        Ok(None) => (
            Prepared::Done(base.with_records(Some(bytes::Bytes::new()))),
            watch,
        ),
        Err(e) => {
            let data = base.with_error_code(BrokerError::from(e).code().code());
            (Prepared::Done(data), watch)
        }
    }
}
