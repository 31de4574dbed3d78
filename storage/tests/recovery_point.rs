//! Recovery point tests: what a restart trusts below the recovery point
//! (`recovery-point-offset-checkpoint` plus producer snapshots) and what it still scans.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use brook_storage::checkpoint::RECOVERY_POINT_FILE_NAME;
use brook_storage::segment::file_name;
use brook_storage::testing::{encode_batch, TestBatch};
use brook_storage::{LoadStats, Log, LogConfig, LogManager, StorageError};
use common::{files, read_all};

const PRODUCER: i64 = 9;
const EPOCH: i16 = 1;

/// Small segments, but indexes large enough never to fill (a full index is never
/// trusted, see `Segment::load_trusted`).
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1_000,
        index_interval_bytes: 100,
        segment_index_bytes: 4_096,
        segment_ms: None,
        ..LogConfig::default()
    }
}

/// The idempotent batch with sequence `seq` (2 records each).
fn idempotent(seq: i32) -> Vec<u8> {
    encode_batch(
        &TestBatch::sized(1_000 + i64::from(seq), 2, 40).with_producer(PRODUCER, EPOCH, seq),
    )
}

/// Appends the batches with sequences `seqs` (2 records each); returns the stored bytes.
fn append(log: &mut Log, seqs: std::ops::Range<i32>) -> Vec<Vec<u8>> {
    seqs.map(|seq| {
        let mut b = idempotent(seq * 2);
        log.append(&mut b, 5, 0).expect("append");
        b
    })
    .collect()
}

/// Checks the producer state: a retry of `last_seq`'s batch is a duplicate, the next
/// sequence is accepted, and a gap is refused.
fn assert_producer_continues(log: &mut Log, last_seq: i32) {
    let retry = log
        .append(&mut idempotent(last_seq * 2), 5, 0)
        .expect("retry");
    assert!(retry.duplicate, "a retry of the last batch is a duplicate");
    let gap = log.append(&mut idempotent(last_seq * 2 + 6), 5, 0);
    assert!(matches!(gap, Err(StorageError::OutOfOrderSequence { .. })));
    let next = log
        .append(&mut idempotent(last_seq * 2 + 2), 5, 0)
        .expect("next");
    assert!(!next.duplicate);
}

fn snapshots(dir: &Path) -> Vec<i64> {
    files(dir)
        .iter()
        .filter_map(|f| f.strip_suffix(".snapshot")?.parse().ok())
        .collect()
}

fn segment_bases(dir: &Path) -> Vec<i64> {
    files(dir)
        .iter()
        .filter_map(|f| f.strip_suffix(".log")?.parse().ok())
        .collect()
}

fn flip_byte(path: &Path, position: u64) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open");
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, position).expect("read byte");
    file.write_all_at(&[byte[0] ^ 0xFF], position)
        .expect("write byte");
}

fn stats(manager: &LogManager) -> LoadStats {
    manager
        .get("t", 0)
        .expect("log")
        .with_log_blocking(|log| Ok(log.load_stats()))
        .expect("stats")
}

/// A log manager with one partition `t-0` holding `batches` idempotent batches, shut
/// down cleanly. Returns the log dir, the partition dir and the written bytes.
fn cleanly_shut_down_log(root: &Path, batches: i32) -> (PathBuf, Vec<Vec<u8>>) {
    let manager = LogManager::open(&[root.to_path_buf()], config()).expect("open");
    let handle = manager.get_or_create("t", 0, config()).expect("create");
    let written = handle
        .with_log_blocking(|log| Ok(append(log, 0..batches)))
        .expect("append");
    let dir = handle.dir();
    manager.shutdown().expect("shutdown");
    (dir, written)
}

#[test]
fn a_clean_shutdown_reopens_without_scanning_and_keeps_producer_state() {
    let root = tempfile::tempdir().expect("tempdir");
    let (dir, mut written) = cleanly_shut_down_log(root.path(), 40);
    let bases = segment_bases(&dir);
    assert!(bases.len() > 4, "small segments must have rolled");
    assert!(root.path().join(RECOVERY_POINT_FILE_NAME).exists());
    // What a full scan rebuilds, to compare with what the snapshot restores.
    let replayed = Log::open(&dir, config(), 0)
        .expect("full scan")
        .producer_state()
        .clone();
    // A byte in the middle of the second batch of the first (trusted) segment: a full
    // scan would fail its CRC and truncate the log there.
    let position = written[0].len() as u64 + written[1].len() as u64 / 2;
    flip_byte(&dir.join(file_name(0, "log")), position);
    let middle = written[1].len() / 2;
    if let Some(b) = written[1].get_mut(middle) {
        *b ^= 0xFF;
    }

    let manager = LogManager::open(&[root.path().to_path_buf()], config()).expect("reopen");
    assert_eq!(
        stats(&manager),
        LoadStats {
            trusted_segments: bases.len(),
            scanned_segments: 0
        }
    );
    let handle = manager.get("t", 0).expect("log");
    handle
        .with_log_blocking(|log| {
            assert_eq!(log.log_end_offset(), 80);
            assert_eq!(log.recovery_point(), 80);
            assert_eq!(read_all(log), written.concat());
            assert_eq!(log.producer_state(), &replayed);
            assert_producer_continues(log, 39);
            Ok(())
        })
        .expect("checks");
}

#[test]
fn a_crash_after_the_recovery_point_truncates_the_torn_tail_and_replays_producer_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    let mut written = append(&mut log, 0..30);
    // Up to the next roll, which flushes and snapshots: the point is then the base of
    // the new active segment, holding the batch that rolled it.
    let point_before = log.recovery_point();
    let mut seq = 30;
    while log.recovery_point() == point_before {
        written.extend(append(&mut log, seq..seq + 1));
        seq += 1;
    }
    let recovery_point = log.recovery_point();
    let active = *segment_bases(dir.path()).last().expect("segments");
    assert_eq!(recovery_point, active);
    assert_eq!(log.producer_snapshot_offset(), Some(active));
    // Appended after the point, never flushed; then a crash leaves half a batch.
    written.extend(append(&mut log, seq..seq + 2));
    let last_seq = seq + 1;
    assert_eq!(*segment_bases(dir.path()).last().expect("segments"), active);
    drop(log);
    let torn = idempotent(last_seq * 2 + 2);
    let path = dir.path().join(file_name(active, "log"));
    let size = std::fs::metadata(&path).expect("stat").len();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open")
        .write_all_at(&torn[..torn.len() / 2], size)
        .expect("torn write");

    let mut log =
        Log::open_with_recovery_point(dir.path(), config(), 0, recovery_point).expect("reopen");
    assert_eq!(
        log.load_stats().scanned_segments,
        1,
        "only the active segment"
    );
    assert!(log.load_stats().trusted_segments > 3);
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), size);
    assert_eq!(log.log_end_offset(), i64::from(last_seq + 1) * 2);
    assert_eq!(
        log.recovery_point(),
        recovery_point,
        "the tail is not known durable"
    );
    assert_eq!(read_all(&log), written.concat());
    // The last batches came from the replay after the snapshot.
    assert_producer_continues(&mut log, last_seq);
}

#[test]
fn truncating_below_the_recovery_point_then_reopening_resurrects_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    let written = append(&mut log, 0..30);
    let stale_point = log.flush_for_shutdown(0).expect("flush");
    assert_eq!(stale_point, 60);
    let bases = segment_bases(dir.path());
    // Inside the last segment: the snapshot at its base (taken when it rolled) survives
    // the cut, the one at the old end does not.
    let last_base = *bases.last().expect("segments");
    let cut = last_base + 2;
    assert_eq!(log.truncate_to(cut).expect("truncate"), cut);
    assert!(log.recovery_point() <= cut);
    assert_eq!(
        snapshots(dir.path()),
        vec![last_base],
        "snapshots above the cut are gone"
    );
    // A new leader's data at the same offsets, never flushed; the checkpoint file
    // still names the old point (no checkpoint ran since the truncation).
    let mut rewritten = Vec::new();
    for seq in 0..4 {
        let mut b = encode_batch(&TestBatch::sized(5_000, 2, 7).with_producer(77, 0, seq * 2));
        log.append(&mut b, 6, 0).expect("append");
        rewritten.push(b);
    }
    let end = log.log_end_offset();
    drop(log);

    let mut log =
        Log::open_with_recovery_point(dir.path(), config(), 0, stale_point).expect("reopen");
    assert_eq!(log.log_end_offset(), end);
    let kept: usize = (0..cut / 2).map(|i| written[i as usize].len()).sum();
    let all = read_all(&log);
    assert_eq!(
        all.get(..kept),
        Some(written.concat().get(..kept).unwrap_or_default())
    );
    assert_eq!(all.get(kept..), Some(rewritten.concat().as_slice()));
    // The stale point (60) lies above the rewritten data: the snapshot bound keeps it
    // scanned.
    assert_eq!(
        log.load_stats(),
        LoadStats {
            trusted_segments: bases.len() - 1,
            scanned_segments: 1
        }
    );
    // The old producer continues from the last batch that survived the cut.
    assert_producer_continues(&mut log, (cut / 2 - 1) as i32);
}

#[test]
fn a_missing_or_garbage_checkpoint_recovers_every_segment_as_before() {
    let root = tempfile::tempdir().expect("tempdir");
    let (dir, written) = cleanly_shut_down_log(root.path(), 30);
    let bases = segment_bases(&dir);
    let checkpoint = root.path().join(RECOVERY_POINT_FILE_NAME);
    for damage in ["missing", "garbage"] {
        match damage {
            "missing" => std::fs::remove_file(&checkpoint).expect("remove"),
            _ => std::fs::write(&checkpoint, "0\n7\nnot a line\n").expect("garbage"),
        }
        let manager = LogManager::open(&[root.path().to_path_buf()], config()).expect("reopen");
        assert_eq!(
            stats(&manager),
            LoadStats {
                trusted_segments: 0,
                scanned_segments: bases.len()
            },
            "{damage}"
        );
        manager
            .get("t", 0)
            .expect("log")
            .with_log_blocking(|log| {
                assert_eq!(log.log_end_offset(), 60);
                assert_eq!(read_all(log), written.concat());
                Ok(())
            })
            .expect("checks");
        manager.shutdown().expect("shutdown");
    }
    // A full scan still truncates at a corrupt batch, as before recovery points.
    std::fs::remove_file(&checkpoint).expect("remove");
    flip_byte(&dir.join(file_name(0, "log")), written[0].len() as u64 + 70);
    let manager = LogManager::open(&[root.path().to_path_buf()], config()).expect("reopen");
    let handle = manager.get("t", 0).expect("log");
    assert_eq!(handle.log_end_offset(), 2);
}

#[test]
fn a_trusted_segment_with_a_missing_or_damaged_index_is_recovered_fully() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    let written = append(&mut log, 0..30);
    let point = log.flush_for_shutdown(0).expect("flush");
    drop(log);
    let bases = segment_bases(dir.path());
    let index = |i: usize| dir.path().join(file_name(bases[i], "index"));
    let originals: Vec<Vec<u8>> = (0..3)
        .map(|i| std::fs::read(index(i)).expect("read"))
        .collect();
    assert!(
        originals.iter().all(|o| o.len() >= 16),
        "segments were indexed"
    );
    std::fs::remove_file(index(0)).expect("missing index");
    // Whole entries but the last ones lost: more than an interval without an entry.
    std::fs::write(index(1), &originals[1][..8]).expect("short index");
    // Not a whole number of entries.
    std::fs::write(index(2), &originals[2][..originals[2].len() - 3]).expect("torn index");
    std::fs::remove_file(dir.path().join(file_name(bases[3], "timeindex")))
        .expect("missing time index");

    let log = Log::open_with_recovery_point(dir.path(), config(), 0, point).expect("reopen");
    assert_eq!(
        log.load_stats(),
        LoadStats {
            trusted_segments: bases.len() - 4,
            scanned_segments: 4
        }
    );
    assert_eq!(log.log_end_offset(), 60);
    assert_eq!(read_all(&log), written.concat());
    for (i, original) in originals.iter().enumerate() {
        assert_eq!(&std::fs::read(index(i)).expect("rebuilt"), original);
    }
}

#[test]
fn delete_records_into_unflushed_data_keeps_the_recovery_point_at_the_log_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config(), 0).expect("open");
    append(&mut log, 0..30);
    let point = log.recovery_point();
    assert!(
        point < log.log_end_offset(),
        "the active segment is unflushed"
    );
    let start = log.log_end_offset() - 2;
    assert_eq!(
        log.increment_log_start_offset(start, 0)
            .expect("delete records"),
        start
    );
    // Raised by a flush, never by decree: everything below it is fsynced.
    assert_eq!(log.recovery_point(), log.log_end_offset());
    assert!(log.recovery_point() >= log.log_start_offset());
}

/// Not a benchmark (no assertion on time): prints how long opening ~200 MB in 100
/// segments takes with and without a recovery point. Run with
/// `cargo test -p brook-storage --test recovery_point -- --ignored --nocapture`.
#[test]
#[ignore = "writes 200 MB; run by hand for the open-time figures"]
fn open_time_with_and_without_a_recovery_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_bytes: 2 * 1024 * 1024,
        segment_ms: None,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config.clone(), 0).expect("open");
    let batch = encode_batch(&TestBatch::sized(1_000, 100, 1_000));
    let mut written = 0usize;
    while written < 200 * 1024 * 1024 {
        log.append(&mut batch.clone(), 0, 0).expect("append");
        written += batch.len();
    }
    let point = log.flush_for_shutdown(0).expect("flush");
    let segments = log.segment_count();
    drop(log);
    for (label, recovery_point) in [
        ("full scan", 0),
        ("recovery point", point),
        ("full scan", 0),
        ("recovery point", point),
    ] {
        let started = Instant::now();
        let log = Log::open_with_recovery_point(dir.path(), config.clone(), 0, recovery_point)
            .expect("reopen");
        let elapsed = started.elapsed();
        assert_eq!(log.log_end_offset(), point);
        println!(
            "{label}: {} MB in {segments} segments opened in {:.1} ms ({:?})",
            written / (1024 * 1024),
            elapsed.as_secs_f64() * 1_000.0,
            log.load_stats()
        );
    }
}
