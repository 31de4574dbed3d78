//! LeaveGroup (v0-5): v0-2 name one member; v3+ batch member identities (KIP-345), each
//! with its own error, so static members and the admin client can remove instances.
//! NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS (the group's `__consumer_offsets`
//! partition still loading) are the response's error, with no members, as Kafka answers.

use brook_protocol::kafka_protocol::messages::leave_group_response::MemberResponse;
use brook_protocol::kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{group_code, Denied};
use crate::server::session::Session;

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    // Kafka's handleLeaveGroupRequest: READ on the group.
    if !Access::new(broker, session).group(AclOperation::Read, &req.group_id) {
        return LeaveGroupResponse::default().with_error_code(Denied::Group.code().code());
    }
    if version < 3 {
        let code = match broker
            .groups
            .leave(&req.group_id, &[(req.member_id.to_string(), None)])
        {
            Ok(results) => results.into_iter().next().and_then(Result::err),
            Err(e) => Some(e),
        }
        .map_or(0, |e| group_code(&e).code());
        return LeaveGroupResponse::default().with_error_code(code);
    }
    let identities: Vec<(String, Option<String>)> = req
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.group_instance_id.as_ref().map(|s| s.to_string()),
            )
        })
        .collect();
    // Not the coordinator, or its partition loading: one error for the request, as Kafka.
    let results = match broker.groups.leave(&req.group_id, &identities) {
        Ok(results) => results,
        Err(e) => return LeaveGroupResponse::default().with_error_code(group_code(&e).code()),
    };
    let members = req
        .members
        .into_iter()
        .zip(results)
        .map(|(m, r)| {
            MemberResponse::default()
                .with_member_id(m.member_id)
                .with_group_instance_id(m.group_instance_id)
                .with_error_code(r.err().map_or(0, |e| group_code(&e).code()))
        })
        .collect();
    LeaveGroupResponse::default().with_members(members)
}
