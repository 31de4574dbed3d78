//! The group coordinator's side of a transaction's end: called by the transaction
//! marker writer once a COMMIT or ABORT marker for `producer_id` is appended to
//! `__consumer_offsets` partition `partition`. Placeholder until transactional offset
//! commits (TxnOffsetCommit) are served: there is nothing pending to apply or drop.

use crate::error::BrokerError;

impl super::GroupCoordinator {
    /// Applies (commit) or drops (abort) the offsets `producer_id` committed in its
    /// transaction to groups of `partition`.
    pub async fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        commit: bool,
    ) -> Result<(), BrokerError> {
        let _ = (partition, producer_id, commit);
        Ok(())
    }
}
