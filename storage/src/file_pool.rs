//! A bounded pool of open files shared by every partition (like a database's table
//! cache): segment logs and their offset, time and transaction indexes are opened on
//! demand and the least recently used are closed when the pool is full, so the number of
//! partitions a broker holds is not limited by `ulimit -n` (issue 24: three files per
//! partition made a broker fail at about 6,600 partitions on a 20,000-file limit).
//!
//! A file is named by a [`PooledFile`], owned by its segment; [`PooledFile::get`] returns
//! an `Arc<File>`. The pool may close its own reference at any time; a reader or a
//! zero-copy send holding the `Arc` keeps the descriptor (and the inode, even if the file
//! is renamed or deleted meanwhile) until it lets go. Dropping the `PooledFile` forgets
//! the file.
//!
//! Thread-safety: the pool is split into shards, each a short `parking_lot` mutex held for
//! map operations only; opening and closing files (syscalls) happen outside any lock.
//! The file descriptor limit is per process, so there is one pool per process
//! ([`global`]), sized once at start-up by [`configure`].

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::error::{io_err, Result};

/// Shards of the pool: enough that concurrent appends and reads rarely meet on a lock.
const SHARDS: usize = 16;
/// The pool's size when nobody called [`configure`] (tests, tools).
const DEFAULT_CAPACITY: usize = 1024;

static POOL: OnceLock<Arc<FilePool>> = OnceLock::new();

/// Sizes the process's pool; only the first call (before any file is opened) counts.
/// Returns the capacity in force.
pub fn configure(capacity: usize) -> usize {
    global_or_init(capacity).capacity()
}

/// The process's pool.
pub fn global() -> &'static Arc<FilePool> {
    global_or_init(DEFAULT_CAPACITY)
}

fn global_or_init(capacity: usize) -> &'static Arc<FilePool> {
    POOL.get_or_init(|| Arc::new(FilePool::new(capacity)))
}

/// The pool's share of the descriptor limit by default: half of it, leaving the rest to
/// sockets, RocksDB and the raft log (Kafka leaves all of this to `ulimit -n`).
pub fn default_capacity(max_open_files: u64) -> usize {
    usize::try_from(max_open_files / 2)
        .unwrap_or(usize::MAX)
        .max(16)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (Kafka's start scripts expect the
/// operator to have done it with `ulimit -n`; Brook does it itself) and returns the soft
/// limit in force.
pub fn raise_open_files_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %e, "could not raise the open files limit to the hard limit");
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

#[derive(Debug)]
struct Entry {
    file: Arc<File>,
    last_used: u64,
}

#[derive(Debug, Default)]
struct Shard {
    files: HashMap<u64, Entry>,
    tick: u64,
}

/// Open files, by the id of the [`PooledFile`] naming them.
#[derive(Debug)]
pub struct FilePool {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    next_id: AtomicU64,
    open: AtomicUsize,
    opened_total: AtomicU64,
    /// Descriptors lent to zero-copy record sets in flight ([`FilePool::lend`]).
    lent: AtomicUsize,
}

impl FilePool {
    /// A pool keeping at most about `capacity` files open (at least one per shard).
    pub fn new(capacity: usize) -> Self {
        FilePool {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            next_id: AtomicU64::new(1),
            open: AtomicUsize::new(0),
            opened_total: AtomicU64::new(0),
            lent: AtomicUsize::new(0),
        }
    }

    pub fn capacity(&self) -> usize {
        self.per_shard * SHARDS
    }

    /// Files the pool holds open now (readers may hold a few more it already let go).
    pub fn open_files(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Files opened since start (opens after an eviction count again).
    pub fn opened_total(&self) -> u64 {
        self.opened_total.load(Ordering::Relaxed)
    }

    /// Most descriptors lent at once: half the pool's capacity. With the pool at half the
    /// descriptor limit (its default) that leaves a quarter of the limit to sockets,
    /// RocksDB and the raft log.
    pub fn lend_capacity(&self) -> usize {
        (self.capacity() / 2).max(1)
    }

    /// Descriptors lent now.
    pub fn lent(&self) -> usize {
        self.lent.load(Ordering::Relaxed)
    }

    /// Lends `files` descriptors to a record set that a response will send from its files
    /// (`FileRecords`), or `None` when the loans would pass [`FilePool::lend_capacity`]:
    /// the caller copies the bytes into memory instead and lets the files go. The pool
    /// may close its own reference to a file while a response still holds it, so without
    /// this bound a fetch sweeping more partitions than the pool holds kept every
    /// evicted file open until its response was sent: at 100,000 partitions the process
    /// reached its 20,000-descriptor limit, and accepts and checkpoint writes failed with
    /// EMFILE.
    pub fn lend(self: &Arc<Self>, files: usize) -> Option<DescriptorLoan> {
        let capacity = self.lend_capacity();
        self.lent
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |lent| {
                lent.checked_add(files).filter(|&after| after <= capacity)
            })
            .ok()?;
        Some(DescriptorLoan {
            pool: Arc::clone(self),
            files,
        })
    }

    fn shard(&self, id: u64) -> &Mutex<Shard> {
        &self.shards[(id as usize) % SHARDS]
    }

    fn cached(&self, id: u64) -> Option<Arc<File>> {
        let mut shard = self.shard(id).lock();
        shard.tick += 1;
        let tick = shard.tick;
        let entry = shard.files.get_mut(&id)?;
        entry.last_used = tick;
        Some(Arc::clone(&entry.file))
    }

    /// Adds a file just opened (outside the lock) for `id`; if another thread added one
    /// meanwhile, that one wins and ours is closed. Evicts past the capacity.
    fn insert(&self, id: u64, file: File) -> Arc<File> {
        let mut evicted = Vec::new();
        let file = {
            let mut shard = self.shard(id).lock();
            shard.tick += 1;
            let tick = shard.tick;
            if let Some(existing) = shard.files.get_mut(&id) {
                existing.last_used = tick;
                Arc::clone(&existing.file)
            } else {
                let file = Arc::new(file);
                shard.files.insert(
                    id,
                    Entry {
                        file: Arc::clone(&file),
                        last_used: tick,
                    },
                );
                self.open.fetch_add(1, Ordering::Relaxed);
                let excess = shard.files.len().saturating_sub(self.per_shard);
                if excess > 0 {
                    evicted = self.evict(&mut shard, excess);
                }
                file
            }
        };
        drop(evicted); // close(2) outside the lock
        file
    }

    /// Takes out the least recently used files of a shard: at least `at_least`, and an
    /// eighth of the shard at once, so a stream of misses pays one selection per batch.
    fn evict(&self, shard: &mut Shard, at_least: usize) -> Vec<Arc<File>> {
        let count = at_least.max(self.per_shard / 8).min(shard.files.len());
        if count == 0 {
            return Vec::new();
        }
        let mut ages: Vec<(u64, u64)> = shard
            .files
            .iter()
            .map(|(id, e)| (e.last_used, *id))
            .collect();
        ages.select_nth_unstable(count - 1);
        let victims: Vec<Arc<File>> = ages[..count]
            .iter()
            .filter_map(|(_, id)| shard.files.remove(id))
            .map(|e| e.file)
            .collect();
        self.open.fetch_sub(victims.len(), Ordering::Relaxed);
        victims
    }

    /// Closes half of every shard's files: the process ran out of descriptors (sockets,
    /// other files) and the pool gives some back before retrying an open.
    fn shed(&self) {
        for shard in &self.shards {
            let victims = {
                let mut shard = shard.lock();
                let half = shard.files.len().div_ceil(2);
                self.evict(&mut shard, half)
            };
            drop(victims);
        }
    }

    fn forget(&self, id: u64) {
        let removed = self.shard(id).lock().files.remove(&id);
        if removed.is_some() {
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
        drop(removed);
    }

    fn open_file(&self, path: &Path, create: bool) -> std::io::Result<File> {
        let open = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .open(path)
        };
        let file = match open() {
            Err(e) if is_out_of_descriptors(&e) => {
                self.shed();
                open()
            }
            other => other,
        }?;
        self.opened_total.fetch_add(1, Ordering::Relaxed);
        Ok(file)
    }
}

/// Descriptors a zero-copy record set holds ([`FilePool::lend`]), given back when it
/// is dropped (after its response was sent, or dropped unsent).
#[derive(Debug)]
pub struct DescriptorLoan {
    pool: Arc<FilePool>,
    files: usize,
}

impl Drop for DescriptorLoan {
    fn drop(&mut self) {
        self.pool.lent.fetch_sub(self.files, Ordering::AcqRel);
    }
}

/// EMFILE (this process) or ENFILE (the system).
pub fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == rustix::io::Errno::MFILE.raw_os_error() || code == rustix::io::Errno::NFILE.raw_os_error())
}

/// One file of a segment, opened through the pool when used. Not `Clone`: the segment
/// owns it, and dropping it forgets the file (readers keep their `Arc<File>`).
#[derive(Debug)]
pub struct PooledFile {
    pool: Arc<FilePool>,
    id: u64,
    path: Arc<Path>,
    /// Written since the last fsync (or possibly so: a file found on disk may hold data
    /// a killed process left in the page cache). A clean file needs no fsync, and no
    /// reopen to give one.
    dirty: AtomicBool,
    /// What `context` an I/O error names.
    what: &'static str,
}

impl PooledFile {
    /// Opens (creating it if missing) `path` in the process's pool; the file stays open
    /// until the pool needs the room. `what` names it in errors ("segment", "index").
    pub fn open_or_create(path: &Path, what: &'static str) -> Result<Self> {
        Self::open_in(global(), path, what)
    }

    pub(crate) fn open_in(pool: &Arc<FilePool>, path: &Path, what: &'static str) -> Result<Self> {
        let id = pool.next_id.fetch_add(1, Ordering::Relaxed);
        let existed = path.exists();
        let file = pool
            .open_file(path, true)
            .map_err(io_err(open_context(what), path))?;
        pool.insert(id, file);
        Ok(PooledFile {
            pool: Arc::clone(pool),
            id,
            path: Arc::from(path),
            dirty: AtomicBool::new(existed),
            what,
        })
    }

    pub fn path(&self) -> &Arc<Path> {
        &self.path
    }

    /// The open file, reopened if the pool closed it. Never creates it again: a file
    /// that vanished is an error.
    pub fn get(&self) -> Result<Arc<File>> {
        if let Some(file) = self.pool.cached(self.id) {
            return Ok(file);
        }
        let file = self
            .pool
            .open_file(&self.path, false)
            .map_err(io_err(open_context(self.what), &self.path))?;
        Ok(self.pool.insert(self.id, file))
    }

    /// The open file if the pool holds it (no syscall): for async workers, which must
    /// not wait on an open.
    pub fn get_cached(&self) -> Option<Arc<File>> {
        self.pool.cached(self.id)
    }

    /// Closes the pool's descriptor now (a reader's `Arc` keeps its own): for files read
    /// once at open and seldom written after, so that they do not push the hot ones out.
    pub fn release(&self) {
        self.pool.forget(self.id);
    }

    /// Records that the file was written (its next `sync_data` fsyncs).
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Fsyncs the file's data if it was written since the last time (fsync is per
    /// inode: a reopened descriptor flushes what an evicted one wrote).
    pub fn sync_data(&self) -> Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let synced = self.get().and_then(|file| {
            crate::write_fault::sync_data(&file)
                .map_err(io_err(sync_context(self.what), &self.path))
        });
        if synced.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        synced
    }
}

impl Drop for PooledFile {
    fn drop(&mut self) {
        self.pool.forget(self.id);
    }
}

fn open_context(what: &'static str) -> &'static str {
    match what {
        "index" => "open index",
        "txn index" => "open txn index",
        _ => "open segment",
    }
}

fn sync_context(what: &'static str) -> &'static str {
    match what {
        "index" => "fsync index",
        "txn index" => "fsync txn index",
        _ => "fsync segment",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_full_pool_closes_the_least_recently_used_and_reopens_on_demand() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pool = Arc::new(FilePool::new(SHARDS)); // one file per shard
        let files: Vec<PooledFile> = (0..64)
            .map(|i| {
                PooledFile::open_in(&pool, &dir.path().join(format!("{i}.log")), "segment")
                    .expect("open")
            })
            .collect();
        assert!(pool.open_files() <= pool.capacity());
        for (i, f) in files.iter().enumerate() {
            f.get()
                .expect("get")
                .write_all_at(&[i as u8], 0)
                .expect("write");
        }
        for (i, f) in files.iter().enumerate() {
            let mut byte = [0u8; 1];
            f.get()
                .expect("reopen")
                .read_exact_at(&mut byte, 0)
                .expect("read");
            assert_eq!(byte[0], i as u8);
        }
        assert!(pool.open_files() <= pool.capacity());
        assert!(pool.opened_total() > 64, "evicted files were reopened");
    }

    #[test]
    fn a_reader_keeps_its_file_after_eviction_and_deletion() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pool = Arc::new(FilePool::new(1));
        let path = dir.path().join("a.log");
        let first = PooledFile::open_in(&pool, &path, "segment").expect("open");
        let held = first.get().expect("get");
        held.write_all_at(b"xyz", 0).expect("write");
        drop(first);
        std::fs::remove_file(&path).expect("delete");
        let mut buf = [0u8; 3];
        held.read_exact_at(&mut buf, 0).expect("still readable");
        assert_eq!(&buf, b"xyz");
        assert_eq!(pool.open_files(), 0);
    }

    #[test]
    fn a_vanished_file_is_not_created_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pool = Arc::new(FilePool::new(SHARDS));
        let path = dir.path().join("a.log");
        let file = PooledFile::open_in(&pool, &path, "segment").expect("open");
        pool.forget(file.id);
        std::fs::remove_file(&path).expect("delete");
        assert!(file.get().is_err());
        assert!(!path.exists());
    }

    #[test]
    fn descriptors_lent_to_record_sets_are_bounded_and_given_back() {
        let pool = Arc::new(FilePool::new(2 * SHARDS));
        assert_eq!(pool.lend_capacity(), SHARDS);
        let most = pool.lend(SHARDS - 1).expect("within the bound");
        assert!(pool.lend(2).is_none(), "past the bound: copied instead");
        let last = pool.lend(1).expect("exactly the bound");
        assert_eq!(pool.lent(), SHARDS);
        drop(most);
        assert_eq!(pool.lent(), 1);
        assert!(pool.lend(SHARDS - 1).is_some(), "given back on drop");
        drop(last);
    }
}
