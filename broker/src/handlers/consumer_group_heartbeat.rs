//! ConsumerGroupHeartbeat (v0-1, KIP-848): a consumer-protocol member joins, heartbeats,
//! reconciles and leaves through this one API. The handler resolves topic names and ids
//! against the metadata and leaves the protocol to `coordinator::consumer_group`.

use brook_protocol::kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as WireAssignment, TopicPartitions,
};
use brook_protocol::kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::{self, Access};
use crate::broker::Broker;
use crate::config::group::ConsumerGroupOverrides;
use crate::coordinator::consumer_group::member::Assignment;
use crate::coordinator::consumer_group::{self, Caller, HeartbeatRequest, TopicsView};
use crate::error::{group_code, BrokerError, Denied};
use crate::metadata::features;
use crate::server::session::Session;

/// Why a KIP-848 request is refused while `consumer` is not an enabled rebalance protocol.
pub const CONSUMER_PROTOCOL_DISABLED: &str =
    "The consumer group protocol is not enabled (group.coordinator.rebalance.protocols).";

pub async fn handle(
    broker: &Broker,
    session: &Session,
    client_id: &str,
    req: ConsumerGroupHeartbeatRequest,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    let refused = |code: i16, message: String| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    let image = broker.image();
    if !features::consumer_protocol_enabled(&broker.config, &image) {
        let code = BrokerError::UnsupportedVersion.code().code();
        return refused(code, CONSUMER_PROTOCOL_DISABLED.to_owned());
    }
    // Kafka's handleConsumerGroupHeartbeatRequest: READ on the group, then DESCRIBE on
    // every subscribed topic.
    let access = Access::new(broker, session);
    if !access.group(AclOperation::Read, &req.group_id) {
        return refused(Denied::Group.code().code(), Denied::Group.to_string());
    }
    if let Some(names) = &req.subscribed_topic_names {
        let denied: Vec<&str> = names
            .iter()
            .map(|n| n.as_str())
            .filter(|n| !access.topic(AclOperation::Describe, n))
            .collect();
        if !denied.is_empty() {
            return refused(
                Denied::Topic.code().code(),
                format!(
                    "The member is not authorized to access topics: [{}]",
                    denied.join(", ")
                ),
            );
        }
    }
    if req.group_id.is_empty() {
        return refused(
            crate::error::GroupError::InvalidRequest(String::new())
                .code()
                .code(),
            "GroupId can't be empty.".to_owned(),
        );
    }
    let topics = consumer_group::topic_metas(&image);
    let owned = req.topic_partitions.as_ref().map(|tps| {
        let mut a = Assignment::new();
        for tp in tps {
            a.entry(tp.topic_id)
                .or_default()
                .extend(tp.partitions.iter().copied());
        }
        a
    });
    let request = HeartbeatRequest {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ns| ns.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned,
        client_id: client_id.to_owned(),
        client_host: format!("/{}", session.peer.ip()),
    };
    let groups = &broker.groups;
    // The group's own session timeout and heartbeat interval, when set, over the broker's.
    let config = groups.consumer_groups().config().with_overrides(
        image.group_configs(&req.group_id).map_or_else(
            ConsumerGroupOverrides::default,
            ConsumerGroupOverrides::from_stored,
        ),
    );
    // The group's patterns resolve to the topics this member's principal may describe.
    let caller = Caller {
        principal: session.principal().clone(),
        host: session.peer.ip(),
    };
    let may_describe = |c: &Caller, topic: &str| {
        auth::may_describe_topic(broker, &image, &c.principal, c.host, topic)
    };
    let view = TopicsView {
        topics: &topics,
        version: consumer_group::metadata_version(&image),
        may_describe: &may_describe,
    };
    let result = match consumer_group::heartbeat::validate(&request, version) {
        Ok(()) => {
            groups
                .consumer_heartbeat(&req.group_id, &request, &caller, &view, &config)
                .await
        }
        Err(e) => Err(e),
    };
    match result {
        Err(e) => refused(group_code(&e).code(), e.to_string()),
        Ok(reply) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(reply.member_id)))
            .with_member_epoch(reply.member_epoch)
            // A leave (epoch -1 or -2) is told no interval: there is no next heartbeat.
            .with_heartbeat_interval_ms(if reply.member_epoch < 0 {
                0
            } else {
                config.heartbeat_interval_ms
            })
            .with_assignment(reply.assignment.map(|a| {
                WireAssignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(topic_id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
    }
}
