//! `meta.properties` in the first log dir, as Kafka writes it: the cluster id and node
//! id this data belongs to, and the directory id (a random UUID naming this copy of the
//! data: KIP-853 tells a voter from the same node id with a wiped disk by it). A log dir
//! formatted for another node is refused at start; a file written before directory ids
//! gets one at the next start.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};
use base64::Engine;
use uuid::Uuid;

const FILE: &str = "meta.properties";

/// The cluster id stored in `dir`, if the directory was formatted before; refuses a
/// directory formatted for another node id.
pub fn read_cluster_id(dir: &Path, node_id: i32) -> anyhow::Result<Option<String>> {
    let path = dir.join(FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return Ok(None);
    };
    let value = |key: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
    };
    if let Some(stored) = value("node.id") {
        if stored != node_id.to_string() {
            bail!(
                "{} belongs to node.id {stored}, not {node_id}",
                path.display()
            );
        }
    }
    Ok(value("cluster.id"))
}

/// The directory id stored in `dir`'s `meta.properties`, if any.
pub fn read_directory_id(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(dir.join(FILE)).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == "directory.id")
        .map(|(_, v)| v.trim().to_string())
}

/// Reads the cluster id, or creates the file with a new one (or `wanted`).
pub fn load_or_create(dir: &Path, node_id: i32, wanted: Option<String>) -> anyhow::Result<String> {
    load_or_create_with(dir, node_id, wanted, None)
}

/// [`load_or_create`], with the directory id a new file gets (`brook format
/// --initial-controllers` names it); `None`: a random one.
pub fn load_or_create_with(
    dir: &Path,
    node_id: i32,
    wanted: Option<String>,
    directory_id: Option<String>,
) -> anyhow::Result<String> {
    fs::create_dir_all(dir).with_context(|| format!("creating log dir {}", dir.display()))?;
    let path = dir.join(FILE);
    if let Ok(text) = fs::read_to_string(&path) {
        let value = |key: &str| {
            text.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_string())
        };
        let cluster_id = value("cluster.id").context("meta.properties lacks cluster.id")?;
        if let Some(stored) = value("node.id") {
            if stored != node_id.to_string() {
                bail!(
                    "{} belongs to node.id {stored}, not {node_id}",
                    path.display()
                );
            }
        }
        if let Some(wanted) = wanted {
            if wanted != cluster_id {
                bail!(
                    "{} belongs to cluster {cluster_id}, not {wanted}",
                    path.display()
                );
            }
        }
        if value("directory.id").is_none() {
            let directory_id = directory_id.unwrap_or_else(random_directory_id);
            write_file(dir, &cluster_id, node_id, &directory_id)?;
        }
        return Ok(cluster_id);
    }
    let cluster_id = wanted.unwrap_or_else(|| uuid_to_kafka_string(Uuid::new_v4()));
    let directory_id = directory_id.unwrap_or_else(random_directory_id);
    write_file(dir, &cluster_id, node_id, &directory_id)?;
    Ok(cluster_id)
}

/// A new directory id, in Kafka's text form.
pub fn random_directory_id() -> String {
    uuid_to_kafka_string(Uuid::new_v4())
}

/// Replaces the file atomically: tmp, fsync, rename, fsync the directory.
fn write_file(
    dir: &Path,
    cluster_id: &str,
    node_id: i32,
    directory_id: &str,
) -> anyhow::Result<()> {
    let tmp = dir.join(format!("{FILE}.tmp"));
    {
        let mut file =
            fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        write!(
            file,
            "#\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={directory_id}\n"
        )?;
        file.sync_all()?;
    }
    fs::rename(&tmp, dir.join(FILE))?;
    fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// Kafka prints UUIDs (cluster ids, topic ids) as URL-safe base64 without padding.
pub fn uuid_to_kafka_string(id: Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_print_as_22_base64_characters() {
        assert_eq!(uuid_to_kafka_string(Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
    }

    #[test]
    fn keeps_the_cluster_id_across_restarts_and_refuses_another_node() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = load_or_create(dir.path(), 1, None).expect("create");
        assert_eq!(load_or_create(dir.path(), 1, None).expect("reload"), first);
        assert!(load_or_create(dir.path(), 2, None).is_err());
        let directory = read_directory_id(dir.path()).expect("directory id");
        assert_eq!(directory.len(), 22);
        load_or_create(dir.path(), 1, None).expect("reload");
        assert_eq!(read_directory_id(dir.path()), Some(directory));
    }

    #[test]
    fn a_file_without_a_directory_id_gets_one_and_keeps_its_cluster_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join(FILE),
            "version=1\ncluster.id=abc\nnode.id=1\n",
        )
        .expect("write");
        assert_eq!(load_or_create(dir.path(), 1, None).expect("load"), "abc");
        assert!(read_directory_id(dir.path()).is_some());
    }
}
