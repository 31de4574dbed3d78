//! ListOffsets: earliest (-2), latest (-1; the last stable offset for read_committed), max timestamp (-3, KIP-734), earliest local
//! (-4, KIP-1005; equals earliest without tiered storage), or the first offset whose
//! timestamp is at or after a given time (answered from the time index).

use brook_protocol::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use brook_protocol::kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use brook_protocol::kafka_protocol::ResponseError;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::partition::timestamp_lookup::{refine, Target};
use crate::server::session::Session;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let image = broker.image();
    // Kafka's handleListOffsetRequest: DESCRIBE on each topic.
    let access = Access::new(broker, session);
    let from_replica = req.replica_id.0 >= 0;
    // read_committed consumers (v2+) see up to the last stable offset.
    let read_committed = req.isolation_level == 1 && !from_replica;
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.name.to_string();
        let described = access.topic(AclOperation::Describe, &name);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let base = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1);
            // The leader epoch is a v4+ field; older versions must leave it at its default.
            let leader_epoch = match image.partition(&name, p.partition_index) {
                Some(p) if version >= 4 => p.leader_epoch,
                _ => -1,
            };
            let result = if !described {
                Err(Denied::Topic.code())
            } else {
                match broker
                    .replicas
                    // KIP-320: a client with an older (or newer) leader epoch must refresh.
                    .leader_partition(&name, p.partition_index, Some(p.current_leader_epoch))
                    .await
                    .map(|p| p.log().clone())
                {
                    Err(e) => Err(e.code()),
                    Ok(log) => match p.timestamp {
                        // Consumers see up to the high watermark; a follower (replica id >= 0)
                        // asks for the log end (Kafka's `fetchOffsetForTimestamp`).
                        LATEST if from_replica => Ok((log.log_end_offset(), -1)),
                        LATEST if read_committed => Ok((log.last_stable_offset(), -1)),
                        LATEST => Ok((log.high_watermark(), -1)),
                        EARLIEST | EARLIEST_LOCAL => Ok((log.log_start_offset(), -1)),
                        MAX_TIMESTAMP => match log.max_timestamp_offset().await {
                            Ok(Some(found)) => visible(
                                &log,
                                from_replica,
                                read_committed,
                                exact(&log, found, Target::MaxTimestamp).await,
                            ),
                            Ok(None) => Ok((-1, -1)),
                            Err(e) => Err(BrokerError::from(e).code()),
                        },
                        ts if ts < 0 => {
                            Err(BrokerError::InvalidRequest(format!("timestamp {ts}")).code())
                        }
                        ts => match log.offset_for_timestamp(ts).await {
                            Ok(Some(found)) => visible(
                                &log,
                                from_replica,
                                read_committed,
                                exact(&log, found, Target::AtOrAfter(ts)).await,
                            ),
                            Ok(None) => Ok((-1, -1)),
                            Err(e) => Err(BrokerError::from(e).code()),
                        },
                    },
                }
            };
            partitions.push(match result {
                Ok((offset, timestamp)) => base
                    .with_offset(offset)
                    .with_timestamp(timestamp)
                    .with_leader_epoch(leader_epoch),
                Err(code) => base.with_error_code(code.code()),
            });
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

async fn exact(
    log: &brook_storage::LogHandle,
    found: brook_storage::TimestampOffset,
    target: Target,
) -> Result<(i64, i64), ResponseError> {
    refine(log, found, target)
        .await
        .map(|r| (r.offset, r.timestamp))
        .map_err(|e| e.code())
}

/// A timestamp lookup's answer as a consumer may see it: a record at or past the high
/// watermark (for read_committed, the last stable offset) is not there yet (-1, -1).
fn visible(
    log: &brook_storage::LogHandle,
    from_replica: bool,
    read_committed: bool,
    found: Result<(i64, i64), ResponseError>,
) -> Result<(i64, i64), ResponseError> {
    let bound = if read_committed {
        log.last_stable_offset()
    } else {
        log.high_watermark()
    };
    match found {
        Ok((offset, _)) if !from_replica && offset >= bound => Ok((-1, -1)),
        other => other,
    }
}
