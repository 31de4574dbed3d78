//! Roll decisions (Kafka's `LogSegment.shouldRoll`): pure, no I/O.
//!
//! Invariant: an empty segment never rolls (rolling it would only recreate it).

use crate::config::LogConfig;

/// Why the active segment must roll before an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollReason {
    Size,
    Age,
    IndexFull,
    OffsetOverflow,
}

/// What `roll_reason` needs to know about the active segment.
#[derive(Debug, Clone, Copy)]
pub struct RollState {
    pub base_offset: i64,
    pub size: u64,
    pub first_batch_timestamp: Option<i64>,
    pub created_ms: i64,
    pub index_full: bool,
}

/// What `roll_reason` needs to know about the incoming append.
#[derive(Debug, Clone, Copy)]
pub struct IncomingAppend {
    pub size: u64,
    pub max_timestamp: i64,
    pub last_offset: i64,
    pub now_ms: i64,
}

/// Kafka's `LogSegment.shouldRoll`: never roll an empty segment; roll when the append
/// would overflow `segment.bytes`, when the segment is older than `segment.ms` (measured
/// from its first batch's timestamp to the incoming max timestamp, or from its creation
/// when it has no timestamp), when an index is full, or when the last offset would not
/// fit in a u32 relative offset.
pub fn roll_reason(
    state: &RollState,
    incoming: &IncomingAppend,
    config: &LogConfig,
) -> Option<RollReason> {
    if state.size == 0 {
        return None;
    }
    if state.size.saturating_add(incoming.size) > config.segment_bytes {
        return Some(RollReason::Size);
    }
    if let Some(segment_ms) = config.segment_ms {
        let waited = match state.first_batch_timestamp {
            Some(ts) if ts >= 0 => incoming.max_timestamp.saturating_sub(ts),
            _ => incoming.now_ms.saturating_sub(state.created_ms),
        };
        if waited > segment_ms {
            return Some(RollReason::Age);
        }
    }
    if state.index_full {
        return Some(RollReason::IndexFull);
    }
    if incoming.last_offset - state.base_offset > i64::from(u32::MAX) {
        return Some(RollReason::OffsetOverflow);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(size: u64, first_ts: Option<i64>) -> RollState {
        RollState {
            base_offset: 100,
            size,
            first_batch_timestamp: first_ts,
            created_ms: 1_000,
            index_full: false,
        }
    }

    fn incoming(size: u64, max_timestamp: i64, last_offset: i64) -> IncomingAppend {
        IncomingAppend {
            size,
            max_timestamp,
            last_offset,
            now_ms: 5_000,
        }
    }

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 1_000,
            segment_ms: Some(2_000),
            ..LogConfig::default()
        }
    }

    #[test]
    fn an_empty_segment_never_rolls() {
        assert_eq!(
            roll_reason(
                &state(0, None),
                &incoming(5_000, 99_999, 1 << 40),
                &config()
            ),
            None
        );
    }

    #[test]
    fn size_rolls_only_when_the_append_would_overflow() {
        assert_eq!(
            roll_reason(
                &state(900, Some(4_000)),
                &incoming(100, 4_000, 101),
                &config()
            ),
            None
        );
        assert_eq!(
            roll_reason(
                &state(900, Some(4_000)),
                &incoming(101, 4_000, 101),
                &config()
            ),
            Some(RollReason::Size)
        );
    }

    #[test]
    fn age_is_measured_from_the_first_batch_timestamp_or_creation() {
        assert_eq!(
            roll_reason(&state(10, Some(1_000)), &incoming(1, 3_000, 101), &config()),
            None
        );
        assert_eq!(
            roll_reason(&state(10, Some(1_000)), &incoming(1, 3_001, 101), &config()),
            Some(RollReason::Age)
        );
        // No timestamp: now (5_000) - created (1_000) = 4_000 > 2_000.
        assert_eq!(
            roll_reason(&state(10, Some(-1)), &incoming(1, -1, 101), &config()),
            Some(RollReason::Age)
        );
        let no_age = LogConfig {
            segment_ms: None,
            ..config()
        };
        assert_eq!(
            roll_reason(&state(10, Some(0)), &incoming(1, i64::MAX, 101), &no_age),
            None
        );
    }

    #[test]
    fn full_indexes_and_relative_offset_overflow_roll() {
        let mut full = state(10, Some(4_000));
        full.index_full = true;
        assert_eq!(
            roll_reason(&full, &incoming(1, 4_000, 101), &config()),
            Some(RollReason::IndexFull)
        );
        let last = 100 + i64::from(u32::MAX);
        assert_eq!(
            roll_reason(
                &state(10, Some(4_000)),
                &incoming(1, 4_000, last),
                &config()
            ),
            None
        );
        assert_eq!(
            roll_reason(
                &state(10, Some(4_000)),
                &incoming(1, 4_000, last + 1),
                &config()
            ),
            Some(RollReason::OffsetOverflow)
        );
    }

    #[test]
    fn file_names_have_twenty_digits() {
        assert_eq!(
            crate::segment::file_name(42, "log"),
            "00000000000000000042.log"
        );
    }
}
