//! Opening a partition log (Kafka's `LogLoader`): segments wholly below the recovery
//! point are opened from their indexes (`Segment::load_trusted`), the others recovered
//! by a full scan, and the producer state loaded from a snapshot plus the batch headers
//! after it.
//!
//! The bound below which a segment is trusted is `min(recovery point, snapshot offset)`
//! of the newest producer snapshot at or below the recovery point. Both only ever cover
//! fsynced data; the snapshot bound also keeps a stale checkpoint safe: a truncation
//! deletes (durably) every snapshot above its new end before anything new is appended,
//! so data written after it is always scanned even if the checkpoint file still names an
//! older, higher recovery point. Without a snapshot nothing is trusted (a full scan, as
//! before recovery points existed). The first segment that is not trusted ends the
//! trusted range: it and every later one are scanned, torn tails truncated.
//!
//! Aborted transaction indexes (`.txnindex`): a segment keeps the entries of its file
//! whose markers lie below the snapshot offset (fsynced with the segment, since the
//! snapshot is at or below the recovery point, and not replayed), plus those its replay
//! rebuilds from the markers at or above it; a full scan rebuilds every entry. The file
//! is rewritten if it differs.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::path::Path;

use crate::config::LogConfig;
use crate::control::parse_end_txn_marker;
use crate::error::{io_err, Result};
use crate::log::epoch_cache;
use crate::log::listing::Listing;
use crate::log::{LeaderEpochCache, Log};
use crate::producer_snapshot;
use crate::producer_state::ProducerStateManager;
use crate::recovery::scan_segment_names;
use crate::segment::{file_name, Segment};
use crate::txn_index::{self, AbortedTxn};

/// How much of the log an open scanned (for logs and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Segments opened from their indexes without a scan.
    pub trusted_segments: usize,
    /// Segments recovered by a full scan.
    pub scanned_segments: usize,
}

impl Log {
    /// Opens the log in `dir` (created if missing) with no recovery point: every segment
    /// is recovered (torn or corrupt tails truncated and later segments dropped, indexes
    /// rebuilt, producer state replayed from the batch headers). The leader epoch cache
    /// is its checkpoint merged with the epochs of the batch headers (as Kafka's
    /// `LogSegment.recover`), trimmed to the recovered log.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<Self> {
        Self::open_with_recovery_point(dir, config, now_ms, 0)
    }

    /// Like [`Log::open`], trusting what lies below `recovery_point` (the offset below
    /// which the log was known fsynced, from `recovery-point-offset-checkpoint`): see the
    /// module docs. 0 recovers everything.
    pub fn open_with_recovery_point(
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
        recovery_point: i64,
    ) -> Result<Self> {
        let (created, mut listing) = match Listing::read(dir)? {
            Some(listing) => (false, listing),
            None => {
                fs::create_dir_all(dir).map_err(io_err("create log dir", dir))?;
                (true, Listing::empty())
            }
        };
        if listing.has_interrupted_clean() {
            // A clean interrupted by a crash is rolled back or completed first.
            crate::cleaner::swap::complete_interrupted_cleans(dir)?;
            listing = Listing::read(dir)?.unwrap_or_else(Listing::empty);
        }
        let bases = scan_segment_names(dir, listing.names())?;
        // Listed now, with tmp files of interrupted writes removed; nothing below adds or
        // removes a snapshot before `delete_above_of` uses the list again.
        let snapshots = producer_snapshot::offsets_in(dir, listing.names(), true)?;
        let snapshot = match recovery_point {
            0 => None,
            _ => producer_snapshot::latest_of(dir, snapshots.clone(), recovery_point)?,
        };
        // Batches below `replay_from` are already in the snapshot's state.
        let (mut producers, replay_from, trust_below) = match snapshot {
            Some((offset, state)) => (state, offset, Some(offset.min(recovery_point))),
            None => (ProducerStateManager::new(), i64::MIN, None),
        };
        let mut epochs = if listing.contains(epoch_cache::FILE_NAME) {
            LeaderEpochCache::load(dir)?
        } else {
            LeaderEpochCache::empty(dir)
        };
        let mut segments = BTreeMap::new();
        let mut stats = LoadStats::default();
        let mut next_offset: Option<i64> = None;
        let mut drop_rest = false;
        let mut aborted: Vec<AbortedTxn> = Vec::new();
        // (first offset, marker offset) of the transactions the replay completed.
        let mut completed: VecDeque<(i64, i64)> = VecDeque::new();
        for base in bases {
            let indexes_present = ["index", "timeindex"]
                .iter()
                .all(|ext| listing.contains(&file_name(base, ext)));
            let mut segment = Segment::open(dir, base, &config, now_ms)?;
            if drop_rest || next_offset.is_some_and(|next| base < next) {
                tracing::warn!(dir = %dir.display(), base_offset = base, "deleting segment after a corrupt or overlapping one");
                segment.delete()?;
                drop_rest = true;
                continue;
            }
            // Decided per segment: one whose indexes are missing or inconsistent is
            // recovered by a scan, and the segments after it may still be trusted.
            let mut trusted = false;
            if trust_below.is_some_and(|bound| base < bound) && indexes_present {
                if segment.load_trusted(&config)? {
                    trusted = trust_below.is_some_and(|bound| segment.next_offset() <= bound);
                } else {
                    // Below the recovery point the files were consistent when fsynced: a
                    // disagreement now is damage (or a full time index), worth a line.
                    let index = dir.join(file_name(base, "index"));
                    tracing::warn!(path = %index.display(), "segment's indexes disagree with its log; scanning it and rebuilding them");
                }
            }
            let mut replayed: Vec<AbortedTxn> = Vec::new();
            if trusted {
                stats.trusted_segments += 1;
            } else {
                let truncated = segment.recover(&config, &mut |h, bytes| {
                    if h.base_offset >= replay_from {
                        let marker = (h.is_control() && h.has_producer_id())
                            .then(|| parse_end_txn_marker(bytes, h).ok())
                            .flatten();
                        if let Some(c) = producers.update(h, marker.as_ref()) {
                            replayed.extend(producers.aborted_entry(&c));
                            completed.push_back((c.first_offset, c.last_offset));
                        }
                    }
                    epochs.assign_if_newer(h.partition_leader_epoch, h.base_offset);
                })?;
                stats.scanned_segments += 1;
                drop_rest = truncated > 0;
            }
            let stored = match listing.contains(&file_name(base, "txnindex")) {
                true => segment.txn_index_bytes()?,
                false => Vec::new(),
            };
            let mut entries: Vec<AbortedTxn> =
                txn_index::decode_valid(&stored, base, segment.next_offset())
                    .into_iter()
                    .filter(|e| e.last_offset < replay_from)
                    .collect();
            entries.extend(replayed);
            segment.reset_txn_index_from(&entries, stored)?;
            aborted.extend(entries);
            next_offset = Some(segment.next_offset());
            segments.insert(base, segment);
        }
        let fresh_segment = segments.is_empty();
        if fresh_segment {
            let mut segment = Segment::open(dir, 0, &config, now_ms)?;
            segment.recover(&config, &mut |_, _| {})?;
            segment.reset_txn_index(&[])?;
            segments.insert(0, segment);
        }
        let log_start_offset = segments.keys().next().copied().unwrap_or_default();
        let log_end_offset = segments
            .values()
            .next_back()
            .map_or(0, Segment::next_offset);
        if log_end_offset < replay_from {
            // Corruption cut the log below the snapshot: its state includes batches that
            // are gone, so rebuild from every remaining header (rare; a header-only read).
            tracing::warn!(dir = %dir.display(), snapshot_offset = replay_from, log_end_offset, "log ends below its producer snapshot; replaying every batch header");
            producers = ProducerStateManager::new();
            aborted.clear();
            completed.clear();
            for segment in segments.values_mut() {
                let mut entries = Vec::new();
                segment.for_each_producer_batch(&mut |h, marker| {
                    if let Some(c) = producers.update(h, marker) {
                        entries.extend(producers.aborted_entry(&c));
                        completed.push_back((c.first_offset, c.last_offset));
                    }
                })?;
                segment.reset_txn_index(&entries)?;
                aborted.extend(entries);
            }
        }
        // Snapshots above the end describe batches that no longer exist (Kafka's
        // `truncateAndReload` on load).
        let snapshot_offset = producer_snapshot::delete_above_of(dir, snapshots, log_end_offset)?;
        epochs.truncate_from_end(log_end_offset);
        epochs.truncate_from_start(log_start_offset);
        // Not written here: on a start after a crash every partition with unflushed
        // epochs would pay a write and two fsyncs. The cache is rebuilt from the same
        // headers by any later open until the next flush writes it.

        tracing::debug!(dir = %dir.display(), recovery_point, trusted = stats.trusted_segments, scanned = stats.scanned_segments, "log loaded");
        let log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            log_end_offset,
            // Data above the checkpointed point may be only in the page cache (a killed
            // process): it is not known durable until the next flush.
            recovery_point: recovery_point.clamp(0, log_end_offset),
            snapshot_offset,
            load_stats: stats,
            producers,
            epochs,
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            // A new directory, or a log found without any segment: its entries are
            // fsynced by its first flush.
            dir_sync_pending: created || fresh_segment,
            txn_index_behind: None,
            pending_deletions: Vec::new(),
            cleaner: match listing.contains(crate::cleaner::checkpoint::FILE_NAME) {
                true => crate::cleaner::CleanerState::load(dir),
                false => crate::cleaner::CleanerState::default(),
            },
            rewrites: Default::default(),
            cleaning: Default::default(),
            txns: Default::default(),
        };
        log.reset_txns(aborted, completed);
        Ok(log)
    }

    /// How much the open of this log scanned.
    pub fn load_stats(&self) -> LoadStats {
        self.load_stats
    }
}
