//! The retention task (Kafka's `LogManager.cleanupLogs`, scheduled every
//! `log.retention.check.interval.ms`): one pass over every open log deletes the segments
//! that `retention.ms`, `retention.bytes` or the log start offset condemn, unlinks
//! `.deleted` files whose `file.delete.delay.ms` is over, and persists moved log start
//! offsets in the checkpoint file.
//!
//! Each pass reads the logs' current configs (the metadata follower pushes topic config
//! changes into them with `LogHandle::set_config`) and the interval from the effective
//! broker config, so both apply live. The task is owned by the caller's `TaskTracker`
//! and stops at the `CancellationToken`; a pass in progress finishes first (its file work
//! runs on blocking threads and is not cancel-safe midway).

use std::sync::Arc;
use std::time::Duration;

use brook_storage::log_manager::now_ms;
use tokio_util::sync::CancellationToken;
use tracing::{error, info_span, warn, Instrument};

use crate::broker::Broker;
use crate::partition::ReplicaManager;

/// What one pass did, for logs and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassSummary {
    pub logs_checked: usize,
    pub segments_deleted: usize,
    pub log_starts_moved: usize,
}

/// Runs retention passes until `shutdown` is cancelled.
pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    loop {
        let interval_ms = broker
            .effective_config()
            .log_retention_check_interval_ms
            .max(1);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(interval_ms)) => {}
        }
        run_pass(&broker.replicas)
            .instrument(info_span!("retention"))
            .await;
    }
}

/// One pass over every open log.
pub async fn run_pass(replicas: &ReplicaManager) -> PassSummary {
    let mut summary = PassSummary::default();
    for log in replicas.logs() {
        summary.logs_checked += 1;
        let before = log.log_start_offset();
        match log.enforce_retention(now_ms()).await {
            Ok(outcome) => {
                summary.segments_deleted += outcome.segments_deleted;
                if outcome.log_start_offset != before {
                    summary.log_starts_moved += 1;
                }
            }
            // A log deleted since the listing is not an error.
            Err(brook_storage::StorageError::LogDeleted { .. }) => {}
            Err(e) => error!(
                topic = log.topic(),
                partition = log.partition(),
                error = %e,
                "retention failed"
            ),
        }
    }
    if summary.log_starts_moved > 0 {
        if let Err(e) = replicas.checkpoint_log_start_offsets().await {
            warn!(error = %e, "persisting log start offsets failed");
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use brook_storage::testing::{encode_batch, TestBatch};
    use brook_storage::{LogConfig, LogManager};
    use bytes::BytesMut;

    use super::*;

    #[tokio::test]
    async fn a_pass_deletes_expired_segments_and_checkpoints_the_new_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            segment_bytes: 1_000,
            segment_ms: None,
            retention_ms: Some(60_000),
            file_delete_delay_ms: 0,
            ..LogConfig::default()
        };
        let manager =
            LogManager::open(&[dir.path().to_path_buf()], config.clone()).expect("open logs");
        let log = manager.get_or_create("t", 0, config).expect("create");
        let replicas = ReplicaManager::new(
            manager,
            1,
            tokio::sync::watch::channel(std::sync::Arc::default()).1,
        );
        let now = now_ms();
        // Four ~420-byte batches, two per segment: the first two an hour old.
        for ts in [now - 3_600_000, now - 3_600_000, now, now] {
            let batch = encode_batch(&TestBatch::sized(ts, 4, 80));
            log.append(BytesMut::from(&batch[..]), 0, now)
                .await
                .expect("append");
        }
        let summary = run_pass(&replicas).await;
        assert_eq!(
            summary,
            PassSummary {
                logs_checked: 1,
                segments_deleted: 1,
                log_starts_moved: 1
            }
        );
        assert_eq!(log.log_start_offset(), 8);
        let checkpoint = std::fs::read_to_string(dir.path().join("log-start-offset-checkpoint"))
            .expect("checkpoint written");
        assert_eq!(checkpoint, "0\n1\nt 0 8\n");
        // Nothing else is due: a second pass changes nothing.
        assert_eq!(run_pass(&replicas).await.segments_deleted, 0);
    }
}
