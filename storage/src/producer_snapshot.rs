//! Producer state snapshots (Kafka's `<offset>.snapshot` files of `ProducerStateManager`):
//! the idempotent producer state as of an offset, so that opening a log replays only the
//! batch headers after it instead of every batch of every segment.
//!
//! A snapshot named `<20-digit offset>.snapshot` holds the state after every batch below
//! `offset` and nothing from a batch at or above it. It is written only when every byte
//! below `offset` is fsynced (the log's recovery point), so it never describes data a
//! crash could lose. Brook's own format (documented in `storage/FORMAT.md`), big-endian:
//!
//! ```text
//! magic "BRPS" | version u16 = 2 | offset i64 | producer count u32
//! per producer: producer id i64 | epoch i16 | coordinator epoch i32 (v2)
//!               | current transaction first offset i64, -1 = none (v2) | batch count u8
//!   per batch: first sequence i32 | last sequence i32 | first offset i64
//!              | last offset i64 | max timestamp i64
//! crc32c u32 of everything before it
//! ```
//!
//! Version 1 (no transaction fields) still loads: its producers have no open
//! transaction and coordinator epoch -1 (it predates transactional appends).
//!
//! Files are replaced atomically (tmp, fsync, rename, directory fsync). An unreadable or
//! corrupt snapshot is ignored with a WARN: the log then replays more headers. Pure
//! encoding plus synchronous file I/O; the owning `Log` serialises access.

use std::collections::{HashSet, VecDeque};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{io_err, Result};
use crate::log::listing::Listing;
use crate::producer_state::{BatchMetadata, ProducerEntry, ProducerStateManager};
use crate::recovery::{segment_file_name, sync_dir};

/// The extension of a snapshot file.
pub const EXTENSION: &str = "snapshot";
/// How many snapshots a log keeps (Kafka keeps a few; two survive one corrupt file).
pub const SNAPSHOTS_TO_RETAIN: usize = 2;

const MAGIC: &[u8; 4] = b"BRPS";
const VERSION: u16 = 2;
/// The version before transactions, still read.
const VERSION_1: u16 = 1;
const HEADER_LEN: usize = 4 + 2 + 8 + 4;
const BATCH_LEN: usize = 4 + 4 + 8 + 8 + 8;

/// The path of the snapshot at `offset` in `dir`.
pub fn path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(crate::segment::file_name(offset, EXTENSION))
}

/// Encodes `state` as of `offset`.
pub fn encode(offset: i64, state: &ProducerStateManager) -> Vec<u8> {
    let mut producers: Vec<(i64, &ProducerEntry)> = state.entries().collect();
    // Sorted, so equal states give equal files.
    producers.sort_unstable_by_key(|(id, _)| *id);
    let mut out = Vec::with_capacity(HEADER_LEN + producers.len() * (23 + 5 * BATCH_LEN) + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(producers.len() as u32).to_be_bytes());
    for (id, entry) in producers {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&entry.producer_epoch.to_be_bytes());
        out.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&entry.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        // At most BATCHES_TO_RETAIN (5) batches per producer: fits a u8.
        let batches = entry.batches.len().min(usize::from(u8::MAX));
        out.push(batches as u8);
        for b in entry.batches.iter().take(batches) {
            out.extend_from_slice(&b.first_sequence.to_be_bytes());
            out.extend_from_slice(&b.last_sequence.to_be_bytes());
            out.extend_from_slice(&b.first_offset.to_be_bytes());
            out.extend_from_slice(&b.last_offset.to_be_bytes());
            out.extend_from_slice(&b.max_timestamp.to_be_bytes());
        }
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// A cursor over a byte slice that never panics on short input.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn i16(&mut self) -> Option<i16> {
        self.take().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take().map(i32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }
}

/// Decodes a snapshot: its offset and state; `None` for a wrong magic, version or CRC,
/// or a truncated or over-long body.
pub fn decode(bytes: &[u8]) -> Option<(i64, ProducerStateManager)> {
    let (body, crc) = bytes.split_last_chunk::<4>()?;
    if crc32c::crc32c(body) != u32::from_be_bytes(*crc) {
        return None;
    }
    let mut r = Reader(body);
    if &r.take::<4>()? != MAGIC {
        return None;
    }
    let version = u16::from_be_bytes(r.take()?);
    if version != VERSION && version != VERSION_1 {
        return None;
    }
    let offset = r.i64()?;
    let count = u32::from_be_bytes(r.take()?);
    let mut producers = Vec::new();
    for _ in 0..count {
        let id = r.i64()?;
        let producer_epoch = r.i16()?;
        let (coordinator_epoch, current_txn_first_offset) = if version == VERSION_1 {
            (-1, None)
        } else {
            let coordinator_epoch = r.i32()?;
            let first = r.i64()?;
            (coordinator_epoch, (first >= 0).then_some(first))
        };
        let [batch_count] = r.take::<1>()?;
        let mut batches = VecDeque::with_capacity(usize::from(batch_count));
        for _ in 0..batch_count {
            batches.push_back(BatchMetadata {
                first_sequence: r.i32()?,
                last_sequence: r.i32()?,
                first_offset: r.i64()?,
                last_offset: r.i64()?,
                max_timestamp: r.i64()?,
            });
        }
        producers.push((
            id,
            ProducerEntry {
                producer_epoch,
                batches,
                current_txn_first_offset,
                coordinator_epoch,
            },
        ));
    }
    // A producer listed twice, or two open transactions starting at one offset, cannot come
    // from a real log: the state built from them would silently drop one (found by the
    // `producer_snapshot` fuzz target), so the snapshot is as corrupt as a bad CRC.
    let mut ids = HashSet::with_capacity(producers.len());
    let mut firsts = HashSet::new();
    let consistent = producers.iter().all(|(id, entry)| {
        ids.insert(*id)
            && entry
                .current_txn_first_offset
                .is_none_or(|first| firsts.insert(first))
    });
    (r.0.is_empty() && consistent).then(|| (offset, ProducerStateManager::from_entries(producers)))
}

/// Offsets of the snapshot files in `dir`, ascending. Tmp files are left alone: another
/// thread (the log's writer, while the cleaner lists) may be about to rename its own.
pub fn list(dir: &Path) -> Result<Vec<i64>> {
    list_files(dir, false)
}

/// [`list`] at open, when no write can be under way: leftover tmp files of a write
/// interrupted by a crash are removed.
fn list_removing_interrupted_writes(dir: &Path) -> Result<Vec<i64>> {
    list_files(dir, true)
}

fn list_files(dir: &Path, remove_tmp: bool) -> Result<Vec<i64>> {
    let listing = Listing::read(dir)?.ok_or_else(|| {
        io_err("list log dir", dir)(std::io::Error::from(std::io::ErrorKind::NotFound))
    })?;
    offsets_in(dir, listing.names(), remove_tmp)
}

/// The snapshot offsets among `names` (the entries of `dir`), ascending; with
/// `remove_tmp`, the tmp files of interrupted writes are removed.
pub(crate) fn offsets_in<'a>(
    dir: &Path,
    names: impl Iterator<Item = &'a str>,
    remove_tmp: bool,
) -> Result<Vec<i64>> {
    let mut offsets = Vec::new();
    for name in names {
        match segment_file_name(name) {
            Some((offset, EXTENSION)) => offsets.push(offset),
            Some((_, "snapshot.tmp")) if remove_tmp => {
                let path = dir.join(name);
                fs::remove_file(&path).map_err(io_err("remove snapshot tmp", &path))?;
            }
            _ => {}
        }
    }
    offsets.sort_unstable();
    Ok(offsets)
}

/// Writes the snapshot of `state` at `offset` atomically, then deletes all but the
/// newest `SNAPSHOTS_TO_RETAIN` snapshots.
pub fn write(dir: &Path, offset: i64, state: &ProducerStateManager) -> Result<()> {
    let path = path(dir, offset);
    let tmp = dir.join(format!(
        "{}.tmp",
        crate::segment::file_name(offset, EXTENSION)
    ));
    let mut file = fs::File::create(&tmp).map_err(io_err("create producer snapshot", &tmp))?;
    file.write_all(&encode(offset, state))
        .and_then(|()| file.sync_all())
        .map_err(io_err("write producer snapshot", &tmp))?;
    drop(file);
    fs::rename(&tmp, &path).map_err(io_err("rename producer snapshot", &path))?;
    let offsets = list(dir)?;
    let excess = offsets.len().saturating_sub(SNAPSHOTS_TO_RETAIN);
    for old in offsets.iter().take(excess) {
        remove(dir, *old)?;
    }
    sync_dir(dir)
}

/// The newest readable snapshot at an offset `<= max_offset`: its offset and state.
/// Corrupt ones are skipped with a WARN (an older one, or none, means more replay).
/// Called when the log is opened; removes the tmp files of interrupted writes.
pub fn latest_at_or_below(
    dir: &Path,
    max_offset: i64,
) -> Result<Option<(i64, ProducerStateManager)>> {
    latest_of(dir, list_removing_interrupted_writes(dir)?, max_offset)
}

/// [`latest_at_or_below`] among the snapshots at `offsets` (listed by the caller).
pub(crate) fn latest_of(
    dir: &Path,
    offsets: Vec<i64>,
    max_offset: i64,
) -> Result<Option<(i64, ProducerStateManager)>> {
    for offset in offsets.into_iter().rev().filter(|o| *o <= max_offset) {
        let path = path(dir, offset);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err("read producer snapshot", &path)(e)),
        };
        match decode(&bytes) {
            Some((stored, state)) if stored == offset => return Ok(Some((offset, state))),
            _ => tracing::warn!(path = %path.display(), "corrupt producer snapshot ignored"),
        }
    }
    Ok(None)
}

/// Deletes every snapshot above `offset` (after a truncation to `offset`, they describe
/// batches that are gone), fsyncing the directory if any went, so that no later crash
/// brings them back. Returns the newest remaining snapshot offset.
pub fn delete_above(dir: &Path, offset: i64) -> Result<Option<i64>> {
    delete_above_of(dir, list(dir)?, offset)
}

/// [`delete_above`] among the snapshots at `offsets` (listed by the caller).
pub(crate) fn delete_above_of(dir: &Path, offsets: Vec<i64>, offset: i64) -> Result<Option<i64>> {
    let mut deleted = false;
    for above in offsets.iter().filter(|o| **o > offset) {
        remove(dir, *above)?;
        deleted = true;
    }
    if deleted {
        sync_dir(dir)?;
    }
    Ok(offsets.into_iter().rfind(|o| *o <= offset))
}

/// Deletes every snapshot (the log restarts empty).
pub fn delete_all(dir: &Path) -> Result<()> {
    delete_above(dir, i64::MIN).map(|_| ())
}

fn remove(dir: &Path, offset: i64) -> Result<()> {
    let path = path(dir, offset);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("delete producer snapshot", &path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_batch;

    #[test]
    fn listing_leaves_a_write_in_progress_alone_and_opening_removes_an_interrupted_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), 10, &ProducerStateManager::new()).expect("write");
        // Another thread's write between create and rename (the cleaner lists meanwhile).
        let tmp = dir.path().join("00000000000000000020.snapshot.tmp");
        fs::write(&tmp, b"partial").expect("tmp");
        assert_eq!(list(dir.path()).expect("list"), vec![10]);
        assert!(
            tmp.exists(),
            "a listing must not delete a write in progress"
        );
        // At open, nothing writes: a tmp file is a crash's leftover.
        let (offset, _) = latest_at_or_below(dir.path(), 100)
            .expect("load")
            .expect("a snapshot");
        assert_eq!(offset, 10);
        assert!(!tmp.exists());
    }
    use crate::control::ControlType;
    use crate::testing::{encode_batch, TestBatch};

    fn sample() -> ProducerStateManager {
        let mut state = ProducerStateManager::new();
        for (i, (pid, epoch, seq)) in [(7, 0, 0), (7, 0, 3), (9, 2, i32::MAX - 1), (11, 1, 0)]
            .into_iter()
            .enumerate()
        {
            let bytes = encode_batch(
                &TestBatch::sized(1_000 + i as i64, 3, 5).with_producer(pid, epoch, seq),
            );
            let mut h = validate_batch(&bytes).expect("valid test batch");
            h.base_offset = 10 * i as i64;
            state.update(&h, None);
        }
        // Producer 13 has a transaction open at offset 50 after one completed.
        for (offset, batch) in [
            (40, TestBatch::sized(0, 1, 1).transactional(13, 2, 0)),
            (41, TestBatch::marker(13, 2, ControlType::Commit, 4)),
            (50, TestBatch::sized(0, 2, 1).transactional(13, 2, 1)),
        ] {
            let bytes = encode_batch(&batch);
            let mut h = validate_batch(&bytes).expect("valid test batch");
            h.base_offset = offset;
            let marker = h
                .is_control()
                .then(|| crate::control::parse_end_txn_marker(&bytes, &h).expect("marker"));
            state.update(&h, marker.as_ref());
        }
        state
    }

    #[test]
    fn a_snapshot_keeps_open_transactions_and_coordinator_epochs() {
        let state = sample();
        let (_, decoded) = decode(&encode(60, &state)).expect("decodes");
        let entry = decoded.entry(13).expect("producer 13");
        assert_eq!(entry.current_txn_first_offset, Some(50));
        assert_eq!(entry.coordinator_epoch, 4);
        assert_eq!(decoded.first_unstable_offset(), Some(50));
    }

    #[test]
    fn a_version_1_snapshot_still_loads() {
        // Version 1 as written before transactions: producer 7, epoch 3, one batch.
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.extend_from_slice(&1u16.to_be_bytes());
        v1.extend_from_slice(&42i64.to_be_bytes());
        v1.extend_from_slice(&1u32.to_be_bytes());
        v1.extend_from_slice(&7i64.to_be_bytes());
        v1.extend_from_slice(&3i16.to_be_bytes());
        v1.push(1);
        for v in [0i32, 2] {
            v1.extend_from_slice(&v.to_be_bytes());
        }
        for v in [10i64, 12, 1_000] {
            v1.extend_from_slice(&v.to_be_bytes());
        }
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        let (offset, state) = decode(&v1).expect("v1 decodes");
        assert_eq!(offset, 42);
        let entry = state.entry(7).expect("producer 7");
        assert_eq!(entry.producer_epoch, 3);
        assert_eq!(entry.current_txn_first_offset, None);
        assert_eq!(entry.coordinator_epoch, -1);
        assert_eq!(entry.batches.len(), 1);
        assert_eq!(state.first_unstable_offset(), None);
    }

    #[test]
    fn a_snapshot_round_trips_every_producer_and_batch() {
        let state = sample();
        assert_eq!(decode(&encode(42, &state)), Some((42, state)));
        let empty = ProducerStateManager::new();
        assert_eq!(decode(&encode(0, &empty)), Some((0, empty)));
    }

    #[test]
    fn a_flipped_bit_or_a_short_file_is_rejected() {
        let bytes = encode(42, &sample());
        for at in [0, 5, 20, bytes.len() - 1] {
            let mut bad = bytes.clone();
            if let Some(b) = bad.get_mut(at) {
                *b ^= 1;
            }
            assert_eq!(decode(&bad), None, "flip at {at}");
        }
        assert_eq!(decode(&bytes[..bytes.len() - 3]), None);
        assert_eq!(decode(&[]), None);
    }

    /// Found by the `producer_snapshot` fuzz target: with a CRC that matches, a snapshot
    /// listing one producer twice, or two producers whose open transactions start at the
    /// same offset, decoded to a state that dropped one of them (and re-encoded differently).
    #[test]
    fn a_snapshot_naming_a_producer_or_a_transaction_start_twice_is_corrupt() {
        let open_at = |first: Option<i64>| ProducerEntry {
            producer_epoch: 0,
            batches: VecDeque::new(),
            current_txn_first_offset: first,
            coordinator_epoch: 0,
        };
        let snapshot = |entries: &[(i64, ProducerEntry)]| {
            let mut body = MAGIC.to_vec();
            body.extend_from_slice(&VERSION.to_be_bytes());
            body.extend_from_slice(&100i64.to_be_bytes());
            body.extend_from_slice(&(entries.len() as u32).to_be_bytes());
            for (id, e) in entries {
                body.extend_from_slice(&id.to_be_bytes());
                body.extend_from_slice(&e.producer_epoch.to_be_bytes());
                body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
                body.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
                body.push(0);
            }
            let crc = crc32c::crc32c(&body);
            body.extend_from_slice(&crc.to_be_bytes());
            body
        };
        let fine = snapshot(&[(1, open_at(Some(5))), (2, open_at(Some(7)))]);
        assert!(decode(&fine).is_some());
        let same_start = snapshot(&[(1, open_at(Some(5))), (2, open_at(Some(5)))]);
        assert_eq!(decode(&same_start), None);
        let same_producer = snapshot(&[(1, open_at(None)), (1, open_at(Some(5)))]);
        assert_eq!(decode(&same_producer), None);
    }

    #[test]
    fn only_the_newest_two_are_kept_and_truncation_deletes_those_above() {
        let dir = tempfile::tempdir().expect("tempdir");
        for offset in [10, 20, 30] {
            write(dir.path(), offset, &sample()).expect("write");
        }
        assert_eq!(list(dir.path()).expect("list"), vec![20, 30]);
        let (offset, state) = latest_at_or_below(dir.path(), 25)
            .expect("read")
            .expect("one at 20");
        assert_eq!((offset, state), (20, sample()));
        assert_eq!(delete_above(dir.path(), 20).expect("delete"), Some(20));
        assert_eq!(list(dir.path()).expect("list"), vec![20]);
        std::fs::write(path(dir.path(), 20), b"garbage").expect("corrupt");
        assert!(latest_at_or_below(dir.path(), 100).expect("read").is_none());
        delete_all(dir.path()).expect("delete all");
        assert!(list(dir.path()).expect("list").is_empty());
    }
}
