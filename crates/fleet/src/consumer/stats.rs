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
    /// Tasks cancelled while this consumer held them (ended `cancelled`, never retried).
    pub cancelled: u64,
    /// Attempts that ran past their timeout (each also counted as retried or dead-lettered).
    pub timed_out: u64,
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
    pub(super) cancelled: AtomicU64,
    pub(super) timed_out: AtomicU64,
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
            cancelled: g(&self.cancelled),
            timed_out: g(&self.timed_out),
        }
    }
}

pub(super) fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    /// Counts the answer of a call that ends a delivery: `ok` when it landed, `lost` when the
    /// delivery was no longer current, `cancelled` when the task was cancelled meanwhile (the
    /// backend ended it so: nothing to retry), `errors` otherwise.
    pub(super) fn note(
        &self,
        queue: &str,
        what: &str,
        res: switchyard_core::Result<bool>,
        ok: &AtomicU64,
    ) {
        match res {
            Ok(true) => bump(ok),
            Ok(false) => bump(&self.lost),
            Err(switchyard_core::Error::Cancelled { .. }) => bump(&self.cancelled),
            Err(e) => {
                bump(&self.errors);
                tracing::warn!(queue, error = %e, "{what} failed");
            }
        }
    }
}
