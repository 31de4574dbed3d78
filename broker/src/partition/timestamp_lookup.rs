//! Record-exact answers for ListOffsets by timestamp and max timestamp.
//!
//! Storage finds the right *batch* from the time index and batch headers without
//! decoding anything; Kafka answers with the exact *record*, so this decodes that one
//! batch (decompressing it if needed). ListOffsets is not on the produce/fetch hot
//! path, and at most one batch is decoded per lookup.

use brook_protocol::kafka_protocol::records::RecordBatchDecoder;
use brook_storage::{LogHandle, MinOneBatch, TimestampOffset};

use crate::error::BrokerError;

/// Which record of the batch is wanted.
#[derive(Clone, Copy)]
pub enum Target {
    /// The first record at or after the batch-level offset whose timestamp >= this.
    AtOrAfter(i64),
    /// The first record carrying the batch's maximum timestamp.
    MaxTimestamp,
}

/// Narrows a batch-level answer from storage to the exact record.
pub async fn refine(
    log: &LogHandle,
    found: TimestampOffset,
    target: Target,
) -> Result<TimestampOffset, BrokerError> {
    let read = log
        .read(found.offset, 1, log.log_end_offset(), MinOneBatch::Yes)
        .await?;
    let mut bytes = read.records;
    let Ok(set) = RecordBatchDecoder::decode(&mut bytes) else {
        // A batch storage validated but the decoder cannot read (an unknown codec):
        // the batch-level answer is the best there is.
        return Ok(found);
    };
    let hit = set.records.iter().find(|r| match target {
        Target::AtOrAfter(ts) => r.offset >= found.offset && r.timestamp >= ts,
        Target::MaxTimestamp => r.timestamp == found.timestamp,
    });
    Ok(hit.map_or(found, |r| TimestampOffset {
        offset: r.offset,
        timestamp: r.timestamp,
    }))
}
