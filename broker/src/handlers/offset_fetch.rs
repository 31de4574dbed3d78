//! OffsetFetch (v1-9): v1-7 ask for one group, v8+ for many (KIP-709). A null topic
//! list means every partition the group committed; a partition without a commit gets
//! offset -1 and no error. Offsets committed in a transaction not yet ended are never
//! returned (the last non-transactional or committed-transaction offset is); with
//! `require_stable` (v7+, KIP-447) a partition with such a pending commit answers
//! UNSTABLE_OFFSET_COMMIT with offset -1 instead, and the client retries. As Kafka 4's
//! `OffsetMetadataManager.fetchOffsets`/`fetchAllOffsets`, this is per partition, also
//! for "all partitions" requests (there only for partitions with a committed offset);
//! the group-level error stays NONE. While the group's `__consumer_offsets` partition is
//! still loading, the group answers COORDINATOR_LOAD_IN_PROGRESS (v8+ per group, before
//! at the top level), never the offsets it may not have read back yet.

use std::collections::{BTreeMap, BTreeSet};

use brook_protocol::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use brook_protocol::kafka_protocol::messages::{
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::offsets::CommittedOffset;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::group::GroupCoordinator;
use crate::error::{group_code, Denied, GroupError};
use crate::server::session::Session;

/// (topic → partition → committed offset or why not) for one group: `Ok(None)` is no
/// commit, `Err` a pending transactional commit under `require_stable`.
type Answer = BTreeMap<String, BTreeMap<i32, Result<Option<CommittedOffset>, ResponseError>>>;

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    // Kafka's handleOffsetFetchRequest: DESCRIBE on the group, then on each topic.
    let access = Access::new(broker, session);
    let group_denied = |group: &str| !access.group(AclOperation::Describe, group);
    let answer = |group: &str, wanted: Option<Vec<(String, Vec<i32>)>>| {
        let all = wanted.is_none();
        let mut answer = answer(&broker.groups, group, wanted, req.require_stable);
        restrict_to_describable(&mut answer, &access, all);
        answer
    };
    if version < 8 {
        if group_denied(&req.group_id) {
            return OffsetFetchResponse::default().with_error_code(Denied::Group.code().code());
        }
        let wanted = req.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                .collect::<Vec<_>>()
        });
        if let Err(e) = broker.groups.serves(&req.group_id) {
            return OffsetFetchResponse::default().with_error_code(group_code(&e).code());
        }
        let answer = answer(&req.group_id, wanted);
        let topics = answer
            .into_iter()
            .map(|(topic, partitions)| {
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(p, c)| {
                                let (offset, epoch, metadata, error) = fields(c);
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(epoch)
                                    .with_metadata(Some(StrBytes::from_string(metadata)))
                                    .with_error_code(error)
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
            if group_denied(&g.group_id) {
                return OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(Denied::Group.code().code());
            }
            if let Err(e) = broker.groups.serves(&g.group_id) {
                return OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(group_code(&e).code());
            }
            // v9+: a consumer-protocol member fetches with its member epoch (KIP-848).
            if version >= 9 {
                let member_id = g.member_id.as_deref();
                if let Err(e) = broker.groups.consumer_groups().validate_fetch(
                    &g.group_id,
                    member_id,
                    g.member_epoch,
                ) {
                    return OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(group_code(&e).code());
                }
            }
            let topics = answer(&g.group_id, wanted)
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(p, c)| {
                                    let (offset, epoch, metadata, error) = fields(c);
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(epoch)
                                        .with_metadata(Some(StrBytes::from_string(metadata)))
                                        .with_error_code(error)
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

/// Topics the session may not DESCRIBE: left out of an all-topics answer, answered
/// TOPIC_AUTHORIZATION_FAILED when named.
fn restrict_to_describable(answer: &mut Answer, access: &Access<'_>, all: bool) {
    answer.retain(|topic, partitions| {
        if access.topic(AclOperation::Describe, topic) {
            return true;
        }
        for result in partitions.values_mut() {
            *result = Err(Denied::Topic.code());
        }
        !all
    });
}

/// The requested partitions (or all committed ones) with their commits; with
/// `require_stable`, UNSTABLE_OFFSET_COMMIT for those with a pending transactional commit.
fn answer(
    groups: &GroupCoordinator,
    group_id: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Answer {
    // Pending first: a transaction completing between the two reads then shows as
    // unstable, never as the offsets from before it (the coordinator moves an offset from
    // pending to committed in one step).
    let pending = if require_stable {
        groups.pending_transactional_offsets(group_id)
    } else {
        BTreeSet::new()
    };
    let committed = groups.fetch_offsets(group_id);
    let stable = |topic: &str, partition: i32, c: Option<CommittedOffset>| {
        if pending.contains(&(topic.to_owned(), partition)) {
            Err(GroupError::UnstableOffsetCommit.code())
        } else {
            Ok(c)
        }
    };
    let mut out = Answer::new();
    match wanted {
        None => {
            for ((topic, partition), c) in committed {
                let result = stable(&topic, partition, Some(c));
                out.entry(topic).or_default().insert(partition, result);
            }
        }
        Some(wanted) => {
            for (topic, partitions) in wanted {
                let entry = out.entry(topic.clone()).or_default();
                for p in partitions {
                    let c = committed.get(&(topic.clone(), p)).cloned();
                    entry.insert(p, stable(&topic, p, c));
                }
            }
        }
    }
    out
}

fn fields(c: Result<Option<CommittedOffset>, ResponseError>) -> (i64, i32, String, i16) {
    match c {
        Ok(Some(c)) => (c.offset, c.leader_epoch, c.metadata, 0),
        Ok(None) => (-1, -1, String::new(), 0),
        Err(e) => (-1, -1, String::new(), e.code()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::coordinator::group::{
        Committer, GroupConfig, GroupError, TxnCommitter, TxnProducer,
    };

    fn offset(offset: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
        }
    }

    #[tokio::test]
    async fn require_stable_answers_unstable_for_partitions_with_a_pending_transactional_commit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let groups = GroupCoordinator::start(
            dir.path().join("store"),
            GroupConfig {
                initial_rebalance_delay: Duration::ZERO,
                min_session_timeout_ms: 1,
                max_session_timeout_ms: 100_000,
                offset_metadata_max_bytes: 4096,
                offsets_retention_ms: 60_000,
                offsets_retention_check_interval: Duration::from_secs(3600),
            },
            None,
        )
        .await
        .expect("start");
        let standalone = Committer {
            member_id: String::new(),
            group_instance_id: None,
            generation_id: -1,
            missing_group_error: GroupError::UnknownMemberId,
        };
        groups
            .commit_offsets(
                "g",
                standalone,
                vec![("t".into(), 0, offset(5)), ("t".into(), 1, offset(6))],
            )
            .await
            .expect("commit");
        let producer = TxnCommitter {
            producer: TxnProducer {
                producer_id: 7,
                producer_epoch: 0,
            },
            member_id: String::new(),
            group_instance_id: None,
            generation_id: -1,
        };
        groups
            .commit_transactional_offsets(
                "g",
                producer,
                vec![("t".into(), 0, offset(50)), ("t".into(), 2, offset(60))],
            )
            .await
            .expect("txn commit");
        let wanted = || Some(vec![("t".to_string(), vec![0, 1, 2])]);
        let summary = |answer: Answer| -> Vec<(i32, i64, i16)> {
            answer["t"]
                .iter()
                .map(|(p, c)| {
                    let (offset, _, _, error) = fields(c.clone());
                    (*p, offset, error)
                })
                .collect()
        };
        let unstable = GroupError::UnstableOffsetCommit.code().code();

        // Without require_stable: the last stable offsets, as before.
        assert_eq!(
            summary(answer(&groups, "g", wanted(), false)),
            vec![(0, 5, 0), (1, 6, 0), (2, -1, 0)]
        );
        assert_eq!(
            summary(answer(&groups, "g", wanted(), true)),
            vec![(0, -1, unstable), (1, 6, 0), (2, -1, unstable)]
        );
        // All partitions: those with a committed offset, unstable where pending.
        assert_eq!(
            summary(answer(&groups, "g", None, true)),
            vec![(0, -1, unstable), (1, 6, 0)]
        );

        groups
            .complete_transaction(0, 7, true)
            .await
            .expect("commit marker");
        assert_eq!(
            summary(answer(&groups, "g", wanted(), true)),
            vec![(0, 50, 0), (1, 6, 0), (2, 60, 0)]
        );
    }
}
