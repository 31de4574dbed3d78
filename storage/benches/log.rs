//! Storage micro-benchmarks (criterion; `make bench-storage` runs them with the disk's
//! raw `dd` speed beside them). Never a CI gate.
//!
//! - `append/1KB`, `append/16KB`: `Log::append` of one realistic v2 batch (8 x 110 B or
//!   16 x 1000 B records, built with `brook_storage::testing`) into a log on a temp dir
//!   in the target directory's file system, 64 MB segments, no fsync per append
//!   (Kafka's default: the page cache absorbs writes, segments are fsynced on roll).
//!   Throughput in bytes of batch. The log is recreated (untimed) every 256 MB so the
//!   run's disk use stays bounded.
//! - `read/1MB`: `Log::read` of 1 MB from the middle of a 64 MB log (a fetch).
//! - `index/offset_lookup`, `index/time_lookup`: one lookup in a full default-size
//!   index (10 MB, 1 310 720 entries), at pseudo-random targets.
//! - `cleaner/16MB`: one `Log::clean` pass over a compacted log of four closed 4 MB
//!   segments of 1 KB batches (8 records each, 1 000 distinct keys, so most records are
//!   superseded); throughput in bytes of closed segments cleaned. The log is rebuilt,
//!   untimed, before each pass.
//!
//! The temp dirs live under `target/` (not `/tmp`, which may be a tmpfs) so that the
//! figures are the disk's; `BROOK_BENCH_DIR` overrides the location.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use brook_storage::index::{OffsetIndex, TimeIndex};
use brook_storage::testing::{encode_batch, TestBatch, TestRecord};
use brook_storage::{Log, LogConfig, MinOneBatch};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// The log is recreated past this size to bound disk use.
const RESET_BYTES: u64 = 256 * 1024 * 1024;
const INDEX_BYTES: u64 = 10 * 1024 * 1024;

fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var_os("BROOK_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-tmp"));
    std::fs::create_dir_all(&base).expect("create the bench base dir");
    tempfile::tempdir_in(base).expect("create a bench temp dir")
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        segment_ms: None,
        retention_ms: None,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// A v2 batch of `count` records of `len` bytes.
fn batch(count: usize, len: usize) -> Vec<u8> {
    encode_batch(&TestBatch::sized(1_700_000_000_000, count, len))
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    for (name, count, len) in [("1KB", 8, 110), ("16KB", 16, 1_000)] {
        let template = batch(count, len);
        group.throughput(Throughput::Bytes(template.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            let dir = bench_dir();
            let path = dir.path().join("append-0");
            let mut log = Some(Log::open(&path, config(), 0).expect("open log"));
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    let Some(current) = log.as_mut() else { break };
                    if current.size_bytes() > RESET_BYTES {
                        if let Some(full) = log.take() {
                            full.delete().expect("delete log");
                        }
                        log = Some(Log::open(&path, config(), 0).expect("reopen log"));
                    }
                    let Some(current) = log.as_mut() else { break };
                    let mut records = template.clone();
                    let start = Instant::now();
                    current.append(&mut records, 0, 0).expect("append");
                    elapsed += start.elapsed();
                }
                elapsed
            });
        });
    }
    group.finish();
}

fn read(c: &mut Criterion) {
    let dir = bench_dir();
    let mut log = Log::open(&dir.path().join("read-0"), config(), 0).expect("open log");
    let template = batch(16, 1_000);
    while log.size_bytes() < SEGMENT_BYTES {
        log.append(&mut template.clone(), 0, 0).expect("append");
    }
    let middle = log.log_end_offset() / 2;
    let max_bytes = 1024 * 1024;
    let sample = log
        .read(middle, max_bytes, i64::MAX, MinOneBatch::Yes)
        .expect("read");
    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(sample.records.len() as u64));
    group.bench_function("1MB", |b| {
        b.iter(|| {
            log.read(middle, max_bytes, i64::MAX, MinOneBatch::Yes)
                .expect("read")
        })
    });
    group.finish();
}

/// Pseudo-random targets (xorshift) in `0..bound`, so lookups do not hit one cache line.
fn targets(bound: i64) -> Vec<i64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..4_096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % bound as u64) as i64
        })
        .collect()
}

fn index(c: &mut Criterion) {
    let dir = bench_dir();
    let entries = (INDEX_BYTES / 8) as i64;
    let mut offsets =
        OffsetIndex::open(&dir.path().join("0.index"), 0, INDEX_BYTES).expect("offset index");
    // One entry per ~4 KB of log (index.interval.bytes), 30 records per entry.
    for i in 0..entries {
        offsets
            .append(i * 30, (i * 4_096) as u64)
            .expect("index append");
    }
    let entries_time = (INDEX_BYTES / 12) as i64;
    let mut times =
        TimeIndex::open(&dir.path().join("0.timeindex"), 0, INDEX_BYTES).expect("time index");
    for i in 0..entries_time {
        times
            .maybe_append(1_700_000_000_000 + i * 10, i * 30)
            .expect("time index append");
    }
    let mut group = c.benchmark_group("index");
    let offset_targets = targets(entries * 30);
    group.bench_function("offset_lookup", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % offset_targets.len();
            offsets.lookup(offset_targets[i])
        })
    });
    let time_targets: Vec<i64> = targets(entries_time * 10)
        .into_iter()
        .map(|t| 1_700_000_000_000 + t)
        .collect();
    group.bench_function("time_lookup", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % time_targets.len();
            times.lookup(time_targets[i])
        })
    });
    group.finish();
}

/// A 1 KB batch of 8 keyed records (`key-<n>`, 1 000 distinct keys in rotation).
fn keyed_batch(first_key: usize) -> Vec<u8> {
    let mut batch = TestBatch::sized(1_700_000_000_000, 8, 100);
    for (i, record) in batch.records.iter_mut().enumerate() {
        *record = TestRecord {
            key: Some(format!("key-{:03}", (first_key + i) % 1_000).into_bytes()),
            ..record.clone()
        };
    }
    encode_batch(&batch)
}

fn cleaner(c: &mut Criterion) {
    let segment_bytes = 4 * 1024 * 1024;
    let compact = LogConfig {
        segment_bytes,
        cleanup_compact: true,
        cleanup_delete: false,
        min_cleanable_dirty_ratio: 0.01,
        ..config()
    };
    let build = |path: &std::path::Path| {
        let mut log = Log::open(path, compact.clone(), 0).expect("open log");
        let mut n = 0;
        while log.segment_count() < 5 {
            log.append(&mut keyed_batch(n * 8), 0, 0).expect("append");
            n += 1;
        }
        log
    };
    let dir = bench_dir();
    let path = dir.path().join("clean-0");
    let closed = {
        let log = build(&path);
        let stats = log.segment_stats();
        let bytes: u64 = stats.iter().take(stats.len() - 1).map(|s| s.size).sum();
        log.delete().expect("delete log");
        bytes
    };
    let mut group = c.benchmark_group("cleaner");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(closed));
    group.bench_function("16MB", |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                let mut log = build(&path);
                let start = Instant::now();
                let outcome = log
                    .clean(1_700_000_100_000, 64 * 1024 * 1024)
                    .expect("clean");
                elapsed += start.elapsed();
                assert!(
                    outcome.cleaned && outcome.records_removed > 0,
                    "{outcome:?}"
                );
                log.delete().expect("delete log");
            }
            elapsed
        });
    });
    group.finish();
}

fn settings() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
}

criterion_group! {
    name = benches;
    config = settings();
    targets = append, read, index, cleaner
}
criterion_main!(benches);
