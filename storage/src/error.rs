//! `StorageError`: the one error type of `brook-storage`.
//!
//! Variants carry data (offsets, sizes, which check failed), never Kafka error codes:
//! the broker maps them to codes in exactly one place (`broker/src/error.rs`).

use std::io;
use std::path::{Path, PathBuf};

use crate::batch::BatchError;

/// Everything a storage operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A batch in an append failed validation (`batch_index` counts from 0 in the request).
    #[error("corrupt record batch #{batch_index}: {reason}")]
    CorruptBatch {
        batch_index: usize,
        #[source]
        reason: BatchError,
    },
    /// One batch is larger than the topic's `max.message.bytes`.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge { size: u64, max: u64 },
    /// The whole append cannot fit in one segment (`segment.bytes`).
    #[error("append of {size} bytes exceeds segment.bytes {segment_bytes}")]
    RecordBatchTooLarge { size: u64, segment_bytes: u64 },
    /// An append with no batches at all.
    #[error("append contains no record batch")]
    EmptyAppend,
    /// A read or lookup outside `[log_start, log_end]`.
    #[error("offset {requested} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        requested: i64,
        log_start: i64,
        log_end: i64,
    },
    /// Idempotent producer sequence gap or reset (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER).
    #[error(
        "out of order sequence for producer {producer_id} epoch {producer_epoch}: \
         last sequence {last_sequence:?}, received first sequence {first_sequence}"
    )]
    OutOfOrderSequence {
        producer_id: i64,
        producer_epoch: i16,
        last_sequence: Option<i32>,
        first_sequence: i32,
    },
    /// A batch from an older producer epoch than the one already seen (fenced producer).
    #[error(
        "producer {producer_id} epoch {received_epoch} is older than current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        producer_id: i64,
        current_epoch: i16,
        received_epoch: i16,
    },
    /// A non-transactional batch from a producer with a transaction open on this
    /// partition (Kafka's INVALID_TXN_STATE from `ProducerAppendInfo.appendDataBatch`).
    #[error("producer {producer_id} wrote a non-transactional batch while its transaction from offset {txn_first_offset} is open")]
    InvalidTxnState {
        producer_id: i64,
        txn_first_offset: i64,
    },
    /// A transaction marker from a coordinator epoch older than the last marker's for the
    /// producer (a zombie coordinator; Kafka's TRANSACTION_COORDINATOR_FENCED).
    #[error("transaction marker for producer {producer_id} from coordinator epoch {received_epoch}, older than {current_epoch}")]
    TransactionCoordinatorFenced {
        producer_id: i64,
        current_epoch: i32,
        received_epoch: i32,
    },
    /// A follower append whose batch would not lie after the log's (or the previous
    /// batch's) last offset: the replica fetched from the wrong place.
    #[error("follower append out of order: batch base offset {got}, expected at least {expected_at_least}")]
    NonMonotonicFollowerAppend { expected_at_least: i64, got: i64 },
    /// A batch already in the log no longer parses (the file changed under us).
    #[error("corrupt log {path} at position {position}: {reason}")]
    CorruptLog {
        path: PathBuf,
        position: u64,
        #[source]
        reason: BatchError,
    },
    /// A topic name that cannot be used as a directory name.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },
    /// The same partition exists in two log directories.
    #[error("partition {topic}-{partition} found in both {first} and {second}")]
    DuplicateLog {
        topic: String,
        partition: i32,
        first: PathBuf,
        second: PathBuf,
    },
    /// The partition's log could not be opened (out of file descriptors, permissions,
    /// corruption recovery could not repair): it stays offline until the next start, as
    /// Kafka takes a failed log directory offline. The first failure is kept.
    #[error("log of {topic}-{partition} is offline: {reason}")]
    LogOffline {
        topic: String,
        partition: i32,
        reason: String,
    },
    /// The log was deleted while a handle to it was still held.
    #[error("log {dir} has been deleted")]
    LogDeleted { dir: PathBuf },
    /// A file-system operation failed.
    #[error("{context} {path}: {source}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A RocksDB operation of the consumer-offset store failed.
    #[cfg(feature = "rocksdb")]
    #[error("offset store {path}: {context}: {source}")]
    OffsetStoreDb {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: rocksdb::Error,
    },
    /// The offset store on disk was written in a format version this build cannot read.
    #[error("offset store {path} has format version {found}, this build reads {supported}")]
    UnsupportedOffsetStoreFormat {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A key or value of the offset store does not decode (corruption, a foreign writer) or
    /// cannot be encoded (a name longer than 4 GiB).
    #[error("offset store {path}: {reason}")]
    OffsetStoreCodec { path: PathBuf, reason: String },
    /// The blocking task running a storage operation panicked or was cancelled.
    #[error("storage task failed: {reason}")]
    TaskFailed { reason: String },
    /// A read limited to the page cache ([`crate::file_records::ReadWait::CachedOnly`])
    /// met bytes that are not there; blocking reads never return it. The caller retries
    /// on a blocking thread.
    #[error("the bytes to read are not in the page cache")]
    NotCached,
}

/// Shorthand for `Result<T, StorageError>`.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Builds a `map_err` closure that wraps an `io::Error` with what was being done and where.
/// The path is copied only when there is an error: appends and reads call this on every
/// operation.
pub(crate) fn io_err<'a>(
    context: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> StorageError + 'a {
    move |source| StorageError::Io {
        context,
        path: path.to_path_buf(),
        source,
    }
}
