//! Coordinators: producer ids, classic consumer groups and transactions.

pub mod group;
pub mod group_metrics;
pub mod producer_id;
pub mod txn;
