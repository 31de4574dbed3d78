//! The transaction coordinator's errors; `crate::error` maps them to Kafka codes.
//! Defined beside the map, so the error module depends on no coordinator type (the
//! coordinator re-exports it from `coordinator::txn`). The last variants are the answers
//! a partition leader gets when it asks a coordinator about a producer's transaction
//! (KIP-890), in-process or over the network.

/// Why a transactional request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("this broker is not the transaction coordinator")]
    NotCoordinator,
    #[error("the transaction coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("the transaction coordinator is loading its state")]
    CoordinatorLoadInProgress,
    #[error("another operation on the transaction is in progress")]
    ConcurrentTransactions,
    /// Answered as INVALID_PRODUCER_EPOCH to requests older than PRODUCER_FENCED.
    #[error("the producer has been fenced by a newer epoch")]
    ProducerFenced,
    #[error("the producer id is not the one of this transactional id")]
    InvalidProducerIdMapping,
    #[error("the transaction is not in a state that allows this")]
    InvalidTxnState,
    #[error("transaction timeout {0} ms is above transaction.max.timeout.ms")]
    InvalidTransactionTimeout(i32),
    #[error("transactional id not found")]
    TransactionalIdNotFound,
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A record too large for the log, or unreadable state: Kafka's UNKNOWN_SERVER_ERROR.
    #[error("transaction log write failed: {0}")]
    Internal(String),
    /// Not tried: another partition of the same request was refused.
    #[error("not attempted: another partition of the request failed")]
    OperationNotAttempted,
    /// The partition is not in the producer's ongoing transaction (TRANSACTION_ABORTABLE).
    #[error("the partition is not in the producer's transaction")]
    NotInTransaction,
    /// What a leader answers for PRODUCER_FENCED to clients of its own API.
    #[error("the producer epoch is not the current one")]
    InvalidProducerEpoch,
    /// The coordinator on another broker could not be reached.
    #[error("the transaction coordinator could not be reached")]
    Unreachable,
    /// The coordinator's broker did not answer within the request timeout.
    #[error("the transaction coordinator timed out")]
    TimedOut,
    /// Another broker's coordinator answered a code this broker's has no variant for.
    #[error("the transaction coordinator answered error code {0}")]
    Remote(i16),
}
