//! The leader epoch cache of one partition (Kafka's `LeaderEpochFileCache`, KIP-101/279):
//! for each leader epoch, the first offset written in it. It answers
//! OffsetForLeaderEpoch and tells a follower where its log diverged from the leader's.
//!
//! Invariants: entries strictly increase in both epoch and start offset; epochs and start
//! offsets are never negative. Mutations change memory only and mark the cache dirty;
//! `flush` persists `<partition dir>/leader-epoch-checkpoint` when (and only when) it
//! changed, atomically (tmp, fsync, rename, fsync directory). The file is a cache of
//! what the batch headers say: `Log::open` merges it with the headers and trims it to the
//! log, so a crash between a data write and the file write loses nothing.
//!
//! Format (Kafka's, text): `0` (version), the entry count, then `<epoch> <start offset>`
//! per line, oldest first. Not thread-safe: owned by the `Log`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::checkpoint::write_atomically;
use crate::error::{io_err, Result};

/// The file's name inside the partition directory.
pub const FILE_NAME: &str = "leader-epoch-checkpoint";
const VERSION: &str = "0";
/// Kafka's `UNDEFINED_EPOCH` / `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One epoch and the first offset written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// A partition's leader epochs.
#[derive(Debug)]
pub struct LeaderEpochCache {
    dir: PathBuf,
    entries: Vec<EpochEntry>,
    /// Memory differs from the file.
    dirty: bool,
}

impl LeaderEpochCache {
    /// The cache of a log in `dir` without a checkpoint file (what `load` gives when the
    /// file is missing).
    pub fn empty(dir: &Path) -> Self {
        LeaderEpochCache {
            dir: dir.to_path_buf(),
            entries: Vec::new(),
            dirty: false,
        }
    }

    /// Loads `<dir>/leader-epoch-checkpoint`. A missing file gives an empty cache; a
    /// malformed one gives an empty cache (WARN) marked dirty, so that the version
    /// rebuilt from the batch headers replaces it at the next `flush`.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(FILE_NAME);
        let mut cache = Self::empty(dir);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cache),
            // Not UTF-8: as malformed as any other garbage.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => String::new(),
            Err(e) => return Err(io_err("read leader epoch checkpoint", &path)(e)),
        };
        match parse(&text) {
            Some(entries) => {
                // Through `assign`, as Kafka loads it: a non-monotonic file is repaired.
                for e in &entries {
                    cache.assign(e.epoch, e.start_offset);
                }
                cache.dirty = cache.entries != entries;
            }
            None => {
                tracing::warn!(path = %path.display(), "malformed leader epoch checkpoint; rebuilding it from the log");
                cache.dirty = true;
            }
        }
        Ok(cache)
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest (epoch, start offset).
    pub fn latest(&self) -> Option<(i32, i64)> {
        self.entries.last().map(|e| (e.epoch, e.start_offset))
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Kafka's `assign`: records that `epoch` starts at `start_offset`. Needed when the
    /// epoch differs from the latest one or starts earlier; entries at or after the new
    /// one (epoch >= or start offset >=) are removed first, which keeps both columns
    /// strictly increasing. Negative epochs or offsets (batches from before KIP-101,
    /// `NO_PARTITION_LEADER_EPOCH`) are ignored. Returns whether the cache changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        let needed = self
            .entries
            .last()
            .is_none_or(|l| l.epoch != epoch || start_offset < l.start_offset);
        if !needed {
            return false;
        }
        let keep = self
            .entries
            .iter()
            .position(|e| e.epoch >= epoch || e.start_offset >= start_offset)
            .unwrap_or(self.entries.len());
        let removed = self.entries.len() - keep;
        let trivial = removed == 0
            || (removed == 1
                && self
                    .entries
                    .last()
                    .is_some_and(|l| l.start_offset == start_offset));
        if !trivial {
            // Kafka warns too: only a leader change with no data in between is expected.
            tracing::warn!(dir = %self.dir.display(), epoch, start_offset, removed, "leader epoch assignment truncated later epochs");
        }
        self.entries.truncate(keep);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.dirty = true;
        true
    }

    /// Kafka's `assign` as the log uses it: only an epoch newer than the latest one is
    /// recorded (a batch of an older epoch never rewrites history).
    pub fn assign_if_newer(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || self.latest_epoch().is_some_and(|l| epoch <= l) {
            return false;
        }
        self.assign(epoch, start_offset)
    }

    /// Kafka's `endOffsetFor`: (the epoch, the offset after its last record) for
    /// OffsetForLeaderEpoch and follower divergence checks.
    /// - `UNDEFINED_EPOCH` (or an empty cache, or an epoch above all cached ones):
    ///   (-1, -1);
    /// - the latest epoch: (latest, `log_end_offset`), since it is still being written;
    /// - otherwise (largest cached epoch <= requested, start of the next higher epoch), or
    ///   (requested, start of the first cached epoch) when the requested one is below all
    ///   cached epochs (their data is gone; the follower restarts from there).
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> (i32, i64) {
        let undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        if requested_epoch == UNDEFINED_EPOCH {
            return undefined;
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return (requested_epoch, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested_epoch) else {
            return undefined;
        };
        match self
            .entries
            .iter()
            .rev()
            .find(|e| e.epoch <= requested_epoch)
        {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (requested_epoch, higher.start_offset),
        }
    }

    /// Kafka's `truncateFromEnd`: drops the entries starting at or after `end_offset`
    /// (the log was truncated there).
    pub fn truncate_from_end(&mut self, end_offset: i64) {
        if end_offset < 0 {
            return;
        }
        let keep = self
            .entries
            .iter()
            .position(|e| e.start_offset >= end_offset)
            .unwrap_or(self.entries.len());
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            self.dirty = true;
        }
    }

    /// Kafka's `truncateFromStart`: the log now starts at `start_offset`; entries
    /// starting at or before it are dropped except the latest of them, which is moved to
    /// start at `start_offset` (its epoch still covers the first remaining records).
    pub fn truncate_from_start(&mut self, start_offset: i64) {
        let removed = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        let Some(last_removed) = removed.checked_sub(1).and_then(|i| self.entries.get(i)) else {
            return;
        };
        let moved = EpochEntry {
            epoch: last_removed.epoch,
            start_offset,
        };
        if removed == 1 && *last_removed == moved {
            return;
        }
        self.entries.drain(..removed);
        self.entries.insert(0, moved);
        self.dirty = true;
    }

    /// Forgets every epoch (the log was fully truncated).
    pub fn clear(&mut self) {
        if !self.entries.is_empty() {
            self.entries.clear();
            self.dirty = true;
        }
    }

    /// Persists the cache if it changed since the last flush (or load).
    pub fn flush(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        write_atomically(&self.dir, FILE_NAME, &render(&self.entries))?;
        self.dirty = false;
        Ok(())
    }
}

/// Renders the file's text.
fn render(entries: &[EpochEntry]) -> String {
    let mut text = format!("{VERSION}\n{}\n", entries.len());
    for e in entries {
        text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    text
}

/// Parses the file's text; `None` if malformed (version, count, a bad or negative field).
pub(crate) fn parse(text: &str) -> Option<Vec<EpochEntry>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != VERSION {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut entries = Vec::with_capacity(count.min(1024));
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let mut fields = line.split_whitespace();
        let epoch: i32 = fields.next()?.parse().ok()?;
        let start_offset: i64 = fields.next()?.parse().ok()?;
        if fields.next().is_some() || epoch < 0 || start_offset < 0 {
            return None;
        }
        entries.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    (entries.len() == count).then_some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> (tempfile::TempDir, LeaderEpochCache) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = LeaderEpochCache::load(dir.path()).expect("load");
        for (epoch, start) in entries {
            cache.assign(*epoch, *start);
        }
        (dir, cache)
    }

    fn pairs(cache: &LeaderEpochCache) -> Vec<(i32, i64)> {
        cache
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    #[test]
    fn assign_adds_newer_epochs_and_ignores_repeats_and_negatives() {
        let (_dir, mut c) = cache(&[]);
        assert!(c.assign(0, 0));
        assert!(!c.assign(0, 5), "same epoch, later offset: nothing to do");
        assert!(c.assign(2, 10));
        assert!(!c.assign(-1, 20));
        assert!(!c.assign(3, -1));
        assert_eq!(pairs(&c), vec![(0, 0), (2, 10)]);
        assert_eq!(c.latest(), Some((2, 10)));
        assert_eq!(c.latest_epoch(), Some(2));
    }

    #[test]
    fn assign_replaces_later_entries_that_are_not_monotonic() {
        // A lower start offset for a new epoch removes entries starting at or after it.
        let (_dir, mut c) = cache(&[(0, 0), (2, 10), (3, 20)]);
        assert!(c.assign(4, 10));
        assert_eq!(pairs(&c), vec![(0, 0), (4, 10)]);
        // An older epoch removes every entry with a greater or equal epoch (as Kafka).
        assert!(c.assign(1, 15));
        assert_eq!(pairs(&c), vec![(0, 0), (1, 15)]);
        // The same epoch starting earlier replaces it.
        assert!(c.assign(1, 5));
        assert_eq!(pairs(&c), vec![(0, 0), (1, 5)]);
    }

    #[test]
    fn assign_if_newer_only_records_epochs_above_the_latest() {
        let (_dir, mut c) = cache(&[(3, 10)]);
        assert!(!c.assign_if_newer(3, 5));
        assert!(!c.assign_if_newer(2, 20));
        assert!(!c.assign_if_newer(-1, 20));
        assert!(c.assign_if_newer(5, 20));
        assert_eq!(pairs(&c), vec![(3, 10), (5, 20)]);
    }

    #[test]
    fn end_offset_for_follows_kafka_in_every_case() {
        let (_dir, empty) = cache(&[]);
        assert_eq!(empty.end_offset_for(0, 100), (-1, -1), "no entries");
        let (_dir, c) = cache(&[(2, 10), (4, 30), (6, 50)]);
        assert_eq!(
            c.end_offset_for(UNDEFINED_EPOCH, 100),
            (-1, -1),
            "undefined"
        );
        assert_eq!(c.end_offset_for(6, 100), (6, 100), "latest epoch: the LEO");
        assert_eq!(
            c.end_offset_for(4, 100),
            (4, 50),
            "cached: next epoch's start"
        );
        assert_eq!(
            c.end_offset_for(5, 100),
            (4, 50),
            "uncached between: the floor epoch, the next start"
        );
        assert_eq!(
            c.end_offset_for(1, 100),
            (1, 10),
            "below all: requested epoch, first start"
        );
        assert_eq!(c.end_offset_for(7, 100), (-1, -1), "above the latest");
    }

    #[test]
    fn truncate_from_end_drops_entries_at_or_after_the_offset() {
        let (_dir, mut c) = cache(&[(2, 10), (4, 30), (6, 50)]);
        c.truncate_from_end(51);
        assert_eq!(c.entries().len(), 3);
        c.truncate_from_end(30);
        assert_eq!(pairs(&c), vec![(2, 10)]);
        c.truncate_from_end(10);
        assert_eq!(pairs(&c), vec![]);
    }

    #[test]
    fn truncate_from_start_moves_the_covering_epoch_to_the_new_start() {
        let (_dir, mut c) = cache(&[(2, 10), (4, 30), (6, 50)]);
        c.truncate_from_start(5);
        assert_eq!(pairs(&c), vec![(2, 10), (4, 30), (6, 50)]);
        c.truncate_from_start(10);
        assert_eq!(pairs(&c), vec![(2, 10), (4, 30), (6, 50)]);
        c.truncate_from_start(35);
        assert_eq!(pairs(&c), vec![(4, 35), (6, 50)]);
        c.truncate_from_start(60);
        assert_eq!(pairs(&c), vec![(6, 60)]);
        c.clear();
        assert_eq!(c.latest(), None);
    }

    #[test]
    fn the_checkpoint_round_trips_in_kafkas_format_and_is_written_only_on_change() {
        let (dir, mut c) = cache(&[(0, 0), (3, 42)]);
        c.flush().expect("flush");
        let path = dir.path().join(FILE_NAME);
        assert_eq!(
            fs::read_to_string(&path).expect("read"),
            "0\n2\n0 0\n3 42\n"
        );
        fs::remove_file(&path).expect("remove");
        c.flush().expect("clean flush");
        assert!(!path.exists(), "an unchanged cache is not rewritten");
        c.assign(4, 50);
        c.flush().expect("flush");
        let loaded = LeaderEpochCache::load(dir.path()).expect("load");
        assert_eq!(pairs(&loaded), vec![(0, 0), (3, 42), (4, 50)]);
        assert!(!loaded.dirty);
        assert!(!dir.path().join(format!("{FILE_NAME}.tmp")).exists());
    }

    #[test]
    fn a_corrupt_checkpoint_loads_empty_and_dirty() {
        for text in [
            "garbage",
            "1\n0\n",
            "0\n2\n1 5\n",
            "0\n1\n-3 5\n",
            "0\n1\n1 5 9\n",
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            fs::write(dir.path().join(FILE_NAME), text).expect("write");
            let c = LeaderEpochCache::load(dir.path()).expect("load");
            assert_eq!(c.latest(), None, "{text:?}");
            assert!(c.dirty, "{text:?}");
        }
    }

    #[test]
    fn a_non_monotonic_checkpoint_is_repaired_on_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), "0\n3\n1 0\n3 20\n2 10\n").expect("write");
        let c = LeaderEpochCache::load(dir.path()).expect("load");
        assert_eq!(pairs(&c), vec![(1, 0), (2, 10)]);
        assert!(c.dirty);
    }
}
