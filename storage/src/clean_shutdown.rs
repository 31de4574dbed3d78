//! The clean-shutdown summary of a log directory, which lets the next start create each
//! partition's `LogHandle` without opening a file of its log (`handle/lazy.rs` opens it
//! on first use). Kafka's `.kafka_cleanshutdown` marker plays the same role for its
//! `LogLoader`; Brook goes further and skips the open itself.
//!
//! Two files per log directory, both written last by `LogManager::shutdown`, after every
//! log is flushed and the offset checkpoints are written:
//! - `clean-shutdown-summary`: per partition that may open lazily, what a handle
//!   publishes before its log is open: log start offset, log end offset, recovery point
//!   and latest leader epoch (text, one line each, then a CRC-32C line over the text).
//!   Nothing else is needed: the lazy open runs the ordinary `Log::open_with_recovery_point`
//!   with the checkpointed recovery point, so segment lists, indexes, producer state and
//!   the epoch cache come from the files exactly as an eager open reads them, and the
//!   summary cannot make them differ. A partition with a transaction that is open, or
//!   completed but above the high watermark, is left out: its last stable offset is read
//!   without the log's lock and must be known from the start, so it opens eagerly.
//! - `.brook_cleanshutdown`: the marker, holding the summary's CRC, created after the
//!   summary is durable. Not Kafka's `.kafka_cleanshutdown`: Kafka parses that file as
//!   JSON with a broker epoch and would refuse this content.
//!
//! A start trusts the summary only when the marker exists, names the summary's CRC, the
//! CRC holds, every entry's directory is listed, and each entry agrees with the
//! recovery-point and log-start checkpoints (recovery point = log end: fsynced to the
//! end). Otherwise the directory takes today's open (recovery from the checkpointed
//! recovery points). A listed partition with no entry opens eagerly. The marker is
//! removed (and the removal fsynced) before anything in the directory is written, so a
//! crash after the start never finds a stale summary trusted again.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::checkpoint::{write_atomically, Offsets};
use crate::error::{io_err, Result};
use crate::recovery::sync_dir;

/// The summary file's name inside each log directory.
pub const SUMMARY_FILE_NAME: &str = "clean-shutdown-summary";
/// The marker's name inside each log directory.
pub const MARKER_FILE_NAME: &str = ".brook_cleanshutdown";
const HEADER: &str = "brook-clean-shutdown-summary 1";

/// What a partition's handle publishes before its log is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryEntry {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// Equal to the log end offset for a log closed cleanly; checked at start.
    pub recovery_point: i64,
    /// The latest leader epoch, including one assigned while the log was not open (it is
    /// assigned at the log end when the log opens, as `Log::assign_epoch_start` would
    /// have done).
    pub latest_epoch: Option<i32>,
}

/// A log directory's summary by (topic, partition).
pub type Summary = BTreeMap<(String, i32), SummaryEntry>;

/// Renders the summary text, CRC line included; returns it with the CRC.
fn render(summary: &Summary) -> (String, u32) {
    let mut text = format!("{HEADER}\n{}\n", summary.len());
    for ((topic, partition), e) in summary {
        text.push_str(&format!(
            "{topic} {partition} {} {} {} {}\n",
            e.log_start_offset,
            e.log_end_offset,
            e.recovery_point,
            e.latest_epoch.unwrap_or(-1)
        ));
    }
    let crc = crc32c::crc32c(text.as_bytes());
    text.push_str(&format!("crc32c {crc:08x}\n"));
    (text, crc)
}

/// A summary's entries in file order, borrowed from its text.
pub(crate) type Entries<'t> = Vec<(&'t str, i32, SummaryEntry)>;

/// Parses the summary text: the summary and its CRC, or why it is rejected.
#[cfg(test)]
fn parse(text: &str) -> std::result::Result<(Summary, u32), &'static str> {
    let (entries, crc) = parse_entries(text)?;
    let count = entries.len();
    let summary: Summary = entries
        .into_iter()
        .map(|(topic, partition, e)| ((topic.to_string(), partition), e))
        .collect();
    if summary.len() != count {
        return Err("count mismatch");
    }
    Ok((summary, crc))
}

/// [`parse`] without an allocation per entry (`LogManager::open` reads one line per
/// partition at start); a partition listed twice is left to the caller.
pub(crate) fn parse_entries(text: &str) -> std::result::Result<(Entries<'_>, u32), &'static str> {
    let body_len = text
        .trim_end_matches('\n')
        .rfind('\n')
        .map(|i| i + 1)
        .ok_or("truncated")?;
    let (body, crc_line) = text.split_at(body_len);
    let crc = crc_line
        .trim()
        .strip_prefix("crc32c ")
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        .ok_or("no checksum line")?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return Err("checksum mismatch");
    }
    let mut lines = body.lines();
    if lines.next() != Some(HEADER) {
        return Err("unknown version");
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or("bad count")?;
    let mut entries = Vec::with_capacity(count.min(body.len() / 12));
    for line in lines {
        let mut f = line.split(' ');
        let mut next = || f.next().ok_or("bad entry");
        let (topic, partition, start, end, point, epoch) =
            (next()?, next()?, next()?, next()?, next()?, next()?);
        if f.next().is_some() {
            return Err("bad entry");
        }
        let num = |s: &str| s.parse::<i64>().map_err(|_| "bad entry");
        let epoch = num(epoch)?;
        let entry = SummaryEntry {
            log_start_offset: num(start)?,
            log_end_offset: num(end)?,
            recovery_point: num(point)?,
            latest_epoch: (epoch >= 0)
                .then(|| i32::try_from(epoch).map_err(|_| "bad entry"))
                .transpose()?,
        };
        let partition = partition.parse::<i32>().map_err(|_| "bad entry")?;
        entries.push((topic, partition, entry));
    }
    if entries.len() != count {
        return Err("count mismatch");
    }
    Ok((entries, crc))
}

/// Writes the summary durably, then the marker naming it (after a clean shutdown's last
/// checkpoint).
pub fn write(log_dir: &Path, summary: &Summary) -> Result<()> {
    let (text, crc) = render(summary);
    write_atomically(log_dir, SUMMARY_FILE_NAME, &text)?;
    write_atomically(log_dir, MARKER_FILE_NAME, &format!("{crc:08x}\n"))
}

/// What a start found of a clean shutdown in one log directory (see [`take_files`]).
#[derive(Debug, Default)]
pub(crate) struct Taken {
    marker: Option<String>,
    text: Option<String>,
}

impl Taken {
    /// The summary's entries if the marker vouches for them: it exists, names the summary's
    /// CRC and the CRC holds. Whether they agree with the checkpoints and the listing is the
    /// caller's to judge ([`agrees`]).
    pub(crate) fn vouched(&self) -> std::result::Result<Entries<'_>, &'static str> {
        let marker = self.marker.as_deref().ok_or("no clean shutdown marker")?;
        let (entries, crc) = parse_entries(self.text.as_deref().ok_or("no summary")?)?;
        if u32::from_str_radix(marker.trim(), 16) != Ok(crc) {
            return Err("the marker names another summary");
        }
        Ok(entries)
    }

    /// Logs why the summary is not used, unless there was none to use (a directory of a
    /// crashed broker, or one from before summaries: no noise).
    pub(crate) fn not_used(&self, log_dir: &Path, reason: &str) {
        if self.marker.is_some() || self.text.is_some() {
            tracing::warn!(dir = %log_dir.display(), reason, "clean shutdown summary not used; opening every log");
        }
    }
}

/// Reads the directory's marker and summary, then removes both, the marker's removal
/// fsynced: call it before anything in the directory is written, so a crash after this
/// start never finds the summary trusted again.
pub(crate) fn take_files(log_dir: &Path) -> Result<Taken> {
    let marker_path = log_dir.join(MARKER_FILE_NAME);
    let marker = match fs::read_to_string(&marker_path) {
        Ok(marker) => Some(marker),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err("read clean shutdown marker", &marker_path)(e)),
    };
    let summary_path = log_dir.join(SUMMARY_FILE_NAME);
    let text = match fs::read_to_string(&summary_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        // Unreadable: a full open, as with a bad checksum.
        Err(e) => {
            tracing::warn!(path = %summary_path.display(), error = %e, "clean shutdown summary unreadable");
            None
        }
    };
    if marker.is_some() {
        fs::remove_file(&marker_path)
            .map_err(io_err("remove clean shutdown marker", &marker_path))?;
        sync_dir(log_dir)?;
    }
    if text.is_some() {
        // Without its marker it is never trusted again: no fsync needed.
        fs::remove_file(&summary_path)
            .map_err(io_err("remove clean shutdown summary", &summary_path))?;
    }
    Ok(Taken { marker, text })
}

/// Whether a summary entry agrees with the checkpoints read at this start: fsynced to its
/// log end (recovery point = log end, as checkpointed) and starting where the log start
/// checkpoint says (absent: 0).
pub(crate) fn agrees(
    e: &SummaryEntry,
    recovery_point: Option<i64>,
    log_start: Option<i64>,
) -> std::result::Result<(), &'static str> {
    if e.recovery_point != e.log_end_offset || recovery_point != Some(e.recovery_point) {
        return Err("an entry disagrees with the recovery point checkpoint");
    }
    if log_start.unwrap_or(0) != e.log_start_offset || e.log_start_offset > e.log_end_offset {
        return Err("an entry disagrees with the log start offset checkpoint");
    }
    Ok(())
}

/// Reads the directory's summary if a clean shutdown left one and it is valid against
/// the checkpoints read at this start; `None` (with the reason logged) otherwise. Either
/// way the marker and the summary are gone afterwards, the marker's removal fsynced: call
/// it before anything in the directory is written. (`LogManager::open` judges the same
/// way per partition, in one pass with the listing.)
pub fn take(
    log_dir: &Path,
    recovery_points: Option<&Offsets>,
    log_starts: &Offsets,
) -> Result<Option<Summary>> {
    let taken = take_files(log_dir)?;
    match judge(&taken, recovery_points, log_starts) {
        Ok(summary) => Ok(Some(summary)),
        Err(reason) => {
            taken.not_used(log_dir, reason);
            Ok(None)
        }
    }
}

/// The summary if the marker and the checkpoints vouch for it, or why not. The listing
/// check is the caller's (`LogManager::open` knows the directories).
fn judge(
    taken: &Taken,
    recovery_points: Option<&Offsets>,
    log_starts: &Offsets,
) -> std::result::Result<Summary, &'static str> {
    let entries = taken.vouched()?;
    let recovery_points = recovery_points.ok_or("no recovery point checkpoint")?;
    let mut summary = Summary::new();
    for (topic, partition, e) in entries {
        let key = (topic.to_string(), partition);
        agrees(
            &e,
            recovery_points.get(&key).copied(),
            log_starts.get(&key).copied(),
        )?;
        if summary.insert(key, e).is_some() {
            return Err("count mismatch");
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Summary {
        Summary::from([
            (
                ("a-b".to_string(), 0),
                SummaryEntry {
                    log_start_offset: 0,
                    log_end_offset: 10,
                    recovery_point: 10,
                    latest_epoch: Some(3),
                },
            ),
            (
                ("t".to_string(), 7),
                SummaryEntry {
                    log_start_offset: 5,
                    log_end_offset: 5,
                    recovery_point: 5,
                    latest_epoch: None,
                },
            ),
        ])
    }

    fn checkpoints() -> (Offsets, Offsets) {
        let points = Offsets::from([(("a-b".to_string(), 0), 10), (("t".to_string(), 7), 5)]);
        let starts = Offsets::from([(("t".to_string(), 7), 5)]);
        (points, starts)
    }

    #[test]
    fn the_text_round_trips_with_its_checksum() {
        let (text, crc) = render(&sample());
        assert!(text.starts_with(
            "brook-clean-shutdown-summary 1\n2\na-b 0 0 10 10 3\nt 7 5 5 5 -1\ncrc32c "
        ));
        assert_eq!(parse(&text), Ok((sample(), crc)));
    }

    #[test]
    fn a_flipped_byte_or_a_torn_file_is_rejected() {
        let (text, _) = render(&sample());
        let flipped = text.replacen("a-b 0 0 10", "a-b 0 0 11", 1);
        assert_eq!(parse(&flipped), Err("checksum mismatch"));
        assert!(parse(&text[..text.len() / 2]).is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn written_then_taken_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (points, starts) = checkpoints();
        write(dir.path(), &sample()).expect("write");
        assert_eq!(
            take(dir.path(), Some(&points), &starts).expect("take"),
            Some(sample())
        );
        // Both files are gone: a second start (say after a crash) never trusts it.
        assert!(!dir.path().join(MARKER_FILE_NAME).exists());
        assert!(!dir.path().join(SUMMARY_FILE_NAME).exists());
        assert_eq!(
            take(dir.path(), Some(&points), &starts).expect("take"),
            None
        );
    }

    #[test]
    fn a_summary_without_its_marker_or_with_anothers_is_not_trusted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (points, starts) = checkpoints();
        write(dir.path(), &sample()).expect("write");
        fs::remove_file(dir.path().join(MARKER_FILE_NAME)).expect("rm marker");
        assert_eq!(
            take(dir.path(), Some(&points), &starts).expect("take"),
            None
        );
        assert!(!dir.path().join(SUMMARY_FILE_NAME).exists());

        write(dir.path(), &sample()).expect("write");
        fs::write(dir.path().join(MARKER_FILE_NAME), "deadbeef\n").expect("marker");
        assert_eq!(
            take(dir.path(), Some(&points), &starts).expect("take"),
            None
        );
        assert!(!dir.path().join(MARKER_FILE_NAME).exists());
    }

    #[test]
    fn a_summary_that_disagrees_with_the_checkpoints_is_stale() {
        let (points, starts) = checkpoints();
        let (text, crc) = render(&sample());
        let marker = format!("{crc:08x}");
        let taken = |marker: &str, text: &str| Taken {
            marker: Some(marker.to_string()),
            text: Some(text.to_string()),
        };
        let judged = |points: Option<&Offsets>, starts: &Offsets| {
            judge(&taken(&marker, &text), points, starts)
        };
        assert_eq!(judged(Some(&points), &starts), Ok(sample()));
        assert!(judged(None, &starts).is_err());
        let mut moved = points.clone();
        moved.insert(("a-b".to_string(), 0), 4);
        assert!(judged(Some(&moved), &starts).is_err());
        assert!(judged(Some(&points), &Offsets::new()).is_err());
        let mut unflushed = sample();
        unflushed
            .get_mut(&("a-b".to_string(), 0))
            .expect("entry")
            .recovery_point = 9;
        let (text, crc) = render(&unflushed);
        let mut points9 = points.clone();
        points9.insert(("a-b".to_string(), 0), 9);
        assert!(judge(
            &taken(&format!("{crc:08x}"), &text),
            Some(&points9),
            &starts
        )
        .is_err());
    }
}
