//! ListPartitionReassignments (key 46; `kafka-reassign-partitions --verify / --list`,
//! `kafka-topics --describe`'s adding / removing replicas): the partitions being
//! reassigned, from this broker's image, with their replicas, adding and removing ones.
//! Without a topic list every reassigning partition; with one, the listed partitions that
//! are reassigning (unknown topics and partitions are left out, as Kafka does).
//!
//! Authorization (`ControllerApis.handleListPartitionReassignments`): DESCRIBE on the
//! cluster, else CLUSTER_AUTHORIZATION_FAILED.

use brook_protocol::kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use brook_protocol::kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::{reassignment, PartitionImage, TopicImage};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::Denied;
use crate::server::session::Session;

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !Access::new(broker, session).cluster(AclOperation::Describe) {
        let denied = Denied::Cluster;
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(denied.code().code())
            .with_error_message(Some(StrBytes::from_string(denied.to_string())));
    }
    let image = broker.image();
    let topics = match req.topics {
        None => image
            .topics
            .values()
            .filter_map(|t| ongoing(t, t.partitions.values()))
            .collect(),
        Some(asked) => asked
            .iter()
            .filter_map(|a| {
                let t = image.topic(&a.name)?;
                ongoing(
                    t,
                    a.partition_indexes
                        .iter()
                        .filter_map(|i| t.partitions.get(i)),
                )
            })
            .collect(),
    };
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}

/// The reassigning partitions among `partitions` of `topic`, or `None` if there are none.
fn ongoing<'a>(
    topic: &TopicImage,
    partitions: impl Iterator<Item = &'a PartitionImage>,
) -> Option<OngoingTopicReassignment> {
    let partitions: Vec<OngoingPartitionReassignment> = partitions
        .filter(|p| reassignment::in_progress(p))
        .map(|p| {
            OngoingPartitionReassignment::default()
                .with_partition_index(p.partition)
                .with_replicas(p.replicas.iter().map(|&b| b.into()).collect())
                .with_adding_replicas(p.adding_replicas.iter().map(|&b| b.into()).collect())
                .with_removing_replicas(p.removing_replicas.iter().map(|&b| b.into()).collect())
        })
        .collect();
    (!partitions.is_empty()).then(|| {
        OngoingTopicReassignment::default()
            .with_name(StrBytes::from_string(topic.name.clone()).into())
            .with_partitions(partitions)
    })
}
