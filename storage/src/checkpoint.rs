//! The per-log-directory `log-start-offset-checkpoint` file (Kafka's
//! `OffsetCheckpointFile`): where each partition's log starts, so that a restart does not
//! resurrect records that retention or DeleteRecords removed.
//!
//! Format (Kafka's, text): a version line `0`, a count line, then one
//! `<topic> <partition> <offset>` line per partition. Only partitions whose log start lies
//! above 0 are listed, and with none the file is absent. Replaced atomically: write a tmp file, fsync, rename, fsync the
//! directory, so a crash leaves the old or the new file, never a torn one. Synchronous:
//! call from blocking threads.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::{io_err, Result};
use crate::recovery::sync_dir;

/// The file's name inside each log directory.
pub const FILE_NAME: &str = "log-start-offset-checkpoint";
const VERSION: &str = "0";

/// Log start offsets by (topic, partition).
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
    let mut lines = text.lines();
    if lines.next()?.trim() != VERSION {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut offsets = Offsets::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let mut fields = line.split_whitespace();
        let topic = fields.next()?.to_string();
        let partition: i32 = fields.next()?.parse().ok()?;
        let offset: i64 = fields.next()?.parse().ok()?;
        if fields.next().is_some() || partition < 0 || offset < 0 {
            return None;
        }
        offsets.insert((topic, partition), offset);
    }
    (offsets.len() == count).then_some(offsets)
}

/// Reads `<log_dir>/log-start-offset-checkpoint`; a missing file is empty. A malformed
/// file is ignored with a WARN, as Kafka does (the logs then start at their first
/// segment, which retention only ever deletes whole).
pub fn read(log_dir: &Path) -> Result<Offsets> {
    let path = log_dir.join(FILE_NAME);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Offsets::new()),
        Err(e) => return Err(io_err("read checkpoint", &path)(e)),
    };
    Ok(parse(&text).unwrap_or_else(|| {
        tracing::warn!(path = %path.display(), "malformed log start offset checkpoint ignored");
        Offsets::new()
    }))
}

/// Atomically replaces `<log_dir>/log-start-offset-checkpoint` with `offsets`; with no
/// offsets the file is removed instead (absent and empty mean the same).
pub fn write(log_dir: &Path, offsets: &Offsets) -> Result<()> {
    let path = log_dir.join(FILE_NAME);
    if offsets.is_empty() {
        return match fs::remove_file(&path) {
            Ok(()) => sync_dir(log_dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove checkpoint", &path)(e)),
        };
    }
    let tmp = log_dir.join(format!("{FILE_NAME}.tmp"));
    let mut file = fs::File::create(&tmp).map_err(io_err("create checkpoint", &tmp))?;
    file.write_all(render(offsets).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err("write checkpoint", &tmp))?;
    drop(file);
    fs::rename(&tmp, &path).map_err(io_err("rename checkpoint", &path))?;
    sync_dir(log_dir)
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
    fn a_corrupt_file_reads_as_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), "garbage").expect("write");
        assert_eq!(read(dir.path()).expect("read"), Offsets::new());
    }
}
