//! What `LogManager::open` knows of each partition of one log directory before it opens
//! the partition's log: the three offset checkpoints (`checkpoint.rs`) and the clean
//! shutdown summary (`clean_shutdown.rs`), read once and parsed into one map keyed by
//! (topic, partition) borrowed from the files' text, the summary judged against the
//! checkpoints in the same pass. A directory of 100,000 partitions holds four
//! 100,000-line files: one owned `(String, i32)` map per file cost most of a clean start.
//!
//! The listing then asks for each partition directory it finds ([`DirState::listed`]) and
//! counts what it matched, so [`DirState::finish`] knows whether every summary entry was
//! listed (else the summary is not this directory's state) and whether the checkpoints
//! are current: every listed log opens from the summary and each file lists exactly the
//! listed partitions with the offsets their handles start with. Then the rewrite `open`
//! does to drop entries of logs that no longer exist would write what is on disk already,
//! and it is skipped (0.2–0.3 s of three 100,000-line files, each written and fsynced).
//!
//! Crash rule (unchanged): the marker and the summary are removed, the removal fsynced,
//! by [`DirFiles::read`], before anything in the directory is written, so a crash after
//! this start recovers from the checkpoints as a start without a summary does. Skipping
//! the rewrite keeps those checkpoint files as the clean shutdown wrote and fsynced them.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use crate::checkpoint::{self, FILE_NAME, RECOVERY_POINT_FILE_NAME, REPLICATION_FILE_NAME};
use crate::clean_shutdown::{self, SummaryEntry, Taken};
use crate::error::{io_err, Result};

/// The files of one log directory as read at start.
#[derive(Debug)]
pub(crate) struct DirFiles {
    log_starts: Option<String>,
    high_watermarks: Option<String>,
    recovery_points: Option<String>,
    summary: Taken,
}

impl DirFiles {
    /// Reads the three checkpoints, then takes the clean shutdown files (removing them:
    /// see the module docs).
    pub(crate) fn read(log_dir: &Path) -> Result<Self> {
        let log_starts = read_text(log_dir, FILE_NAME)?;
        let high_watermarks = read_text(log_dir, REPLICATION_FILE_NAME)?;
        let recovery_points = read_text(log_dir, RECOVERY_POINT_FILE_NAME)?;
        let summary = clean_shutdown::take_files(log_dir)?;
        Ok(DirFiles {
            log_starts,
            high_watermarks,
            recovery_points,
            summary,
        })
    }
}

/// A file's text; `None` when it does not exist. Bytes that are not text read as an empty
/// (malformed) file: the broker must not refuse to start over a file it can do without.
fn read_text(log_dir: &Path, name: &str) -> Result<Option<String>> {
    let path = log_dir.join(name);
    match fs::read(&path) {
        Ok(bytes) => Ok(Some(String::from_utf8(bytes).unwrap_or_default())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("read checkpoint", &path)(e)),
    }
}

/// What the files say of one partition.
#[derive(Debug, Default, Clone, Copy)]
struct Known {
    log_start: Option<i64>,
    high_watermark: Option<i64>,
    recovery_point: Option<i64>,
    summary: Option<SummaryEntry>,
}

/// How a listed partition's log starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartitionStart {
    /// Checkpointed recovery point; 0 (a full scan) without one.
    pub(crate) recovery_point: i64,
    pub(crate) log_start: Option<i64>,
    /// `None`: no high watermark checkpoint in the directory (see `LogManager::open`).
    pub(crate) high_watermark: Option<i64>,
    /// Its summary entry: the log opens on first use (`handle/lazy.rs`).
    pub(crate) lazy: Option<SummaryEntry>,
}

/// Entries of each file, and of them those whose partition was listed.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    log_starts: usize,
    high_watermarks: usize,
    recovery_points: usize,
    summary: usize,
}

/// One log directory's files, parsed; see the module docs.
#[derive(Debug)]
pub(crate) struct DirState<'t> {
    log_dir: &'t Path,
    known: HashMap<(&'t str, i32), Known>,
    has_high_watermarks: bool,
    has_recovery_points: bool,
    in_files: Tally,
    matched: Tally,
    listed: usize,
    /// Every listed partition so far opens lazily with the offsets the files hold (its
    /// high watermark within its bounds, a listed log start above 0).
    listed_as_written: bool,
}

/// Which offset of [`Known`] a checkpoint file fills.
type Field = fn(&mut Known) -> &mut Option<i64>;

impl<'t> DirState<'t> {
    /// Parses `files` (a malformed checkpoint reads as present but empty, with a WARN, as
    /// `checkpoint::read_named` does; a summary that is not vouched for or disagrees with
    /// the checkpoints is not used, with a WARN, as `clean_shutdown::take` does).
    pub(crate) fn build(log_dir: &'t Path, files: &'t DirFiles) -> Self {
        let mut state = DirState {
            log_dir,
            known: HashMap::new(),
            has_high_watermarks: files.high_watermarks.is_some(),
            has_recovery_points: files.recovery_points.is_some(),
            in_files: Tally::default(),
            matched: Tally::default(),
            listed: 0,
            listed_as_written: true,
        };
        let largest = [
            &files.log_starts,
            &files.high_watermarks,
            &files.recovery_points,
        ]
        .iter()
        .filter_map(|t| t.as_deref())
        .map(|t| t.len() / 8)
        .max()
        .unwrap_or(0);
        state.known.reserve(largest);
        state.in_files.log_starts =
            state.add_checkpoint(&files.log_starts, FILE_NAME, |k| &mut k.log_start);
        state.in_files.high_watermarks =
            state.add_checkpoint(&files.high_watermarks, REPLICATION_FILE_NAME, |k| {
                &mut k.high_watermark
            });
        state.in_files.recovery_points =
            state.add_checkpoint(&files.recovery_points, RECOVERY_POINT_FILE_NAME, |k| {
                &mut k.recovery_point
            });
        if let Err(reason) = state.add_summary(&files.summary) {
            files.summary.not_used(log_dir, reason);
        }
        state
    }

    /// Adds one checkpoint file's offsets; returns how many it lists (0 if malformed).
    fn add_checkpoint(&mut self, text: &'t Option<String>, name: &str, field: Field) -> usize {
        let Some(text) = text else { return 0 };
        let entries = checkpoint::parse_entries(text);
        let added = entries.as_ref().map_or(0, |entries| {
            let mut added = 0;
            for &(topic, partition, offset) in entries {
                let slot = field(self.known.entry((topic, partition)).or_default());
                if slot.replace(offset).is_some() {
                    break; // listed twice: malformed
                }
                added += 1;
            }
            added
        });
        if entries.as_ref().is_some_and(|e| e.len() == added) {
            return added;
        }
        // Partly added (a partition listed twice): none of it counts.
        if let Some(entries) = &entries {
            for &(topic, partition, _) in &entries[..added] {
                if let Some(known) = self.known.get_mut(&(topic, partition)) {
                    *field(known) = None;
                }
            }
        }
        tracing::warn!(path = %self.log_dir.join(name).display(), "malformed offset checkpoint ignored");
        0
    }

    /// Adds the summary's entries if the marker vouches for it and every entry agrees with
    /// the checkpoints; otherwise none, and why.
    fn add_summary(&mut self, taken: &'t Taken) -> std::result::Result<(), &'static str> {
        let entries = taken.vouched()?;
        if !self.has_recovery_points {
            return Err("no recovery point checkpoint");
        }
        let mut verdict = Ok(());
        let mut added = 0;
        for &(topic, partition, entry) in &entries {
            let known = self.known.entry((topic, partition)).or_default();
            verdict = clean_shutdown::agrees(&entry, known.recovery_point, known.log_start);
            if verdict.is_ok() && known.summary.replace(entry).is_some() {
                verdict = Err("count mismatch");
            }
            if verdict.is_err() {
                break;
            }
            added += 1;
        }
        if verdict.is_err() {
            for &(topic, partition, _) in &entries[..added] {
                if let Some(known) = self.known.get_mut(&(topic, partition)) {
                    known.summary = None;
                }
            }
            return verdict;
        }
        self.in_files.summary = added;
        Ok(())
    }

    /// Whether the directory has a recovery point checkpoint (without one every log is
    /// recovered fully).
    pub(crate) fn has_recovery_points(&self) -> bool {
        self.has_recovery_points
    }

    /// A partition directory the listing found (each at most once).
    pub(crate) fn listed(&mut self, topic: &str, partition: i32) -> PartitionStart {
        let known = self
            .known
            .get(&(topic, partition))
            .copied()
            .unwrap_or_default();
        self.listed += 1;
        self.matched.log_starts += usize::from(known.log_start.is_some());
        self.matched.high_watermarks += usize::from(known.high_watermark.is_some());
        self.matched.recovery_points += usize::from(known.recovery_point.is_some());
        self.matched.summary += usize::from(known.summary.is_some());
        // What a handle made from the summary entry starts with is what the files hold:
        // the high watermark is kept within the log's bounds, and only log starts above 0
        // are checkpointed.
        self.listed_as_written &= known.summary.is_some_and(|e| {
            known
                .high_watermark
                .is_some_and(|hw| (e.log_start_offset..=e.log_end_offset).contains(&hw))
                && known.log_start.is_none_or(|start| start > 0)
        });
        PartitionStart {
            recovery_point: known.recovery_point.unwrap_or(0),
            log_start: known.log_start,
            // Without a checkpoint file the directory predates replication (see
            // `LogManager::open`); with one, a partition missing from it has nothing
            // committed beyond its log start (Kafka reads it as 0, clamped).
            high_watermark: self
                .has_high_watermarks
                .then(|| known.high_watermark.unwrap_or(0)),
            lazy: known.summary,
        }
    }

    /// After the listing: whether the summary may be used (every entry's directory was
    /// listed; if not, the caller opens every log of the directory) and whether the
    /// checkpoints are current (see the module docs).
    pub(crate) fn finish(&self) -> Finished {
        let summary_listed = self.matched.summary == self.in_files.summary;
        if !summary_listed {
            tracing::warn!(dir = %self.log_dir.display(), "clean shutdown summary lists a log that is not there; opening every log");
        }
        let all = |matched: usize, in_file: usize| matched == in_file;
        let checkpoints_current = summary_listed
            && self.listed_as_written
            && self.has_high_watermarks
            && self.has_recovery_points
            && all(self.matched.summary, self.listed)
            && all(self.matched.high_watermarks, self.listed)
            && all(self.matched.high_watermarks, self.in_files.high_watermarks)
            && all(self.matched.recovery_points, self.in_files.recovery_points)
            && all(self.matched.log_starts, self.in_files.log_starts);
        Finished {
            summary_listed,
            checkpoints_current,
        }
    }
}

/// [`DirState::finish`]'s verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Finished {
    pub(crate) summary_listed: bool,
    pub(crate) checkpoints_current: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{write_named, Offsets, WhenEmpty};
    use crate::clean_shutdown::{write, Summary};

    fn entry(start: i64, end: i64) -> SummaryEntry {
        SummaryEntry {
            log_start_offset: start,
            log_end_offset: end,
            recovery_point: end,
            latest_epoch: Some(1),
        }
    }

    /// A directory as a clean shutdown leaves it: t-0 [0, 5), t-1 [3, 9), hw 4 and 9.
    fn clean_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let offsets = |pairs: &[(i32, i64)]| -> Offsets {
            pairs
                .iter()
                .map(|&(p, o)| (("t".to_string(), p), o))
                .collect()
        };
        let put = |name, o: Offsets| {
            write_named(dir.path(), name, &o, WhenEmpty::RemoveFile).expect("write");
        };
        put(FILE_NAME, offsets(&[(1, 3)]));
        put(REPLICATION_FILE_NAME, offsets(&[(0, 4), (1, 9)]));
        put(RECOVERY_POINT_FILE_NAME, offsets(&[(0, 5), (1, 9)]));
        let summary = Summary::from([
            (("t".to_string(), 0), entry(0, 5)),
            (("t".to_string(), 1), entry(3, 9)),
        ]);
        write(dir.path(), &summary).expect("summary");
        dir
    }

    #[test]
    fn a_clean_directory_opens_lazily_and_its_checkpoints_are_current() {
        let dir = clean_dir();
        let files = DirFiles::read(dir.path()).expect("read");
        let mut state = DirState::build(dir.path(), &files);
        assert_eq!(
            state.listed("t", 1),
            PartitionStart {
                recovery_point: 9,
                log_start: Some(3),
                high_watermark: Some(9),
                lazy: Some(entry(3, 9)),
            }
        );
        assert_eq!(state.listed("t", 0).lazy, Some(entry(0, 5)));
        assert_eq!(
            state.finish(),
            Finished {
                summary_listed: true,
                checkpoints_current: true,
            }
        );
        // Taken: the marker is gone before anything is written.
        assert!(!dir.path().join(clean_shutdown::MARKER_FILE_NAME).exists());
    }

    #[test]
    fn an_unlisted_or_unknown_partition_makes_the_checkpoints_stale() {
        let dir = clean_dir();
        let files = DirFiles::read(dir.path()).expect("read");
        // t-1's directory is gone: the summary is not this directory's state.
        let mut state = DirState::build(dir.path(), &files);
        state.listed("t", 0);
        assert_eq!(
            state.finish(),
            Finished {
                summary_listed: false,
                checkpoints_current: false,
            }
        );
        // A partition no file knows: it opens eagerly, and the rewrite lists it.
        let mut state = DirState::build(dir.path(), &files);
        state.listed("t", 0);
        state.listed("t", 1);
        let new = state.listed("u", 0);
        assert_eq!(new.lazy, None);
        assert_eq!(new.high_watermark, Some(0));
        assert_eq!(new.recovery_point, 0);
        assert!(state.finish().summary_listed && !state.finish().checkpoints_current);
    }

    #[test]
    fn without_the_marker_nothing_opens_lazily() {
        let dir = clean_dir();
        fs::remove_file(dir.path().join(clean_shutdown::MARKER_FILE_NAME)).expect("rm");
        let files = DirFiles::read(dir.path()).expect("read");
        let mut state = DirState::build(dir.path(), &files);
        let t1 = state.listed("t", 1);
        assert_eq!(
            (t1.lazy, t1.recovery_point, t1.log_start),
            (None, 9, Some(3))
        );
        state.listed("t", 0);
        assert!(!state.finish().checkpoints_current);
    }

    #[test]
    fn a_checkpoint_that_disagrees_with_the_summary_voids_it() {
        let dir = clean_dir();
        let moved: Offsets = [(("t".to_string(), 0), 4), (("t".to_string(), 1), 9)].into();
        write_named(
            dir.path(),
            RECOVERY_POINT_FILE_NAME,
            &moved,
            WhenEmpty::RemoveFile,
        )
        .expect("write");
        let files = DirFiles::read(dir.path()).expect("read");
        let mut state = DirState::build(dir.path(), &files);
        assert_eq!(state.listed("t", 1).lazy, None);
        assert_eq!(state.listed("t", 0).recovery_point, 4);
        assert!(!state.finish().checkpoints_current);
    }

    #[test]
    fn a_partition_listed_twice_makes_a_checkpoint_malformed() {
        let dir = clean_dir();
        fs::write(dir.path().join(FILE_NAME), "0\n2\nt 1 3\nt 1 3\n").expect("write");
        let files = DirFiles::read(dir.path()).expect("read");
        let mut state = DirState::build(dir.path(), &files);
        // Read as empty: t-1's summary entry (log start 3) no longer agrees.
        let t1 = state.listed("t", 1);
        assert_eq!((t1.log_start, t1.lazy), (None, None));
        state.listed("t", 0);
        assert!(!state.finish().checkpoints_current);
    }

    #[test]
    fn a_high_watermark_outside_the_log_is_rewritten() {
        let dir = clean_dir();
        let hws: Offsets = [(("t".to_string(), 0), 7), (("t".to_string(), 1), 9)].into();
        write_named(
            dir.path(),
            REPLICATION_FILE_NAME,
            &hws,
            WhenEmpty::WriteFile,
        )
        .expect("write");
        let files = DirFiles::read(dir.path()).expect("read");
        let mut state = DirState::build(dir.path(), &files);
        assert_eq!(state.listed("t", 0).high_watermark, Some(7));
        state.listed("t", 1);
        assert_eq!(
            state.finish(),
            Finished {
                summary_listed: true,
                checkpoints_current: false,
            }
        );
    }
}
