//! Per-log-directory offset checkpoint files (Kafka's `OffsetCheckpointFile`):
//! - `log-start-offset-checkpoint`: where each partition's log starts, so that a restart
//!   does not resurrect records that retention or DeleteRecords removed. Only partitions
//!   whose log start lies above 0 are listed, and with none the file is absent.
//! - `replication-offset-checkpoint`: each partition's high watermark. Every open log is
//!   listed and the file is written even when empty, because its absence means "a log
//!   directory from before replication" (see `LogManager::open`).
//! - `recovery-point-offset-checkpoint`: each partition's recovery point (below it the
//!   log is fsynced and opens without a scan, `log/load.rs`). Absent or malformed, every
//!   log is recovered fully.
//!
//! Format (Kafka's, text): a version line `0`, a count line, then one
//! `<topic> <partition> <offset>` line per partition. Replaced atomically: write a tmp
//! file, fsync, rename, fsync the directory, so a crash leaves the old or the new file,
//! never a torn one. Synchronous: call from blocking threads.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::{io_err, Result};
use crate::recovery::sync_dir;

/// The log start offset checkpoint's name inside each log directory.
pub const FILE_NAME: &str = "log-start-offset-checkpoint";
/// The high watermark checkpoint's name inside each log directory.
pub const REPLICATION_FILE_NAME: &str = "replication-offset-checkpoint";
/// The recovery point checkpoint's name inside each log directory.
pub const RECOVERY_POINT_FILE_NAME: &str = "recovery-point-offset-checkpoint";
const VERSION: &str = "0";

/// Offsets by (topic, partition).
pub type Offsets = BTreeMap<(String, i32), i64>;

/// Renders the file's text.
pub fn render(offsets: &Offsets) -> String {
    let mut text = format!("{VERSION}\n{}\n", offsets.len());
    for ((topic, partition), offset) in offsets {
        text.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    text
}

/// Parses the file's text; `None` if it is malformed (wrong version, count mismatch,
/// bad line).
pub fn parse(text: &str) -> Option<Offsets> {
    let entries = parse_entries(text)?;
    let offsets: Offsets = entries
        .into_iter()
        .map(|(topic, partition, offset)| ((topic.to_string(), partition), offset))
        .collect();
    // A partition listed twice counts once, as `count` must match the distinct entries.
    (offsets.len() == entries_count(text)?).then_some(offsets)
}

/// The file's `(topic, partition, offset)` entries in file order, borrowed from `text`
/// (no allocation per entry: `LogManager::open` reads 100,000-line files at start);
/// `None` if it is malformed as [`parse`] defines it, except that a partition listed
/// twice is left to the caller.
pub(crate) fn parse_entries(text: &str) -> Option<Vec<(&str, i32, i64)>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != VERSION {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut entries = Vec::with_capacity(count.min(text.len() / 6));
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let mut fields = line.split_whitespace();
        let topic = fields.next()?;
        let partition: i32 = fields.next()?.parse().ok()?;
        let offset: i64 = fields.next()?.parse().ok()?;
        if fields.next().is_some() || partition < 0 || offset < 0 {
            return None;
        }
        entries.push((topic, partition, offset));
    }
    (entries.len() == count).then_some(entries)
}

/// The count line of a well-formed file.
fn entries_count(text: &str) -> Option<usize> {
    text.lines().nth(1)?.trim().parse().ok()
}

/// What `write_named` does when there is nothing to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenEmpty {
    /// Remove the file: absent and empty mean the same (log start offsets).
    RemoveFile,
    /// Write a file with no entries: its presence carries meaning (high watermarks).
    WriteFile,
}

/// Reads `<log_dir>/log-start-offset-checkpoint`; a missing file is empty. A malformed
/// file is ignored with a WARN, as Kafka does (the logs then start at their first
/// segment, which retention only ever deletes whole).
pub fn read(log_dir: &Path) -> Result<Offsets> {
    Ok(read_named(log_dir, FILE_NAME)?.unwrap_or_default())
}

/// Reads `<log_dir>/<name>`: `None` when the file does not exist; a malformed file reads
/// as present but empty, with a WARN (callers treat a missing entry conservatively).
pub fn read_named(log_dir: &Path, name: &str) -> Result<Option<Offsets>> {
    let path = log_dir.join(name);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read checkpoint", &path)(e)),
    };
    // Bytes that are not even text (a flipped high bit) are malformed like any others: the
    // broker must not refuse to start over a file it can do without.
    let parsed = std::str::from_utf8(&bytes).ok().and_then(parse);
    Ok(Some(parsed.unwrap_or_else(|| {
        tracing::warn!(path = %path.display(), "malformed offset checkpoint ignored");
        Offsets::new()
    })))
}

/// Atomically replaces `<log_dir>/log-start-offset-checkpoint` with `offsets`; with no
/// offsets the file is removed instead (absent and empty mean the same).
pub fn write(log_dir: &Path, offsets: &Offsets) -> Result<()> {
    write_named(log_dir, FILE_NAME, offsets, WhenEmpty::RemoveFile)
}

/// Atomically replaces `<log_dir>/<name>` with `offsets`.
pub fn write_named(
    log_dir: &Path,
    name: &str,
    offsets: &Offsets,
    when_empty: WhenEmpty,
) -> Result<()> {
    let path = log_dir.join(name);
    if offsets.is_empty() && when_empty == WhenEmpty::RemoveFile {
        return match fs::remove_file(&path) {
            Ok(()) => sync_dir(log_dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove checkpoint", &path)(e)),
        };
    }
    write_atomically(log_dir, name, &render(offsets))
}

/// Replaces `<dir>/<name>` with `text`: tmp file, fsync, rename, fsync the directory, so
/// a crash leaves the old or the new content, never a torn file.
pub(crate) fn write_atomically(dir: &Path, name: &str, text: &str) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = fs::File::create(&tmp).map_err(io_err("create checkpoint", &tmp))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err("write checkpoint", &tmp))?;
    drop(file);
    fs::rename(&tmp, &path).map_err(io_err("rename checkpoint", &path))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Offsets {
        Offsets::from([(("a-b".to_string(), 0), 42), (("t".to_string(), 3), 7)])
    }

    #[test]
    fn the_text_round_trips_in_kafkas_format() {
        let text = render(&sample());
        assert_eq!(text, "0\n2\na-b 0 42\nt 3 7\n");
        assert_eq!(parse(&text), Some(sample()));
        assert_eq!(parse("0\n0\n"), Some(Offsets::new()));
    }

    #[test]
    fn malformed_text_is_rejected() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("1\n0\n"), None);
        assert_eq!(parse("0\n2\nt 0 1\n"), None);
        assert_eq!(parse("0\n1\nt x 1\n"), None);
        assert_eq!(parse("0\n1\nt 0 -1\n"), None);
        assert_eq!(parse("0\n1\nt 0 1 9\n"), None);
    }

    #[test]
    fn write_then_read_returns_the_offsets_and_leaves_no_tmp() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path()).expect("read missing"), Offsets::new());
        write(dir.path(), &sample()).expect("write");
        assert_eq!(read(dir.path()).expect("read"), sample());
        write(dir.path(), &Offsets::new()).expect("overwrite");
        assert_eq!(read(dir.path()).expect("read"), Offsets::new());
        assert!(!dir.path().join(FILE_NAME).exists());
        assert!(!dir.path().join(format!("{FILE_NAME}.tmp")).exists());
    }

    #[test]
    fn a_named_file_distinguishes_absent_from_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let name = REPLICATION_FILE_NAME;
        assert_eq!(read_named(dir.path(), name).expect("read"), None);
        write_named(dir.path(), name, &Offsets::new(), WhenEmpty::WriteFile).expect("write");
        assert_eq!(
            read_named(dir.path(), name).expect("read"),
            Some(Offsets::new())
        );
        write_named(dir.path(), name, &sample(), WhenEmpty::WriteFile).expect("write");
        assert_eq!(read_named(dir.path(), name).expect("read"), Some(sample()));
        fs::write(dir.path().join(name), "garbage").expect("write");
        assert_eq!(
            read_named(dir.path(), name).expect("read"),
            Some(Offsets::new())
        );
    }

    #[test]
    fn a_corrupt_file_reads_as_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), "garbage").expect("write");
        assert_eq!(read(dir.path()).expect("read"), Offsets::new());
        fs::write(dir.path().join(FILE_NAME), b"0\n1\nt 0 \xff\xfe\n").expect("write");
        assert_eq!(read(dir.path()).expect("not UTF-8"), Offsets::new());
    }
}
