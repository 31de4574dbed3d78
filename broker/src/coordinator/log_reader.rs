//! Reading a coordinator partition's log back, record by record, from an offset to the
//! log end as it was when reading began: what a coordinator replays when it loads a
//! partition (Kafka's `CoordinatorLoader`). Each step reads about 1 MiB of batches
//! (at least one whole batch) and decodes them; records before the start offset (the
//! head of a batch that straddles it) are skipped.

use brook_protocol::kafka_protocol::records::{Record, RecordBatchDecoder};
use brook_storage::log::MinOneBatch;
use brook_storage::LogHandle;

use crate::error::BrokerError;

/// How much of a partition one read returns.
const READ_BYTES: usize = 1 << 20;

/// A position in a log being replayed.
pub struct LogCursor<'a> {
    log: &'a LogHandle,
    next: i64,
    end: i64,
}

impl<'a> LogCursor<'a> {
    /// Reads `log` from `from` (at least its log start) to its current log end.
    pub fn new(log: &'a LogHandle, from: i64) -> Self {
        LogCursor {
            log,
            next: from.max(log.log_start_offset()),
            end: log.log_end_offset(),
        }
    }

    /// The offset the next chunk starts at (one past the last record returned).
    pub fn next_offset(&self) -> i64 {
        self.next
    }

    /// The next records (control records included, in offset order), or `None` at the
    /// end. An unreadable batch fails the read: the caller's load fails and is retried.
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<Record>>, BrokerError> {
        if self.next >= self.end {
            return Ok(None);
        }
        let read = self
            .log
            .read(self.next, READ_BYTES, self.end, MinOneBatch::Yes)
            .await?;
        let mut bytes = read.records;
        if bytes.is_empty() {
            return Ok(None);
        }
        let sets = RecordBatchDecoder::decode_all(&mut bytes).map_err(|e| {
            BrokerError::ServerFault(format!(
                "{}-{} unreadable: {e}",
                self.log.topic(),
                self.log.partition()
            ))
        })?;
        let mut last = self.next - 1;
        let mut records = Vec::new();
        for record in sets.into_iter().flat_map(|s| s.records) {
            last = last.max(record.offset);
            if record.offset >= self.next {
                records.push(record);
            }
        }
        if last < self.next {
            // Nothing past the position (a log that ends in a gap): stop, as a read
            // that made no progress would loop forever.
            self.end = self.next;
            return Ok(None);
        }
        self.next = last + 1;
        Ok(Some(records))
    }
}
