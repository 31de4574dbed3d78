//! Property: however transactional batches and markers of a few producers interleave,
//! and wherever the log rolls, snapshots or crashes, reopening (from the snapshot, or by
//! a full scan) and replicating to a follower give the same aborted transactions, open
//! transactions and `.txnindex` contents as the live log, and those match a simple model.

mod common;

use std::collections::BTreeMap;

use brook_storage::testing::{encode_batch, TestBatch};
use brook_storage::{AbortedTxn, ControlType, Log, LogConfig};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy)]
enum Op {
    Data { pid: i64, records: usize },
    Marker { pid: i64, abort: bool },
    Plain,
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i64..3, 1usize..4).prop_map(|(pid, records)| Op::Data { pid, records }),
        3 => (0i64..3, any::<bool>()).prop_map(|(pid, abort)| Op::Marker { pid, abort }),
        1 => Just(Op::Plain),
        1 => Just(Op::Snapshot),
    ]
}

type State = (Vec<AbortedTxn>, Vec<(i64, i64)>, Option<i64>);

fn state(log: &Log) -> State {
    (
        log.aborted_transactions(0, i64::MAX),
        log.ongoing_transactions()
            .iter()
            .map(|t| (t.producer_id, t.first_offset))
            .collect(),
        log.first_unstable_offset(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn reopen_and_replication_agree_with_the_live_transaction_state(
        ops in prop::collection::vec(op(), 1..40),
        segment_bytes in 250u64..900,
    ) {
        let (dir, replica) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
        let config = LogConfig { segment_bytes, ..common::small_config() };
        let mut log = Log::open(dir.path(), config.clone(), 0).expect("open");
        // Model: pid -> (first offset of its open transaction), and the aborted list.
        let mut open: BTreeMap<i64, i64> = BTreeMap::new();
        let mut aborted: Vec<(i64, i64, i64)> = Vec::new();
        let mut seqs = [0i32; 3];
        let mut point = 0;
        for op in ops {
            match op {
                Op::Data { pid, records } => {
                    let seq = seqs[pid as usize];
                    seqs[pid as usize] += records as i32;
                    let mut bytes = encode_batch(
                        &TestBatch::sized(0, records, 20).transactional(pid, 0, seq),
                    );
                    let info = log.append(&mut bytes, 0, 0).expect("append data");
                    open.entry(pid).or_insert(info.base_offset);
                }
                Op::Marker { pid, abort } => {
                    let kind = if abort { ControlType::Abort } else { ControlType::Commit };
                    let mut bytes = encode_batch(&TestBatch::marker(pid, 0, kind, 0));
                    let info = log.append(&mut bytes, 0, 0).expect("append marker");
                    if let Some(first) = open.remove(&pid) {
                        if abort {
                            aborted.push((pid, first, info.base_offset));
                        }
                    }
                }
                Op::Plain => {
                    let mut bytes = common::batch(0, 2, 20);
                    log.append(&mut bytes, 0, 0).expect("append plain");
                }
                Op::Snapshot => point = log.flush_for_shutdown(0).expect("snapshot"),
            }
        }
        let live = state(&log);
        let model_aborted: Vec<(i64, i64, i64)> = live
            .0
            .iter()
            .map(|a| (a.producer_id, a.first_offset, a.last_offset))
            .collect();
        prop_assert_eq!(model_aborted, aborted);
        let mut model_open: Vec<(i64, i64)> = open.iter().map(|(p, f)| (*p, *f)).collect();
        model_open.sort_by_key(|(_, first)| *first);
        prop_assert_eq!(&live.1, &model_open);
        prop_assert_eq!(live.2, model_open.first().map(|(_, f)| *f));

        // A follower fed the leader's bytes.
        let mut follower = Log::open(replica.path(), config.clone(), 0).expect("open follower");
        follower.append_as_follower(&common::read_all(&log), 0).expect("replicate");
        prop_assert_eq!(&state(&follower), &live);

        // A crash (no flush) reopened from the last snapshot, then a full scan.
        drop(log);
        let reopened = Log::open_with_recovery_point(dir.path(), config.clone(), 0, point)
            .expect("reopen from snapshot");
        prop_assert_eq!(&state(&reopened), &live);
        drop(reopened);
        let scanned = Log::open(dir.path(), config, 0).expect("reopen fully");
        prop_assert_eq!(&state(&scanned), &live);
    }
}
