//! The bootstrap records of a node's metadata directory: what `brook format` writes before the
//! first start (Kafka's `bootstrap.checkpoint`, written by `kafka-storage format`), for the
//! quorum to apply once when it is first initialised.
//!
//! The file is `<data_dir>/bootstrap.json` (`raft/FORMAT.md`), replaced atomically and readable
//! by its owner only (it holds salted SCRAM credentials, never a password). The quorum reads it
//! at start; a voter whose metadata was empty then proposes its records as a
//! [`Command::Bootstrap`] once it leads and the image is not bootstrapped yet; a voter that
//! ran before ignores its file (`quorum.rs`, `controller.rs`).
//! Pure file I/O, no async; callers on a runtime use `spawn_blocking`.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::command::Command;

/// The file's name in the quorum's data directory.
pub const FILE: &str = "bootstrap.json";
/// Readers refuse other versions instead of guessing.
const FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct BootstrapFile {
    format_version: u32,
    records: Vec<Command>,
}

/// Writes `records` as the bootstrap file of `dir` (created if missing): tmp file, fsync,
/// rename, fsync the directory.
pub fn write(dir: &Path, records: &[Command]) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let body = serde_json::to_vec(&BootstrapFile {
        format_version: FORMAT_VERSION,
        records: records.to_vec(),
    })
    .map_err(io::Error::other)?;
    let tmp = dir.join(format!("{FILE}.tmp"));
    {
        let mut options = fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp)?;
        file.write_all(&body)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, dir.join(FILE))?;
    fs::File::open(dir)?.sync_all()
}

/// The bootstrap records of `dir`, `None` when it has no bootstrap file.
pub fn read(dir: &Path) -> io::Result<Option<Vec<Command>>> {
    let path = dir.join(FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let file: BootstrapFile = serde_json::from_slice(&bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a bootstrap file: {e}", path.display()),
        )
    })?;
    if file.format_version != FORMAT_VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} has format version {}; this build reads {FORMAT_VERSION}",
                path.display(),
                file.format_version
            ),
        ));
    }
    Ok(Some(file.records))
}

/// Whether `dir` holds a bootstrap file.
pub fn exists(dir: &Path) -> bool {
    dir.join(FILE).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read(dir.path()).expect("read").is_none());
        let records = vec![Command::SetClusterId {
            cluster_id: "c".into(),
        }];
        write(&dir.path().join("meta"), &records).expect("write");
        assert_eq!(read(&dir.path().join("meta")).expect("read"), Some(records));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.path().join("meta").join(FILE))
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn another_format_version_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join(FILE),
            br#"{"format_version":2,"records":[]}"#,
        )
        .expect("write");
        let err = read(dir.path()).expect_err("refused");
        assert!(err.to_string().contains("format version 2"), "{err}");
    }
}
