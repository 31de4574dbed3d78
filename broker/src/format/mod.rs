//! `brook format`: Kafka's `kafka-storage format` for a node's metadata directory before its
//! first start. It writes `meta.properties` (the cluster id, node id and directory id, as the
//! broker would on its first start) and the bootstrap records the metadata quorum applies once
//! when it is first initialised (`brook_raft::bootstrap`): SCRAM credentials (`--add-scram`),
//! so a cluster whose brokers log in to each other with SCRAM has their credential before any
//! broker replicates, with no unsecured listener to create it through, and the initial feature
//! levels (`--release-version`, `--feature`, `features.rs`), `metadata.version` among them.
//!
//! KIP-853's quorum flags, as Kafka 4.4's tool: `--standalone` (this controller alone, a
//! dynamic quorum of one), `--initial-controllers id@host:port:dir,…` (the initial voters;
//! this node's directory id is taken from its entry) and `--no-initial-controllers` (a
//! controller that joins an existing dynamic quorum as an observer, to be added with
//! `kafka-metadata-quorum add-controller`). A dynamic quorum is finalized at `kraft.version` 1,
//! a static one (`controller.quorum.voters`) at 0; contradictions are refused with Kafka's
//! sentences. Brook's one deviation: a controller with neither `controller.quorum.voters` nor
//! `controller.quorum.bootstrap.servers` (Brook's one-node default) needs none of the flags.
//!
//! As Kafka's tool: the cluster id is required (`--cluster-id`/`-t`, else Brook's own
//! `cluster.id` key), a formatted directory is refused unless `--ignore-formatted`/`-g`, bad
//! `--add-scram` input stops with Kafka's sentence, and passwords are never printed (only
//! salted credentials are written). Formatting is optional for Brook: a node never formatted
//! creates `meta.properties` on its first start and has no bootstrap records.

pub mod add_scram;
pub mod features;
pub mod voters;

use std::path::{Path, PathBuf};

use brook_raft::bootstrap::{Bootstrap, BootstrapVoter};
use brook_raft::Command;

use crate::cluster::quorum_config;
use crate::config::{BrokerConfig, ProcessRole};
use crate::metadata::features::{KRAFT_VERSION, METADATA_VERSION};
use crate::metadata::meta_properties;

/// What `brook format` was asked for, beyond the broker configuration.
#[derive(Debug, Default)]
pub struct FormatRequest {
    pub cluster_id: Option<String>,
    pub add_scram: Vec<String>,
    pub ignore_formatted: bool,
    pub release_version: Option<String>,
    pub features: Vec<String>,
    pub quorum: QuorumFlag,
}

/// Kafka's mutually exclusive quorum flags (the argument parser refuses two at once).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub enum QuorumFlag {
    #[default]
    None,
    Standalone,
    InitialControllers(String),
    NoInitialControllers,
}

/// What the quorum flags settle, checked against the configuration.
struct QuorumPlan {
    /// The initial voters of a dynamic quorum (`None`: static, or an observer to be added).
    voters: Option<Vec<BootstrapVoter>>,
    dynamic: bool,
    /// This node's directory id when the flags name it.
    directory_id: Option<String>,
    /// Whether this node is one of the initial voters (Kafka's "voter directory" line).
    initial_voter: bool,
}

/// Kafka's `StorageTool` checks of the quorum flags, in its order, and the voter set.
fn quorum_plan(config: &BrokerConfig, flag: &QuorumFlag) -> Result<QuorumPlan, String> {
    let controller = config.process_roles.contains(&ProcessRole::Controller);
    let static_voters = !config.controller_quorum_voters.is_empty();
    let initial = match flag {
        QuorumFlag::InitialControllers(list) => Some(voters::parse(list)?),
        _ => None,
    };
    if *flag == QuorumFlag::Standalone && !controller {
        return Err("You can only use --standalone on a controller.".into());
    }
    if static_voters
        && matches!(
            flag,
            QuorumFlag::Standalone | QuorumFlag::InitialControllers(_)
        )
    {
        return Err("You cannot specify controller.quorum.voters and format the node with --initial-controllers or --standalone. If you want to use dynamic quorum, please remove controller.quorum.voters and specify controller.quorum.bootstrap.servers instead.".into());
    }
    if controller
        && !static_voters
        && !config.controller_quorum_bootstrap_servers.is_empty()
        && *flag == QuorumFlag::None
    {
        return Err("Because controller.quorum.voters is not set on this controller, you must specify one of the following: --standalone, --initial-controllers, or --no-initial-controllers.".into());
    }
    let node_id = u64::try_from(config.node_id).unwrap_or_default();
    Ok(match (flag, initial) {
        (QuorumFlag::Standalone, _) => {
            let listener = config
                .controller_listener_names
                .first()
                .and_then(|name| config.listeners.iter().find(|l| &l.name == name))
                .ok_or("--standalone needs a controller listener: controller.listener.names must name one of listeners")?
                .advertised();
            let directory_id = meta_properties::uuid_to_kafka_string(uuid::Uuid::new_v4());
            QuorumPlan {
                voters: Some(vec![BootstrapVoter {
                    id: node_id,
                    host: listener.host,
                    port: listener.port,
                    directory_id: directory_id.clone(),
                }]),
                dynamic: true,
                directory_id: Some(directory_id),
                initial_voter: true,
            }
        }
        (QuorumFlag::InitialControllers(_), Some(voters)) => {
            // By node id alone, as Kafka: a broker-only node listed takes its directory id too.
            let own = voters.iter().find(|v| v.id == node_id);
            QuorumPlan {
                directory_id: own.map(|v| v.directory_id.clone()),
                initial_voter: own.is_some(),
                voters: Some(voters),
                dynamic: true,
            }
        }
        (QuorumFlag::NoInitialControllers, _) => QuorumPlan {
            voters: None,
            dynamic: !static_voters,
            directory_id: None,
            initial_voter: false,
        },
        _ => QuorumPlan {
            voters: None,
            dynamic: false,
            directory_id: None,
            initial_voter: false,
        },
    })
}

/// The `kraft.version` level: 1 for a dynamic quorum, 0 for a static one, or what
/// `--feature kraft.version=N` says if it agrees (Kafka's two sentences otherwise).
fn kraft_version(
    plan: &QuorumPlan,
    features: &features::Features,
    flag: &QuorumFlag,
) -> Result<i16, String> {
    match (features.kraft_version_given, plan.dynamic) {
        (Some(0), true) if *flag != QuorumFlag::None => Err("Cannot set kraft.version to 0 if controller.quorum.voters is empty and one of the flags --standalone, --initial-controllers, or --no-initial-controllers is used. For dynamic controllers support, try removing the --feature flag for kraft.version.".into()),
        (Some(level), false) if level > 0 => Err(format!("Cannot set kraft.version to {level} unless controller.quorum.voters is empty and one of the flags --standalone, --initial-controllers, or --no-initial-controllers is used. For dynamic controllers support, try using one of --standalone, --initial-controllers, or --no-initial-controllers and removing controller.quorum.voters.")),
        (_, dynamic) => Ok(i16::from(dynamic)),
    }
}

/// Formats the node's metadata directory; `Ok` is the line to print, `Err` the message to
/// stop with (exit 1, as Kafka's tool).
pub fn run(config: &BrokerConfig, request: &FormatRequest) -> Result<String, String> {
    // Every argument is checked before anything is written.
    let plan = quorum_plan(config, &request.quorum)?;
    let features = features::parse(request.release_version.as_deref(), &request.features)?;
    let kraft_version = kraft_version(&plan, &features, &request.quorum)?;
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
    let mut levels: Vec<(String, i16)> = features.levels.clone().into_iter().collect();
    levels.push((KRAFT_VERSION.to_owned(), kraft_version));
    levels.push((METADATA_VERSION.to_owned(), features.metadata_level));
    let mut records = vec![Command::UpdateFeatures { levels }];
    if !upsertions.is_empty() {
        records.push(Command::AlterUserScramCredentials {
            upsertions,
            deletions: Vec::new(),
        });
    }
    let bootstrap = Bootstrap {
        records,
        voters: plan.voters.clone(),
    };
    brook_raft::bootstrap::write_bootstrap(&quorum_dir, &bootstrap)
        .map_err(|e| format!("cannot write {}: {e}", quorum_dir.display()))?;
    // Last: meta.properties is what marks the directory formatted.
    meta_properties::load_or_create_with(
        &metadata_dir,
        config.node_id,
        Some(cluster_id),
        plan.directory_id.clone(),
    )
    .map_err(|e| format!("{e:#}"))?;
    // Kafka's lines.
    let kind = match (plan.voters.is_some(), plan.initial_voter) {
        (true, true) => "dynamic metadata voter directory",
        (true, false) => "dynamic metadata directory",
        _ => "metadata directory",
    };
    Ok(format!(
        "Formatting {kind} {} with metadata.version {}.",
        metadata_dir.display(),
        features.release()
    ))
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
            ..FormatRequest::default()
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
                "Formatting metadata directory {} with metadata.version 4.4-IV2.",
                dir.path().display()
            )
        );
        let quorum_dir = quorum_config::data_dir(&config).expect("dir");
        let records = brook_raft::bootstrap::read(&quorum_dir)
            .expect("read")
            .expect("written");
        assert!(
            matches!(&records[..], [Command::UpdateFeatures { levels }, Command::AlterUserScramCredentials { upsertions, .. }]
            if upsertions.len() == 1 && upsertions[0].user == "admin"
                && levels.contains(&("kraft.version".to_owned(), 0))
                && levels.contains(&("metadata.version".to_owned(), 33))
                && levels.contains(&("transaction.version".to_owned(), 2)))
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

    fn dynamic_config(dir: &Path, extra: &[&str]) -> BrokerConfig {
        let mut overrides = vec![
            format!("log.dirs={}", dir.display()),
            "process.roles=controller".to_owned(),
            "node.id=1".to_owned(),
            "controller.listener.names=CONTROLLER".to_owned(),
            "listeners=CONTROLLER://127.0.0.1:19990".to_owned(),
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT".to_owned(),
        ];
        overrides.extend(extra.iter().map(|s| s.to_string()));
        BrokerConfig::load(None, std::iter::empty(), &overrides)
            .expect("valid")
            .0
    }

    fn quorum_request(quorum: QuorumFlag, features: &[&str]) -> FormatRequest {
        FormatRequest {
            quorum,
            features: features.iter().map(|s| s.to_string()).collect(),
            ..request(&[])
        }
    }

    const BOOTSTRAP: &str = "controller.quorum.bootstrap.servers=127.0.0.1:19990";
    const STATIC: &str = "controller.quorum.voters=1@127.0.0.1:19990";

    #[test]
    fn standalone_writes_this_controller_as_the_one_voter_with_its_directory_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dynamic_config(dir.path(), &[BOOTSTRAP]);
        let line = run(&config, &quorum_request(QuorumFlag::Standalone, &[])).expect("formats");
        assert_eq!(
            line,
            format!(
                "Formatting dynamic metadata voter directory {} with metadata.version 4.4-IV2.",
                dir.path().display()
            )
        );
        let quorum_dir = quorum_config::data_dir(&config).expect("dir");
        let bootstrap = brook_raft::bootstrap::read_bootstrap(&quorum_dir)
            .expect("read")
            .expect("written");
        let voters = bootstrap.voters.expect("voters");
        assert_eq!(voters.len(), 1);
        assert_eq!(
            (voters[0].id, voters[0].addr()),
            (1, "127.0.0.1:19990".into())
        );
        assert_eq!(
            meta_properties::read_directory_id(dir.path()),
            Some(voters[0].directory_id.clone())
        );
        assert!(
            matches!(&bootstrap.records[..], [Command::UpdateFeatures { levels }]
            if levels.contains(&("kraft.version".to_owned(), 1)))
        );
    }

    #[test]
    fn initial_controllers_give_this_node_its_directory_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dynamic_config(dir.path(), &[BOOTSTRAP]);
        let list =
            "1@127.0.0.1:19990:JEXY6aqzQY-32P5TStzaFg,2@127.0.0.1:19991:MvDxzVmcRsaTz33bUuRU6A";
        run(
            &config,
            &quorum_request(QuorumFlag::InitialControllers(list.into()), &[]),
        )
        .expect("formats");
        assert_eq!(
            meta_properties::read_directory_id(dir.path()),
            Some("JEXY6aqzQY-32P5TStzaFg".into())
        );
    }

    #[test]
    fn contradicting_quorum_flags_get_kafkas_sentences_and_write_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = |extra: &[&str], flag: QuorumFlag, features: &[&str]| {
            run(
                &dynamic_config(dir.path(), extra),
                &quorum_request(flag, features),
            )
            .expect_err("refused")
        };
        assert_eq!(err(&[BOOTSTRAP], QuorumFlag::None, &[]), "Because controller.quorum.voters is not set on this controller, you must specify one of the following: --standalone, --initial-controllers, or --no-initial-controllers.");
        assert!(err(&[STATIC], QuorumFlag::Standalone, &[])
            .starts_with("You cannot specify controller.quorum.voters and format the node with --initial-controllers or --standalone."));
        assert!(
            err(&[BOOTSTRAP], QuorumFlag::Standalone, &["kraft.version=0"])
                .starts_with("Cannot set kraft.version to 0 if controller.quorum.voters is empty")
        );
        assert!(err(&[STATIC], QuorumFlag::None, &["kraft.version=1"])
            .starts_with("Cannot set kraft.version to 1 unless controller.quorum.voters is empty"));
        let broker_only = [
            "process.roles=broker",
            "listeners=PLAINTEXT://127.0.0.1:19991",
            BOOTSTRAP,
        ];
        assert_eq!(
            err(&broker_only, QuorumFlag::Standalone, &[]),
            "You can only use --standalone on a controller."
        );
        assert!(!formatted(
            dir.path(),
            &quorum_config::data_dir(&dynamic_config(dir.path(), &[])).expect("dir")
        ));
    }
}
