//! OffsetDelete (v0, KIP-496): removes a group's committed offsets for some partitions.
//! An Empty group may lose any; an active consumer group keeps the offsets of topics
//! its members subscribe to (`GROUP_SUBSCRIBED_TO_TOPIC`); an active group of another
//! protocol type is refused as `NON_EMPTY_GROUP`.

use brook_protocol::kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use brook_protocol::kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::broker::Broker;
use crate::error::{group_code, PartitionError};

pub async fn handle(
    broker: &Broker,
    req: OffsetDeleteRequest,
    _version: i16,
) -> OffsetDeleteResponse {
    let image = broker.image();
    // Unknown partitions are answered without touching the group, as Kafka does.
    let mut known = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            if image.partition(&t.name, p.partition_index).is_some() {
                known.push((t.name.to_string(), p.partition_index));
            }
        }
    }
    let results = match broker
        .groups
        .delete_offsets(&req.group_id, known.clone())
        .await
    {
        Ok(results) => results,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code().code()),
    };
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let key = (t.name.to_string(), p.partition_index);
                    let code = match known.iter().position(|k| *k == key) {
                        None => PartitionError::UnknownTopicOrPartition.code().code(),
                        Some(i) => match results.get(i) {
                            Some(Err(e)) => group_code(e).code(),
                            _ => 0,
                        },
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
