//! The consumer-offset store: committed offsets and group metadata in RocksDB.
//!
//! Kafka keeps these in the compacted `__consumer_offsets` topic and rebuilds an in-memory
//! cache from it on coordinator load; Brook keeps the materialised view directly in a
//! RocksDB instance of its own (separate from the raft crate's), which is what that cache
//! would hold. The broker appends every change to `__consumer_offsets` first and applies it
//! here afterwards ([`OffsetStore::apply`], with a per-partition applied position), so
//! start-up replays the log tail the store has not seen yet.
//!
//! Layout (documented in `storage/FORMAT.md`, "Consumer-offset store"): column family
//! `offsets` maps `(group, topic, partition)` to a versioned [`CommittedOffset`] encoding,
//! with keys built so a group's offsets are one prefix range (see `codec`); `groups` maps a
//! group id to opaque coordinator bytes; `meta` holds `format_version` and one
//! `applied/<partition>` per `__consumer_offsets` partition.
//!
//! Invariants: every mutating call is one `WriteBatch`; all but `apply` are written with
//! `sync = true`, so when they return the change survives a crash (Kafka acknowledges an OffsetCommit only once the
//! commit is durable); a store whose `format_version` is not [`OFFSET_STORE_FORMAT_VERSION`]
//! is refused at open.
//!
//! Thread-safety: [`OffsetStore`] is `Clone + Send + Sync`; clones share the database. All
//! methods block (RocksDB I/O, fsync): call them from a blocking thread, e.g. through
//! [`OffsetStore::run_blocking`]. Owner: the broker's group coordinator.

mod apply;
mod codec;
mod store;

pub use apply::OffsetRecord;
pub use store::{OffsetStore, OFFSET_STORE_FORMAT_VERSION};

/// One committed offset of a (group, topic, partition), as OffsetCommit stores it and
/// OffsetFetch returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record (KIP-320); `-1` when the client sent none.
    pub leader_epoch: i32,
    /// The client's free-form metadata string.
    pub metadata: String,
    /// When the coordinator accepted the commit; `offsets.retention.minutes` counts from it.
    pub commit_timestamp_ms: i64,
}
