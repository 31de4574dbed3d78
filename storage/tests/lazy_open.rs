//! Logs opened on first use after a clean shutdown (`clean_shutdown.rs`,
//! `handle/lazy.rs`): the summary is written, trusted only with its marker and matching
//! checkpoints, and a log opened lazily answers every operation exactly as one opened at
//! start. Each test runs the same operations on a lazily opened copy and on an eagerly
//! opened copy of one data directory and compares.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use brook_storage::clean_shutdown::{MARKER_FILE_NAME, SUMMARY_FILE_NAME};
use brook_storage::testing::{encode_batch, TestBatch};
use brook_storage::{LogHandle, LogManager, MinOneBatch};
use bytes::BytesMut;
use common::{batch, small_config};

const PARTITIONS: i32 = 4;

fn open(dir: &Path) -> LogManager {
    LogManager::open(&[dir.to_path_buf()], small_config()).expect("open log manager")
}

fn log(manager: &LogManager, partition: i32) -> LogHandle {
    manager.get("t", partition).expect("log exists")
}

/// t-0: several segments, epochs 1 and 3; t-1: empty; t-2: records with the log start
/// moved by DeleteRecords; t-3: one batch, high watermark below its end.
async fn fill(manager: &LogManager) {
    for p in 0..PARTITIONS {
        manager
            .get_or_create("t", p, small_config())
            .expect("create");
    }
    let t0 = log(manager, 0);
    for i in 0..12 {
        let epoch = if i < 6 { 1 } else { 3 };
        t0.append(BytesMut::from(&batch(i, 2, 50)[..]), epoch, 0)
            .await
            .expect("append t-0");
    }
    let t2 = log(manager, 2);
    for i in 0..5 {
        t2.append(BytesMut::from(&batch(i, 3, 10)[..]), 2, 0)
            .await
            .expect("append t-2");
    }
    t2.increment_log_start_offset(7, 0)
        .await
        .expect("delete records");
    let t3 = log(manager, 3);
    t3.append(BytesMut::from(&batch(0, 4, 10)[..]), 0, 0)
        .await
        .expect("append t-3");
    for p in 0..PARTITIONS {
        log(manager, p).set_high_watermark(i64::MAX);
    }
    t3.set_high_watermark(2);
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A data directory after a clean shutdown, and an identical copy without the marker
/// (so it opens every log at start, as after a crash of a clean-stopped broker).
async fn lazy_and_eager_dirs(root: &Path) -> (PathBuf, PathBuf) {
    let lazy = root.join("lazy");
    let manager = open(&lazy);
    fill(&manager).await;
    manager.shutdown().expect("shutdown");
    assert!(lazy.join(SUMMARY_FILE_NAME).exists());
    assert!(lazy.join(MARKER_FILE_NAME).exists());
    let eager = root.join("eager");
    copy_dir(&lazy, &eager);
    fs::remove_file(eager.join(MARKER_FILE_NAME)).expect("remove marker");
    (lazy, eager)
}

/// What a client or follower sees of a log without opening it.
fn published(h: &LogHandle) -> (i64, i64, i64, Option<i32>, i64) {
    (
        h.log_start_offset(),
        h.log_end_offset(),
        h.high_watermark(),
        h.latest_epoch(),
        h.last_stable_offset(),
    )
}

async fn read_all(h: &LogHandle) -> Vec<u8> {
    h.read(h.log_start_offset(), usize::MAX, i64::MAX, MinOneBatch::Yes)
        .await
        .expect("read")
        .records
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazily_opened_log_answers_as_an_eagerly_opened_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let (lazy_dir, eager_dir) = lazy_and_eager_dirs(root.path()).await;
    let lazy = open(&lazy_dir);
    let eager = open(&eager_dir);
    // The marker and summary are consumed at start: a crash from here on never trusts them.
    assert!(!lazy_dir.join(MARKER_FILE_NAME).exists());
    assert!(!lazy_dir.join(SUMMARY_FILE_NAME).exists());

    for p in 0..PARTITIONS {
        let (l, e) = (log(&lazy, p), log(&eager, p));
        assert!(!l.is_open(), "t-{p} is not opened at start");
        assert!(e.is_open());
        assert_eq!(published(&l), published(&e), "t-{p} before use");
    }
    // Memory-only operations do not open a log: every partition gets them at start.
    for m in [&lazy, &eager] {
        for p in 0..PARTITIONS {
            log(m, p).set_config(small_config()).await.expect("config");
            log(m, p).assign_epoch_start(5).await.expect("epoch");
        }
    }
    lazy.checkpoint_recovery_points().expect("checkpoint");
    let t1 = log(&lazy, 1);
    let nothing = t1.enforce_retention(i64::MAX / 2).await.expect("retention");
    assert_eq!(nothing.segments_deleted, 0);
    for p in 0..PARTITIONS {
        assert!(!log(&lazy, p).is_open(), "t-{p} still closed");
        assert_eq!(published(&log(&lazy, p)), published(&log(&eager, p)));
    }

    // First use opens it; from then on both answer alike.
    for p in 0..PARTITIONS {
        let (l, e) = (log(&lazy, p), log(&eager, p));
        assert_eq!(read_all(&l).await, read_all(&e).await, "t-{p} read");
        assert!(l.is_open());
        for epoch in [0, 1, 3, 5] {
            assert_eq!(
                l.end_offset_for_epoch(epoch).await.expect("epoch lookup"),
                e.end_offset_for_epoch(epoch).await.expect("epoch lookup"),
                "t-{p} epoch {epoch}"
            );
        }
        let more = batch(99, 3, 20);
        let a = l
            .append(BytesMut::from(&more[..]), 5, 0)
            .await
            .expect("append");
        let b = e
            .append(BytesMut::from(&more[..]), 5, 0)
            .await
            .expect("append");
        assert_eq!(a, b, "t-{p} append");
        let to = (l.log_end_offset() - 4).max(l.log_start_offset());
        assert_eq!(
            l.truncate_to(to).await.expect("truncate"),
            e.truncate_to(to).await.expect("truncate"),
            "t-{p} truncate"
        );
        assert_eq!(read_all(&l).await, read_all(&e).await, "t-{p} read after");
        assert_eq!(published(&l), published(&e), "t-{p} after use");
    }
    // An operation that opens a log opens it inline too (an append to a closed log).
    lazy.shutdown().expect("shutdown");
    eager.shutdown().expect("shutdown");
    let (lazy, eager) = (open(&lazy_dir), open(&eager_dir));
    for p in 0..PARTITIONS {
        let (l, e) = (log(&lazy, p), log(&eager, p));
        assert!(!l.is_open() && !e.is_open(), "both clean now");
        assert_eq!(published(&l), published(&e), "t-{p} after restart");
        assert_eq!(
            read_all(&l).await,
            read_all(&e).await,
            "t-{p} read after restart"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_to_a_closed_log_opens_it_and_a_delete_removes_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let (lazy_dir, _) = lazy_and_eager_dirs(root.path()).await;
    let lazy = open(&lazy_dir);
    let t1 = log(&lazy, 1);
    let info = t1
        .append(BytesMut::from(&batch(1, 2, 10)[..]), 0, 0)
        .await
        .expect("append");
    assert_eq!((info.base_offset, t1.log_end_offset()), (0, 2));
    assert!(t1.is_open());
    assert!(lazy.delete_log("t", 3).expect("delete closed log"));
    assert!(!lazy_dir.join("t-3").exists());
    lazy.shutdown().expect("shutdown");
    let lazy = open(&lazy_dir);
    assert!(lazy.get("t", 3).is_none());
    assert_eq!(read_all(&log(&lazy, 1)).await.len(), batch(1, 2, 10).len());
}

/// Every way the summary can be wrong leads to today's full open, never to a stale
/// bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_or_stale_summary_is_not_trusted() {
    let root = tempfile::tempdir().expect("tempdir");
    let (dir, _) = lazy_and_eager_dirs(root.path()).await;
    let pristine = root.path().join("pristine");
    copy_dir(&dir, &pristine);
    let all_open = |m: &LogManager| (0..PARTITIONS).all(|p| log(m, p).is_open());

    // A flipped digit in the summary: the checksum fails.
    let summary = dir.join(SUMMARY_FILE_NAME);
    let text = fs::read_to_string(&summary).expect("read");
    fs::write(&summary, text.replacen("t 0 0 24", "t 0 0 25", 1)).expect("write");
    assert!(all_open(&open(&dir)));

    // The start consumed the marker: a crash now (no shutdown) opens everything again.
    let restarted = open(&dir);
    assert!(all_open(&restarted));
    drop(restarted);

    // A partition directory gone since the shutdown: the summary is not the state.
    let gone = root.path().join("gone");
    copy_dir(&pristine, &gone);
    fs::remove_dir_all(gone.join("t-3")).expect("rm");
    let m = open(&gone);
    assert!((0..3).all(|p| log(&m, p).is_open()));

    // A recovery point checkpoint that moved (written after the summary): stale.
    let moved = root.path().join("moved");
    copy_dir(&pristine, &moved);
    let points = moved.join("recovery-point-offset-checkpoint");
    let text = fs::read_to_string(&points).expect("read");
    fs::write(&points, text.replacen("t 0 24", "t 0 20", 1)).expect("write");
    assert!(all_open(&open(&moved)));

    // A partition created after the shutdown (no entry) opens eagerly, the rest lazily.
    let added = root.path().join("added");
    copy_dir(&pristine, &added);
    copy_dir(&added.join("t-1"), &added.join("u-0"));
    let m = open(&added);
    assert!(m.get("u", 0).expect("u-0").is_open());
    assert!(!log(&m, 0).is_open());
}

/// A log with a transaction still open at shutdown opens eagerly: its last stable offset
/// is read without the lock and must be right from the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_with_an_open_transaction_opens_eagerly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = open(dir.path());
    let t0 = manager
        .get_or_create("t", 0, small_config())
        .expect("create");
    let t1 = manager
        .get_or_create("t", 1, small_config())
        .expect("create");
    let txn = encode_batch(&TestBatch::sized(0, 2, 10).transactional(42, 0, 0));
    t0.append(BytesMut::from(&txn[..]), 0, 0)
        .await
        .expect("append");
    t1.append(BytesMut::from(&batch(0, 2, 10)[..]), 0, 0)
        .await
        .expect("append");
    t0.set_high_watermark(i64::MAX);
    t1.set_high_watermark(i64::MAX);
    assert_eq!(t0.last_stable_offset(), 0);
    manager.shutdown().expect("shutdown");

    let manager = open(dir.path());
    let (t0, t1) = (log(&manager, 0), log(&manager, 1));
    assert!(t0.is_open() && !t1.is_open());
    assert_eq!(t0.last_stable_offset(), 0);
    assert!(t0.has_ongoing_transaction(42, 0));
    assert_eq!(t1.last_stable_offset(), 2);
}
