//! Coordinators: producer ids and classic consumer groups; transactions come next.

pub mod group;
pub mod group_metrics;
pub mod producer_id;
