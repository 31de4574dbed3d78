//! A partition directory as start-up finds it (`Log::open_with_recovery_point`): two
//! segments' `.log`, `.index` and `.timeindex` files, a `.txnindex`, the
//! `leader-epoch-checkpoint` and a producer-state snapshot, all from the input, opened with
//! a recovery point from the input. Start-up either refuses with an error or opens a log
//! whose every batch, read from the log start to the log end, passes its CRC check; closed
//! cleanly and reopened at its log end (a clean restart trusting everything), it is the same.
//!
//! Input: flags (bit 0: recompute batch CRCs), recovery point (i64), the second segment's
//! base offset (u32) and the snapshot's offset (i64), then the nine files as
//! `brook_fuzz::split_parts` parts.
#![no_main]

use std::fs;
use std::path::PathBuf;

use brook_fuzz::{seal_batches, split_parts};
use brook_storage::batch::BatchIter;
use brook_storage::producer_snapshot;
use brook_storage::segment::file_name;
use brook_storage::{Log, LogConfig, MinOneBatch};
use libfuzzer_sys::fuzz_target;

const NOW_MS: i64 = 1_700_000_000_000;

fn dir() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    let root = if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    };
    root.join(format!("brook-fuzz-log-dir-{}", std::process::id()))
        .join("t-0")
}

fn check_reads(log: &Log) {
    let end = log.log_end_offset();
    let mut offset = log.log_start_offset();
    assert!(offset <= end, "log start {offset} past log end {end}");
    for _ in 0..64 {
        if offset >= end {
            return;
        }
        let Ok(read) = log.read(offset, 1 << 20, end, MinOneBatch::Yes) else {
            return;
        };
        let mut next = offset;
        for item in BatchIter::new(&read.records) {
            let (_, header) = item.expect("a served batch passes its CRC check");
            next = next.max(header.next_offset());
        }
        if next <= offset {
            return;
        }
        offset = next;
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<21>() else {
        return;
    };
    let seal = head[0] & 1 == 1;
    let recovery_point = i64::from_be_bytes(head[1..9].try_into().expect("8 bytes"));
    let base1 = i64::from(u32::from_be_bytes(head[9..13].try_into().expect("4 bytes")));
    let snapshot_offset = i64::from_be_bytes(head[13..21].try_into().expect("8 bytes"));
    let parts = split_parts(rest, 9);
    let dir = dir();
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("fuzz dir");
    let files = [
        (file_name(0, "log"), parts[0]),
        (file_name(0, "index"), parts[1]),
        (file_name(0, "timeindex"), parts[2]),
        (file_name(0, "txnindex"), parts[3]),
        (file_name(base1, "log"), parts[4]),
        (file_name(base1, "index"), parts[5]),
        (file_name(base1, "timeindex"), parts[6]),
        ("leader-epoch-checkpoint".to_string(), parts[7]),
    ];
    for (name, bytes) in files {
        let mut bytes = bytes.to_vec();
        if seal && name.ends_with(".log") {
            seal_batches(&mut bytes);
        }
        if !bytes.is_empty() || name.ends_with(".log") {
            fs::write(dir.join(name), bytes).expect("write fuzz file");
        }
    }
    if !parts[8].is_empty() && snapshot_offset >= 0 {
        fs::write(producer_snapshot::path(&dir, snapshot_offset), parts[8]).expect("write");
    }
    let config = LogConfig::default();
    let Ok(log) = Log::open_with_recovery_point(&dir, config.clone(), NOW_MS, recovery_point)
    else {
        return;
    };
    check_reads(&log);
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    if log.close(NOW_MS).is_err() {
        return;
    }
    let again = Log::open_with_recovery_point(&dir, config, NOW_MS, end)
        .expect("a cleanly closed log reopens");
    assert_eq!(again.log_end_offset(), end, "log end after a clean restart");
    assert_eq!(
        again.log_start_offset(),
        start,
        "log start after a clean restart"
    );
    check_reads(&again);
});
