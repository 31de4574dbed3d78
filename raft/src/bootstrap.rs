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
/// Readers refuse other versions instead of guessing. Version 2 adds `voters` (a dynamic
/// quorum's initial voter set); a file without voters is still written as version 1, so a
/// build that predates dynamic quorums reads what it can honour and refuses the rest.
const FORMAT_VERSION: u32 = 1;
const FORMAT_VERSION_VOTERS: u32 = 2;

#[derive(Serialize, Deserialize)]
struct BootstrapFile {
    format_version: u32,
    records: Vec<Command>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    voters: Option<Vec<BootstrapVoter>>,
}

/// One voter of a dynamic quorum's initial set (`brook format --standalone` /
/// `--initial-controllers`, KIP-853): its id, controller endpoint and directory id (Kafka's
/// base64 UUID, the `directory.id` of its `meta.properties`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapVoter {
    pub id: u64,
    pub host: String,
    pub port: u16,
    pub directory_id: String,
}

impl BootstrapVoter {
    /// The peer-RPC address, `host:port` (IPv6 in brackets).
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// What a bootstrap file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bootstrap {
    pub records: Vec<Command>,
    /// The initial voters of a dynamic quorum; `None` for a static one.
    pub voters: Option<Vec<BootstrapVoter>>,
}

/// Writes `records` as the bootstrap file of `dir` (created if missing): tmp file, fsync,
/// rename, fsync the directory.
pub fn write(dir: &Path, records: &[Command]) -> io::Result<()> {
    write_bootstrap(
        dir,
        &Bootstrap {
            records: records.to_vec(),
            voters: None,
        },
    )
}

/// Writes `bootstrap` (records and, for a dynamic quorum, its initial voters) as
/// [`write`] does.
pub fn write_bootstrap(dir: &Path, bootstrap: &Bootstrap) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let body = serde_json::to_vec(&BootstrapFile {
        format_version: if bootstrap.voters.is_some() {
            FORMAT_VERSION_VOTERS
        } else {
            FORMAT_VERSION
        },
        records: bootstrap.records.clone(),
        voters: bootstrap.voters.clone(),
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
    Ok(read_bootstrap(dir)?.map(|b| b.records))
}

/// The whole bootstrap file of `dir` (records and voters), `None` when there is none.
pub fn read_bootstrap(dir: &Path) -> io::Result<Option<Bootstrap>> {
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
    if file.format_version != FORMAT_VERSION && file.format_version != FORMAT_VERSION_VOTERS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} has format version {}; this build reads {FORMAT_VERSION} and {FORMAT_VERSION_VOTERS}",
                path.display(),
                file.format_version
            ),
        ));
    }
    Ok(Some(Bootstrap {
        records: file.records,
        voters: file.voters,
    }))
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
    fn voters_round_trip_as_version_2() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bootstrap = Bootstrap {
            records: Vec::new(),
            voters: Some(vec![BootstrapVoter {
                id: 1,
                host: "::1".into(),
                port: 9093,
                directory_id: "JEXY6aqzQY-32P5TStzaFg".into(),
            }]),
        };
        write_bootstrap(dir.path(), &bootstrap).expect("write");
        let text = fs::read_to_string(dir.path().join(FILE)).expect("file");
        assert!(text.starts_with(r#"{"format_version":2,"#), "{text}");
        let back = read_bootstrap(dir.path()).expect("read").expect("some");
        assert_eq!(back, bootstrap);
        assert_eq!(back.voters.expect("voters")[0].addr(), "[::1]:9093");
    }

    #[test]
    fn another_format_version_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join(FILE),
            br#"{"format_version":3,"records":[]}"#,
        )
        .expect("write");
        let err = read(dir.path()).expect_err("refused");
        assert!(err.to_string().contains("format version 3"), "{err}");
    }
}
