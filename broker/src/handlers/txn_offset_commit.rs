//! TxnOffsetCommit (v0-5): a transactional producer commits a consumer group's offsets
//! as part of its transaction (`sendOffsetsToTransaction`). The group checks are
//! OffsetCommit's, transactional flavour: v3+ carry the consumer's generation, member id
//! and instance id (KIP-447), which fence zombies; generation -1 with no member id skips
//! them. Each partition is checked against the metadata (`UNKNOWN_TOPIC_OR_PARTITION`)
//! and `offset.metadata.max.bytes`; the valid ones are appended to the group's
//! `__consumer_offsets` partition as one transactional batch, durably, before the
//! response, and stay pending until the transaction's marker. A group-level failure is
//! reported on every partition, as Kafka does.
//!
//! First the group's offsets partition is checked with (v0-4) or, for Transactions V2
//! clients, which send no AddOffsetsToTxn, added to (v5) the producer's transaction at
//! its coordinator (KIP-890, `coordinator::txn::partition_check`).

use brook_protocol::kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use brook_protocol::kafka_protocol::messages::{
    TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;

use super::offset_entries::{accepted, check, Requested};
use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::group::records::{group_partition_index, OFFSETS_TOPIC};
use crate::coordinator::group::{TxnCommitter, TxnProducer};
use crate::coordinator::handles::CoordinatorHost;
use crate::coordinator::txn::partition_check::{ensure_in_transaction, Operation, Producer};
use crate::error::{Denied, GroupError, TxnError};
use crate::server::session::Session;

/// The first version sent by Transactions V2 clients.
const FIRST_V2_VERSION: i16 = 5;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    // Kafka's handleTxnOffsetCommitRequest: WRITE on the transactional id and READ on the
    // group (every partition refused without them), READ on each topic.
    let access = Access::new(broker, session);
    let denied = access.txn_offsets(&req.transactional_id, &req.group_id);
    let requested = req.topics.iter().flat_map(|topic| {
        topic.partitions.iter().map(move |p| Requested {
            topic: topic.name.as_str(),
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: p.committed_leader_epoch,
            metadata: p.committed_metadata.as_ref(),
        })
    });
    let mut checked = check(broker, requested);
    for (topic, _, result) in &mut checked {
        if !access.topic(AclOperation::Read, topic) {
            *result = Err(Denied::Topic.code());
        }
    }
    let entries = accepted(&checked);
    let committer = TxnCommitter {
        producer: TxnProducer {
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
        },
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id,
    };
    let group_error = match denied {
        Some(denied) => Some(denied.code()),
        None => match in_transaction(broker, &req, version).await {
            Err(e) => Some(e),
            Ok(()) => match broker
                .groups
                .commit_transactional_offsets(&req.group_id, committer, entries)
                .await
            {
                Ok(()) => None,
                Err(e) => Some(e.code()),
            },
        },
    };
    let mut topics: Vec<TxnOffsetCommitResponseTopic> = Vec::new();
    for (topic, partition, result) in checked {
        let code = match (&result, group_error) {
            (_, Some(e)) => e.code(),
            (Err(e), None) => e.code(),
            (Ok(_), None) => 0,
        };
        let entry = TxnOffsetCommitResponsePartition::default()
            .with_partition_index(partition)
            .with_error_code(code);
        match topics.last_mut() {
            Some(t) if *t.name == *topic => t.partitions.push(entry),
            _ => topics.push(
                TxnOffsetCommitResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(vec![entry]),
            ),
        }
    }
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The group's offsets partition must be in the producer's transaction.
async fn in_transaction(
    broker: &Broker,
    req: &TxnOffsetCommitRequest,
    version: i16,
) -> Result<(), ResponseError> {
    let partition = group_partition_index(&broker.image(), &req.group_id)
        .ok_or(GroupError::CoordinatorNotAvailable.code())?;
    let tp = (OFFSETS_TOPIC.to_string(), partition);
    let operation = if version >= FIRST_V2_VERSION {
        Operation::Add
    } else {
        Operation::Verify {
            abortable: version >= 4,
        }
    };
    let producer = Producer {
        transactional_id: &req.transactional_id,
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
    };
    ensure_in_transaction(
        &broker.coordinator_handles(),
        producer,
        &tp,
        operation,
        TxnError::CoordinatorLoadInProgress.code(),
    )
    .await
}
