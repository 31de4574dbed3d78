//! Reacts to failed log directories (Kafka's `ReplicaManager.handleLogDirFailure`).
//!
//! Storage takes a directory offline on its first I/O error (`log_dir_failure`); its
//! partitions then answer KAFKA_STORAGE_ERROR and Metadata lists this broker's replicas
//! of them as offline. What is left is what Kafka does to the process: when every log
//! directory has failed, or the first one, which holds the metadata quorum's log
//! (`__cluster_metadata`, Kafka's `metadata.log.dir` default), the broker halts with exit
//! code 1 and a message naming the directories. It does not shut down cleanly: a clean
//! shutdown flushes and checkpoints, which is what just failed. In a cluster the
//! controller then fences it after `broker.session.timeout.ms` and moves its
//! partitions' leadership to the in-sync replicas. While another directory is left, the
//! broker keeps serving it and reports the failed directory's replicas offline, so the
//! controller moves their leadership at once (Kafka's offline log dirs in the heartbeat).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::error;

use crate::broker::Broker;
use crate::cluster::offline_replicas;

/// Kafka's exit code when all log directories failed (`Exit.halt(1)`).
const HALT_CODE: i32 = 1;

/// Why the broker must halt now, if it must.
fn halt_reason(
    log_dirs: &[PathBuf],
    failures: &brook_storage::log_dir_failure::LogDirFailures,
) -> Option<String> {
    let list = |dirs: &[PathBuf]| {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    if failures.all_offline() {
        return Some(format!(
            "shutdown broker because all log dirs in {} have failed",
            list(log_dirs)
        ));
    }
    let metadata_dir = log_dirs.first()?;
    failures.failure(metadata_dir).map(|_| {
        format!(
            "shutdown broker because the metadata log dir {} has failed",
            metadata_dir.display()
        )
    })
}

/// Pause before reporting offline replicas again after a failed proposal.
const REPORT_RETRY: Duration = Duration::from_millis(500);

/// Watches the log directories until `shutdown`; halts the process when it must, and
/// otherwise reports the replicas of failed directories to the controller
/// (`cluster::offline_replicas`) until the current registration lists them all.
pub async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    let failures = broker.replicas.log_dir_failures();
    let mut changed = failures.subscribe();
    let mut images = broker.quorum.subscribe();
    loop {
        if let Some(reason) = halt_reason(&broker.config.log_dirs, &failures) {
            let failed: Vec<String> = failures
                .offline_dirs()
                .into_iter()
                .map(|(dir, why)| format!("{}: {why}", dir.display()))
                .collect();
            error!(failed = ?failed, "{reason}");
            std::process::exit(HALT_CODE);
        }
        let reported = offline_replicas::report(&broker).await;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            c = changed.changed() => if c.is_err() { return },
            // A new registration (or topic) may lack what was reported: check again.
            c = images.changed() => if c.is_err() { return },
            _ = tokio::time::sleep(REPORT_RETRY), if !reported => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_storage::error::StorageError;
    use brook_storage::log_dir_failure::LogDirFailures;
    use std::path::Path;

    fn eio() -> StorageError {
        StorageError::Io {
            context: "fsync segment",
            path: PathBuf::new(),
            source: std::io::Error::from_raw_os_error(5),
        }
    }

    #[test]
    fn the_broker_halts_when_every_dir_or_the_metadata_dir_has_failed() {
        let dirs = vec![PathBuf::from("/m"), PathBuf::from("/d")];
        let failures = LogDirFailures::new(&dirs);
        assert_eq!(halt_reason(&dirs, &failures), None);
        failures.fail_on(Path::new("/d"), &eio());
        assert_eq!(halt_reason(&dirs, &failures), None, "the other dir serves");
        failures.fail_on(Path::new("/m"), &eio());
        assert_eq!(
            halt_reason(&dirs, &failures).as_deref(),
            Some("shutdown broker because all log dirs in /m,/d have failed")
        );
        let failures = LogDirFailures::new(&dirs);
        failures.fail_on(Path::new("/m"), &eio());
        assert_eq!(
            halt_reason(&dirs, &failures).as_deref(),
            Some("shutdown broker because the metadata log dir /m has failed")
        );
    }
}
