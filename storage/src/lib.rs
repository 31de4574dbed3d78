//! Brook's storage: Kafka partition logs on local disk, and (`offsets`, with the default
//! `rocksdb` feature) the RocksDB consumer-offset store.
//!
//! The core (`log`, `segment`, `index`, `producer_state`, `batch`) is synchronous like
//! Kafka's `LocalLog`; `handle::LogHandle` is the only async door. No network, no
//! `kafka-protocol`: errors carry data and the broker maps them to Kafka codes. The
//! on-disk layout is documented in `storage/FORMAT.md`.

pub mod batch;
pub mod checkpoint;
pub mod clean_shutdown;
pub mod cleaner;
pub mod config;
pub mod control;
pub mod error;
pub mod file_pool;
pub mod file_records;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod handle;
pub mod index;
pub mod log;
pub mod log_dir_failure;
pub mod log_manager;
#[cfg(feature = "rocksdb")]
pub mod offsets;
pub mod producer_snapshot;
pub mod producer_state;
mod records;
mod recovery;
pub mod retention;
pub mod roll;
pub mod segment;
mod start_state;
pub mod testing;
pub mod txn_index;
mod write_fault;

pub use batch::{BatchError, BatchHeader, TimestampType};
pub use cleaner::CleanOutcome;
pub use config::LogConfig;
pub use control::{ControlType, EndTxnMarker};
pub use error::{Result, StorageError};
pub use file_records::{FetchedRecords, FileRange, FileRecords, ReadWait};
pub use handle::{LogHandle, PlannedRead, ShutdownClose};
pub use log::{
    AppendInfo, FollowerAppend, LeaderEpochCache, LoadStats, Log, MinOneBatch, RangesRead,
    ReadPlan, ReadResult, RetentionOutcome, TimestampOffset,
};
pub use log_manager::LogManager;
pub use producer_state::{ActiveProducer, CompletedTxn};
pub use txn_index::{AbortedTxn, OngoingTxn};
