//! Coordinators: producer ids, classic and KIP-848 consumer groups, transactions.
//!
//! The group and transaction coordinators keep their state in partitions of their own
//! topics and share the machinery Kafka's coordinator-common gives its coordinators:
//! they write through the `writer` (append as leader, wait for the high watermark), load a
//! partition's state on the `runtime` when this broker starts leading it (replaying its
//! log with `log_reader`) and unload it when it stops, and reach the rest of the broker
//! only through `handles`.

pub mod consumer_group;
pub mod group;
pub mod group_metrics;
pub mod handles;
pub mod log_reader;
pub mod producer_id;
pub mod runtime;
pub mod txn;
pub mod writer;

/// The coordinators' writes (offset commits, transaction log records, markers): `records`
/// as one uncompressed v2 batch, base offset 0 (the log stamps the real one).
pub fn encode_uncompressed_batch(
    records: &[brook_protocol::kafka_protocol::records::Record],
) -> Result<bytes::BytesMut, String> {
    use brook_protocol::kafka_protocol::records::{
        Compression, RecordBatchEncoder, RecordEncodeOptions,
    };
    let mut buf = bytes::BytesMut::with_capacity(64 * records.len().max(1));
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records, &options).map_err(|e| e.to_string())?;
    Ok(buf)
}
