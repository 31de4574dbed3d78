//! Retention decisions, pure: given a partition's segment stats, its config, its log
//! start offset and the time, how many of the oldest segments go (Kafka's
//! `UnifiedLog.deleteOldSegments`).
//!
//! Rules (Kafka's): segments are judged whole and deleted oldest first, so the answer is
//! always a prefix; the active (last) segment is never deleted here (Kafka would roll it
//! first; Brook keeps it). Three criteria, the longest prefix wins:
//! - `retention.ms`: a segment whose largest timestamp is older than `now - retention.ms`;
//! - `retention.bytes`: while `total size - segment size >= retention.bytes`;
//! - log start offset: a segment whose successor starts at or below the log start offset
//!   (DeleteRecords moved the start past it); this one applies whatever the cleanup policy.
//!
//! No I/O, no clock: `now_ms` is an argument so the rules are unit-tested exactly.

use crate::config::LogConfig;

/// What retention needs to know about one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentStats {
    pub base_offset: i64,
    pub size: u64,
    /// The largest record timestamp in the segment (`None` when it holds no batch).
    pub max_timestamp: Option<i64>,
}

/// Why the first segment of a deletion goes (for logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionReason {
    RetentionMs,
    RetentionBytes,
    LogStartOffset,
}

/// How many of the oldest segments to delete, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deletion {
    pub count: usize,
    pub reason: DeletionReason,
}

/// The oldest segments that retention deletes now, `None` if nothing goes. `segments`
/// are in base-offset order, the last one being the active segment.
pub fn segments_to_delete(
    segments: &[SegmentStats],
    config: &LogConfig,
    log_start_offset: i64,
    now_ms: i64,
) -> Option<Deletion> {
    let closed = segments.len().saturating_sub(1);
    let candidates = segments.get(..closed).unwrap_or_default();
    let mut best: Option<Deletion> = None;
    let mut consider = |count: usize, reason| {
        if count > best.map_or(0, |b| b.count) {
            best = Some(Deletion { count, reason });
        }
    };
    if config.cleanup_delete {
        consider(
            time_breached(candidates, config, now_ms),
            DeletionReason::RetentionMs,
        );
        consider(
            size_breached(segments, candidates, config),
            DeletionReason::RetentionBytes,
        );
    }
    consider(
        start_breached(segments, closed, log_start_offset),
        DeletionReason::LogStartOffset,
    );
    best
}

/// Leading segments whose largest timestamp is older than `retention.ms`.
fn time_breached(candidates: &[SegmentStats], config: &LogConfig, now_ms: i64) -> usize {
    let Some(retention_ms) = config.retention_ms else {
        return 0;
    };
    candidates
        .iter()
        .take_while(|s| {
            s.max_timestamp
                .is_some_and(|ts| now_ms.saturating_sub(ts) > retention_ms)
        })
        .count()
}

/// Leading segments that can go while the remaining log stays at least `retention.bytes`
/// (Kafka: `diff = size - retentionSize`; delete while `diff - segment.size >= 0`).
fn size_breached(all: &[SegmentStats], candidates: &[SegmentStats], config: &LogConfig) -> usize {
    let Some(retention_bytes) = config.retention_bytes else {
        return 0;
    };
    let total: u64 = all.iter().map(|s| s.size).sum();
    let Some(mut excess) = total.checked_sub(retention_bytes) else {
        return 0;
    };
    candidates
        .iter()
        .take_while(|s| match excess.checked_sub(s.size) {
            Some(rest) => {
                excess = rest;
                true
            }
            None => false,
        })
        .count()
}

/// Leading closed segments whose successor starts at or below the log start offset.
fn start_breached(all: &[SegmentStats], closed: usize, log_start_offset: i64) -> usize {
    all.windows(2)
        .take(closed)
        .take_while(|pair| pair[1].base_offset <= log_start_offset)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base_offset: i64, size: u64, ts: i64) -> SegmentStats {
        SegmentStats {
            base_offset,
            size,
            max_timestamp: Some(ts),
        }
    }

    fn config(retention_ms: Option<i64>, retention_bytes: Option<u64>) -> LogConfig {
        LogConfig {
            retention_ms,
            retention_bytes,
            ..LogConfig::default()
        }
    }

    fn three() -> Vec<SegmentStats> {
        vec![seg(0, 100, 1_000), seg(10, 100, 2_000), seg(20, 100, 3_000)]
    }

    #[test]
    fn segments_older_than_retention_ms_go_oldest_first() {
        let c = config(Some(500), None);
        assert_eq!(segments_to_delete(&three(), &c, 0, 1_400), None);
        assert_eq!(
            segments_to_delete(&three(), &c, 0, 1_501),
            Some(Deletion {
                count: 1,
                reason: DeletionReason::RetentionMs
            })
        );
        // Everything expired: the active segment still stays.
        assert_eq!(
            segments_to_delete(&three(), &c, 0, 100_000).map(|d| d.count),
            Some(2)
        );
    }

    #[test]
    fn an_unexpired_old_segment_stops_time_retention() {
        let segments = vec![seg(0, 100, 9_000), seg(10, 100, 1_000), seg(20, 1, 1)];
        let c = config(Some(500), None);
        assert_eq!(segments_to_delete(&segments, &c, 0, 5_000), None);
    }

    #[test]
    fn size_retention_keeps_at_least_retention_bytes() {
        // 300 bytes, bound 150: deleting the first leaves 200 >= 150; the second would
        // leave 100 < 150.
        let c = config(None, Some(150));
        assert_eq!(
            segments_to_delete(&three(), &c, 0, 0),
            Some(Deletion {
                count: 1,
                reason: DeletionReason::RetentionBytes
            })
        );
        assert_eq!(
            segments_to_delete(&three(), &config(None, Some(100)), 0, 0).map(|d| d.count),
            Some(2)
        );
        assert_eq!(
            segments_to_delete(&three(), &config(None, Some(300)), 0, 0),
            None
        );
        assert_eq!(
            segments_to_delete(&three(), &config(None, Some(0)), 0, 0).map(|d| d.count),
            Some(2)
        );
    }

    #[test]
    fn segments_below_the_log_start_offset_go_whatever_the_policy() {
        let c = LogConfig {
            cleanup_delete: false,
            ..config(Some(1), Some(0))
        };
        assert_eq!(segments_to_delete(&three(), &c, 9, 100_000), None);
        assert_eq!(
            segments_to_delete(&three(), &c, 10, 100_000),
            Some(Deletion {
                count: 1,
                reason: DeletionReason::LogStartOffset
            })
        );
        assert_eq!(
            segments_to_delete(&three(), &c, 25, 100_000).map(|d| d.count),
            Some(2)
        );
    }

    #[test]
    fn compact_only_topics_ignore_time_and_size() {
        let c = LogConfig {
            cleanup_delete: false,
            ..config(Some(1), Some(0))
        };
        assert_eq!(segments_to_delete(&three(), &c, 0, 100_000), None);
    }

    #[test]
    fn a_single_active_segment_never_goes() {
        let only = vec![seg(0, 1_000, 1)];
        assert_eq!(
            segments_to_delete(&only, &config(Some(1), Some(0)), 5, 100_000),
            None
        );
        assert_eq!(segments_to_delete(&[], &config(Some(1), None), 0, 0), None);
    }

    #[test]
    fn the_longest_prefix_of_all_criteria_wins() {
        let c = config(Some(500), Some(250));
        // Time: 1 segment (ts 1_000 is > 500 old at 1_600, 2_000 is not); size: 0.
        // Log start 20: 2 segments.
        assert_eq!(
            segments_to_delete(&three(), &c, 20, 1_600),
            Some(Deletion {
                count: 2,
                reason: DeletionReason::LogStartOffset
            })
        );
    }
}
