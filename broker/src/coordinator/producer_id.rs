//! Producer ids for InitProducerId, unique across the cluster and across restarts.
//!
//! As Kafka's `RPCProducerIdManager` does, each broker takes blocks of
//! [`BLOCK_SIZE`] ids from the controller (`Command::AllocateProducerIds`, committed
//! through the metadata quorum, so no two brokers and no two starts of one broker ever get
//! the same block) and hands them out from memory. A block lost by a crash is simply
//! skipped. Ids of data written before blocks existed were `start_ms << 20` (above 2^60),
//! far beyond any block this counter reaches.

use brook_raft::{Command, MetadataQuorum};

use crate::error::BrokerError;

/// Ids per block (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const BLOCK_SIZE: i64 = 1000;

/// The ids left in this broker's current block: `next..end`.
#[derive(Default)]
pub struct ProducerIdAllocator {
    block: tokio::sync::Mutex<(i64, i64)>,
}

impl ProducerIdAllocator {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next producer id, fetching a new block through the quorum when this one is used
    /// up. The async mutex serialises block fetches; it is held across the proposal on
    /// purpose (one fetch at a time, others wait for its block). Takes the quorum, not the
    /// broker: this is all it needs of it.
    pub async fn allocate(
        &self,
        quorum: &MetadataQuorum,
        broker_id: i32,
    ) -> Result<i64, BrokerError> {
        let mut block = self.block.lock().await;
        if block.0 >= block.1 {
            quorum
                .propose(Command::AllocateProducerIds {
                    broker_id,
                    block_size: BLOCK_SIZE,
                })
                .await?;
            let image = quorum.image();
            let got = image.producer_id_blocks.get(&broker_id).ok_or_else(|| {
                BrokerError::ServerFault("producer id block missing after allocation".into())
            })?;
            *block = (got.first, got.first + got.len);
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }
}
