//! Snapshots by metadata volume, Kafka's `metadata.log.max.record.bytes.between.snapshots`:
//! each node builds a snapshot once the entries it applied since its last one stand for that
//! many bytes of Kafka metadata records, so a restart replays a bounded log.
//!
//! openraft's own policy counts entries (every [`SNAPSHOT_EVERY_LOGS`](crate::config::SNAPSHOT_EVERY_LOGS)),
//! which misses a log of few but heavy entries: a node with 100,000 partitions restarted a
//! few times writes a handful of entries, each moving every partition, and replayed them all
//! at every start (issue #24). Brook's commands are compact — a `FenceBroker` of a few dozen
//! bytes does what Kafka writes as one `PartitionChangeRecord` per partition — so the serialized
//! size of an entry says little about its replay cost; [`record_bytes`] counts instead the
//! records Kafka would write for it, from the command and the image, with no serialization.
//!
//! The state machine adds each applied entry's [`record_bytes`] to a counter it resets when a
//! snapshot is taken or installed ([`crate::state_machine`]); [`run`] watches the counter and
//! asks openraft for a snapshot once it reaches the threshold.

use openraft::{EntryPayload, Raft};
use tokio::sync::watch;

use crate::command::Command;
use crate::image::MetadataImage;
use crate::TypeConfig;

/// Kafka's default `metadata.log.max.record.bytes.between.snapshots` (20 MiB).
pub const DEFAULT_SNAPSHOT_RECORD_BYTES: u64 = 20 * 1024 * 1024;

/// About the size of one partition's record in Kafka's metadata log (a `PartitionRecord` or a
/// `PartitionChangeRecord` with its batch share: topic id, partition, leader, replicas / ISR).
pub const PARTITION_RECORD_BYTES: u64 = 40;
/// About the size of any other record (a registration, a config, a fence, a membership).
pub const RECORD_BYTES: u64 = 100;

/// The bytes of Kafka metadata records an applied entry stands for: one record, plus one
/// partition record for each partition it creates or may move. A broker-wide change
/// (registration, fence, unfence, unregistration) counts every partition of the image: its
/// apply visits them all, and Kafka writes a change for each the broker leads. O(topics) for
/// those, O(1) for the others.
pub fn record_bytes(image: &MetadataImage, payload: &EntryPayload<TypeConfig>) -> u64 {
    let partitions = match payload {
        EntryPayload::Normal(cmd) => partitions_moved(image, cmd),
        EntryPayload::Blank | EntryPayload::Membership(_) => 0,
    };
    RECORD_BYTES.saturating_add(PARTITION_RECORD_BYTES.saturating_mul(partitions))
}

fn partitions_moved(image: &MetadataImage, cmd: &Command) -> u64 {
    let len = |n: usize| n as u64;
    match cmd {
        Command::CreateTopic { partitions, .. } | Command::CreatePartitions { partitions, .. } => {
            len(partitions.len())
        }
        Command::ElectLeaders { partitions, .. }
        | Command::MarkReplicasOffline { partitions, .. } => len(partitions.len()),
        Command::AlterPartitionReassignments { reassignments } => len(reassignments.len()),
        Command::RegisterBroker { .. }
        | Command::FenceBroker { .. }
        | Command::UnfenceBroker { .. }
        | Command::UnregisterBroker { .. } => image
            .topics
            .values()
            .map(|topic| len(topic.partitions.len()))
            .sum(),
        Command::Bootstrap { records } => records
            .iter()
            .map(|record| 1 + partitions_moved(image, record))
            .sum(),
        _ => 0,
    }
}

/// Asks openraft for a snapshot whenever the applied record bytes since the last one reach
/// `threshold`, until raft stops. A request while a snapshot is being built is ignored by
/// openraft; the counter, reset only when a build starts, asks again at the next apply.
pub(crate) async fn run(
    raft: Raft<TypeConfig>,
    mut record_bytes: watch::Receiver<u64>,
    threshold: u64,
) {
    // The replay at start counts too: a long log left by the previous run is snapshotted now.
    record_bytes.mark_changed();
    while record_bytes.changed().await.is_ok() {
        let since_snapshot = *record_bytes.borrow_and_update();
        if since_snapshot < threshold {
            continue;
        }
        tracing::debug!(
            since_snapshot,
            threshold,
            "metadata record bytes since the last snapshot reached the threshold"
        );
        if raft.trigger().snapshot().await.is_err() {
            return; // raft stopped
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::*;
    use crate::command::{FenceReason, PartitionAssignment};

    fn with_partitions(counts: &[i32]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for (i, &n) in counts.iter().enumerate() {
            let cmd = Command::CreateTopic {
                name: format!("t{i}"),
                topic_id: Uuid::from_u128(i as u128 + 1),
                partitions: (0..n)
                    .map(|partition| PartitionAssignment {
                        partition,
                        replicas: vec![1],
                        leader: 1,
                    })
                    .collect(),
                configs: BTreeMap::new(),
            };
            crate::apply::apply(&mut image, &cmd, i as u64 + 1).expect("created");
        }
        image
    }

    #[test]
    fn a_broker_wide_change_counts_a_record_per_partition_of_the_image() {
        let image = with_partitions(&[3, 7]);
        let fence = EntryPayload::Normal(Command::FenceBroker {
            broker_id: 1,
            broker_epoch: 1,
            reason: FenceReason::ControlledShutdown,
        });
        assert_eq!(
            record_bytes(&image, &fence),
            RECORD_BYTES + 10 * PARTITION_RECORD_BYTES
        );
        let config = EntryPayload::Normal(Command::SetClusterId {
            cluster_id: "c".into(),
        });
        assert_eq!(record_bytes(&image, &config), RECORD_BYTES);
        assert_eq!(record_bytes(&image, &EntryPayload::Blank), RECORD_BYTES);
    }
}
