//! Waiting, written once (ADR 0367): the blocking reserve over an adapter's try and wake signal,
//! and the lock's backoff over its single try.

use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::{LockOps, QueueOps, TaskOps};
use crate::Result;
use crate::fleet::{Delivery, LockGrant, TaskEvents};

/// What one reserve attempt of [`QueueOps::queue_try_reserve`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attempt {
    /// The deliveries made, in serve order; empty when nothing could be taken.
    pub got: Vec<Delivery>,
    /// With nothing taken: how long until something may change that no wake signal announces
    /// (a delayed task falling due, a rate-limit token), if the backend knows. Give it a little
    /// late rather than early, so the next attempt finds what it waited for.
    pub retry_in: Option<Duration>,
}

impl Attempt {
    /// An attempt that took `got`.
    pub fn got(got: Vec<Delivery>) -> Self {
        Attempt {
            got,
            retry_in: None,
        }
    }

    /// An attempt that took nothing; try again within `retry_in`, if given.
    pub fn nothing(retry_in: Option<Duration>) -> Self {
        Attempt {
            got: Vec::new(),
            retry_in,
        }
    }
}

/// The instant `after` from now; a wait too long for the clock ends some thirty years away
/// instead of panicking.
fn deadline_after(after: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

/// Reserves up to `max` tasks, waiting up to `timeout` while none can be taken: tries at least
/// once (so `timeout = 0` takes a ready task), then sleeps until the adapter's wake signal, its
/// `retry_in`, its poll interval or the deadline, whichever comes first.
pub(super) async fn reserve<T: QueueOps + ?Sized>(
    ops: &T,
    name: &str,
    max: usize,
    timeout: Duration,
    visibility_ms: u64,
) -> Result<Vec<Delivery>> {
    let deadline = deadline_after(timeout);
    let wake = ops.queue_wake(name);
    let (mut poll, most) = ops.queue_poll();
    let mut again = false;
    loop {
        // Armed before the attempt, so a push that lands after the attempt looked still wakes
        // this sleep.
        let notified = wake.as_deref().map(Notify::notified);
        tokio::pin!(notified);
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        let first = ops
            .queue_try_reserve(name, max, visibility_ms, again)
            .await?;
        again = true;
        if !first.got.is_empty() {
            return Ok(first.got);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Vec::new());
        }
        let second = ops.queue_before_wait(name, max, visibility_ms).await?;
        if !second.got.is_empty() {
            return Ok(second.got);
        }
        let nap = [Some(left), Some(poll), first.retry_in, second.retry_in]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(left);
        match notified.as_mut().as_pin_mut() {
            Some(n) => {
                let _ = tokio::time::timeout(nap, n).await;
            }
            None => ops.queue_wait(name, nap).await?,
        }
        poll = poll.saturating_mul(2).min(most);
    }
}

/// Takes the lock for `hold_ms`, retrying the adapter's single try with a backoff (doubling from
/// [`LockOps::lock_backoff`] up to 500 ms) until `wait` runs out; `None` on timeout.
pub(super) async fn lock<T: LockOps + ?Sized>(
    ops: &T,
    name: &str,
    hold_ms: u64,
    wait: Duration,
) -> Result<Option<LockGrant>> {
    let deadline = deadline_after(wait);
    let mut backoff = ops.lock_backoff();
    loop {
        if let Some(grant) = ops.lock_try_acquire(name, hold_ms).await? {
            return Ok(Some(grant));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        tokio::time::sleep(backoff.min(left)).await;
        backoff = backoff.saturating_mul(2).min(Duration::from_millis(500));
    }
}

/// Reads up to `max` end events after `after`, waiting up to `timeout` while there is none: reads
/// at least once, then sleeps until the adapter's wake signal (or its own wait), 250 ms or the
/// deadline, and reads again from where the last read stood (so `"$"` is resolved once, at the
/// first read).
pub(super) async fn task_events<T: TaskOps + ?Sized>(
    ops: &T,
    name: &str,
    after: Option<&str>,
    max: usize,
    timeout: Duration,
) -> Result<TaskEvents> {
    let deadline = deadline_after(timeout);
    let wake = ops.task_events_wake(name);
    let mut from = after.map(str::to_owned);
    loop {
        let notified = wake.as_deref().map(Notify::notified);
        tokio::pin!(notified);
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        let read = ops.task_events(name, from.as_deref(), max).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        if !read.events.is_empty() || read.gap || left.is_zero() {
            return Ok(read);
        }
        let nap = left.min(Duration::from_millis(250));
        match notified.as_mut().as_pin_mut() {
            Some(n) => {
                let _ = tokio::time::timeout(nap, n).await;
            }
            None => {
                if let Some(woke) = ops.task_events_wait(name, &read.cursor, max, nap).await?
                    && !woke.events.is_empty()
                {
                    return Ok(woke);
                }
            }
        }
        from = Some(read.cursor);
    }
}
