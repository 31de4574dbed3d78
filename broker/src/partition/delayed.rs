//! Delayed operations (Kafka's `DelayedOperationPurgatory`, for `DelayedProduce` and
//! `DelayedFetch`): a request that cannot be answered yet — an acks=all produce until the
//! high watermark covers it, a fetch until it has `min_bytes` — waits on the partitions it
//! concerns, and is re-checked when one of them changes, until it completes, its deadline
//! passes, or the broker shuts down.
//!
//! The watcher lists Kafka keeps per partition key are the partitions' own watch
//! channels here: the log's (notified when its log end offset or high watermark moves)
//! and the partition's role channel (notified when its leadership or ISR changes). An
//! operation subscribes to them before it checks its condition, so a change landing
//! between the check and the wait still wakes it; it then re-checks only the partitions
//! that changed. Nothing is registered anywhere else: a completed or expired operation
//! drops its receivers and leaves nothing to purge, and an idle partition costs no task
//! and no timer (the deadline is the waiting operation's).

use std::future::Future;
use std::task::Poll;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::replica::Partition;

/// What ended one wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// These keys' partitions changed (or went away): re-check them.
    Changed(Vec<usize>),
    /// The request's deadline passed.
    TimedOut,
    /// The broker is shutting down.
    ShuttingDown,
}

/// One partition's channels, as a delayed operation watches them.
pub struct Watch {
    /// Log end offset and high watermark changes.
    log: watch::Receiver<i64>,
    /// Role and ISR changes.
    role: Option<watch::Receiver<u64>>,
}

impl Watch {
    /// Watches the partition's log and role.
    pub fn partition(partition: &Partition) -> Self {
        Watch {
            log: partition.log().subscribe_appends(),
            role: Some(partition.subscribe_changes()),
        }
    }

    /// Watches a log only.
    pub fn log(log: &brook_storage::LogHandle) -> Self {
        Watch {
            log: log.subscribe_appends(),
            role: None,
        }
    }
}

/// The partitions one delayed operation waits on, by key (the operation's index of the
/// partition), with its deadline and the broker's shutdown.
pub struct Delayed {
    watches: Vec<Option<Watch>>,
    deadline: Instant,
    shutdown: CancellationToken,
    /// Keys whose log channel closed.
    closed: Vec<usize>,
}

impl Delayed {
    pub fn new(keys: usize, deadline: Instant, shutdown: CancellationToken) -> Self {
        Delayed {
            watches: (0..keys).map(|_| None).collect(),
            deadline,
            shutdown,
            closed: Vec::new(),
        }
    }

    /// Watches (or stops watching, with `None`) the partition of `key`. Subscribe before
    /// reading the state the condition checks.
    pub fn set(&mut self, key: usize, watch: Option<Watch>) {
        if let Some(slot) = self.watches.get_mut(key) {
            *slot = watch;
        }
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the log of `key` was closed (deleted) while watched.
    pub fn is_closed(&self, key: usize) -> bool {
        self.closed.contains(&key)
    }

    /// Waits until a watched partition changes, the deadline passes, or shutdown. With
    /// nothing watched only the deadline or shutdown end it.
    pub async fn wait(&mut self) -> Wake {
        if self.shutdown.is_cancelled() {
            return Wake::ShuttingDown;
        }
        let shutdown = self.shutdown.clone();
        tokio::select! {
            changed = changed_keys(&mut self.watches) => {
                let mut keys = Vec::with_capacity(changed.len());
                for (key, closed) in changed {
                    if closed {
                        // A closed channel is ready forever: report it once, then stop
                        // watching it.
                        self.closed.push(key);
                        self.set(key, None);
                    }
                    keys.push(key);
                }
                Wake::Changed(keys)
            }
            _ = tokio::time::sleep_until(self.deadline) => Wake::TimedOut,
            _ = shutdown.cancelled() => Wake::ShuttingDown,
        }
    }
}

/// The keys whose channels changed, each with whether its log's channel closed (the log
/// was deleted or closed), once at least one has; never completes when nothing is watched.
async fn changed_keys(watches: &mut [Option<Watch>]) -> Vec<(usize, bool)> {
    let mut pending: Vec<_> = watches
        .iter_mut()
        .enumerate()
        .filter_map(|(i, w)| {
            let w = w.as_mut()?;
            let log = Box::pin(w.log.changed());
            let role = w.role.as_mut().map(|r| Box::pin(r.changed()));
            Some((i, log, role))
        })
        .collect();
    std::future::poll_fn(|cx| {
        // Every future is polled (no short cut), so all keys that changed are reported;
        // none is polled again after the call that returns `Ready`.
        let ready: Vec<(usize, bool)> = pending
            .iter_mut()
            .filter_map(|(i, log, role)| {
                let log = log.as_mut().poll(cx);
                let role_ready = role
                    .as_mut()
                    .is_some_and(|r| r.as_mut().poll(cx).is_ready());
                let closed = matches!(log, Poll::Ready(Err(_)));
                (log.is_ready() || role_ready).then_some((*i, closed))
            })
            .collect();
        if ready.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(ready)
        }
    })
    .await
}

#[cfg(test)]
mod tests;
