//! SyncGroup (v0-5): the leader sends the assignments, every member gets its own; a
//! follower that arrives first parks until the leader's sync (or a new rebalance).
//! v5 carries the protocol type and name, checked against the group's.

use brook_protocol::kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::group::SyncRequest;
use crate::error::{group_code, Denied};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    // Kafka's handleSyncGroupRequest: READ on the group.
    if !Access::new(broker, session).group(AclOperation::Read, &req.group_id) {
        return SyncGroupResponse::default().with_error_code(Denied::Group.code().code());
    }
    let sync = SyncRequest {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id,
        protocol_type: req.protocol_type.as_ref().map(|s| s.to_string()),
        protocol_name: req.protocol_name.as_ref().map(|s| s.to_string()),
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    match broker.groups.sync(&req.group_id, sync).await {
        Ok(r) => {
            let mut response = SyncGroupResponse::default().with_assignment(r.assignment);
            if version >= 5 {
                response = response
                    .with_protocol_type(r.protocol_type.map(StrBytes::from_string))
                    .with_protocol_name(r.protocol_name.map(StrBytes::from_string));
            }
            response
        }
        Err(e) => SyncGroupResponse::default().with_error_code(group_code(&e).code()),
    }
}
