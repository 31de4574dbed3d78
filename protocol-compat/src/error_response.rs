//! Error responses in an API's own format, for requests Brook decodes but does not
//! serve (a known API that is not implemented yet, or a version below what it serves):
//! the client gets `UNSUPPORTED_VERSION` where it expects it instead of a dropped
//! connection.

use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

/// The response to send for `request` when its API or version is not served, or `None`
/// when the API has no top-level error field to carry the code.
pub fn unsupported_response(request: &RequestKind) -> Option<ResponseKind> {
    let code = ResponseError::UnsupportedVersion.code();
    let response = match request {
        RequestKind::FindCoordinator(req) => {
            let coordinators = req
                .coordinator_keys
                .iter()
                .map(|key| {
                    find_coordinator_response::Coordinator::default()
                        .with_key(key.clone())
                        .with_node_id(BrokerId(-1))
                        .with_error_code(code)
                })
                .collect();
            ResponseKind::FindCoordinator(
                FindCoordinatorResponse::default()
                    .with_error_code(code)
                    .with_node_id(BrokerId(-1))
                    .with_coordinators(coordinators),
            )
        }
        RequestKind::JoinGroup(_) => ResponseKind::JoinGroup(
            JoinGroupResponse::default()
                .with_error_code(code)
                .with_generation_id(-1),
        ),
        RequestKind::SyncGroup(_) => {
            ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code))
        }
        RequestKind::Heartbeat(_) => {
            ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
        }
        RequestKind::LeaveGroup(_) => {
            ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code))
        }
        RequestKind::ListGroups(_) => {
            ResponseKind::ListGroups(ListGroupsResponse::default().with_error_code(code))
        }
        RequestKind::SaslHandshake(_) => {
            ResponseKind::SaslHandshake(SaslHandshakeResponse::default().with_error_code(code))
        }
        RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default().with_error_code(code),
        ),
        RequestKind::InitProducerId(_) => ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        RequestKind::EndTxn(_) => {
            ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(code))
        }
        RequestKind::AddOffsetsToTxn(_) => {
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
        }
        RequestKind::DescribeAcls(_) => {
            ResponseKind::DescribeAcls(DescribeAclsResponse::default().with_error_code(code))
        }
        RequestKind::DescribeCluster(_) => {
            ResponseKind::DescribeCluster(DescribeClusterResponse::default().with_error_code(code))
        }
        RequestKind::DescribeGroups(req) => ResponseKind::DescribeGroups(
            DescribeGroupsResponse::default().with_groups(
                req.groups
                    .iter()
                    .map(|g| {
                        describe_groups_response::DescribedGroup::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteGroups(req) => ResponseKind::DeleteGroups(
            DeleteGroupsResponse::default().with_results(
                req.groups_names
                    .iter()
                    .map(|g| {
                        delete_groups_response::DeletableGroupResult::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::ListTransactions(_) => ResponseKind::ListTransactions(
            ListTransactionsResponse::default().with_error_code(code),
        ),
        RequestKind::DescribeQuorum(_) => {
            ResponseKind::DescribeQuorum(DescribeQuorumResponse::default().with_error_code(code))
        }
        RequestKind::UpdateFeatures(_) => {
            ResponseKind::UpdateFeatures(UpdateFeaturesResponse::default().with_error_code(code))
        }
        RequestKind::ConsumerGroupHeartbeat(_) => ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default().with_error_code(code),
        ),
        RequestKind::GetTelemetrySubscriptions(_) => ResponseKind::GetTelemetrySubscriptions(
            GetTelemetrySubscriptionsResponse::default().with_error_code(code),
        ),
        RequestKind::PushTelemetry(_) => {
            ResponseKind::PushTelemetry(PushTelemetryResponse::default().with_error_code(code))
        }
        RequestKind::DescribeLogDirs(_) => {
            ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(code))
        }
        _ => return None,
    };
    Some(response)
}
