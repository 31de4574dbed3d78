//! ListTransactions: the transactional ids this broker coordinates (COORDINATOR_LOAD_IN_PROGRESS
//! while one of its `__transaction_state` partitions is loading), filtered by state
//! names (unknown names are echoed in `unknown_state_filters`), producer ids, v1's
//! minimum running time (`duration_filter`, ms since the transaction started) and v2's
//! transactional id pattern (a Java regular expression; Brook supports the common
//! `prefix.*` / literal forms and matches any other pattern literally).
//!
//! Authorization (Kafka's `handleListTransactionsRequest`): only the transactional ids the
//! session may DESCRIBE are listed; no error for the others.

use brook_protocol::kafka_protocol::messages::list_transactions_response::TransactionState;
use brook_protocol::kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::coordinator::txn::state::TxnState;
use crate::error::BrokerError;
use crate::server::session::Session;

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: ListTransactionsRequest,
    _version: i16,
) -> ListTransactionsResponse {
    let mut unknown = Vec::new();
    let mut states = Vec::new();
    for name in &req.state_filters {
        match TxnState::from_name(name) {
            Some(s) => states.push(s),
            None => unknown.push(name.clone()),
        }
    }
    let now_ms = brook_storage::log_manager::now_ms();
    let all = match broker.txn.list() {
        Ok(all) => all,
        Err(e) => {
            return ListTransactionsResponse::default()
                .with_error_code(BrokerError::from(e).code().code())
                .with_unknown_state_filters(unknown)
        }
    };
    let access = Access::new(broker, session);
    let listed = all
        .into_iter()
        .filter(|t| access.transactional_id(AclOperation::Describe, &t.transactional_id))
        .filter(|t| states.is_empty() || states.contains(&t.state))
        .filter(|t| {
            req.producer_id_filters.is_empty()
                || req.producer_id_filters.contains(&ProducerId(t.producer_id))
        })
        .filter(|t| {
            req.duration_filter < 0
                || (t.start_timestamp_ms >= 0
                    && now_ms - t.start_timestamp_ms >= req.duration_filter)
        })
        .filter(|t| {
            req.transactional_id_pattern
                .as_deref()
                .is_none_or(|p| matches_pattern(p, &t.transactional_id))
        })
        .map(|t| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(t.transactional_id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(StrBytes::from_static_str(t.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(listed)
}

/// `prefix.*` / `.*` and literal patterns; the rest of Java's syntax is matched literally.
fn matches_pattern(pattern: &str, id: &str) -> bool {
    if pattern.is_empty() {
        return true;
    }
    match pattern.strip_suffix(".*") {
        Some(prefix) if !prefix.contains(['.', '*', '[', '(', '+', '?', '|', '\\', '^', '$']) => {
            id.starts_with(prefix)
        }
        _ => pattern == id,
    }
}

#[cfg(test)]
mod tests {
    use super::matches_pattern;

    #[test]
    fn prefix_and_literal_patterns_match_transactional_ids() {
        assert!(matches_pattern("app-.*", "app-1"));
        assert!(!matches_pattern("app-.*", "other"));
        assert!(matches_pattern(".*", "anything"));
        assert!(matches_pattern("exact", "exact"));
        assert!(!matches_pattern("exact", "exact-not"));
    }
}
