//! The per-partition checks OffsetCommit and TxnOffsetCommit share: the partition must
//! exist in the metadata (`UNKNOWN_TOPIC_OR_PARTITION`) and its metadata string fit
//! `offset.metadata.max.bytes` (`OFFSET_METADATA_TOO_LARGE`); a valid one becomes the
//! entry to store, stamped with the commit time.

use std::time::{SystemTime, UNIX_EPOCH};

use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::offsets::CommittedOffset;

use crate::broker::Broker;
use crate::error::{GroupError, PartitionError};

/// One partition of a commit request, as the request names it.
pub struct Requested<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<&'a StrBytes>,
}

/// Each partition with the entry to store or the error it gets whatever the group says.
pub type Checked = Vec<(String, i32, Result<CommittedOffset, ResponseError>)>;

/// Checks every requested partition, in request order.
pub fn check<'a>(broker: &Broker, requested: impl Iterator<Item = Requested<'a>>) -> Checked {
    let image = broker.image();
    let max_metadata = broker.groups.config().offset_metadata_max_bytes;
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    requested
        .map(|r| {
            let metadata = r.metadata.map(|m| m.to_string());
            let too_large = metadata.as_ref().filter(|m| m.len() > max_metadata);
            let result = if image.partition(r.topic, r.partition).is_none() {
                Err(PartitionError::UnknownTopicOrPartition.code())
            } else if let Some(m) = too_large {
                Err(GroupError::OffsetMetadataTooLarge(m.len()).code())
            } else {
                Ok(CommittedOffset {
                    offset: r.offset,
                    leader_epoch: r.leader_epoch,
                    metadata: metadata.unwrap_or_default(),
                    commit_timestamp_ms: now_ms,
                })
            };
            (r.topic.to_string(), r.partition, result)
        })
        .collect()
}

/// The entries that passed the checks, to hand to the group coordinator.
pub fn accepted(checked: &Checked) -> Vec<(String, i32, CommittedOffset)> {
    checked
        .iter()
        .filter_map(|(t, p, r)| r.as_ref().ok().map(|c| (t.clone(), *p, c.clone())))
        .collect()
}
