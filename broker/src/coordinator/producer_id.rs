//! Producer ids for InitProducerId.
//!
//! Ids must never repeat across restarts: the log keeps producer state by id, and a new
//! producer handed an old id would collide with its sequences. Each process start takes
//! the block above `start_ms << 20` (Kafka's ids are positive i64s; the clock in ms
//! needs 41 bits), so a restart after at least one millisecond never reuses an id unless
//! one run handed out more than 2^20 ids per millisecond of the gap.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub struct ProducerIdAllocator {
    next: AtomicI64,
}

impl ProducerIdAllocator {
    pub fn new() -> Self {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(1);
        ProducerIdAllocator {
            next: AtomicI64::new(now_ms << 20),
        }
    }

    pub fn allocate(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

impl Default for ProducerIdAllocator {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_positive_and_distinct() {
        let ids = ProducerIdAllocator::new();
        let a = ids.allocate();
        let b = ids.allocate();
        assert!(a > 0 && b == a + 1);
    }
}
