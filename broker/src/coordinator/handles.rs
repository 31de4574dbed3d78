//! What the coordinators use of the broker that hosts them: narrow handles (the partition
//! writer, the metadata images, the stopping signal, the peer connections for markers and
//! partition checks, the producer-id allocator, the two coordinators), not `Broker`
//! itself, so the coordinators do not depend on the broker's wiring and can be driven
//! in-process by tests.

use std::sync::Arc;

use brook_raft::{MetadataImage, MetadataQuorum};
use tokio_util::sync::CancellationToken;

use super::group::GroupCoordinator;
use super::producer_id::ProducerIdAllocator;
use super::txn::TxnCoordinator;
use super::writer::PartitionWriter;
use crate::replication::peer_security::PeerSecurity;

/// Borrowed from the host for one operation.
#[derive(Clone, Copy)]
pub struct CoordinatorHandles<'a> {
    pub node_id: i32,
    /// The metadata images (and the quorum producer-id blocks are allocated through).
    pub quorum: &'a MetadataQuorum,
    pub writer: &'a PartitionWriter,
    /// Cancelled when a clean shutdown begins: writes waiting for their commit give up.
    pub stopping: &'a CancellationToken,
    /// How this broker reaches its peers (WriteTxnMarkers, AddPartitionsToTxn).
    pub peers: &'a PeerSecurity,
    pub producer_ids: &'a ProducerIdAllocator,
    pub groups: &'a GroupCoordinator,
    pub txn: &'a TxnCoordinator,
}

impl CoordinatorHandles<'_> {
    /// The current metadata image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.quorum.image()
    }
}

/// The owner of the coordinators' handles, for their background tasks (which outlive any
/// one borrow).
pub trait CoordinatorHost: Send + Sync + 'static {
    fn coordinator_handles(&self) -> CoordinatorHandles<'_>;
}
