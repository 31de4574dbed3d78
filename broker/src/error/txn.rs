//! The transaction coordinator's errors; `crate::error` maps them to Kafka codes.

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
}
