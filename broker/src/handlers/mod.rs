//! One file per Kafka API. [`HANDLERS`] is the single list of what Brook serves: it
//! drives both dispatch and the ApiVersions response, so Brook never advertises an API
//! or version it does not implement.

use brook_protocol::kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use brook_protocol::versions::codec_range;

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::quota::enforce;
use crate::server::session::Session;
use crate::server::write::FileChunk;

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leader_hint;
pub mod leave_group;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
mod offset_entries;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod unregister_broker;
pub mod update_features;
pub mod write_txn_markers;

/// Every API Brook serves; each at every version the codec carries (from the lowest
/// Apache Kafka 4.0 accepts to the newest `kafka-protocol` encodes).
pub const HANDLERS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DeleteRecords,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::InitProducerId,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::CreatePartitions,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeCluster,
    ApiKey::DescribeQuorum,
    ApiKey::DescribeTopicPartitions,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::DescribeLogDirs,
    ApiKey::AlterReplicaLogDirs,
    ApiKey::UnregisterBroker,
    ApiKey::ListPartitionReassignments,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::OffsetDelete,
    ApiKey::ListGroups,
    ApiKey::ListConfigResources,
    ApiKey::DescribeGroups,
    ApiKey::DeleteGroups,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
    ApiKey::TxnOffsetCommit,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::WriteTxnMarkers,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
    ApiKey::DescribeProducers,
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::DescribeClientQuotas,
    ApiKey::AlterClientQuotas,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    ApiKey::UpdateFeatures,
];

/// Whether Brook serves `api_key` at `version`.
pub fn serves(api_key: ApiKey, version: i16) -> bool {
    let range = codec_range(api_key);
    HANDLERS.contains(&api_key) && version >= range.min && version <= range.max
}

/// A handler's answer: the response, and (Fetch only) the record sets left in their
/// files, each with the placeholder that stands for it in the response
/// (`brook_protocol::chunked`).
pub struct Reply {
    pub body: ResponseKind,
    pub files: Vec<(bytes::Bytes, FileChunk)>,
}

impl From<ResponseKind> for Reply {
    fn from(body: ResponseKind) -> Self {
        Reply {
            body,
            files: Vec::new(),
        }
    }
}

/// Runs the handler for a decoded request. `Ok(None)` means no response is sent
/// (Produce with acks=0); `Err` closes the connection.
pub async fn handle(
    broker: &Broker,
    session: &Session,
    header: &RequestHeader,
    body: RequestKind,
) -> Result<Option<Reply>, BrokerError> {
    let v = header.request_api_version;
    let response = match body {
        RequestKind::ApiVersions(req) => {
            ResponseKind::ApiVersions(api_versions::handle(broker, &req, v))
        }
        RequestKind::Metadata(req) => {
            ResponseKind::Metadata(metadata::handle(broker, session, req, v).await)
        }
        RequestKind::Produce(req) => {
            return Ok(produce::handle(broker, session, req, v)
                .await
                .map(|r| ResponseKind::Produce(r).into()))
        }
        RequestKind::Fetch(mut req) => {
            enforce::cap_fetch(broker, session, header, &mut req);
            return Ok(Some(fetch::handle(broker, session, req, v).await));
        }
        RequestKind::ListOffsets(req) => {
            ResponseKind::ListOffsets(list_offsets::handle(broker, session, req, v).await)
        }
        RequestKind::CreateTopics(req) => {
            let mut quota = enforce::mutation_quota(broker, session, header, v, 6);
            let response = create_topics::handle(broker, session, req, v, &mut quota).await;
            ResponseKind::CreateTopics(response.with_throttle_time_ms(enforce::ms(&quota)))
        }
        RequestKind::DeleteTopics(req) => {
            let mut quota = enforce::mutation_quota(broker, session, header, v, 5);
            let response = delete_topics::handle(broker, session, req, v, &mut quota).await;
            ResponseKind::DeleteTopics(response.with_throttle_time_ms(enforce::ms(&quota)))
        }
        RequestKind::DeleteRecords(req) => {
            ResponseKind::DeleteRecords(delete_records::handle(broker, session, req, v).await)
        }
        RequestKind::OffsetForLeaderEpoch(req) => ResponseKind::OffsetForLeaderEpoch(
            offset_for_leader_epoch::handle(broker, session, req, v).await,
        ),
        RequestKind::CreatePartitions(req) => {
            let mut quota = enforce::mutation_quota(broker, session, header, v, 3);
            let response = create_partitions::handle(broker, session, req, v, &mut quota).await;
            ResponseKind::CreatePartitions(response.with_throttle_time_ms(enforce::ms(&quota)))
        }
        RequestKind::InitProducerId(req) => {
            ResponseKind::InitProducerId(init_producer_id::handle(broker, session, req, v).await)
        }
        RequestKind::DescribeConfigs(req) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(broker, session, req, v))
        }
        RequestKind::AlterConfigs(req) => {
            ResponseKind::AlterConfigs(alter_configs::handle(broker, session, req, v).await)
        }
        RequestKind::IncrementalAlterConfigs(req) => ResponseKind::IncrementalAlterConfigs(
            incremental_alter_configs::handle(broker, session, req, v).await,
        ),
        RequestKind::DescribeCluster(req) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(broker, session, req, v))
        }
        RequestKind::DescribeQuorum(req) => {
            ResponseKind::DescribeQuorum(describe_quorum::handle(broker, session, req, v).await)
        }
        RequestKind::DescribeTopicPartitions(req) => ResponseKind::DescribeTopicPartitions(
            describe_topic_partitions::handle(broker, session, req, v).await,
        ),
        RequestKind::ElectLeaders(req) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(broker, session, req, v).await)
        }
        RequestKind::AlterPartitionReassignments(req) => ResponseKind::AlterPartitionReassignments(
            alter_partition_reassignments::handle(broker, session, req, v).await,
        ),
        RequestKind::UnregisterBroker(req) => {
            ResponseKind::UnregisterBroker(unregister_broker::handle(broker, session, req).await)
        }
        RequestKind::AlterReplicaLogDirs(req) => ResponseKind::AlterReplicaLogDirs(
            alter_replica_log_dirs::handle(broker, session, req).await,
        ),
        RequestKind::DescribeLogDirs(req) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(broker, session, req).await)
        }
        RequestKind::ListPartitionReassignments(req) => ResponseKind::ListPartitionReassignments(
            list_partition_reassignments::handle(broker, session, req),
        ),
        RequestKind::FindCoordinator(req) => {
            ResponseKind::FindCoordinator(find_coordinator::handle(broker, session, req, v).await)
        }
        RequestKind::JoinGroup(req) => {
            ResponseKind::JoinGroup(join_group::handle(broker, session, header, req, v).await)
        }
        RequestKind::SyncGroup(req) => {
            ResponseKind::SyncGroup(sync_group::handle(broker, session, req, v).await)
        }
        RequestKind::Heartbeat(req) => {
            ResponseKind::Heartbeat(heartbeat::handle(broker, session, req, v))
        }
        RequestKind::LeaveGroup(req) => {
            ResponseKind::LeaveGroup(leave_group::handle(broker, session, req, v))
        }
        RequestKind::OffsetCommit(req) => {
            ResponseKind::OffsetCommit(offset_commit::handle(broker, session, req, v).await)
        }
        RequestKind::OffsetFetch(req) => {
            ResponseKind::OffsetFetch(offset_fetch::handle(broker, session, req, v))
        }
        RequestKind::OffsetDelete(req) => {
            ResponseKind::OffsetDelete(offset_delete::handle(broker, session, req, v).await)
        }
        RequestKind::ListGroups(req) => {
            ResponseKind::ListGroups(list_groups::handle(broker, session, req, v))
        }
        RequestKind::ListConfigResources(req) => ResponseKind::ListConfigResources(
            list_config_resources::handle(broker, session, req, v),
        ),
        RequestKind::DescribeGroups(req) => {
            ResponseKind::DescribeGroups(describe_groups::handle(broker, session, req, v))
        }
        RequestKind::DeleteGroups(req) => {
            ResponseKind::DeleteGroups(delete_groups::handle(broker, session, req, v).await)
        }
        RequestKind::ConsumerGroupHeartbeat(req) => {
            let client_id = header.client_id.as_deref().unwrap_or_default();
            ResponseKind::ConsumerGroupHeartbeat(
                consumer_group_heartbeat::handle(broker, session, client_id, req, v).await,
            )
        }
        RequestKind::ConsumerGroupDescribe(req) => ResponseKind::ConsumerGroupDescribe(
            consumer_group_describe::handle(broker, session, req, v),
        ),
        RequestKind::TxnOffsetCommit(req) => {
            ResponseKind::TxnOffsetCommit(txn_offset_commit::handle(broker, session, req, v).await)
        }
        RequestKind::AddPartitionsToTxn(req) => ResponseKind::AddPartitionsToTxn(
            add_partitions_to_txn::handle(broker, session, req, v).await,
        ),
        RequestKind::AddOffsetsToTxn(req) => {
            ResponseKind::AddOffsetsToTxn(add_offsets_to_txn::handle(broker, session, req, v).await)
        }
        RequestKind::EndTxn(req) => {
            ResponseKind::EndTxn(end_txn::handle(broker, session, req, v).await)
        }
        RequestKind::WriteTxnMarkers(req) => {
            ResponseKind::WriteTxnMarkers(write_txn_markers::handle(broker, session, req, v).await)
        }
        RequestKind::DescribeTransactions(req) => ResponseKind::DescribeTransactions(
            describe_transactions::handle(broker, session, req, v),
        ),
        RequestKind::ListTransactions(req) => {
            ResponseKind::ListTransactions(list_transactions::handle(broker, session, req, v))
        }
        RequestKind::DescribeProducers(req) => ResponseKind::DescribeProducers(
            describe_producers::handle(broker, session, req, v).await,
        ),
        RequestKind::DescribeAcls(req) => {
            ResponseKind::DescribeAcls(describe_acls::handle(broker, session, req, v))
        }
        RequestKind::CreateAcls(req) => {
            ResponseKind::CreateAcls(create_acls::handle(broker, session, req, v).await)
        }
        RequestKind::DeleteAcls(req) => {
            ResponseKind::DeleteAcls(delete_acls::handle(broker, session, req, v).await)
        }
        RequestKind::SaslHandshake(req) => {
            ResponseKind::SaslHandshake(sasl_handshake::handle(req, v))
        }
        RequestKind::SaslAuthenticate(req) => {
            ResponseKind::SaslAuthenticate(sasl_authenticate::handle(req, v))
        }
        RequestKind::DescribeClientQuotas(req) => ResponseKind::DescribeClientQuotas(
            describe_client_quotas::handle(broker, session, req, v),
        ),
        RequestKind::AlterClientQuotas(req) => ResponseKind::AlterClientQuotas(
            alter_client_quotas::handle(broker, session, req, v).await,
        ),
        RequestKind::DescribeUserScramCredentials(req) => {
            ResponseKind::DescribeUserScramCredentials(describe_user_scram_credentials::handle(
                broker, session, req, v,
            ))
        }
        RequestKind::AlterUserScramCredentials(req) => ResponseKind::AlterUserScramCredentials(
            alter_user_scram_credentials::handle(broker, session, req, v).await,
        ),
        RequestKind::UpdateFeatures(req) => {
            ResponseKind::UpdateFeatures(update_features::handle(broker, session, req, v).await)
        }
        other => {
            return Err(BrokerError::NoHandler(
                format!("{other:?}").chars().take(40).collect(),
            ))
        }
    };
    Ok(Some(response.into()))
}
