//! The Brook broker: every Kafka semantic lives here, on top of the wire codec
//! (`brook-protocol`), the partition logs (`brook-storage`) and the metadata quorum
//! (`brook-raft`).

/// The process allocator, beside the codec whose array reservations it absorbs.
pub use brook_protocol::alloc;
pub mod auth;
pub mod broker;
pub mod cluster;
pub mod config;
pub mod coordinator;
pub mod error;
pub mod format;
pub mod handlers;
pub mod logging;
pub mod metadata;
pub mod metrics;
pub mod partition;
pub mod quota;
pub mod replication;
pub mod server;
