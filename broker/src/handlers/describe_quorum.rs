//! DescribeQuorum (KIP-595/KIP-853): the metadata quorum as `kafka-metadata-quorum
//! describe --status / --replication` shows it — leader, leader epoch (the raft term),
//! high watermark (the last applied metadata entry), each voter's and observer's log end
//! offset. Kafka's brokers forward this request to the controller; a Brook node asks the
//! metadata leader for its raft view (every voter's and observer's replicated position),
//! and answers from its own view (its position, `-1` for the others) only when no leader
//! answers.
//!
//! Authorization (Kafka's controller, `ControllerApis.handleDescribeQuorum`): DESCRIBE on
//! the cluster, else the top-level `CLUSTER_AUTHORIZATION_FAILED` and nothing else.

use std::time::{SystemTime, UNIX_EPOCH};

use brook_protocol::kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use brook_protocol::kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{Denied, PartitionError};
use crate::server::session::Session;

/// The metadata log's name in KRaft.
const METADATA_TOPIC: &str = "__cluster_metadata";

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    if !Access::new(broker, session).cluster(AclOperation::Describe) {
        let refused =
            DescribeQuorumResponse::default().with_error_code(Denied::Cluster.code().code());
        // The top-level message is a v2 field (Kafka's `getTopLevelErrorResponse`).
        return if version >= 2 {
            refused.with_error_message(Some(StrBytes::from_string(Denied::Cluster.to_string())))
        } else {
            refused
        };
    }
    let asks_for_metadata = req.topics.iter().any(|t| {
        t.topic_name.0.as_str() == METADATA_TOPIC
            && t.partitions.iter().any(|p| p.partition_index == 0)
    });
    if !asks_for_metadata {
        return DescribeQuorumResponse::default()
            .with_error_code(PartitionError::UnknownTopicOrPartition.code().code());
    }
    let m = match broker.quorum.leader_metrics().await {
        Ok(leader_view) => leader_view,
        Err(_) => broker.quorum.raft_metrics(),
    };
    let listener = broker
        .config
        .controller_listener_names
        .first()
        .map_or("CONTROLLER", String::as_str);
    quorum_response(&m, version, listener)
}

/// The answer for the quorum as `m` (the leader's raft view, when it answered) shows it:
/// also what the controller listener answers (`cluster/controller_api`). Voters and
/// observers carry their directory ids (v2, KIP-853) where the membership has them;
/// `nodes` lists each voter's controller endpoint under `listener`.
pub fn quorum_response(
    m: &brook_raft::RaftMetrics<u64, brook_raft::QuorumNode>,
    version: i16,
    listener: &str,
) -> DescribeQuorumResponse {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let own_end = m.last_log_index.map_or(-1, |i| i as i64);
    let high_watermark = m.last_applied.map_or(-1, |l| l.index as i64);
    let is_leader = m.current_leader == Some(m.id);
    let membership = m.membership_config.membership();
    let state = |id: u64| {
        let end = if id == m.id {
            Some(own_end)
        } else {
            m.replication
                .as_ref()
                .and_then(|r| r.get(&id))
                .map(|matched| matched.map_or(-1, |l| l.index as i64))
        };
        let seen = if end.is_some() && (is_leader || id == m.id) {
            now_ms
        } else {
            -1
        };
        let caught_up = match end {
            Some(e) if e >= high_watermark && seen > 0 => now_ms,
            _ => -1,
        };
        let directory = membership
            .get_node(&id)
            .and_then(|n| n.directory_id.as_deref())
            .and_then(crate::cluster::controller_api::kafka_uuid)
            .unwrap_or_default();
        ReplicaState::default()
            .with_replica_id(BrokerId(i32::try_from(id).unwrap_or(-1)))
            .with_replica_directory_id(directory)
            .with_log_end_offset(end.unwrap_or(-1))
            .with_last_fetch_timestamp(seen)
            .with_last_caught_up_timestamp(caught_up)
    };
    let voters: Vec<ReplicaState> = membership.voter_ids().map(state).collect();
    let observers: Vec<ReplicaState> = membership.learner_ids().map(state).collect();
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(
            m.current_leader
                .and_then(|l| i32::try_from(l).ok())
                .unwrap_or(-1),
        ))
        .with_leader_epoch(i32::try_from(m.current_term).unwrap_or(i32::MAX))
        .with_high_watermark(high_watermark)
        .with_current_voters(voters)
        .with_observers(observers);
    let mut response = DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![partition])]);
    if version >= 2 {
        let nodes = membership
            .voter_ids()
            .filter_map(|id| {
                let addr = &membership.get_node(&id)?.addr;
                let (host, port) = addr.rsplit_once(':')?;
                Some(
                    Node::default()
                        .with_node_id(BrokerId(i32::try_from(id).ok()?))
                        .with_listeners(vec![Listener::default()
                            .with_name(StrBytes::from_string(listener.to_owned()))
                            .with_host(StrBytes::from_string(
                                host.trim_matches(['[', ']']).to_string(),
                            ))
                            .with_port(port.parse().ok()?)]),
                )
            })
            .collect();
        response = response.with_nodes(nodes);
    }
    response
}
