//! Log lines a client can cause, limited: each kind logs its first `LINES_PER_INTERVAL`
//! occurrences of an interval one by one and counts the rest, and `report_suppressed`
//! writes one summary line per kind and interval for what it counted. A flood of bad frames
//! or failed logins therefore writes a bounded amount of log, and the per-reason counter
//! (`brook_connections_closed_total{reason}`, see `metrics`) still counts every one.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;

/// How often counted lines are summarised and each kind's allowance renewed.
pub const INTERVAL: Duration = Duration::from_secs(10);
/// Lines of one kind logged in full per interval.
pub const LINES_PER_INTERVAL: u32 = 5;

/// One kind of client-caused log line.
pub struct Limited {
    /// What the summary line calls these lines.
    pub what: &'static str,
    logged: AtomicU32,
    suppressed: AtomicU64,
}

impl Limited {
    pub const fn new(what: &'static str) -> Self {
        Limited {
            what,
            logged: AtomicU32::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether this occurrence may be logged in full; `false` counts it for the summary.
    pub fn allow(&self) -> bool {
        if self.logged.fetch_add(1, Ordering::Relaxed) < LINES_PER_INTERVAL {
            return true;
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Ends the interval: the count not logged since the last call, and a new allowance.
    fn roll(&self) -> u64 {
        self.logged.store(0, Ordering::Relaxed);
        self.suppressed.swap(0, Ordering::Relaxed)
    }
}

/// Writes, every `INTERVAL` until `shutdown`, one line for each kind in `kinds` that had
/// lines counted instead of logged.
pub async fn report_suppressed(kinds: &'static [&'static Limited], shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        summarise(kinds);
    }
    summarise(kinds);
}

fn summarise(kinds: &[&Limited]) {
    for kind in kinds {
        let suppressed = kind.roll();
        if suppressed > 0 {
            warn!(
                suppressed,
                interval_s = INTERVAL.as_secs(),
                "{}: {suppressed} more in the last interval, counted but not logged one by one",
                kind.what
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_logs_its_allowance_and_counts_the_rest() {
        static KIND: Limited = Limited::new("test lines");
        let allowed = (0..1000).filter(|_| KIND.allow()).count();
        assert_eq!(allowed, LINES_PER_INTERVAL as usize);
        assert_eq!(KIND.roll(), 1000 - u64::from(LINES_PER_INTERVAL));
        // A new interval: a new allowance, nothing left to report.
        assert!(KIND.allow());
        assert_eq!(KIND.roll(), 0);
    }
}
