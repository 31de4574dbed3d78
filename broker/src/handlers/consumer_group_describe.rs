//! ConsumerGroupDescribe (v0-1, KIP-848): epochs, state, assignor and every member's
//! current and target assignment of consumer groups. A classic group is answered
//! GROUP_ID_NOT_FOUND "Group X is not a consumer group.", as Kafka does, so the admin
//! client falls back to DescribeGroups. A group whose `__consumer_offsets` partition is
//! still loading is COORDINATOR_LOAD_IN_PROGRESS.

use brook_protocol::kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as WireAssignment, DescribedGroup, Member, TopicPartitions,
};
use brook_protocol::kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::{AclOperation, ResourceType};
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::consumer_group::member::Assignment;
use crate::error::{group_code, Denied, GroupError};
use crate::server::session::Session;

/// READ, DELETE, DESCRIBE (Kafka's `AclOperation` codes 3, 6, 8) as a bitfield.
const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8);

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: ConsumerGroupDescribeRequest,
    _version: i16,
) -> ConsumerGroupDescribeResponse {
    let access = Access::new(broker, session);
    let image = broker.image();
    let wire = |a: Assignment| {
        WireAssignment::default().with_topic_partitions(
            a.into_iter()
                .filter_map(|(topic_id, ps)| {
                    let name = image.topic_names_by_id.get(&topic_id)?;
                    Some(
                        TopicPartitions::default()
                            .with_topic_id(topic_id)
                            .with_topic_name(TopicName(StrBytes::from_string(name.clone())))
                            .with_partitions(ps.into_iter().collect()),
                    )
                })
                .collect(),
        )
    };
    let groups = req
        .group_ids
        .into_iter()
        .map(|group_id| {
            let failed = |e: i16, message: String| {
                DescribedGroup::default()
                    .with_group_id(group_id.clone())
                    .with_error_code(e)
                    .with_error_message(Some(StrBytes::from_string(message)))
                    .with_authorized_operations(i32::MIN)
            };
            // Kafka's handleConsumerGroupDescribe: DESCRIBE on the group.
            if !access.group(AclOperation::Describe, &group_id) {
                return failed(Denied::Group.code().code(), Denied::Group.to_string());
            }
            if let Err(e) = broker.groups.serves(&group_id) {
                return failed(group_code(&e).code(), e.to_string());
            }
            let Some(d) = broker
                .groups
                .consumer_groups()
                .with_group(&group_id, |g| g.describe())
            else {
                let message = if broker.groups.describe(&group_id).is_some() {
                    format!("Group {} is not a consumer group.", &*group_id)
                } else {
                    format!("Group {} not found.", &*group_id)
                };
                return failed(GroupError::GroupIdNotFound.code().code(), message);
            };
            let operations = if req.include_authorized_operations {
                access.authorized_operations(ResourceType::Group, &group_id, GROUP_OPERATIONS)
            } else {
                i32::MIN
            };
            let members = d
                .members
                .into_iter()
                .map(|m| {
                    Member::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_instance_id(m.instance_id.map(StrBytes::from_string))
                        .with_rack_id(m.rack_id.map(StrBytes::from_string))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(StrBytes::from_string(m.client_id))
                        .with_client_host(StrBytes::from_string(m.client_host))
                        .with_subscribed_topic_names(
                            m.subscribed_topic_names
                                .into_iter()
                                .map(|n| TopicName(StrBytes::from_string(n)))
                                .collect(),
                        )
                        // Kafka's member holds "" for no pattern, and shows it so.
                        .with_subscribed_topic_regex(Some(StrBytes::from_string(
                            m.subscribed_topic_regex.unwrap_or_default(),
                        )))
                        .with_assignment(wire(m.assignment))
                        .with_target_assignment(wire(m.target_assignment))
                        // Kafka's `MemberType`: 0 classic protocol, 1 consumer protocol.
                        .with_member_type(if m.classic { 0 } else { 1 })
                })
                .collect();
            DescribedGroup::default()
                .with_group_id(group_id)
                .with_group_state(StrBytes::from_static_str(d.state))
                .with_group_epoch(d.group_epoch)
                .with_assignment_epoch(d.assignment_epoch)
                .with_assignor_name(StrBytes::from_string(d.assignor_name))
                .with_members(members)
                .with_authorized_operations(operations)
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
