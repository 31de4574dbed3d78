//! JoinGroup (v0-9): hands the request to the group coordinator and parks until the
//! join phase completes. v4+ clients joining without a member id first get
//! `MEMBER_ID_REQUIRED` with an id to rejoin with (KIP-394); v5+ may name a static
//! `group.instance.id` (KIP-345); v9 may skip the assignment (KIP-814). v0 has no
//! rebalance timeout: it equals the session timeout, as in Kafka.

use brook_protocol::kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use brook_protocol::kafka_protocol::messages::{
    JoinGroupRequest, JoinGroupResponse, RequestHeader,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::group::{JoinOutcome, JoinRequest};
use crate::error::{group_code, Denied, GroupError};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    header: &RequestHeader,
    req: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    // Kafka's handleJoinGroupRequest: READ on the group.
    if !Access::new(broker, session).group(AclOperation::Read, &req.group_id) {
        return JoinGroupResponse::default()
            .with_generation_id(-1)
            .with_member_id(req.member_id)
            .with_error_code(Denied::Group.code().code());
    }
    let rebalance_timeout_ms = if version == 0 {
        req.session_timeout_ms
    } else {
        req.rebalance_timeout_ms
    };
    let join = JoinRequest {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", session.peer.ip()),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms,
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
        // Only a member joining a consumer group (KIP-848 migration) needs the topics.
        topics: broker
            .groups
            .consumer_groups()
            .exists(&req.group_id)
            .then(|| {
                std::sync::Arc::new(crate::coordinator::consumer_group::topic_metas(
                    &broker.image(),
                ))
            }),
    };
    let base = JoinGroupResponse::default()
        .with_generation_id(-1)
        .with_member_id(req.member_id.clone());
    match broker.groups.join(&req.group_id, join).await {
        Ok(JoinOutcome::MemberIdRequired(id)) => base
            .with_error_code(GroupError::MemberIdRequired.code().code())
            .with_member_id(StrBytes::from_string(id)),
        Err(e) => base.with_error_code(group_code(&e).code()),
        Ok(JoinOutcome::Joined(r)) => {
            let members = r
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(StrBytes::from_string(id))
                        // The field exists from v5; older leaders never see instance ids.
                        .with_group_instance_id(if version >= 5 {
                            instance.map(StrBytes::from_string)
                        } else {
                            None
                        })
                        .with_metadata(metadata)
                })
                .collect();
            let mut response = base
                .with_generation_id(r.generation_id)
                .with_protocol_name(match r.protocol_name {
                    Some(name) => Some(StrBytes::from_string(name)),
                    // Not nullable before v7.
                    None if version < 7 => Some(StrBytes::default()),
                    None => None,
                })
                .with_leader(StrBytes::from_string(r.leader))
                .with_member_id(StrBytes::from_string(r.member_id))
                .with_members(members);
            if version >= 7 {
                response = response.with_protocol_type(r.protocol_type.map(StrBytes::from_string));
            }
            if version >= 9 {
                response = response.with_skip_assignment(r.skip_assignment);
            }
            response
        }
    }
}
