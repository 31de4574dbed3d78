//! Pure planning for the cleaner (Kafka's `LogCleanerManager.cleanableOffsets`,
//! `LogToClean` and `Cleaner.groupSegmentsBySize`): which part of a log is cleanable,
//! how dirty it is, whether it must be cleaned now, and how its segments are grouped
//! into new ones. No I/O.
//!
//! The cleanable range runs from the log start to the first uncleanable offset: the
//! active segment's base, or earlier the base of the first dirty segment whose largest
//! timestamp is newer than `now - min.compaction.lag.ms`, or earlier the first offset of
//! the oldest open transaction (Kafka never cleans past the last stable offset: whether
//! that transaction's records stay is not decided yet). The clean section lies below
//! the first dirty offset (the cleaner checkpoint), the dirty section above it.

use crate::config::LogConfig;

/// What planning needs to know about one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    pub base_offset: i64,
    pub next_offset: i64,
    pub size: u64,
    /// Largest batch max timestamp (`None` when empty).
    pub max_timestamp: Option<i64>,
    /// Max timestamp of the first batch (`None` when empty).
    pub first_timestamp: Option<i64>,
}

/// How dirty a log is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanPlan {
    /// Where the dirty section starts (the checkpoint clamped into the log).
    pub first_dirty_offset: i64,
    /// Nothing at or above it is cleaned.
    pub first_uncleanable_offset: i64,
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    /// `max.compaction.lag.ms` is exceeded by the oldest dirty record.
    pub max_lag_exceeded: bool,
}

impl CleanPlan {
    /// dirty / (clean + dirty) of the cleanable part (0 when it is empty).
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }

    /// Kafka's rule: dirty bytes to clean and the ratio reached or the max lag passed.
    pub fn needs_cleaning(&self, config: &LogConfig) -> bool {
        self.dirty_bytes > 0
            && (self.max_lag_exceeded || self.dirty_ratio() >= config.min_cleanable_dirty_ratio)
    }
}

/// Plans over `segments` (oldest first, the last one active), with the first offset of
/// the oldest open transaction `first_unstable_offset`.
pub fn plan(
    segments: &[SegmentInfo],
    checkpoint: Option<i64>,
    log_start_offset: i64,
    first_unstable_offset: Option<i64>,
    config: &LogConfig,
    now_ms: i64,
) -> CleanPlan {
    let active_base = segments.last().map_or(log_start_offset, |s| s.base_offset);
    // A checkpoint outside the log (lost, or the log was truncated) means "all dirty".
    let first_dirty = checkpoint
        .filter(|c| (log_start_offset..=active_base).contains(c))
        .unwrap_or(log_start_offset);
    let lag_limit = now_ms.saturating_sub(config.min_compaction_lag_ms);
    let closed = &segments[..segments.len().saturating_sub(1)];
    let first_uncleanable = closed
        .iter()
        .filter(|s| s.next_offset > first_dirty)
        .find(|s| s.max_timestamp.is_some_and(|ts| ts > lag_limit))
        .map_or(active_base, |s| s.base_offset)
        .min(first_unstable_offset.unwrap_or(i64::MAX))
        .max(first_dirty);
    let mut plan = CleanPlan {
        first_dirty_offset: first_dirty,
        first_uncleanable_offset: first_uncleanable,
        clean_bytes: 0,
        dirty_bytes: 0,
        max_lag_exceeded: false,
    };
    // Nothing dirty below the bound (an open transaction holds it at the checkpoint):
    // no pass is due, however large the segment holding the bound.
    let dirty_below = first_dirty < first_uncleanable;
    for s in closed.iter().filter(|s| s.base_offset < first_uncleanable) {
        if s.next_offset <= first_dirty {
            plan.clean_bytes += s.size;
        } else if dirty_below {
            plan.dirty_bytes += s.size;
            let oldest = s.first_timestamp.or(s.max_timestamp);
            if let (Some(max_lag), Some(ts)) = (config.max_compaction_lag_ms, oldest) {
                plan.max_lag_exceeded |= now_ms.saturating_sub(ts) > max_lag;
            }
        }
    }
    plan
}

/// Groups consecutive segments (indexes into `segments`) so each group's total size
/// stays within `segment.bytes`, its estimated index within `segment.index.bytes`, and
/// its offsets within u32 of its first base: each group becomes one new segment.
pub fn group_segments(segments: &[SegmentInfo], config: &LogConfig) -> Vec<Vec<usize>> {
    let index_entries = |bytes: u64| bytes / config.index_interval_bytes.max(1) + 1;
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let (mut size, mut entries, mut base) = (0u64, 0u64, 0i64);
    for (i, s) in segments.iter().enumerate() {
        let fits = !current.is_empty()
            && size + s.size <= config.segment_bytes
            && (entries + index_entries(s.size)) * 12 <= config.segment_index_bytes
            && s.next_offset - 1 - base <= i64::from(u32::MAX);
        if !fits && !current.is_empty() {
            groups.push(std::mem::take(&mut current));
        }
        if current.is_empty() {
            (size, entries, base) = (0, 0, s.base_offset);
        }
        current.push(i);
        size += s.size;
        entries += index_entries(s.size);
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: i64, next: i64, size: u64, ts: i64) -> SegmentInfo {
        SegmentInfo {
            base_offset: base,
            next_offset: next,
            size,
            max_timestamp: Some(ts),
            first_timestamp: Some(ts - 10),
        }
    }

    fn config() -> LogConfig {
        LogConfig {
            cleanup_compact: true,
            min_cleanable_dirty_ratio: 0.5,
            ..LogConfig::default()
        }
    }

    #[test]
    fn ratio_counts_clean_and_dirty_bytes_below_the_active_segment() {
        let segs = [seg(0, 10, 100, 1), seg(10, 20, 300, 2), seg(20, 25, 999, 3)];
        let p = plan(&segs, Some(10), 0, None, &config(), 1_000);
        assert_eq!((p.first_dirty_offset, p.first_uncleanable_offset), (10, 20));
        assert_eq!((p.clean_bytes, p.dirty_bytes), (100, 300));
        assert!((p.dirty_ratio() - 0.75).abs() < 1e-9);
        assert!(p.needs_cleaning(&config()));
        let strict = LogConfig {
            min_cleanable_dirty_ratio: 0.8,
            ..config()
        };
        assert!(!p.needs_cleaning(&strict));
    }

    #[test]
    fn a_missing_or_stale_checkpoint_means_all_dirty() {
        let segs = [seg(5, 10, 100, 1), seg(10, 20, 300, 2), seg(20, 25, 0, 3)];
        for checkpoint in [None, Some(2), Some(99)] {
            let p = plan(&segs, checkpoint, 5, None, &config(), 1_000);
            assert_eq!(p.first_dirty_offset, 5);
            assert_eq!((p.clean_bytes, p.dirty_bytes), (0, 400));
        }
    }

    #[test]
    fn min_compaction_lag_stops_the_cleanable_range_at_the_first_young_segment() {
        let segs = [
            seg(0, 10, 100, 100),
            seg(10, 20, 100, 900),
            seg(20, 30, 100, 200),
            seg(30, 31, 5, 950),
        ];
        let lagged = LogConfig {
            min_compaction_lag_ms: 500,
            ..config()
        };
        let p = plan(&segs, None, 0, None, &lagged, 1_000);
        assert_eq!(p.first_uncleanable_offset, 10);
        assert_eq!(p.dirty_bytes, 100);
        // Nothing dirty is old enough: nothing is cleanable.
        let p = plan(&segs, Some(10), 0, None, &lagged, 1_000);
        assert_eq!(p.first_uncleanable_offset, 10);
        assert_eq!(p.dirty_bytes, 0);
        assert!(!p.needs_cleaning(&lagged));
    }

    #[test]
    fn max_compaction_lag_forces_a_clean_below_the_ratio() {
        let segs = [
            seg(0, 10, 1_000, 100),
            seg(10, 20, 10, 200),
            seg(20, 21, 1, 300),
        ];
        let cfg = LogConfig {
            max_compaction_lag_ms: Some(500),
            min_cleanable_dirty_ratio: 0.9,
            ..config()
        };
        let p = plan(&segs, Some(10), 0, None, &cfg, 600);
        assert!(!p.max_lag_exceeded);
        assert!(!p.needs_cleaning(&cfg));
        let p = plan(&segs, Some(10), 0, None, &cfg, 800);
        assert!(p.max_lag_exceeded);
        assert!(p.needs_cleaning(&cfg));
    }

    #[test]
    fn an_open_transaction_bounds_the_cleanable_range_at_its_first_offset() {
        let segs = [seg(0, 10, 100, 1), seg(10, 20, 100, 2), seg(20, 25, 5, 3)];
        let p = plan(&segs, None, 0, Some(14), &config(), 1_000);
        assert_eq!(p.first_uncleanable_offset, 14);
        assert_eq!((p.clean_bytes, p.dirty_bytes), (0, 200));
        // Once cleaned up to it, nothing is due until the transaction ends.
        let p = plan(&segs, Some(14), 0, Some(14), &config(), 1_000);
        assert_eq!((p.first_uncleanable_offset, p.dirty_bytes), (14, 0));
        assert!(!p.needs_cleaning(&config()));
        let p = plan(&segs, Some(14), 0, None, &config(), 1_000);
        assert_eq!((p.first_uncleanable_offset, p.dirty_bytes), (20, 100));
    }

    #[test]
    fn only_the_active_segment_means_nothing_to_clean() {
        let p = plan(&[seg(0, 50, 10_000, 1)], None, 0, None, &config(), 1_000);
        assert_eq!((p.first_uncleanable_offset, p.dirty_bytes), (0, 0));
        assert!(!p.needs_cleaning(&config()));
    }

    #[test]
    fn segments_group_within_segment_bytes_and_u32_offsets() {
        let cfg = LogConfig {
            segment_bytes: 250,
            ..config()
        };
        let segs = [
            seg(0, 10, 100, 1),
            seg(10, 20, 100, 1),
            seg(20, 30, 100, 1),
            seg(30, 40, 300, 1),
        ];
        assert_eq!(
            group_segments(&segs, &cfg),
            vec![vec![0, 1], vec![2], vec![3]]
        );
        let far = [seg(0, 10, 1, 1), seg(1 << 33, (1 << 33) + 1, 1, 1)];
        assert_eq!(group_segments(&far, &config()), vec![vec![0], vec![1]]);
    }
}
