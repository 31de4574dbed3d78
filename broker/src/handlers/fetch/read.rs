//! The reads of a fetch pass: each partition checked and planned (`plan`, memory only),
//! then read without the partition locks — on the runtime while the bytes are in the page
//! cache (`preadv2(RWF_NOWAIT)`, which fails instead of waiting for the disk), and from
//! the first partition that is not, the rest in one blocking-pool hop. Only batch headers
//! are read: a record set of 4 KiB or more stays in its segment files and is sent with
//! `sendfile` (zero-copy, issue #13; `server::write`), a placeholder of its length
//! standing for it in the encoded response. Such a record set may end inside a batch, as
//! Kafka's do. `brook.fetch.zero.copy=false` reads record sets into memory instead. The
//! per-partition reads share the response's byte budget; the first partition with data
//! may exceed it by one batch so consumers always progress (Kafka's `minOneMessage`).

use brook_protocol::chunked::placeholder;
use brook_protocol::kafka_protocol::messages::fetch_response::PartitionData;
use brook_protocol::kafka_protocol::ResponseError;
use brook_storage::{FetchedRecords, FileRecords, MinOneBatch, PlannedRead};

use super::leader_throttle::LeaderThrottle;
use super::plan::{prepare, Prepared};
use super::{Replica, Wanted};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::metrics;
use crate::partition::delayed::Watch;

/// One partition's read: its data, the record set left in its files if any (then the
/// data's `records` is its placeholder), and its append watch.
type PartitionRead = (usize, PartitionData, Option<FileRecords>, Option<Watch>);

/// Reads the partitions `indexes` of `wanted` (in order), sharing `budget` bytes; the first
/// with data may exceed it by one batch unless `had_data` (data already gathered). Checks
/// and plans each partition here (memory only), then reads them in order: on this thread
/// while their bytes are in the page cache (zero-copy path only: batch headers, or a small
/// record set), and from the first that is not, the rest in one blocking-pool hop. Returns
/// each partition's data with its append watch, subscribed before its read.
pub(super) async fn read_some(
    broker: &Broker,
    wanted: &[Wanted],
    indexes: &[usize],
    budget: usize,
    had_data: bool,
    replica: Replica,
    zero_copy: bool,
) -> Vec<PartitionRead> {
    let throttle = LeaderThrottle::for_fetch(broker, replica);
    // Per prepared partition (same order): whether its bytes count against the throttle.
    let mut throttled = Vec::with_capacity(if throttle.is_some() { indexes.len() } else { 0 });
    let mut prepared = Vec::with_capacity(indexes.len());
    let mut watches = Vec::with_capacity(indexes.len());
    // At most how many bytes the reads planned so far can return. Once that covers the
    // budget, later partitions get their offsets only: a plan holds its segment files
    // (reopening those the file pool closed, one blocking-pool hop each), and a fetch of
    // 100,000 partitions planned every one of them to fill a 50 MiB response, holding
    // 20,000 files open until the process ran out of descriptors.
    let mut planned_bytes: u64 = 0;
    let budget_bytes = budget as u64;
    for &i in indexes {
        let Some(w) = wanted.get(i) else { continue };
        // Until a planned read has data, even past the budget: the first partition with
        // data may exceed it by one batch.
        let read = planned_bytes < budget_bytes || (planned_bytes == 0 && !had_data);
        let (mut p, watch) = prepare(broker, w, replica, read).await;
        if let Some(t) = &throttle {
            let class = t.classify(&w.key.topic, w.key.partition);
            if class == Some(true) {
                p = p.without_records();
            }
            throttled.push(class.is_some());
        }
        // Counted after the throttle: a throttled replica's bytes must not take the budget
        // of the in-sync partitions behind it.
        if let Prepared::Read(_, planned) = &p {
            planned_bytes = planned_bytes.saturating_add(planned.bytes_at_most());
        }
        prepared.push((i, p));
        watches.push((i, watch));
    }
    let mut reader = Reader {
        budget,
        any_data: had_data,
        zero_copy,
    };
    let mut datas = Vec::with_capacity(prepared.len());
    let mut pending = prepared.into_iter();
    while let Some((slot, p)) = pending.next() {
        match reader.read_cached(slot, p) {
            Attempt::Answered(data) => datas.push(data),
            Attempt::Uncached(uncached) => {
                let rest: Vec<_> = std::iter::once((slot, uncached)).chain(pending).collect();
                datas.extend(read_blocking(rest, reader, wanted).await);
                break;
            }
        }
    }
    if let Some(t) = &throttle {
        let served: u64 = throttled
            .iter()
            .zip(&datas)
            .filter(|(counted, _)| **counted)
            .map(|(_, (data, files))| match files {
                Some(files) => files.len(),
                None => data.records.as_ref().map_or(0, |r| r.len() as u64),
            })
            .sum();
        t.record(served);
    }
    watches
        .into_iter()
        .zip(datas)
        .map(|((i, watch), (data, files))| (i, data, files, watch))
        .collect()
}

/// Runs `prepared` reads in order in one blocking-pool hop.
async fn read_blocking(
    prepared: Vec<(usize, Prepared)>,
    mut reader: Reader,
    wanted: &[Wanted],
) -> Vec<(PartitionData, Option<FileRecords>)> {
    let slots: Vec<usize> = prepared.iter().map(|(slot, _)| *slot).collect();
    let reads = tokio::task::spawn_blocking(move || {
        prepared
            .into_iter()
            .map(|(slot, p)| reader.read(slot, p))
            .collect::<Vec<_>>()
    });
    match reads.await {
        Ok(datas) => datas,
        Err(e) => {
            tracing::error!(error = %e, "fetch read task failed");
            let code = ResponseError::UnknownServerError.code();
            slots
                .iter()
                .map(|&i| {
                    let data = PartitionData::default()
                        .with_partition_index(wanted.get(i).map_or(-1, |w| w.key.partition))
                        .with_error_code(code);
                    (data, None)
                })
                .collect()
        }
    }
}

/// Runs planned reads in order, sharing the response's byte budget. A read's slot (unique
/// within the response) picks the placeholder of a record set left in its files.
struct Reader {
    budget: usize,
    /// Data already gathered: no later read may exceed the budget (`minOneMessage`).
    any_data: bool,
    zero_copy: bool,
}

/// A read tried from the page cache alone.
enum Attempt {
    Answered((PartitionData, Option<FileRecords>)),
    /// The read given back, for the blocking pool.
    Uncached(Prepared),
}

impl Reader {
    /// The read from the page cache alone, on this (async) thread; given back when a byte
    /// it needs is not cached, or on the copying path.
    fn read_cached(&mut self, slot: usize, p: Prepared) -> Attempt {
        let (base, planned) = match p {
            Prepared::Done(data) => return Attempt::Answered((data, None)),
            Prepared::Read(base, planned) if self.zero_copy => (base, planned),
            uncached => return Attempt::Uncached(uncached),
        };
        let (limit, min_one) = self.bounds(&planned);
        match planned.try_execute_for_send_cached(limit, min_one) {
            Ok(Some(sent)) => match placed(sent, slot) {
                Some(read) => {
                    metrics::record_fetch_read(true);
                    Attempt::Answered(self.answer(base, Ok(read)))
                }
                // Too large for a placeholder: the copying path reads it, which blocks.
                None => Attempt::Uncached(Prepared::Read(base, planned)),
            },
            Ok(None) => Attempt::Uncached(Prepared::Read(base, planned)),
            Err(e) => Attempt::Answered(self.answer(base, Err(e))),
        }
    }

    /// The read, blocking on the disk if need be (blocking threads only).
    fn read(&mut self, slot: usize, p: Prepared) -> (PartitionData, Option<FileRecords>) {
        let (base, planned) = match p {
            Prepared::Done(data) => return (data, None),
            Prepared::Read(base, planned) => (base, planned),
        };
        metrics::record_fetch_read(false);
        let (limit, min_one) = self.bounds(&planned);
        let read = if self.zero_copy {
            planned.execute_for_send(limit, min_one).and_then(|sent| {
                // Too large for a placeholder: read by the copying path instead (which
                // also handles a truncation racing it).
                placed(sent, slot).map_or_else(|| copied(&planned, limit, min_one), Ok)
            })
        } else {
            copied(&planned, limit, min_one)
        };
        self.answer(base, read)
    }

    /// The byte limit of the next read, and whether it may exceed it by one batch.
    fn bounds(&self, planned: &PlannedRead) -> (usize, MinOneBatch) {
        let limit = planned.max_bytes().min(self.budget);
        let min_one = if self.any_data {
            MinOneBatch::No
        } else {
            MinOneBatch::Yes
        };
        (limit, min_one)
    }

    /// The partition's answer to a read, charged to the budget.
    fn answer(
        &mut self,
        base: PartitionData,
        read: brook_storage::Result<ReadRecords>,
    ) -> (PartitionData, Option<FileRecords>) {
        match read {
            Ok((records, files, log_start)) => {
                self.budget = self.budget.saturating_sub(records.len());
                self.any_data |= !records.is_empty();
                let data = base
                    .with_log_start_offset(log_start)
                    .with_records(Some(records));
                (data, files)
            }
            Err(e) => (
                base.with_error_code(BrokerError::from(e).code().code()),
                None,
            ),
        }
    }
}

/// A read as the response's `records` (bytes, or the placeholder of a record set left in
/// its files), those files, and the log start offset.
type ReadRecords = (bytes::Bytes, Option<FileRecords>, i64);

/// The copying read (`brook.fetch.zero.copy=false`, or a record set too large for a
/// placeholder). Blocking file I/O.
fn copied(
    planned: &PlannedRead,
    limit: usize,
    min_one: MinOneBatch,
) -> brook_storage::Result<ReadRecords> {
    planned
        .execute(limit, min_one)
        .map(|read| (read.records, None, read.log_start_offset))
}

/// A zero-copy read's answer: its bytes, or its files behind the placeholder of `slot`;
/// `None` when the record set cannot have a placeholder (over `MAX_PLACEHOLDER_LEN`).
fn placed(sent: (FetchedRecords, i64), slot: usize) -> Option<ReadRecords> {
    match sent {
        (FetchedRecords::Memory(bytes), log_start) => Some((bytes, None, log_start)),
        (FetchedRecords::Files(files), log_start) => {
            let len = usize::try_from(files.len()).unwrap_or(usize::MAX);
            placeholder(slot, len).map(|stand_in| (stand_in, Some(files), log_start))
        }
    }
}
