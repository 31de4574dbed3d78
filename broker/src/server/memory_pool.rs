//! The broker-wide request memory pool (`queued.max.request.bytes`; Kafka's KIP-72
//! `SimpleMemoryPool` in the non-strict mode its socket server uses). A connection leases a
//! request's whole size from the pool before it buffers the body of a request larger than
//! its own read buffer (`server::frame_reader`), and gives it back once the request is
//! handled. When the pool is dry the connection waits and reads nothing meanwhile, so its
//! client's bytes stay in the kernel's socket buffers and TCP pushes back: the broker never
//! buffers more request bytes than the pool (plus, non-strict, one request that found a
//! single free byte: at most `pool + socket.request.max.bytes`).
//!
//! Non-strict, as Kafka's: a lease is granted while any byte is free, so a request of
//! `socket.request.max.bytes` is never refused by fragmentation of the pool, and whoever
//! holds a lease can always finish reading its request (leases are whole requests), so the
//! pool cannot deadlock on half-read requests.
//!
//! Thread-safety: one atomic for the free bytes, a `Notify` for the waiters (woken only when
//! someone waits: a counter says so). Owned by the `Broker`; leases hold an `Arc` to it.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;

use crate::metrics::memory_pool::PoolProbe;

pub struct RequestMemoryPool {
    capacity: i64,
    available: AtomicI64,
    /// Connections waiting for a lease; a release wakes them only when this is non-zero.
    waiting: AtomicUsize,
    freed: Notify,
    probe: PoolProbe,
}

/// Bytes of the pool held for one request; given back on drop.
pub struct Lease {
    pool: Arc<RequestMemoryPool>,
    bytes: i64,
}

impl RequestMemoryPool {
    pub fn new(capacity: u64) -> Arc<Self> {
        let capacity = i64::try_from(capacity).unwrap_or(i64::MAX);
        let probe = PoolProbe::new();
        probe.available(capacity);
        Arc::new(RequestMemoryPool {
            capacity,
            available: AtomicI64::new(capacity),
            waiting: AtomicUsize::new(0),
            freed: Notify::new(),
            probe,
        })
    }

    pub fn capacity(&self) -> i64 {
        self.capacity
    }

    /// Free bytes now (negative while a non-strict lease overdraws the pool).
    pub fn available(&self) -> i64 {
        self.available.load(Ordering::SeqCst)
    }

    /// A lease of `bytes` if any byte of the pool is free (Kafka's non-strict `tryAllocate`).
    pub fn try_lease(self: &Arc<Self>, bytes: usize) -> Option<Lease> {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let mut available = self.available.load(Ordering::SeqCst);
        loop {
            if available < 1 {
                return None;
            }
            match self.available.compare_exchange_weak(
                available,
                available.saturating_sub(bytes),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(now) => available = now,
            }
        }
        self.probe.available(available.saturating_sub(bytes));
        Some(Lease {
            pool: self.clone(),
            bytes,
        })
    }

    /// Waits for a lease of `bytes` (cancel-safe: dropping the future takes nothing). The
    /// wait, if any, is recorded (`brook_request_memory_pool_wait_seconds`).
    pub async fn lease(self: &Arc<Self>, bytes: usize) -> Lease {
        if let Some(lease) = self.try_lease(bytes) {
            return lease;
        }
        let started = Instant::now();
        let _waiting = Waiting::enter(self);
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so a release in between still wakes this wait.
            freed.as_mut().enable();
            if let Some(lease) = self.try_lease(bytes) {
                self.probe.waited(started.elapsed());
                return lease;
            }
            freed.await;
        }
    }
}

/// Counts a waiter for as long as it waits (also when its future is dropped).
struct Waiting<'a>(&'a RequestMemoryPool);

impl<'a> Waiting<'a> {
    fn enter(pool: &'a RequestMemoryPool) -> Self {
        pool.waiting.fetch_add(1, Ordering::SeqCst);
        Waiting(pool)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let now = self
            .pool
            .available
            .fetch_add(self.bytes, Ordering::SeqCst)
            .saturating_add(self.bytes);
        self.pool.probe.available(now);
        // SeqCst on both sides: a waiter that counted itself after this load sees the bytes
        // given back in its own check.
        if self.pool.waiting.load(Ordering::SeqCst) > 0 {
            self.pool.freed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_lease_is_granted_while_any_byte_is_free_and_given_back_on_drop() {
        let pool = RequestMemoryPool::new(100);
        let a = pool.try_lease(60).expect("free");
        // Non-strict: 40 bytes free is enough for 80; the pool is overdrawn.
        let b = pool.try_lease(80).expect("any byte free");
        assert_eq!(pool.available(), -40);
        assert!(pool.try_lease(1).is_none());
        drop(a);
        assert_eq!(pool.available(), 20);
        drop(b);
        assert_eq!(pool.available(), 100);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dry_pool_makes_a_lease_wait_for_a_release() {
        let pool = RequestMemoryPool::new(100);
        let held = pool.try_lease(100).expect("free");
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move { pool.lease(50).await.bytes }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        assert_eq!(pool.waiting.load(Ordering::SeqCst), 1);
        drop(held);
        assert_eq!(waiting.await.expect("task"), 50);
        assert_eq!(pool.available(), 100);
        assert_eq!(pool.waiting.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_wait_takes_nothing() {
        let pool = RequestMemoryPool::new(10);
        let held = pool.try_lease(10).expect("free");
        let waited = tokio::time::timeout(Duration::from_secs(1), pool.lease(5)).await;
        assert!(waited.is_err());
        assert_eq!(pool.waiting.load(Ordering::SeqCst), 0);
        drop(held);
        assert_eq!(pool.available(), 10);
    }
}
