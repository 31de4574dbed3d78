//! The log cleaner task (Kafka's `LogCleaner` with one thread): repeatedly picks the
//! dirtiest compacted log that is due (`min.cleanable.dirty.ratio` reached,
//! `max.compaction.lag.ms` exceeded, or a tombstone delete horizon passed) and runs one
//! compaction pass on it; when none is due it sleeps `log.cleaner.backoff.ms`.
//!
//! Logs carry their live topic config (`cleanup.policy` changes reach them through
//! `LogHandle::set_config`), so a topic switched to `compact` is picked up by the next
//! pass. Gated on `log.cleaner.enable` (read at start, as Kafka). Owned by the caller's
//! `TaskTracker`, stopped by the `CancellationToken`; a pass in progress finishes first
//! (it runs on a blocking thread, holding the partition lock only to capture its inputs
//! and to swap its result in, and is not cancel-safe). Each pass is logged once at INFO
//! and counted in `brook_log_cleaner_*` metrics; a pass abandoned because the log
//! changed underneath it (storage logs why) is retried after the backoff.

use std::sync::Arc;
use std::time::{Duration, Instant};

use brook_storage::log_manager::now_ms;
use brook_storage::{CleanOutcome, LogHandle, StorageError};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, info_span, Instrument};

use crate::broker::Broker;
use crate::partition::ReplicaManager;

/// Runs the cleaner until `shutdown` is cancelled (returns at once if disabled).
pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    if !broker.effective_config().log_cleaner_enable {
        info!("log cleaner disabled (log.cleaner.enable=false)");
        return;
    }
    loop {
        let config = broker.effective_config();
        let budget = usize::try_from(config.log_cleaner_dedupe_buffer_size).unwrap_or(usize::MAX);
        let cleaned = clean_dirtiest(&broker.replicas, budget)
            .instrument(info_span!("log_cleaner"))
            .await;
        let pause = if cleaned.is_some_and(|o| o.cleaned) {
            Duration::ZERO
        } else {
            Duration::from_millis(config.log_cleaner_backoff_ms)
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Cleans the dirtiest due log, if any; returns what it did (`cleaned` false when the
/// pass found nothing to do after all or was abandoned).
pub async fn clean_dirtiest(replicas: &ReplicaManager, budget: usize) -> Option<CleanOutcome> {
    let now = now_ms();
    let mut dirtiest: Option<(f64, LogHandle)> = None;
    for log in replicas.logs() {
        match log.cleaning_priority(now).await {
            Ok(Some(ratio)) if dirtiest.as_ref().is_none_or(|(best, _)| ratio > *best) => {
                dirtiest = Some((ratio, log));
            }
            // A log in a failed directory: that failure was logged once, not once per pass.
            Ok(_) | Err(StorageError::LogDeleted { .. } | StorageError::LogOffline { .. }) => {}
            Err(e) => {
                error!(topic = log.topic(), partition = log.partition(), error = %e, "cleaner planning failed")
            }
        }
    }
    let (ratio, log) = dirtiest?;
    let started = Instant::now();
    match log.clean(now_ms(), budget).await {
        Ok(outcome) if !outcome.cleaned => Some(outcome),
        Ok(outcome) => {
            info!(
                topic = log.topic(),
                partition = log.partition(),
                dirty_ratio = ratio,
                bytes_before = outcome.bytes_before,
                bytes_after = outcome.bytes_after,
                segments_before = outcome.segments_before,
                segments_after = outcome.segments_after,
                records_removed = outcome.records_removed,
                first_dirty_offset = outcome.first_dirty_offset,
                duration_ms = started.elapsed().as_millis() as u64,
                "log cleaned"
            );
            crate::metrics::record_log_cleaned(
                log.topic(),
                outcome.records_removed,
                outcome.bytes_before.saturating_sub(outcome.bytes_after),
                started.elapsed(),
            );
            Some(outcome)
        }
        Err(StorageError::LogDeleted { .. }) => None,
        Err(e) => {
            error!(topic = log.topic(), partition = log.partition(), error = %e, "log cleaning failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use brook_storage::testing::{encode_batch, TestBatch, TestRecord};
    use brook_storage::{LogConfig, LogManager, MinOneBatch};
    use bytes::BytesMut;

    use super::*;

    fn keyed(key: &str, value: Option<&str>, ts: i64) -> BytesMut {
        let mut batch = TestBatch::values(ts, &[]);
        batch.records = vec![TestRecord {
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            timestamp_delta: 0,
        }];
        BytesMut::from(&encode_batch(&batch)[..])
    }

    #[tokio::test]
    async fn the_dirtiest_compacted_log_is_cleaned_and_others_are_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let compact = LogConfig {
            segment_bytes: 300,
            segment_ms: None,
            cleanup_compact: true,
            cleanup_delete: false,
            min_cleanable_dirty_ratio: 0.01,
            file_delete_delay_ms: 0,
            ..LogConfig::default()
        };
        let manager = LogManager::open(&[dir.path().to_path_buf()], compact.clone()).expect("open");
        let log = manager
            .get_or_create("c", 0, compact.clone())
            .expect("create");
        let plain = LogConfig {
            cleanup_compact: false,
            ..compact.clone()
        };
        let other = manager.get_or_create("d", 0, plain).expect("create");
        let replicas = ReplicaManager::new(
            manager,
            1,
            tokio::sync::watch::channel(std::sync::Arc::default()).1,
        );
        let now = now_ms();
        for i in 0..12 {
            let key = format!("k{}", i % 2);
            for l in [&log, &other] {
                l.append(keyed(&key, Some(&format!("v{i}")), now), 0, now)
                    .await
                    .expect("append");
            }
        }
        let outcome = clean_dirtiest(&replicas, 1 << 20)
            .await
            .expect("a log was cleaned");
        assert!(outcome.records_removed > 0);
        assert!(outcome.bytes_after < outcome.bytes_before);
        let read = log
            .read(0, 1 << 20, i64::MAX, MinOneBatch::Yes)
            .await
            .expect("read");
        let other_read = other
            .read(0, 1 << 20, i64::MAX, MinOneBatch::Yes)
            .await
            .expect("read");
        assert!(read.records.len() < other_read.records.len());
        // Nothing is due any more.
        assert_eq!(clean_dirtiest(&replicas, 1 << 20).await, None);
    }
}
