//! Partition replication, Kafka's ISR protocol (`../shared/research/replication.md`):
//!
//! - followers pull from leaders with Kafka's own Fetch (`fetcher`, over `client`), with
//!   their replica id and broker epoch, `last_fetched_epoch` for divergence detection, and
//!   append the leader's batches as they are;
//! - the leader tracks each follower's log end offset from its fetches (`leader`), moves
//!   the high watermark to the smallest LEO of the maximal ISR (the committed one plus the
//!   followers an ISR change in flight adds: `isr_state`), and answers acks=all produces
//!   once the high watermark covers them (`acks`);
//! - the ISR changes only through the metadata quorum, as a compare-and-set on the
//!   partition epoch (`isr`, Kafka's AlterPartition): a leader cut off from the quorum
//!   cannot shrink the ISR to itself and acknowledge alone.

pub mod acks;
pub mod client;
pub mod fetcher;
pub mod isr;
pub mod isr_state;
pub mod leader;
pub mod peer_sasl;
pub mod peer_security;
pub mod rebalance;
pub mod throttle;
