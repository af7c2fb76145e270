//! What a consumer counts.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of what a consumer did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ConsumerStats {
    /// Tasks whose handler succeeded and whose ack landed.
    pub acked: u64,
    /// Failed tasks requeued with a delay.
    pub retried: u64,
    /// Tasks dead-lettered after their last attempt.
    pub dead_lettered: u64,
    /// Tasks dropped because their `ttl_seconds` ran out.
    pub expired: u64,
    /// Bodies that were not a valid envelope, dead-lettered once.
    pub malformed: u64,
    /// Tasks released unfinished at shutdown.
    pub released: u64,
    /// Deliveries lost to a timeout before the worker finished (ack/nack came too late).
    pub lost: u64,
    /// Backend errors met (the loop carries on).
    pub errors: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) acked: AtomicU64,
    pub(super) retried: AtomicU64,
    pub(super) dead_lettered: AtomicU64,
    pub(super) expired: AtomicU64,
    pub(super) malformed: AtomicU64,
    pub(super) released: AtomicU64,
    pub(super) lost: AtomicU64,
    pub(super) errors: AtomicU64,
}

impl Counters {
    pub(super) fn snapshot(&self) -> ConsumerStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ConsumerStats {
            acked: g(&self.acked),
            retried: g(&self.retried),
            dead_lettered: g(&self.dead_lettered),
            expired: g(&self.expired),
            malformed: g(&self.malformed),
            released: g(&self.released),
            lost: g(&self.lost),
            errors: g(&self.errors),
        }
    }
}

pub(super) fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}
