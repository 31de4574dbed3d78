//! DescribeGroups (v0-6): state, protocol and members of each group; member metadata
//! and assignments only once the group is Stable (as Kafka shows them). An unknown group
//! is described as Dead; from v6 it is also `GROUP_ID_NOT_FOUND` (KIP-1043). A group whose
//! `__consumer_offsets` partition is still loading is COORDINATOR_LOAD_IN_PROGRESS.

use brook_protocol::kafka_protocol::messages::describe_groups_response::{
    DescribedGroup, DescribedGroupMember,
};
use brook_protocol::kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::acl::ResourceType;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{Denied, GroupError};
use crate::server::session::Session;

/// READ, DELETE, DESCRIBE (Kafka's `AclOperation` codes 3, 6, 8) as a bitfield.
const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8);

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let access = Access::new(broker, session);
    let groups = req
        .groups
        .into_iter()
        .map(|group_id| {
            // Kafka's handleDescribeGroupsRequest: DESCRIBE on the group.
            if !access.group(AclOperation::Describe, &group_id) {
                return DescribedGroup::default()
                    .with_group_id(group_id)
                    .with_error_code(Denied::Group.code().code())
                    .with_authorized_operations(i32::MIN);
            }
            let operations = if req.include_authorized_operations {
                access.authorized_operations(ResourceType::Group, &group_id, GROUP_OPERATIONS)
            } else {
                i32::MIN
            };
            if let Err(e) = broker.groups.serves(&group_id) {
                return DescribedGroup::default()
                    .with_group_id(group_id)
                    .with_error_code(crate::error::group_code(&e).code())
                    .with_authorized_operations(operations);
            }
            let Some(d) = broker.groups.describe(&group_id) else {
                let is_consumer_group = broker.groups.consumer_groups().exists(&group_id);
                let mut g = DescribedGroup::default()
                    .with_group_id(group_id.clone())
                    .with_group_state(StrBytes::from_static_str("Dead"))
                    .with_authorized_operations(operations);
                if version >= 6 {
                    // A consumer group (KIP-848) is not described here (KIP-1043).
                    let message = if is_consumer_group {
                        format!("Group {} is not a classic group.", &*group_id)
                    } else {
                        "Group not found.".to_owned()
                    };
                    g = g
                        .with_error_code(GroupError::GroupIdNotFound.code().code())
                        .with_error_message(Some(StrBytes::from_string(message)));
                }
                return g;
            };
            let members = d
                .members
                .into_iter()
                .map(|m| {
                    DescribedGroupMember::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_group_instance_id(if version >= 4 {
                            m.group_instance_id.map(StrBytes::from_string)
                        } else {
                            None
                        })
                        .with_client_id(StrBytes::from_string(m.client_id))
                        .with_client_host(StrBytes::from_string(m.client_host))
                        .with_member_metadata(m.metadata)
                        .with_member_assignment(m.assignment)
                })
                .collect();
            DescribedGroup::default()
                .with_group_id(group_id)
                .with_group_state(StrBytes::from_static_str(d.state.name()))
                .with_protocol_type(StrBytes::from_string(d.protocol_type))
                .with_protocol_data(StrBytes::from_string(d.protocol_data))
                .with_members(members)
                .with_authorized_operations(operations)
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
