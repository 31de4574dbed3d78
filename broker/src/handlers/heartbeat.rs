//! Heartbeat (v0-4): keeps a member's session alive; `REBALANCE_IN_PROGRESS` tells it
//! to rejoin, `ILLEGAL_GENERATION`/`UNKNOWN_MEMBER_ID` that it was left behind.

use brook_protocol::kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{group_code, Denied};
use crate::server::session::Session;

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: HeartbeatRequest,
    _version: i16,
) -> HeartbeatResponse {
    // Kafka's handleHeartbeatRequest: READ on the group.
    if !Access::new(broker, session).group(AclOperation::Read, &req.group_id) {
        return HeartbeatResponse::default().with_error_code(Denied::Group.code().code());
    }
    let result = broker.groups.heartbeat(
        &req.group_id,
        &req.member_id,
        req.group_instance_id.as_deref(),
        req.generation_id,
    );
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| group_code(&e).code()))
}
