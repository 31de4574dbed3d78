//! The start-up replay of a `__consumer_offsets` log into the offset store (before the
//! coordinator serves a partition: at start and when it becomes the partition's leader):
//! read from the applied position + 1 to the log end and apply, so a crash between
//! append and apply loses nothing. Re-applying is harmless (puts and deletes of whole
//! keys, in log order).
//!
//! Transactional batches (TxnOffsetCommit) are buffered per producer id and applied when
//! a COMMIT control record of that producer follows, dropped at an ABORT one (Kafka's
//! `replayEndTransactionMarker`); those still open at the log end are handed back as
//! pending. The applied position stored never passes the first record of a transaction
//! still open (`TxnOffsets::position`), so the next replay starts early enough to see
//! all of them.

use std::collections::BTreeMap;
use std::slice;

use brook_protocol::kafka_protocol::records::Record;
use brook_storage::offsets::{OffsetRecord, OffsetStore};
use brook_storage::LogHandle;
use tracing::{info, warn};

use super::records;
use super::txn_offsets::{OpenTxn, TxnOffsets};
use crate::coordinator::log_reader::LogCursor;
use crate::error::BrokerError;

/// What replaying one `__consumer_offsets` log found.
#[derive(Debug, Default)]
pub struct Replayed {
    /// How many records were applied to the store.
    pub applied: u64,
    /// Transactions still open at the log end (no marker yet), by producer id.
    pub open: BTreeMap<i64, OpenTxn>,
    /// The last log offset processed, if any.
    pub processed: Option<i64>,
}

/// A control record's key: `i16` version, `i16` type (0 ABORT, 1 COMMIT). `Some(true)`
/// for COMMIT, `Some(false)` for ABORT, `None` for anything else.
pub(super) fn marker_is_commit(key: Option<&[u8]>) -> Option<bool> {
    match key?.get(2..4)? {
        [0, 0] => Some(false),
        [0, 1] => Some(true),
        _ => None,
    }
}

/// Applies to `store` every record of `log` (a `__consumer_offsets` partition) past the
/// store's applied position, completing or dropping transactional commits at their
/// markers; returns what it applied and the transactions left open.
pub async fn replay(store: &OffsetStore, log: &LogHandle) -> Result<Replayed, BrokerError> {
    let (mut replay, from) = StoreReplay::start(store, log).await?;
    let mut cursor = LogCursor::new(log, from);
    while let Some(records) = cursor.next_chunk().await? {
        replay.apply(store, records, cursor.next_offset()).await?;
    }
    Ok(replay.finish())
}

/// One partition's replay into the store, chunk by chunk (the start-up replay above, and
/// the coordinator runtime's load of a partition this broker starts leading).
pub(super) struct StoreReplay {
    partition: i32,
    txns: TxnOffsets,
    total: u64,
    /// The offset after the last record processed.
    next: i64,
}

impl StoreReplay {
    /// The replay of `log` and the offset it starts at: one past the store's applied
    /// position of the partition.
    pub(super) async fn start(
        store: &OffsetStore,
        log: &LogHandle,
    ) -> Result<(StoreReplay, i64), BrokerError> {
        let partition = log.partition();
        let applied = store
            .run_blocking(move |s| s.applied_position_of(partition))
            .await?;
        let log_end = log.log_end_offset();
        let from = match applied {
            // The store saw records the log no longer has (the log was truncated or
            // recreated): start over from the log's beginning.
            Some(p) if p >= log_end => {
                warn!(
                    partition,
                    applied = p,
                    log_end,
                    "offsets store ahead of its log; replaying all"
                );
                log.log_start_offset()
            }
            Some(p) => p + 1,
            None => log.log_start_offset(),
        };
        let replay = StoreReplay {
            partition,
            txns: TxnOffsets::default(),
            total: 0,
            next: from.max(log.log_start_offset()),
        };
        Ok((replay, from))
    }

    /// Applies `records` (in offset order; `next`: the offset after them) to `store`.
    pub(super) async fn apply(
        &mut self,
        store: &OffsetStore,
        records: Vec<Record>,
        next: i64,
    ) -> Result<(), BrokerError> {
        let partition = self.partition;
        let txns = &mut self.txns;
        let mut changes = Vec::new();
        for record in records {
            if record.control {
                match marker_is_commit(record.key.as_deref()) {
                    Some(commit) => {
                        let done = txns.complete(partition, record.producer_id, commit);
                        changes.extend(done.into_iter().map(|((group, topic, p), offset)| {
                            OffsetRecord::Commit {
                                group,
                                topic,
                                partition: p,
                                offset,
                            }
                        }));
                    }
                    None => {
                        warn!(
                            partition,
                            offset = record.offset,
                            "skipping unknown control record"
                        )
                    }
                }
                continue;
            }
            let Some(key) = record.key.as_deref() else {
                continue;
            };
            match records::decode(key, record.value.as_deref()) {
                Ok(Some(change @ OffsetRecord::Commit { .. }))
                    if record.transactional && record.producer_id >= 0 =>
                {
                    txns.add(
                        partition,
                        record.producer_id,
                        record.producer_epoch,
                        record.offset,
                        slice::from_ref(&change),
                    );
                }
                Ok(Some(change)) => {
                    txns.observe_plain(partition, slice::from_ref(&change), record.offset);
                    changes.push(change);
                }
                Ok(None) => {}
                Err(e) => {
                    warn!(partition, offset = record.offset, error = %e, "skipping unreadable offsets record")
                }
            }
        }
        let last = next - 1;
        txns.processed(partition, last);
        let position = txns.position(partition).unwrap_or(last);
        self.total += changes.len() as u64;
        self.next = next;
        store
            .run_blocking(move |s| s.apply(partition, &changes, position))
            .await?;
        Ok(())
    }

    /// What the replay found: the transactions still open, the last offset processed.
    pub(super) fn finish(mut self) -> Replayed {
        let partition = self.partition;
        let open = self.txns.take_partition(partition);
        if self.total > 0 || !open.is_empty() {
            info!(
                partition,
                records = self.total,
                open_transactions = open.len(),
                "offsets log tail replayed into the store"
            );
        }
        let next = self.next;
        Replayed {
            applied: self.total,
            open,
            processed: (next > 0).then(|| next - 1),
        }
    }
}
