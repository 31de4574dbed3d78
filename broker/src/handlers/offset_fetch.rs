//! OffsetFetch (v1-9): v1-7 ask for one group, v8+ for many (KIP-709). A null topic
//! list means every partition the group committed; a partition without a commit gets
//! offset -1 and no error. `require_stable` needs no waiting: Brook has no pending
//! transactional offsets, so every committed offset is already stable.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use brook_protocol::kafka_protocol::messages::{
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_storage::offsets::CommittedOffset;

use crate::broker::Broker;
use crate::error::group_code;

/// (topic → partition → committed offset, if any) for one group.
type Answer = BTreeMap<String, BTreeMap<i32, Option<CommittedOffset>>>;

pub fn handle(broker: &Broker, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    if version < 8 {
        let wanted = req.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                .collect::<Vec<_>>()
        });
        if let Err(e) = broker.groups.coordinates(&req.group_id) {
            return OffsetFetchResponse::default().with_error_code(group_code(&e).code());
        }
        let answer = answer(broker, &req.group_id, wanted);
        let topics = answer
            .into_iter()
            .map(|(topic, partitions)| {
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(p, c)| {
                                let (offset, epoch, metadata) = fields(c);
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(epoch)
                                    .with_metadata(Some(StrBytes::from_string(metadata)))
                            })
                            .collect(),
                    )
            })
            .collect();
        return OffsetFetchResponse::default().with_topics(topics);
    }
    let groups = req
        .groups
        .iter()
        .map(|g| {
            let wanted = g.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                    .collect::<Vec<_>>()
            });
            if let Err(e) = broker.groups.coordinates(&g.group_id) {
                return OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(group_code(&e).code());
            }
            let topics = answer(broker, &g.group_id, wanted)
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(p, c)| {
                                    let (offset, epoch, metadata) = fields(c);
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(epoch)
                                        .with_metadata(Some(StrBytes::from_string(metadata)))
                                })
                                .collect(),
                        )
                })
                .collect();
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id.clone())
                .with_topics(topics)
        })
        .collect();
    OffsetFetchResponse::default().with_groups(groups)
}

/// The requested partitions (or all committed ones) with their commits.
fn answer(broker: &Broker, group_id: &str, wanted: Option<Vec<(String, Vec<i32>)>>) -> Answer {
    let committed = broker.groups.fetch_offsets(group_id);
    let mut out = Answer::new();
    match wanted {
        None => {
            for ((topic, partition), c) in committed {
                out.entry(topic).or_default().insert(partition, Some(c));
            }
        }
        Some(wanted) => {
            for (topic, partitions) in wanted {
                let entry = out.entry(topic.clone()).or_default();
                for p in partitions {
                    entry.insert(p, committed.get(&(topic.clone(), p)).cloned());
                }
            }
        }
    }
    out
}

fn fields(c: Option<CommittedOffset>) -> (i64, i32, String) {
    match c {
        Some(c) => (c.offset, c.leader_epoch, c.metadata),
        None => (-1, -1, String::new()),
    }
}
