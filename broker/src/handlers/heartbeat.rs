//! Heartbeat (v0-4): keeps a member's session alive; `REBALANCE_IN_PROGRESS` tells it
//! to rejoin, `ILLEGAL_GENERATION`/`UNKNOWN_MEMBER_ID` that it was left behind.

use brook_protocol::kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::broker::Broker;
use crate::error::group_code;

pub fn handle(broker: &Broker, req: HeartbeatRequest, _version: i16) -> HeartbeatResponse {
    let result = broker.groups.heartbeat(
        &req.group_id,
        &req.member_id,
        req.group_instance_id.as_deref(),
        req.generation_id,
    );
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| group_code(&e).code()))
}
