//! ElectLeaders (key 43; `kafka-leader-election.sh`, `Admin.electLeaders`): preferred
//! (type 0: the first replica leads again once it is back in the ISR) or unclean (type 1: a
//! leaderless partition gets any live replica, accepting the loss of what only the dead
//! ISR held). Any broker answers: the election is one `Command::ElectLeaders` through the
//! quorum, and each partition's result is read from the image it produced.
//!
//! Per partition, as Kafka's controller answers: ELECTION_NOT_NEEDED (already led by the
//! preferred replica / has a leader), PREFERRED_LEADER_NOT_AVAILABLE (the preferred
//! replica is not an active ISR member), ELIGIBLE_LEADERS_NOT_AVAILABLE (no live replica),
//! UNKNOWN_TOPIC_OR_PARTITION. Without a partition list every partition is considered and
//! only those an election concerns are reported.
//!
//! Authorization (Kafka's controller, `ControllerApis.handleElectLeaders`): ALTER on the
//! cluster, else `CLUSTER_AUTHORIZATION_FAILED` at the top and for every listed partition,
//! and nothing is elected.

use brook_protocol::kafka_protocol::messages::elect_leaders_response::{
    PartitionResult, ReplicaElectionResult,
};
use brook_protocol::kafka_protocol::messages::{
    ElectLeadersRequest, ElectLeadersResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::{
    preferred_leader_electable, unclean_electable, Command, ElectionRefusal, ElectionType,
    MetadataImage,
};
use tracing::info;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied, ElectionError};
use crate::server::session::Session;

const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    if !Access::new(broker, session).cluster(AclOperation::Alter) {
        return refused(req, version, Denied::Cluster);
    }
    let election = match req.election_type {
        PREFERRED => ElectionType::Preferred,
        UNCLEAN => ElectionType::Unclean,
        other => {
            return ElectLeadersResponse::default()
                .with_error_code(ElectionError::UnknownElectionType(other).code().code());
        }
    };
    let image = broker.image();
    let all = req.topic_partitions.is_none();
    let asked: Vec<(String, i32)> = match req.topic_partitions {
        Some(topics) => topics
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect(),
        None => image
            .topics
            .values()
            .flat_map(|t| t.partitions.keys().map(move |&p| (t.name.clone(), p)))
            .collect(),
    };
    // Phase one: what an election could change; the rest is answered from the image.
    let mut results: Vec<(String, i32, Result<Option<i32>, ElectionError>)> = Vec::new();
    let mut candidates = Vec::new();
    for (topic, partition) in asked {
        let result = check(&image, &topic, partition, election);
        if let Ok(Some(_)) = result {
            if let Some(t) = image.topic(&topic) {
                candidates.push((t.topic_id, partition));
            }
        }
        if all && result == Err(ElectionError::Refused(ElectionRefusal::ElectionNotNeeded)) {
            continue;
        }
        results.push((topic, partition, result));
    }
    if !candidates.is_empty() {
        if let Err(e) = broker
            .quorum
            .propose(Command::ElectLeaders {
                partitions: candidates,
                election,
            })
            .await
        {
            return ElectLeadersResponse::default()
                .with_error_code(BrokerError::from(e).code().code());
        }
    }
    // Phase two: each candidate's outcome in the image the election produced.
    let after = broker.image();
    let mut by_topic: std::collections::BTreeMap<String, Vec<PartitionResult>> =
        std::collections::BTreeMap::new();
    for (topic, partition, result) in results {
        let outcome = match result {
            Ok(Some(expected)) => match after.partition(&topic, partition) {
                Some(p) if p.leader == expected => {
                    info!(%topic, partition, leader = expected, ?election, "leader elected");
                    Ok(())
                }
                _ => Err(ElectionError::Refused(match election {
                    ElectionType::Preferred => ElectionRefusal::PreferredLeaderNotAvailable,
                    ElectionType::Unclean => ElectionRefusal::EligibleLeadersNotAvailable,
                })),
            },
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        let entry = PartitionResult::default().with_partition_id(partition);
        by_topic.entry(topic).or_default().push(match outcome {
            Ok(()) => entry,
            Err(e) => entry
                .with_error_code(e.code().code())
                .with_error_message(Some(StrBytes::from_string(e.to_string()))),
        });
    }
    ElectLeadersResponse::default().with_replica_election_results(
        by_topic
            .into_iter()
            .map(|(topic, partition_result)| {
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(topic)))
                    .with_partition_result(partition_result)
            })
            .collect(),
    )
}

/// Kafka's `ElectLeadersRequest.getErrorResponse`: the refusal at the top and on every
/// partition the request listed (v0 has no top-level code).
fn refused(req: ElectLeadersRequest, version: i16, denied: Denied) -> ElectLeadersResponse {
    let code = denied.code().code();
    let results = req
        .topic_partitions
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            ReplicaElectionResult::default()
                .with_topic(t.topic)
                .with_partition_result(
                    t.partitions
                        .into_iter()
                        .map(|p| {
                            PartitionResult::default()
                                .with_partition_id(p)
                                .with_error_code(code)
                                .with_error_message(Some(StrBytes::from_string(denied.to_string())))
                        })
                        .collect(),
                )
        })
        .collect();
    ElectLeadersResponse::default()
        .with_error_code(if version >= 1 { code } else { 0 })
        .with_replica_election_results(results)
}

/// `Ok(Some(leader))`: an election would make `leader` lead; `Err`: why it would not.
fn check(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    election: ElectionType,
) -> Result<Option<i32>, ElectionError> {
    let p = image
        .partition(topic, partition)
        .ok_or(ElectionError::UnknownTopicOrPartition)?;
    match election {
        ElectionType::Preferred => preferred_leader_electable(image, p)
            .map(|()| p.replicas.first().copied())
            .map_err(ElectionError::Refused),
        ElectionType::Unclean => unclean_electable(image, p)
            .map(Some)
            .map_err(ElectionError::Refused),
    }
}
