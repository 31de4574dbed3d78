//! Produce: each partition's record batches go to its log as bytes — storage validates
//! the batch headers and CRCs, checks idempotent sequences, stamps offsets and writes;
//! no record is decoded here, except on compacted topics, whose records must all have a
//! key (`partition::compacted_keys`, INVALID_RECORD). Only the partition's leader appends;
//! elsewhere the answer is NOT_LEADER_OR_FOLLOWER with the leader's id, epoch and endpoint
//! (KIP-951, v10+). acks=0 sends no response; acks=1 answers after the leader's append;
//! acks=all is refused with NOT_ENOUGH_REPLICAS (nothing written) while the ISR is smaller
//! than `min.insync.replicas`, else answered once the high watermark covers every
//! partition's append (`replication::acks`): every partition of the request is appended
//! first, then the waits run, so a request's latency is its slowest partition's, not the
//! sum. The first transactional batch of a producer epoch on a partition is checked with
//! (Produce ≤ v11) or added to (v12+, Transactions V2) its transaction at the coordinator
//! first (KIP-890, `coordinator::txn::partition_check`).

use std::collections::BTreeSet;

use brook_protocol::kafka_protocol::messages::produce_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use brook_protocol::kafka_protocol::messages::{
    BrokerId, ProduceRequest, ProduceResponse, TopicName,
};
use brook_protocol::kafka_protocol::ResponseError;
use tracing::{debug, error};

use std::sync::Arc;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::group::records::OFFSETS_TOPIC;
use crate::coordinator::handles::CoordinatorHost;
use crate::coordinator::txn::partition_check::{ensure_in_transaction, Operation, Producer};
use crate::coordinator::txn::records::TXN_STATE_TOPIC;
use crate::error::{BrokerError, Denied};
use crate::logging::sites;
use crate::metadata::topics;
use crate::metrics;
use crate::partition::append::{AppendError, RequiredAcks};
use crate::partition::compacted_keys::KeylessRecords;
use crate::partition::Partition;
use crate::replication::acks::{self, NotReplicated};
use crate::replication::leader::LeaderPartition;
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: ProduceRequest,
    version: i16,
) -> Option<ProduceResponse> {
    let acks = req.acks;
    let transactional_id = req.transactional_id.as_ref().map(|id| id.to_string());
    // Kafka's handleProduceRequest: WRITE on the transactional id (every partition refused
    // without it), then WRITE on each topic (its partitions TOPIC_AUTHORIZATION_FAILED).
    let access = Access::new(broker, session);
    let txn_denied = transactional_id
        .as_deref()
        .is_some_and(|id| !access.transactional_id(AclOperation::Write, id));
    let timeout = std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    // Phase one appends every partition; phase two waits for the acks=all ones.
    let mut appended = Vec::new();
    for topic in req.topic_data {
        let authorized = |name: &str| access.topic(AclOperation::Write, name);
        let named_and_denied = topic.topic_id.is_nil() && !authorized(topic.name.as_str());
        let name = if txn_denied || named_and_denied {
            None
        } else {
            resolve_name(broker, &topic.name, &topic.topic_id).await
        };
        let denied = if txn_denied {
            Some(Denied::TransactionalId)
        } else if named_and_denied || name.as_deref().is_some_and(|n| !authorized(n)) {
            Some(Denied::Topic)
        } else {
            None
        };
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let response = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            let result = if !matches!(acks, -1..=1) {
                Err(ResponseError::InvalidRequiredAcks.into())
            } else if let Some(denied) = denied {
                Err(denied.code().into())
            } else {
                match &name {
                    // Kafka's ReplicaManager: "Cannot append to internal topic".
                    Some(name) if is_internal(name) => {
                        Err(ResponseError::InvalidTopicException.into())
                    }
                    Some(name) => {
                        let request = Request {
                            acks,
                            version,
                            transactional_id: transactional_id.as_deref(),
                        };
                        append(broker, name, data.index, data.records, request).await
                    }
                    None => Err(ResponseError::UnknownTopicOrPartition.into()),
                }
            };
            partitions.push((response, result));
        }
        appended.push((topic.name, topic.topic_id, partitions));
    }
    // One deadline for the whole request, as Kafka's single DelayedProduce: the partitions
    // are waited for in turn, each with what is left, so N unreplicated partitions still
    // answer at `timeout_ms`, not N times it.
    let deadline = std::time::Instant::now() + timeout;
    let mut responses = Vec::with_capacity(appended.len());
    let mut hinted_leaders = BTreeSet::new();
    for (name, topic_id, partitions) in appended {
        let mut answered = Vec::with_capacity(partitions.len());
        for (response, result) in partitions {
            let result = match result {
                Ok((ok, Some((partition, state)))) if acks == -1 => acks::wait_for_high_watermark(
                    &partition,
                    &state,
                    ok.last_offset + 1,
                    deadline.saturating_duration_since(std::time::Instant::now()),
                    &broker.stopping,
                )
                .await
                .map(|()| ok)
                .map_err(Refused::from),
                Ok((ok, _)) => Ok(ok),
                Err(e) => Err(e),
            };
            answered.push(match result {
                Ok(ok) => response
                    .with_base_offset(ok.base_offset)
                    .with_log_append_time_ms(ok.log_append_time.unwrap_or(-1))
                    .with_log_start_offset(ok.log_start_offset),
                Err(Refused::Code(code)) => response.with_error_code(code.code()),
                Err(Refused::Moved {
                    leader,
                    leader_epoch,
                }) => {
                    hinted_leaders.insert(leader);
                    response
                        .with_error_code(ResponseError::NotLeaderOrFollower.code())
                        .with_current_leader(
                            LeaderIdAndEpoch::default()
                                .with_leader_id(BrokerId(leader))
                                .with_leader_epoch(leader_epoch),
                        )
                }
                Err(Refused::Keyless(keyless)) => keyless.response(response),
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(name)
                .with_topic_id(topic_id)
                .with_partition_responses(answered),
        );
    }
    if acks == 0 {
        return None;
    }
    let mut response = ProduceResponse::default().with_responses(responses);
    if version >= 10 && !hinted_leaders.is_empty() {
        let image = broker.image();
        let endpoints = super::leader_hint::endpoints(&image, hinted_leaders)
            .map(|b| {
                let (id, host, port, rack) = super::leader_hint::endpoint_fields(b);
                NodeEndpoint::default()
                    .with_node_id(id)
                    .with_host(host)
                    .with_port(port)
                    .with_rack(rack)
            })
            .collect();
        response = response.with_node_endpoints(endpoints);
    }
    Some(response)
}

/// The coordinators' own topics, written only by their coordinators.
fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TXN_STATE_TOPIC
}

/// The topic a produce names (v13+ by id), auto-creating a named topic when allowed.
async fn resolve_name(broker: &Broker, name: &TopicName, topic_id: &uuid::Uuid) -> Option<String> {
    if !topic_id.is_nil() {
        return broker.image().topic_name(topic_id).map(str::to_string);
    }
    let name = name.to_string();
    match topics::auto_create(broker, &name).await {
        Ok(true) => Some(name),
        Ok(false) => None,
        Err(e) => {
            debug!(topic = %name, error = %e, "auto-creation on produce failed");
            None
        }
    }
}

/// Why a partition's records were not appended.
enum Refused {
    Code(ResponseError),
    /// Led elsewhere (or nowhere yet: leader -1).
    Moved {
        leader: i32,
        leader_epoch: i32,
    },
    /// A compacted topic's batch holds key-less records (INVALID_RECORD with details).
    Keyless(KeylessRecords),
}

impl From<ResponseError> for Refused {
    fn from(code: ResponseError) -> Self {
        Refused::Code(code)
    }
}

impl From<BrokerError> for Refused {
    fn from(e: BrokerError) -> Self {
        match e {
            BrokerError::NotLeaderOrFollower {
                leader,
                leader_epoch,
                ..
            } => Refused::Moved {
                leader,
                leader_epoch,
            },
            e => Refused::Code(e.code()),
        }
    }
}

impl From<NotReplicated> for Refused {
    fn from(e: NotReplicated) -> Self {
        match e {
            NotReplicated::Moved {
                leader,
                leader_epoch,
            } => Refused::Moved {
                leader,
                leader_epoch,
            },
            e => Refused::Code(e.code()),
        }
    }
}

/// What of the request every partition's append needs.
#[derive(Clone, Copy)]
struct Request<'a> {
    acks: i16,
    version: i16,
    transactional_id: Option<&'a str>,
}

/// A partition appended to, and the leader state an acks=all answer waits on.
type Led = (Arc<Partition>, Arc<LeaderPartition>);

/// Appends as leader; returns what was appended and, for a new append, the partition
/// whose high watermark an acks=all answer waits for.
async fn append(
    broker: &Broker,
    topic: &str,
    partition: i32,
    records: Option<bytes::Bytes>,
    request: Request<'_>,
) -> Result<(brook_storage::AppendInfo, Option<Led>), Refused> {
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Err(ResponseError::CorruptMessage.into());
    };
    let replica = broker
        .replicas
        .leader_partition(topic, partition, None)
        .await?;
    let acks = if request.acks == -1 {
        RequiredAcks::All
    } else {
        RequiredAcks::Leader
    };
    let verify = request.transactional_id.map(|transactional_id| {
        move |producer_id, producer_epoch| async move {
            let producer = Producer {
                transactional_id,
                producer_id,
                producer_epoch,
            };
            ensure_in_transaction(
                &broker.coordinator_handles(),
                producer,
                &(topic.to_string(), partition),
                Operation::for_produce(request.version),
                ResponseError::NotEnoughReplicas,
            )
            .await
        }
    });
    let size = records.len();
    let now_ms = brook_storage::log_manager::now_ms();
    let appended = replica
        .append_as_leader(records, acks, verify, now_ms)
        .await
        .map_err(|e| {
            if let AppendError::Broker(e) = &e {
                if e.is_storage_fault() && sites::APPEND_FAILED.allow() {
                    error!(topic, partition, error = %e, "append failed; the partition answers KAFKA_STORAGE_ERROR");
                }
            }
            Refused::from(e)
        })?;
    let info = appended.info;
    if !info.duplicate {
        metrics::record_produce(
            topic,
            size,
            (info.last_offset - info.base_offset + 1) as u64,
        );
    }
    metrics::set_log_end_offset(topic, partition, replica.log().log_end_offset());
    Ok((info, Some((replica, appended.leader))))
}

impl From<AppendError> for Refused {
    fn from(e: AppendError) -> Self {
        match e {
            AppendError::Broker(e) => e.into(),
            AppendError::Keyless(keyless) => Refused::Keyless(keyless),
            e => Refused::Code(crate::error::append_code(&e)),
        }
    }
}
