//! The cleaner checkpoint of one log: its first dirty offset (Kafka's
//! `cleaner-offset-checkpoint`), in `<partition dir>/cleaner-offset-checkpoint`.
//!
//! Kafka keeps one file per log directory; Brook keeps one per partition so that the
//! log that owns the value writes it under its own lock, and deleting a log deletes its
//! checkpoint (a re-created topic never inherits it). Text, Kafka-style: a version line
//! `0` then the offset. Replaced atomically (tmp, fsync, rename, fsync directory). A
//! missing or malformed file means "everything is dirty", which only costs work.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::{io_err, Result};
use crate::recovery::sync_dir;

/// The file's name inside the partition directory.
pub const FILE_NAME: &str = "cleaner-offset-checkpoint";

/// The checkpointed first dirty offset, if any.
pub(crate) fn read(dir: &Path) -> Option<i64> {
    let text = fs::read_to_string(dir.join(FILE_NAME)).ok()?;
    let mut lines = text.lines();
    (lines.next()?.trim() == "0").then_some(())?;
    lines.next()?.trim().parse().ok().filter(|o: &i64| *o >= 0)
}

/// Atomically records `first_dirty_offset`.
pub(crate) fn write(dir: &Path, first_dirty_offset: i64) -> Result<()> {
    let path = dir.join(FILE_NAME);
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let mut file = fs::File::create(&tmp).map_err(io_err("create cleaner checkpoint", &tmp))?;
    file.write_all(format!("0\n{first_dirty_offset}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err("write cleaner checkpoint", &tmp))?;
    drop(file);
    fs::rename(&tmp, &path).map_err(io_err("rename cleaner checkpoint", &path))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_round_trips_and_garbage_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path()), None);
        write(dir.path(), 42).expect("write");
        assert_eq!(read(dir.path()), Some(42));
        assert!(!dir.path().join(format!("{FILE_NAME}.tmp")).exists());
        fs::write(dir.path().join(FILE_NAME), "9\n1\n").expect("write");
        assert_eq!(read(dir.path()), None);
    }
}
