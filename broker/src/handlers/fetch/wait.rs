//! The long poll of a fetch (Kafka's `DelayedFetch`): every wanted partition is read
//! once; with fewer than `min_bytes` gathered the fetch waits as a delayed operation on
//! its partitions (`partition::delayed`), and each wake re-reads only the partitions that
//! changed (the others keep what they returned; Kafka's delayed fetch is keyed by
//! partition too), until `min_bytes`, an error, the deadline (answering with what it has)
//! or shutdown. Each partition's watch is subscribed before that partition is read, so an
//! append landing between the read and the wait still wakes it.

use brook_protocol::kafka_protocol::messages::fetch_response::PartitionData;
use brook_storage::FileRecords;
use tokio::time::Instant;

use super::read::read_some;
use super::{Replica, Wanted};
use crate::broker::Broker;
use crate::partition::delayed::{Delayed, Wake};

/// A fetch's bounds: when it must answer, how much it waits for, how much it may return.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub deadline: Instant,
    pub min_bytes: usize,
    pub max_bytes: usize,
}

/// Each wanted partition's answer (`None`: not read) and the record set left in its files
/// (then its `records` is a placeholder), by slot.
pub(super) async fn gather(
    broker: &Broker,
    wanted: &[Wanted],
    replica: Replica,
    limits: Limits,
) -> (Vec<Option<PartitionData>>, Vec<Option<FileRecords>>) {
    let Limits {
        deadline,
        min_bytes,
        max_bytes,
    } = limits;
    let mut slots: Vec<Option<PartitionData>> = vec![None; wanted.len()];
    let mut files: Vec<Option<FileRecords>> = vec![None; wanted.len()];
    let zero_copy = broker.config.fetch_zero_copy;
    let mut delayed = Delayed::new(wanted.len(), deadline, broker.stopping.clone());
    let mut to_read: Vec<usize> = (0..wanted.len()).collect();
    loop {
        let kept = |i: usize| -> usize {
            if to_read.binary_search(&i).is_ok() {
                return 0;
            }
            record_len(slots[i].as_ref())
        };
        let kept_bytes: usize = (0..wanted.len()).map(kept).sum();
        let budget = max_bytes.saturating_sub(kept_bytes);
        let had_data = kept_bytes > 0;
        let reads = read_some(
            broker, wanted, &to_read, budget, had_data, replica, zero_copy,
        )
        .await;
        for (i, data, in_files, watch) in reads {
            slots[i] = Some(data);
            files[i] = in_files;
            delayed.set(i, watch);
        }
        let gathered: usize = slots.iter().map(|d| record_len(d.as_ref())).sum();
        let any_error = slots
            .iter()
            .flatten()
            .any(|d| d.error_code != 0 || d.diverging_epoch.end_offset >= 0);
        let waited_out = Instant::now() >= deadline;
        if answers_now(wanted.len(), gathered, min_bytes, any_error, waited_out) {
            break;
        }
        match delayed.wait().await {
            Wake::Changed(changed) => to_read = changed,
            Wake::TimedOut | Wake::ShuttingDown => break,
        }
    }
    (slots, files)
}

/// Whether a fetch is answered now rather than held for more data: Kafka's rule
/// (`ReplicaManager.fetchMessages`) answers at once when the request does not want to wait
/// (`max_wait_ms` <= 0, here `waited_out` from the start), names no partition to fetch
/// once its session is resolved (the Java consumer closes its fetch session with such a
/// request: epoch -1, no topics; an incremental fetch that lists nothing new still fetches
/// its session's partitions, so it waits), has `min_bytes`, or met an error or a
/// divergence in some partition. (Kafka's other case, a preferred read replica, Brook
/// does not have.) The same rule ends the wait after each wake.
fn answers_now(
    partitions: usize,
    gathered: usize,
    min_bytes: usize,
    any_error: bool,
    waited_out: bool,
) -> bool {
    partitions == 0 || gathered >= min_bytes || any_error || waited_out
}

fn record_len(data: Option<&PartitionData>) -> usize {
    data.and_then(|d| d.records.as_ref()).map_or(0, |r| r.len())
}

#[cfg(test)]
mod tests {
    use super::answers_now;

    #[test]
    fn a_fetch_with_no_partitions_is_answered_at_once() {
        // The Java consumer's session close: nothing to fetch, so nothing to wait for.
        assert!(answers_now(0, 0, 1, false, false));
    }

    #[test]
    fn a_fetch_short_of_min_bytes_waits_until_its_deadline() {
        assert!(!answers_now(1, 0, 1, false, false));
        assert!(!answers_now(3, 99, 100, false, false));
        assert!(answers_now(1, 0, 1, false, true));
    }

    #[test]
    fn min_bytes_an_error_or_a_divergence_end_the_wait() {
        assert!(answers_now(2, 100, 100, false, false));
        assert!(answers_now(1, 0, 0, false, false));
        assert!(answers_now(1, 0, 1, true, false));
    }
}
