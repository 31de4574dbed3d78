//! Test fixtures: a `Partition` over a real log in a temporary directory, led by broker 1,
//! so the produce, fetch and waiting paths run in-process without sockets.

use std::sync::Arc;

use brook_storage::testing::{encode_batch, TestBatch};
use brook_storage::{LogConfig, LogManager};
use bytes::Bytes;

use super::replica::{Partition, Role};
use crate::replication::leader::{Assignment, LeaderPartition};

/// A partition with its directory (removed on drop).
pub struct Fixture {
    pub partition: Arc<Partition>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// Partition `t`-0 led by broker 1 at epoch 0 with these replicas and ISR.
    pub fn leader(replicas: &[i32], isr: &[i32], min_isr: i32) -> Self {
        Self::with_config(replicas, isr, min_isr, LogConfig::default())
    }

    pub fn with_config(replicas: &[i32], isr: &[i32], min_isr: i32, config: LogConfig) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = LogManager::open(&[dir.path().to_path_buf()], config.clone()).expect("open");
        let log = logs.get_or_create("t", 0, config).expect("log");
        let partition = Arc::new(Partition::new(
            Arc::from("t"),
            uuid::Uuid::from_u128(1),
            0,
            log.clone(),
        ));
        let state = Arc::new(LeaderPartition::new(
            log,
            0,
            Assignment {
                replicas: replicas.to_vec(),
                isr: isr.to_vec(),
                partition_epoch: 0,
            },
            1,
            min_isr,
            0,
        ));
        partition.set_role_now(Role::Leader(state.clone()));
        state.maybe_advance_high_watermark();
        Fixture {
            partition,
            _dir: dir,
        }
    }

    pub fn leader_state(&self) -> Arc<LeaderPartition> {
        self.partition.leader_state().expect("leads")
    }
}

/// One batch of `count` records of 10 bytes, as a client sends it.
pub fn batch(count: usize) -> Bytes {
    Bytes::from(encode_batch(&TestBatch::sized(0, count, 10)))
}
