//! The clean-shutdown record, Kafka's `.kafka_cleanshutdown` (KIP-966): written in the
//! first log dir once every log was flushed and closed at a clean stop, holding the broker
//! epoch the stopping incarnation had; read and removed at the next start, before the
//! broker registers. The registration carries that epoch as its previous broker epoch, and
//! the controller treats a mismatch (or no record: a crash, SIGKILL, a failed flush) as an
//! unclean shutdown, which takes the broker out of every ELR.
//!
//! Format, as Kafka's `CleanShutdownFileHandler`: `{"version":0,"brokerEpoch":N}`.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

const FILE: &str = ".kafka_cleanshutdown";

#[derive(Serialize, Deserialize)]
struct Record {
    version: i32,
    #[serde(rename = "brokerEpoch")]
    broker_epoch: i64,
}

/// The epoch of the last clean shutdown recorded in `dir`, removing the record (a crash
/// after this start must not reuse it); -1 when there is none or it cannot be read.
pub fn take(dir: &Path) -> anyhow::Result<i64> {
    let path = dir.join(FILE);
    let epoch = match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice::<Record>(&bytes)
            .ok()
            .filter(|r| r.version == 0)
            .map_or(-1, |r| r.broker_epoch),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(-1),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    fsync_dir(dir)?;
    Ok(epoch)
}

/// Records a clean shutdown of the incarnation with `broker_epoch` in `dir`, atomically
/// (tmp, fsync, rename, fsync the directory).
pub fn record(dir: &Path, broker_epoch: u64) -> anyhow::Result<()> {
    let record = Record {
        version: 0,
        broker_epoch: i64::try_from(broker_epoch).context("broker epoch")?,
    };
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut file = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(&serde_json::to_vec(&record)?)?;
    file.sync_all()?;
    fs::rename(&tmp, dir.join(FILE)).with_context(|| format!("renaming {}", tmp.display()))?;
    fsync_dir(dir)
}

fn fsync_dir(dir: &Path) -> anyhow::Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_epoch_is_read_once_and_a_missing_or_bad_record_is_minus_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(take(dir.path()).expect("none"), -1);
        record(dir.path(), 42).expect("recorded");
        assert_eq!(
            fs::read_to_string(dir.path().join(FILE)).expect("written"),
            r#"{"version":0,"brokerEpoch":42}"#
        );
        assert_eq!(take(dir.path()).expect("read"), 42);
        assert_eq!(take(dir.path()).expect("gone"), -1);
        fs::write(dir.path().join(FILE), "{not json").expect("written");
        assert_eq!(take(dir.path()).expect("bad"), -1);
        assert!(!dir.path().join(FILE).exists());
    }
}
