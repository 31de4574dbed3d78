//! Writing the KIP-848 consumer groups' records (see `consumer_group::image`) to
//! `__consumer_offsets`: under the partition's write order, the changes a group made since
//! its last write are taken and appended, so writes land in the order the changes were
//! made; a request that changed a group returns only once a write covering its change is
//! durable (if another request's write took the change, this one waits for that write
//! behind the same order).

use brook_storage::offsets::OffsetRecord;
use tracing::warn;

use super::{GroupError, Shared};
use crate::coordinator::consumer_group::RecordChange;
use crate::error::BrokerError;

impl Shared {
    /// Writes what `group_id`'s consumer group changed since its last write.
    pub(super) async fn flush_consumer_group(&self, group_id: &str) -> Result<(), GroupError> {
        let partition = self.offsets_partition(group_id);
        let _ordered = self.write_order(partition).await;
        let changes = self.consumer.take_changes(group_id);
        if changes.is_empty() {
            return Ok(());
        }
        let records = offset_records(group_id, &changes);
        if let Err(e) = self.persist_in_order(partition, records).await {
            self.consumer.write_failed(group_id, &changes);
            warn!(group = %group_id, error = %e, "writing consumer group records failed; they are written again with the next change");
            return Err(coordinator_error(e));
        }
        Ok(())
    }

    /// Writes records of a consumer group that has left memory (its tombstones).
    pub(super) async fn write_removed_consumer_group(
        &self,
        group_id: &str,
        tombstones: Vec<RecordChange>,
    ) -> Result<(), GroupError> {
        if tombstones.is_empty() {
            return Ok(());
        }
        let partition = self.offsets_partition(group_id);
        let _ordered = self.write_order(partition).await;
        self.write_removed_consumer_group_in_order(partition, group_id, tombstones)
            .await
    }

    /// [`Shared::write_removed_consumer_group`] for a caller holding the write order of the
    /// group's `partition`.
    pub(super) async fn write_removed_consumer_group_in_order(
        &self,
        partition: i32,
        group_id: &str,
        tombstones: Vec<RecordChange>,
    ) -> Result<(), GroupError> {
        if tombstones.is_empty() {
            return Ok(());
        }
        self.persist_in_order(partition, offset_records(group_id, &tombstones))
            .await
            .map_err(coordinator_error)
    }
}

/// The store's records for `changes` of `group_id`.
pub(super) fn offset_records(group_id: &str, changes: &[RecordChange]) -> Vec<OffsetRecord> {
    changes
        .iter()
        .map(|(key, value)| match value {
            Some(value) => OffsetRecord::PutGroupRecord {
                group: group_id.to_owned(),
                key: key.clone(),
                value: value.clone(),
            },
            None => OffsetRecord::DeleteGroupRecord {
                group: group_id.to_owned(),
                key: key.clone(),
            },
        })
        .collect()
}

/// What a member is told when its group's write failed: the coordinator's own errors as
/// they are (NOT_COORDINATOR after a leadership move), anything else as
/// COORDINATOR_NOT_AVAILABLE, on which clients retry, as Kafka's coordinator answers.
fn coordinator_error(e: BrokerError) -> GroupError {
    match e {
        BrokerError::Group(g) => g,
        _ => GroupError::CoordinatorNotAvailable,
    }
}
