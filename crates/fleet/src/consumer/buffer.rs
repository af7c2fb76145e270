//! The prefetch buffer (ADR 0376): the feeder that fills it and the keeper that extends the
//! reservations of what it holds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::fleet::Delivery;
use tokio::sync::{Notify, watch};

use super::config::{ConsumerConfig, beat_of};
use super::stats::{Counters, bump};
use crate::queue::{Queue, Reserved};

/// The prefetched tasks of one consumer: filled by its feeder, emptied by its slots, extended by
/// its keeper, and given back by the feeder when the consumer stops.
pub(super) struct Local<T> {
    pub(super) buf: Mutex<VecDeque<Reserved<T>>>,
    /// Tasks were added (slots wait on it).
    pub(super) ready: Notify,
    /// A task was taken (the feeder waits on it for room).
    pub(super) room: Notify,
    /// How many times a slot found the buffer empty and waited (the feeder grows the buffer
    /// when this moves during a refill).
    pub(super) waited: AtomicU64,
}

impl<T> Local<T> {
    pub(super) fn new() -> Self {
        Local {
            buf: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            room: Notify::new(),
            waited: AtomicU64::new(0),
        }
    }

    /// The buffer, even after a panic elsewhere while it was held (the buffer's items are whole
    /// either way, so going on is safe).
    pub(super) fn lock(&self) -> MutexGuard<'_, VecDeque<Reserved<T>>> {
        self.buf.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Takes the buffered task `id` out, if there is one.
    pub(super) fn remove_id(&self, id: &str) -> Option<Reserved<T>> {
        let mut buf = self.lock();
        let at = buf
            .iter()
            .position(|r| matches!(r, Reserved::Task(t) if t.id == id))?;
        let task = buf.remove(at);
        drop(buf);
        self.room.notify_one();
        task
    }

    pub(super) fn take(&self) -> Option<Reserved<T>> {
        let task = self.lock().pop_front();
        if task.is_some() {
            self.room.notify_one();
        }
        task
    }
}

/// How far the feeder may grow the buffer over its starting size (see [`feeder`]).
pub(super) const GROWTH: usize = 16;

/// Keeps the prefetch buffer filled: once it holds half of its size or less, reserves what is
/// missing in one `queue_reserve_many` call (one visibility for the batch). When the consumer
/// stops, gives every task still buffered back at once.
///
/// The size starts at `base` and moves between `base` and `most`. When a refill comes back full
/// and a slot found the buffer empty while it was out, the slots are waiting on the backend's
/// round trip rather than on handlers, so the size doubles and the next call takes more per round
/// trip. When a refill comes back short (the queue has run low), the size halves. Slow handlers
/// do not come back for tasks during a refill, so a consumer of slow tasks keeps holding only
/// `base`.
pub(super) async fn feeder<T: Serialize + DeserializeOwned>(
    queue: Queue<T>,
    local: Arc<Local<T>>,
    (base, most): (usize, usize),
    config: ConsumerConfig,
    mut stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
    settled: Arc<Notify>,
) {
    // Refilling at half keeps the calls large under load (the slots take tasks one by one)
    // while the other half keeps the slots busy during the round trip.
    let mut buffer = base;
    let mut pause = Duration::from_millis(50);
    while !*stop.borrow() {
        let room = local.room.notified();
        let held = local.len();
        if held > buffer / 2 {
            tokio::select! {
                _ = room => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            continue;
        }
        let want = buffer.saturating_sub(held).max(1);
        let waits = local.waited.load(Ordering::Relaxed);
        // Reserve is never cancelled midway, so a task is never reserved and forgotten.
        match queue
            .reserve_many(want, config.poll, config.visibility)
            .await
        {
            Ok(got) => {
                pause = Duration::from_millis(50);
                let full = got.len() >= want;
                if !got.is_empty() {
                    let mut buf = local.lock();
                    // Tasks were left when the call went out, yet a slot had to wait for this
                    // call: the slots outran the round trip.
                    let starved = held > 0 && local.waited.load(Ordering::Relaxed) != waits;
                    buf.extend(got);
                    drop(buf);
                    local.ready.notify_waiters();
                    if full && starved {
                        buffer = buffer.saturating_mul(2).min(most);
                    }
                }
                if !full {
                    buffer = (buffer / 2).max(base);
                }
            }
            Err(e) => {
                bump(&counters.errors);
                tracing::warn!(queue = queue.name(), error = %e, "reserve failed");
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => {}
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
    // Stopped: the slots take no more tasks, so what is buffered was never started. It goes
    // back with no delay, so another worker gets it at once rather than after its visibility.
    let rest: Vec<Reserved<T>> = local.lock().drain(..).collect();
    if rest.is_empty() {
        return;
    }
    let released = futures::future::join_all(
        rest.iter()
            .map(|r| queue.release(r.delivery(), Duration::ZERO)),
    )
    .await;
    for res in released {
        match res {
            Ok(true) => bump(&counters.released),
            Ok(false) => bump(&counters.lost),
            // Cancelled while it waited here: the release ended it `cancelled`.
            Err(switchyard_core::Error::Cancelled { .. }) => bump(&counters.cancelled),
            Err(e) => {
                bump(&counters.errors);
                tracing::warn!(
                    queue = queue.name(),
                    error = %e,
                    "giving back a prefetched task failed; it comes back after its visibility"
                );
            }
        }
    }
    settled.notify_waiters();
}

/// Extends the reservations of buffered tasks every heartbeat period, so a task waiting behind
/// slow handlers does not lapse and go to another worker. A running task's own heartbeat is its
/// slot's. A buffered task whose reservation was already lost is dropped from the buffer; one
/// that was cancelled meanwhile is taken out and ended (a release the backend answers
/// `Cancelled`), never started.
pub(super) async fn keeper<T: Serialize + DeserializeOwned>(
    queue: Queue<T>,
    local: Arc<Local<T>>,
    config: ConsumerConfig,
    mut stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
    settled: Arc<Notify>,
) {
    let beat = beat_of(&config);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(beat) => {}
        }
        let held: Vec<_> = local.lock().iter().map(|r| r.delivery().clone()).collect();
        if held.is_empty() {
            continue;
        }
        let answers =
            futures::future::join_all(held.iter().map(|d| queue.extend(d, config.visibility)))
                .await;
        let mut gone = Vec::new();
        let mut cancelled = Vec::new();
        for (delivery, answer) in held.iter().zip(answers) {
            match answer {
                Ok(true) => {}
                Err(switchyard_core::Error::Cancelled { .. }) => {
                    cancelled.push(delivery.receipt.clone());
                }
                // Either a slot took and ended it meanwhile, or the reservation lapsed.
                Ok(false) => gone.push(delivery.receipt.clone()),
                Err(e) => {
                    bump(&counters.errors);
                    tracing::warn!(queue = queue.name(), error = %e, "heartbeat of a prefetched task failed");
                }
            }
        }
        if !cancelled.is_empty() {
            let taken: Vec<Reserved<T>> = {
                let mut buf = local.lock();
                let (out, keep): (Vec<_>, Vec<_>) = buf
                    .drain(..)
                    .partition(|r| cancelled.contains(&r.delivery().receipt));
                buf.extend(keep);
                out
            };
            let taken: Vec<Delivery> = taken.iter().map(|r| r.delivery().clone()).collect();
            for delivery in &taken {
                let res = queue.release(delivery, Duration::ZERO).await;
                counters.note(
                    queue.name(),
                    "ending a cancelled task",
                    res,
                    &counters.released,
                );
            }
            if !taken.is_empty() {
                local.room.notify_one();
                settled.notify_waiters();
            }
        }
        if !gone.is_empty() {
            let mut buf = local.lock();
            let before = buf.len();
            buf.retain(|r| !gone.contains(&r.delivery().receipt));
            let dropped = before - buf.len();
            drop(buf);
            if dropped > 0 {
                counters.lost.fetch_add(dropped as u64, Ordering::Relaxed);
                tracing::warn!(
                    queue = queue.name(),
                    dropped,
                    "prefetched tasks lost their reservation before they started"
                );
            }
        }
    }
}
