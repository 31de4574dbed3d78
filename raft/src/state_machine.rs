//! The raft state machine: applies committed [`Command`](crate::Command)s to the [`MetadataImage`],
//! publishes each new image on a `watch`, and builds / installs / persists snapshots.
//!
//! Persistence follows openraft's "persistent snapshot" model: `apply` only changes memory;
//! durability comes from the snapshot file (`<dir>/snapshot.json`, replaced atomically:
//! write tmp, fsync, rename, fsync dir) plus the raft log, which openraft re-applies from the
//! snapshot's last log id up to the persisted `committed` id on restart (`Raft::new`).
//!
//! It also counts the Kafka record bytes of the entries applied since the last snapshot taken
//! or installed (`snapshot_trigger.rs`), which decides when the next one is due.
//!
//! Invariants: the published image's `applied` equals the state machine's last applied id;
//! the on-disk snapshot is only ever replaced by one at least as new. Snapshot file I/O runs on
//! `spawn_blocking`; the current-snapshot mutex is only held on blocking threads or briefly.

// openraft's storage traits fix `StorageError` (224 bytes) as the error type, so
// boxing it here would only add a conversion at every trait boundary.
#![allow(clippy::result_large_err)]

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    AnyError, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, StorageError, StorageIOError,
    StoredMembership,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::apply::apply;
use crate::command::ApplyResult;
use crate::image::MetadataImage;
use crate::snapshot_trigger::record_bytes;
use crate::QuorumNode;
use crate::TypeConfig;

type NodeId = u64;
type Entry = openraft::Entry<TypeConfig>;
type Meta = SnapshotMeta<NodeId, QuorumNode>;
type StResult<T> = Result<T, StorageError<NodeId>>;

const SNAPSHOT_FILE: &str = "snapshot.json";
const SNAPSHOT_TMP: &str = "snapshot.json.tmp";
/// Bumped on any incompatible change of the snapshot file; see `raft/FORMAT.md`.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 1;

/// The snapshot file and the snapshot data sent to followers: the same bytes.
#[derive(Serialize, Deserialize)]
pub(crate) struct SnapshotFile {
    format_version: u32,
    meta: Meta,
    pub(crate) image: MetadataImage,
}

/// A snapshot as held in memory: its meta and its serialized bytes.
#[derive(Clone)]
struct StoredSnapshot {
    meta: Meta,
    data: Vec<u8>,
}

/// The snapshot directory and the newest snapshot in it.
struct SnapshotStore {
    dir: PathBuf,
    current: Mutex<Option<StoredSnapshot>>,
}

impl SnapshotStore {
    /// Persists `snapshot` unless a newer one is already current. Blocking.
    fn persist(&self, snapshot: StoredSnapshot) -> StResult<()> {
        let signature = Some(snapshot.meta.signature());
        let write_err = |e: &std::io::Error| {
            StorageError::from(StorageIOError::write_snapshot(signature.clone(), e))
        };
        let mut current = self.current.lock().map_err(|_| {
            StorageIOError::write_snapshot(
                signature.clone(),
                AnyError::error("snapshot lock poisoned"),
            )
        })?;
        if let Some(cur) = current.as_ref() {
            if cur.meta.last_log_id > snapshot.meta.last_log_id {
                return Ok(());
            }
        }
        let tmp = self.dir.join(SNAPSHOT_TMP);
        let mut file = std::fs::File::create(&tmp).map_err(|e| write_err(&e))?;
        file.write_all(&snapshot.data).map_err(|e| write_err(&e))?;
        file.sync_all().map_err(|e| write_err(&e))?;
        std::fs::rename(&tmp, self.dir.join(SNAPSHOT_FILE)).map_err(|e| write_err(&e))?;
        sync_dir(&self.dir).map_err(|e| write_err(&e))?;
        *current = Some(snapshot);
        Ok(())
    }

    fn current(&self) -> StResult<Option<StoredSnapshot>> {
        let current = self.current.lock().map_err(|_| {
            StorageIOError::read_snapshot(None, AnyError::error("snapshot lock poisoned"))
        })?;
        Ok(current.clone())
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

pub(crate) fn decode_snapshot(data: &[u8]) -> StResult<SnapshotFile> {
    let file: SnapshotFile =
        serde_json::from_slice(data).map_err(|e| StorageIOError::read_snapshot(None, &e))?;
    if file.format_version != SNAPSHOT_FORMAT_VERSION {
        return Err(StorageIOError::read_snapshot(
            None,
            AnyError::error(format!(
                "snapshot format version {}, this build reads {SNAPSHOT_FORMAT_VERSION}",
                file.format_version
            )),
        )
        .into());
    }
    Ok(file)
}

/// The state machine openraft drives; see the module docs.
pub struct StateMachineStore {
    image: Arc<MetadataImage>,
    membership: StoredMembership<NodeId, QuorumNode>,
    snapshots: Arc<SnapshotStore>,
    publisher: watch::Sender<Arc<MetadataImage>>,
    snapshot_seq: u64,
    /// The record bytes applied since the last snapshot (see `snapshot_trigger.rs`).
    record_bytes: watch::Sender<u64>,
}

impl StateMachineStore {
    /// Opens the state machine in `dir` (created if absent), starting from the snapshot there.
    pub async fn open(dir: PathBuf) -> StResult<Self> {
        let (current, dir) = tokio::task::spawn_blocking(move || -> StResult<_> {
            std::fs::create_dir_all(&dir).map_err(|e| StorageIOError::read_state_machine(&e))?;
            let path = dir.join(SNAPSHOT_FILE);
            let current = match std::fs::read(&path) {
                Ok(data) => {
                    let file = decode_snapshot(&data)?;
                    Some((file, data))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(StorageIOError::read_snapshot(None, &e).into()),
            };
            Ok((current, dir))
        })
        .await
        .map_err(|e| StorageIOError::read_state_machine(&e))??;

        let (image, membership, stored) = match current {
            Some((file, data)) => {
                let stored = StoredSnapshot {
                    meta: file.meta.clone(),
                    data,
                };
                (file.image, file.meta.last_membership, Some(stored))
            }
            None => (MetadataImage::default(), StoredMembership::default(), None),
        };
        let image = Arc::new(image);
        let (publisher, _) = watch::channel(image.clone());
        Ok(StateMachineStore {
            image,
            membership,
            snapshots: Arc::new(SnapshotStore {
                dir,
                current: Mutex::new(stored),
            }),
            publisher,
            snapshot_seq: 0,
            record_bytes: watch::Sender::new(0),
        })
    }

    /// A receiver of every image this state machine publishes, starting with the current one.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.publisher.subscribe()
    }

    /// A receiver of the record bytes applied since the last snapshot, updated per batch.
    pub fn subscribe_record_bytes(&self) -> watch::Receiver<u64> {
        self.record_bytes.subscribe()
    }

    fn publish(&self) {
        self.publisher.send_replace(self.image.clone());
    }
}

/// Builds a snapshot from a frozen copy of the state (the `Arc` is immutable).
pub struct SnapshotBuilder {
    image: Arc<MetadataImage>,
    membership: StoredMembership<NodeId, QuorumNode>,
    snapshots: Arc<SnapshotStore>,
    snapshot_id: String,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> StResult<Snapshot<TypeConfig>> {
        let meta = Meta {
            last_log_id: self.image.applied,
            last_membership: self.membership.clone(),
            snapshot_id: self.snapshot_id.clone(),
        };
        let file = SnapshotFile {
            format_version: SNAPSHOT_FORMAT_VERSION,
            meta: meta.clone(),
            image: (*self.image).clone(),
        };
        let data = serde_json::to_vec(&file)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        };
        let snapshots = self.snapshots.clone();
        tokio::task::spawn_blocking(move || snapshots.persist(stored))
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))??;
        tracing::info!(snapshot_id = %meta.snapshot_id, "metadata snapshot built");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> StResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, QuorumNode>)> {
        Ok((self.image.applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StResult<Vec<ApplyResult>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut results = Vec::new();
        let mut applied_bytes = 0u64;
        // One copy-on-write per batch: the published image is shared, so the first
        // `make_mut` clones it and later entries of the batch mutate the copy in place.
        let image = Arc::make_mut(&mut self.image);
        for entry in entries {
            applied_bytes = applied_bytes.saturating_add(record_bytes(image, &entry.payload));
            let result = match entry.payload {
                EntryPayload::Blank => Ok(()),
                EntryPayload::Normal(cmd) => {
                    let result = apply(image, &cmd, entry.log_id.index);
                    if let Err(e) = &result {
                        tracing::debug!(log_id = %entry.log_id, kind = cmd.kind(), error = %e, "metadata command rejected");
                    }
                    result
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                    Ok(())
                }
            };
            image.applied = Some(entry.log_id);
            results.push(result);
        }
        self.record_bytes
            .send_modify(|bytes| *bytes = bytes.saturating_add(applied_bytes));
        self.publish();
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshot_seq += 1;
        // The snapshot about to be built holds every entry applied so far.
        self.record_bytes.send_replace(0);
        let snapshot_id = match self.image.applied {
            Some(id) => format!("{}-{}-{}", id.leader_id.term, id.index, self.snapshot_seq),
            None => format!("0-0-{}", self.snapshot_seq),
        };
        SnapshotBuilder {
            image: self.image.clone(),
            membership: self.membership.clone(),
            snapshots: self.snapshots.clone(),
            snapshot_id,
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StResult<()> {
        let data = snapshot.into_inner();
        let file = decode_snapshot(&data)?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        let snapshots = self.snapshots.clone();
        tokio::task::spawn_blocking(move || snapshots.persist(stored))
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))??;
        let mut image = file.image;
        image.applied = meta.last_log_id;
        self.image = Arc::new(image);
        self.membership = meta.last_membership.clone();
        self.record_bytes.send_replace(0);
        tracing::info!(snapshot_id = %meta.snapshot_id, "metadata snapshot installed");
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StResult<Option<Snapshot<TypeConfig>>> {
        Ok(self.snapshots.current()?.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}
