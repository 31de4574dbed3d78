//! `brook format`: Kafka's `kafka-storage format` for a node's metadata directory before its
//! first start. It writes `meta.properties` (the cluster id and node id, as the broker would on
//! its first start) and the bootstrap records the metadata quorum applies once when it is
//! first initialised (`brook_raft::bootstrap`): today SCRAM credentials (`--add-scram`), so a
//! cluster whose brokers log in to each other with SCRAM has their credential before any
//! broker replicates, with no unsecured listener to create it through.
//!
//! As Kafka's tool: the cluster id is required (`--cluster-id`/`-t`, else Brook's own
//! `cluster.id` key), a formatted directory is refused unless `--ignore-formatted`/`-g`, bad
//! `--add-scram` input stops with Kafka's sentence, and passwords are never printed (only
//! salted credentials are written). Formatting is optional for Brook: a node never formatted
//! creates `meta.properties` on its first start and has no bootstrap records.

pub mod add_scram;

use std::path::{Path, PathBuf};

use brook_raft::Command;

use crate::cluster::quorum_config;
use crate::config::BrokerConfig;
use crate::metadata::meta_properties;

/// What `brook format` was asked for, beyond the broker configuration.
#[derive(Debug, Default)]
pub struct FormatRequest {
    pub cluster_id: Option<String>,
    pub add_scram: Vec<String>,
    pub ignore_formatted: bool,
}

/// Formats the node's metadata directory; `Ok` is the line to print, `Err` the message to
/// stop with (exit 1, as Kafka's tool).
pub fn run(config: &BrokerConfig, request: &FormatRequest) -> Result<String, String> {
    // Every argument is checked before anything is written.
    let parsed = request
        .add_scram
        .iter()
        .map(|a| add_scram::parse(a))
        .collect::<Result<Vec<_>, _>>()?;
    let cluster_id = request
        .cluster_id
        .clone()
        .or_else(|| config.cluster_id.clone())
        .ok_or("brook format: the cluster id is required: --cluster-id (-t), e.g. from `brook random-uuid`, as for kafka-storage format (or set cluster.id)")?;
    let metadata_dir = config
        .log_dirs
        .first()
        .cloned()
        .ok_or("log.dirs names no directory")?;
    let quorum_dir = quorum_config::data_dir(config).map_err(|e| e.to_string())?;
    if formatted(&metadata_dir, &quorum_dir) {
        if request.ignore_formatted {
            return Ok("All of the log directories are already formatted.".to_owned());
        }
        return Err(format!(
            "Log directory {} is already formatted. Use --ignore-formatted to ignore this directory and format the others.",
            metadata_dir.display()
        ));
    }
    let upsertions = parsed
        .iter()
        .map(add_scram::AddScram::upsertion)
        .collect::<Result<Vec<_>, _>>()?;
    let users: Vec<String> = parsed.iter().map(|a| a.name.clone()).collect();
    let records = if upsertions.is_empty() {
        Vec::new()
    } else {
        vec![Command::AlterUserScramCredentials {
            upsertions,
            deletions: Vec::new(),
        }]
    };
    brook_raft::bootstrap::write(&quorum_dir, &records)
        .map_err(|e| format!("cannot write {}: {e}", quorum_dir.display()))?;
    // Last: meta.properties is what marks the directory formatted.
    meta_properties::load_or_create(&metadata_dir, config.node_id, Some(cluster_id))
        .map_err(|e| format!("{e:#}"))?;
    let mut line = format!("Formatting metadata directory {}", metadata_dir.display());
    if !users.is_empty() {
        line.push_str(&format!(" with SCRAM credentials for {}", users.join(", ")));
    }
    line.push('.');
    Ok(line)
}

/// Kafka's test is `meta.properties`; a node that ran before without it (Brook writes it on
/// its first start anyway) or was half-formatted has a raft log or bootstrap file.
fn formatted(metadata_dir: &Path, quorum_dir: &Path) -> bool {
    let marks: [PathBuf; 3] = [
        metadata_dir.join("meta.properties"),
        quorum_dir.join("raft-log"),
        quorum_dir.join(brook_raft::bootstrap::FILE),
    ];
    marks.iter().any(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path) -> BrokerConfig {
        let overrides = [format!("log.dirs={}", dir.display())];
        BrokerConfig::load(None, std::iter::empty(), &overrides)
            .expect("valid")
            .0
    }

    fn request(add_scram: &[&str]) -> FormatRequest {
        FormatRequest {
            cluster_id: Some("3Db5QLSqSZieL3rJBUUegA".into()),
            add_scram: add_scram.iter().map(|s| s.to_string()).collect(),
            ignore_formatted: false,
        }
    }

    #[test]
    fn formats_once_writing_the_cluster_id_and_salted_credentials_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path());
        let line = run(
            &config,
            &request(&["SCRAM-SHA-512=[name=admin,password=admin-secret]"]),
        )
        .expect("formats");
        assert_eq!(
            line,
            format!(
                "Formatting metadata directory {} with SCRAM credentials for admin.",
                dir.path().display()
            )
        );
        let quorum_dir = quorum_config::data_dir(&config).expect("dir");
        let records = brook_raft::bootstrap::read(&quorum_dir)
            .expect("read")
            .expect("written");
        assert!(
            matches!(&records[..], [Command::AlterUserScramCredentials { upsertions, .. }]
            if upsertions.len() == 1 && upsertions[0].user == "admin")
        );
        let written =
            std::fs::read_to_string(quorum_dir.join(brook_raft::bootstrap::FILE)).expect("file");
        assert!(!written.contains("admin-secret"));
        assert_eq!(
            meta_properties::read_cluster_id(dir.path(), 1).expect("read"),
            Some("3Db5QLSqSZieL3rJBUUegA".into())
        );
        // Again: refused, or skipped with --ignore-formatted.
        let err = run(&config, &request(&[])).expect_err("formatted");
        assert_eq!(err, format!("Log directory {} is already formatted. Use --ignore-formatted to ignore this directory and format the others.", dir.path().display()));
        let ignore = FormatRequest {
            ignore_formatted: true,
            ..request(&[])
        };
        assert_eq!(
            run(&config, &ignore).expect("skipped"),
            "All of the log directories are already formatted."
        );
    }

    #[test]
    fn bad_input_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path());
        let err = run(
            &config,
            &request(&["SCRAM-SHA-512=[name=a,password=b,iterations=1]"]),
        )
        .expect_err("refused");
        assert_eq!(
            err,
            "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_512"
        );
        let no_id = FormatRequest {
            cluster_id: None,
            ..request(&[])
        };
        assert!(run(&config, &no_id)
            .expect_err("no id")
            .contains("--cluster-id"));
        assert!(!formatted(
            dir.path(),
            &quorum_config::data_dir(&config).expect("dir")
        ));
    }
}
