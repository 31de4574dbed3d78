//! Compacted topics refuse records without a key — the one case where the produce path
//! looks inside a batch (Kafka's `LogValidator.validateKey`: "Compacted topic cannot
//! accept message without key"), since the cleaner could never decide which record of a
//! key-less pair is the newer one.
//!
//! Cost: ordinary topics pay only `LogHandle::is_compacted` (an atomic mirroring the
//! log's resolved config); for a compacted topic the batches are decoded with kafka-protocol
//! (CRC check and decompression included) on the blocking pool, since a 1 MB compressed
//! batch is CPU work a runtime worker must not do.
//!
//! The answer mirrors Kafka's ProduceResponse v8+ (KIP-467): `INVALID_RECORD`, one
//! `record_errors` entry per key-less record (its index within its batch) and an
//! `error_message` naming the first three.

use brook_protocol::kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::records::RecordBatchDecoder;
use brook_protocol::kafka_protocol::ResponseError;
use bytes::Bytes;

/// Kafka's `processRecordErrors` shows at most this many record errors in the message.
const ERRORS_IN_MESSAGE: usize = 3;

/// A produce to a compacted topic that holds key-less records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeylessRecords {
    /// Index within its batch of every record without a key.
    pub batch_indexes: Vec<i32>,
    /// Kafka's per-record message.
    pub record_message: String,
}

impl KeylessRecords {
    /// The partition's response, as Kafka fills it for a `RecordValidationException`.
    pub fn response(&self, response: PartitionProduceResponse) -> PartitionProduceResponse {
        let shown: Vec<String> = self
            .batch_indexes
            .iter()
            .take(ERRORS_IN_MESSAGE)
            .map(|i| {
                format!(
                    "RecordError(batchIndex={i}, message='{}')",
                    self.record_message
                )
            })
            .collect();
        let message = format!(
            "One or more records have been rejected due to {} record errors in total, and only \
             showing the first three errors at most: [{}]",
            self.batch_indexes.len(),
            shown.join(", ")
        );
        let record_errors = self
            .batch_indexes
            .iter()
            .map(|i| {
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(*i)
                    .with_batch_index_error_message(Some(StrBytes::from_string(
                        self.record_message.clone(),
                    )))
            })
            .collect();
        response
            .with_error_code(ResponseError::InvalidRecord.code())
            .with_record_errors(record_errors)
            .with_error_message(Some(StrBytes::from_string(message)))
    }
}

/// Checks that every record of `records` has a key. Batches that do not decode are let
/// through: storage's own validation rejects them with the proper corruption error.
pub fn check_keys(records: &Bytes, topic: &str, partition: i32) -> Result<(), KeylessRecords> {
    let mut buf = records.clone();
    let Ok(batches) = RecordBatchDecoder::decode_all(&mut buf) else {
        return Ok(());
    };
    let batch_indexes: Vec<i32> = batches
        .iter()
        .flat_map(|batch| {
            batch
                .records
                .iter()
                .enumerate()
                .filter(|(_, r)| r.key.is_none())
                .map(|(i, _)| i32::try_from(i).unwrap_or(i32::MAX))
        })
        .collect();
    if batch_indexes.is_empty() {
        return Ok(());
    }
    Err(KeylessRecords {
        batch_indexes,
        record_message: format!(
            "Compacted topic cannot accept message without key in topic partition \
             {topic}-{partition}."
        ),
    })
}

/// The produce path's door, for a partition whose log is compacted: `Err` with what the
/// partition's response needs when a record lacks a key. Decoding runs on the blocking
/// pool.
pub async fn reject_keyless(
    topic: &str,
    partition: i32,
    records: &Bytes,
) -> Result<(), KeylessRecords> {
    let (records, name) = (records.clone(), topic.to_string());
    tokio::task::spawn_blocking(move || check_keys(&records, &name, partition))
        .await
        .unwrap_or(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_protocol::kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use bytes::BytesMut;

    fn record(key: Option<&str>, value: Option<&str>) -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: 1_000,
            key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        }
    }

    fn encode(records: &[Record], compression: Compression) -> Bytes {
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, records, &options).expect("encode");
        buf.freeze()
    }

    #[test]
    fn keyed_records_and_tombstones_pass_uncompressed_and_compressed() {
        let records = [record(Some("a"), Some("1")), record(Some("b"), None)];
        for compression in [Compression::None, Compression::Gzip, Compression::Lz4] {
            let batch = encode(&records, compression);
            assert_eq!(check_keys(&batch, "t", 0), Ok(()), "{compression:?}");
        }
    }

    #[test]
    fn a_null_key_is_reported_with_its_index_in_the_batch() {
        let records = [
            record(Some("a"), Some("1")),
            record(None, Some("2")),
            record(Some("c"), Some("3")),
            record(None, Some("4")),
        ];
        for compression in [Compression::None, Compression::Snappy, Compression::Zstd] {
            let batch = encode(&records, compression);
            let err = check_keys(&batch, "logs", 3).expect_err("key-less records");
            assert_eq!(err.batch_indexes, vec![1, 3], "{compression:?}");
            assert_eq!(
                err.record_message,
                "Compacted topic cannot accept message without key in topic partition logs-3."
            );
        }
    }

    #[test]
    fn undecodable_bytes_are_left_to_storage_validation() {
        let garbage = Bytes::from_static(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(check_keys(&garbage, "t", 0), Ok(()));
    }

    #[test]
    fn the_response_carries_invalid_record_record_errors_and_a_message() {
        let err = KeylessRecords {
            batch_indexes: vec![0, 1, 2, 5],
            record_message: "no key".to_string(),
        };
        let response = err.response(PartitionProduceResponse::default().with_index(2));
        assert_eq!(response.index, 2);
        assert_eq!(response.error_code, 87);
        let indexes: Vec<i32> = response
            .record_errors
            .iter()
            .map(|e| e.batch_index)
            .collect();
        assert_eq!(indexes, vec![0, 1, 2, 5]);
        assert_eq!(
            response.record_errors[0]
                .batch_index_error_message
                .as_deref(),
            Some("no key")
        );
        let message = response.error_message.expect("message");
        assert!(message.starts_with("One or more records have been rejected due to 4 record"));
        assert!(message.contains("RecordError(batchIndex=2, message='no key')"));
        assert!(!message.contains("batchIndex=5"));
    }
}
