//! Coordinators: producer ids today; groups and transactions come next.

pub mod producer_id;
