//! Planned reads finished as file ranges for zero-copy fetches (`log/read_ranges.rs`):
//! the ranges hold exactly what the copying read returns, plus at most a partial last
//! batch where the byte limit cuts one (as Kafka's fetch responses do).

mod common;

use brook_storage::{Log, LogManager, MinOneBatch, ReadPlan, ReadWait, StorageError};
use common::{batch, filled, small_config};

fn ranged(plan: &ReadPlan, limit: usize, min_one: MinOneBatch, wait: ReadWait) -> Vec<u8> {
    let read = plan
        .execute_ranges(limit, min_one, wait)
        .expect("scan")
        .expect("no truncation raced it");
    let bytes = read.records.load(wait).expect("load");
    assert_eq!(bytes.len() as u64, read.records.len());
    bytes.to_vec()
}

fn copied(plan: &ReadPlan, limit: usize, min_one: MinOneBatch) -> Vec<u8> {
    plan.execute(limit, min_one)
        .expect("read")
        .expect("fresh")
        .records
        .to_vec()
}

#[test]
fn ranges_hold_the_copying_reads_batches_and_at_most_a_partial_last_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let batches = filled(&mut log);
    assert!(log.segment_count() > 3);
    let all: Vec<u8> = batches.concat();
    let size = batches[0].len();
    let limits = [
        0,
        1,
        60,
        size - 1,
        size,
        size + 1,
        3 * size + 7,
        2_000,
        usize::MAX,
    ];
    let mut checked = 0;
    for start in 0..40i64 {
        for bound in [start, start + 1, start + 2, start + 5, 17, 33, 40, i64::MAX] {
            if bound <= start {
                continue;
            }
            let plan = log.plan_read(start, usize::MAX, bound).expect("plan");
            for limit in limits {
                for min_one in [MinOneBatch::No, MinOneBatch::Yes] {
                    let whole = copied(&plan, limit, min_one);
                    let got = ranged(&plan, limit, min_one, ReadWait::Block);
                    let context = format!("start {start} bound {bound} limit {limit} {min_one:?}");
                    // Just written, so cached: the page-cache-only scan finds the same.
                    let cached = ranged(&plan, limit, min_one, ReadWait::CachedOnly);
                    assert_eq!(cached, got, "{context}: cached-only read");
                    assert!(got.starts_with(&whole), "{context}: whole batches first");
                    let first = (start / 2) as usize;
                    if whole.is_empty() {
                        // Nothing fits whole: nothing at all (Kafka's firstEntryIncomplete).
                        assert!(got.is_empty(), "{context}: no lone partial batch");
                        continue;
                    }
                    // The whole batches start at the batch holding `start`...
                    let from = first * size;
                    assert_eq!(&all[from..from + whole.len()], &whole[..], "{context}");
                    // ...and the rest is a strict prefix of the next batch below the bound,
                    // there only when the byte limit cut it.
                    let tail = &got[whole.len()..];
                    let next = first + whole.len() / size;
                    if !tail.is_empty() {
                        assert!(tail.len() < size, "{context}: partial, not whole");
                        assert!(
                            ((next * 2 + 1) as i64) < bound,
                            "{context}: below the bound"
                        );
                        assert_eq!(tail, &batches[next][..tail.len()], "{context}");
                        assert_eq!(got.len(), limit, "{context}: cut by the limit only");
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 500, "{checked} reads compared");
}

#[test]
fn ranges_stay_readable_after_retention_and_go_stale_on_truncation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let batches = filled(&mut log);
    let plan = log.plan_read(0, usize::MAX, i64::MAX).expect("plan");
    let before = plan
        .execute_ranges(usize::MAX, MinOneBatch::No, ReadWait::Block)
        .expect("scan")
        .expect("fresh");
    log.increment_log_start_offset(30, 0)
        .expect("delete records");
    log.enforce_retention(i64::MAX / 2).expect("retention");
    assert!(log.log_start_offset() >= 30);
    assert_eq!(
        before
            .records
            .load(ReadWait::Block)
            .expect("the open files are still readable")
            .to_vec(),
        batches.concat()
    );
    assert!(!before.records.is_stale());

    // A truncation rewrites files in place: ranges found before it are stale, and a scan
    // racing it is refused.
    let plan = log.plan_read(30, usize::MAX, i64::MAX).expect("plan");
    let found = plan
        .execute_ranges(usize::MAX, MinOneBatch::No, ReadWait::Block)
        .expect("scan")
        .expect("fresh");
    log.truncate_to(36).expect("truncate");
    assert!(found.records.is_stale());
    assert!(plan
        .execute_ranges(usize::MAX, MinOneBatch::No, ReadWait::Block)
        .expect("scan")
        .is_none());
}

/// Drops the log's segment files from the page cache (written back first).
fn evict_segments(log: &mut Log, dir: &std::path::Path) {
    log.flush(0).expect("flush");
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "log") {
            let file = std::fs::File::open(&path).expect("open segment");
            rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise");
        }
    }
}

#[test]
fn a_cached_only_read_refuses_bytes_the_page_cache_lacks_and_a_blocking_read_loads_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), small_config(), 0).expect("open");
    let batches = filled(&mut log);
    evict_segments(&mut log, dir.path());
    let plan = log.plan_read(0, usize::MAX, i64::MAX).expect("plan");
    let refused = plan.execute_ranges(usize::MAX, MinOneBatch::Yes, ReadWait::CachedOnly);
    assert!(
        matches!(refused, Err(StorageError::NotCached)),
        "evicted headers are not read without waiting: {refused:?}"
    );
    // The blocking scan reads the headers, and with them the small segments, into the cache.
    let found = plan
        .execute_ranges(usize::MAX, MinOneBatch::Yes, ReadWait::Block)
        .expect("scan")
        .expect("fresh");
    assert_eq!(
        found.records.load(ReadWait::Block).expect("load").to_vec(),
        batches.concat()
    );
    // Everything is cached now: the cached-only path answers alone.
    assert_eq!(
        ranged(&plan, usize::MAX, MinOneBatch::Yes, ReadWait::CachedOnly),
        batches.concat()
    );
}

#[tokio::test]
async fn the_handle_sends_large_sets_from_files_and_small_ones_from_memory() {
    use brook_storage::FetchedRecords;
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = LogManager::open(&[dir.path().to_path_buf()], small_config()).expect("open");
    let handle = manager
        .get_or_create("t", 0, small_config())
        .expect("create");
    for i in 0..40 {
        let records = bytes::BytesMut::from(&batch(i, 2, 200)[..]);
        handle.append(records, 0, 0).await.expect("append");
    }
    // What the copying read returns (the leader append assigned offsets and CRCs).
    let expected = handle
        .read(0, usize::MAX, i64::MAX, MinOneBatch::Yes)
        .await
        .expect("read")
        .records
        .to_vec();
    let planned = handle
        .plan_read(0, usize::MAX, i64::MAX)
        .await
        .expect("plan");
    let (records, log_start) =
        tokio::task::spawn_blocking(move || planned.execute_for_send(usize::MAX, MinOneBatch::Yes))
            .await
            .expect("join")
            .expect("read");
    assert_eq!(log_start, 0);
    let FetchedRecords::Files(files) = records else {
        panic!("a large record set stays in its files");
    };
    assert!(files.ranges().len() > 1, "spans segments");
    assert!(
        files.load(ReadWait::Block).expect("load").to_vec() == expected,
        "same bytes as a copy"
    );
    // Just written, so the async worker's page-cache-only attempt finds the same ranges.
    let planned = handle
        .plan_read(0, usize::MAX, i64::MAX)
        .await
        .expect("plan");
    let Some((FetchedRecords::Files(cached), 0)) = planned
        .try_execute_for_send_cached(usize::MAX, MinOneBatch::Yes)
        .expect("read")
    else {
        panic!("cached data is sent from its files without a blocking hop");
    };
    assert_eq!(cached.len(), files.len());

    let planned = handle.plan_read(0, 100, i64::MAX).await.expect("plan");
    let (records, _) =
        tokio::task::spawn_blocking(move || planned.execute_for_send(100, MinOneBatch::Yes))
            .await
            .expect("join")
            .expect("read");
    let FetchedRecords::Memory(bytes) = records else {
        panic!("one small batch is read into memory");
    };
    assert!(!bytes.is_empty() && bytes.len() < 4096);
    assert!(bytes[..] == expected[..bytes.len()], "a prefix of the log");
    manager.shutdown().expect("shutdown");
}
