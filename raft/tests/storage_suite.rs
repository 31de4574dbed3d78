//! Runs openraft's storage `Suite` (log store + state machine conformance) against the
//! RocksDB log store and the snapshotting state machine, each build in a fresh temp dir.

use brook_raft::log_store::LogStore;
use brook_raft::state_machine::StateMachineStore;
use brook_raft::TypeConfig;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{StorageError, StorageIOError};
use tempfile::TempDir;

struct RocksBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for RocksBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), StorageError<u64>> {
        let dir = tempfile::tempdir().map_err(|e| StorageIOError::write(&e))?;
        let log = LogStore::open_async(dir.path().join("raft-log")).await?;
        let sm = StateMachineStore::open(dir.path().join("metadata-snapshot")).await?;
        Ok((dir, log, sm))
    }
}

#[test]
fn the_rocksdb_log_store_and_state_machine_pass_the_openraft_suite() -> anyhow::Result<()> {
    Suite::test_all(RocksBuilder)?;
    Ok(())
}
