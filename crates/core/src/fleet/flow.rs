//! The queue features users reach for first (ADR 0280): delayed and idempotent submits, batches,
//! pause, rate limits, progress, releasing a delivery as it was, choosing dead letters to requeue,
//! and stored recurring schedules. Each area trait states its numbered guarantees; the numbers are
//! those of the whole port, indexed on [`FleetBackend`](super::FleetBackend).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::{Delivery, IdempotencyKey, Priority, Receipt};
use crate::{Error, Result};

/// The most tasks, receipts or bodies one batch call takes: a batch is one atomic step in every
/// backend (one script, one transaction), and an unbounded one would hold the backend for as long
/// as the caller likes. More is [`Error::InvalidInput`].
pub const MAX_BATCH: usize = 1000;

/// The largest progress document [`QueueFlow::queue_progress`] stores, in bytes. More is
/// [`Error::InvalidInput`]: progress is a small status a reader polls, not a result channel.
pub const MAX_PROGRESS_BYTES: usize = 64 * 1024;

/// When a submitted task becomes reservable.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum RunAt {
    /// At once: the task goes to the end of its tier.
    #[default]
    Now,
    /// After this delay, measured on the backend's clock from the moment the backend takes the
    /// submit. Zero is [`RunAt::Now`].
    After(Duration),
    /// At this instant, unix seconds on the backend's clock. An instant in the past is
    /// [`RunAt::Now`]; a non-finite one is [`Error::InvalidInput`].
    At(f64),
}

/// How [`JobQueue::queue_submit`](super::JobQueue::queue_submit) enqueues one task.
///
/// ```
/// use std::time::Duration;
/// use switchyard_core::fleet::{Priority, RunAt, Submit};
/// let submit =
/// Submit::new().priority(Priority::High).run_at(RunAt::After(Duration::from_secs(30)));
/// assert_eq!(submit.priority, Priority::High);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Submit<'a> {
    /// The tier the task waits in (now, or once due).
    pub priority: Priority,
    /// When it becomes reservable.
    pub run_at: RunAt,
    /// Set this key and enqueue in one step; a duplicate enqueues nothing (guarantee
    /// `queue.submit_once`).
    pub idem: Option<IdempotencyKey<'a>>,
}

impl<'a> Submit<'a> {
    /// Normal tier, at once, no idempotency key.
    pub fn new() -> Self {
        Submit::default()
    }

    /// Sets the tier.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Sets when the task becomes reservable.
    pub fn run_at(mut self, run_at: RunAt) -> Self {
        self.run_at = run_at;
        self
    }

    /// Makes the submit idempotent under `idem`.
    pub fn idem(mut self, idem: IdempotencyKey<'a>) -> Self {
        self.idem = Some(idem);
        self
    }
}

/// At most `max` reservations per `per` on one queue, across every consumer and process: a token
/// bucket kept in the backend, holding at most `max` tokens and refilled continuously at
/// `max / per`. Each reserved task takes one token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// Bucket size: the burst a rested queue allows, and the tokens refilled per `per`.
    pub max: u32,
    /// The refill interval.
    pub per: Duration,
}

impl RateLimit {
    /// Checks the limit: `max ≥ 1` and `per` at least 1 ms and at most a day.
    pub fn new(max: u32, per: Duration) -> Result<Self> {
        if max == 0 {
            return Err(Error::invalid("rate_limit.max", "must be at least 1"));
        }
        if per < Duration::from_millis(1) || per > Duration::from_secs(86_400) {
            return Err(Error::invalid(
                "rate_limit.per",
                "must be between 1 ms and 24 hours",
            ));
        }
        Ok(RateLimit { max, per })
    }

    /// `per` in whole milliseconds (rounded up), as backends store it.
    pub fn per_ms(&self) -> u64 {
        u64::try_from(self.per.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}

/// One reservation as a reader sees it ([`QueueFlow::queue_in_flight`]): no receipt, since the
/// receipt is what lets its holder end the delivery.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct InFlight {
    /// The envelope's `"id"`, as in [`Delivery::task_id`].
    pub task_id: Option<String>,
    /// The body as delivered.
    pub body: Vec<u8>,
    /// The delivery's attempt number.
    pub attempt: u32,
    /// The tier it came from.
    pub priority: Priority,
    /// Unix seconds (store clock) when the reservation lapses unless extended.
    pub visible_until: f64,
    /// The last progress its holder reported on this delivery, if any.
    pub progress: Option<Vec<u8>>,
}

impl InFlight {
    /// An entry; adapters build these, callers read them.
    pub fn new(
        task_id: Option<String>,
        body: Vec<u8>,
        attempt: u32,
        priority: Priority,
        visible_until: f64,
        progress: Option<Vec<u8>>,
    ) -> Self {
        InFlight {
            task_id,
            body,
            attempt,
            priority,
            visible_until,
            progress,
        }
    }
}

/// Rejects a batch that is empty-safe but too long (see [`MAX_BATCH`]).
pub fn check_batch(field: &'static str, len: usize) -> Result<()> {
    if len > MAX_BATCH {
        return Err(Error::invalid(
            field,
            "holds more than 1000 items; split it",
        ));
    }
    Ok(())
}

/// Rejects a progress document over [`MAX_PROGRESS_BYTES`].
pub fn check_progress(progress: &[u8]) -> Result<()> {
    if progress.len() > MAX_PROGRESS_BYTES {
        return Err(Error::invalid("progress", "is larger than 64 KiB"));
    }
    Ok(())
}

/// The longest delay [`delay_ms`] accepts, in milliseconds: some 30,000 years, well inside what
/// an `f64` score, an `i64` column and a Lua number hold exactly.
const MAX_DELAY_MS: u64 = 1_000_000_000_000_000;

/// The delay of `run_at` against the backend's `now` (unix seconds), in whole milliseconds rounded
/// up; `None` when the task is reservable at once. Shared by adapters so every backend reads
/// [`RunAt`] alike. A non-finite instant, or a task due more than some 30,000 years away, is
/// [`Error::InvalidInput`].
///
/// ```
/// use std::time::Duration;
/// use switchyard_core::fleet::{RunAt, delay_ms};
/// assert_eq!(delay_ms(RunAt::At(1.0), 100.0).unwrap(), None, "past: at once");
/// assert_eq!(delay_ms(RunAt::After(Duration::from_micros(1500)), 0.0).unwrap(), Some(2));
/// assert_eq!(delay_ms(RunAt::At(100.25), 100.0).unwrap(), Some(250));
/// assert!(delay_ms(RunAt::At(f64::NAN), 0.0).is_err());
/// assert!(delay_ms(RunAt::After(Duration::from_secs(u64::MAX)), 0.0).is_err());
/// ```
pub fn delay_ms(run_at: RunAt, now: f64) -> Result<Option<u64>> {
    let ms = match run_at {
        RunAt::Now => return Ok(None),
        // The same bound as an instant's, so no backend meets a due time it cannot store.
        RunAt::After(d) => u64::try_from(d.as_nanos().div_ceil(1_000_000))
            .ok()
            .filter(|ms| *ms <= MAX_DELAY_MS)
            .ok_or_else(|| Error::invalid("run_at", "is too far away"))?,
        RunAt::At(at) => {
            super::check_finite("run_at", at)?;
            let ms = ((at - now) * 1000.0).ceil();
            if ms > MAX_DELAY_MS as f64 {
                return Err(Error::invalid("run_at", "is too far away"));
            }
            if ms <= 0.0 { 0 } else { ms as u64 }
        }
    };
    Ok((ms > 0).then_some(ms))
}

/// Batches: many pushes, reservations or acks in one atomic step each. Part of
/// [`FleetBackend`](super::FleetBackend).
///
/// # Guarantees
///
/// 19. **queue_batches** (`queue.batches`) — `queue_push_many` appends every body, in order, to the
///     tier's end in one step: a reader never sees part of the batch, and a failed call pushed none
///     of it. `queue_reserve_many(max)` moves due scheduled tasks, then reserves up to `max` ready
///     tasks in serve order (guarantee `queue.priority_fifo`) in one step, each a delivery with its
///     own receipt as from [`queue_reserve`](super::JobQueue::queue_reserve); it waits up to
///     `timeout` only while nothing is ready, and never returns an empty list before the timeout
///     when a task is ready. `queue_ack_many` acks every receipt in one step and answers each:
///     `true` for a current receipt, `false` (nothing changed) for one that is not, in the order
///     given, a receipt given twice answered `true` once. Empty batches do nothing; more than
///     [`MAX_BATCH`] items, or `max = 0`, is [`Error::InvalidInput`].
#[async_trait]
pub trait QueueBatches: Send + Sync {
    /// Appends every body, in order, to the end of `priority`'s tier, in one step.
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<()>;
    /// Reserves up to `max` tasks in one step (see guarantee `queue.batches`).
    async fn queue_reserve_many(
        &self,
        name: &str,
        max: usize,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Vec<Delivery>>;
    /// Acks every receipt in one step; one answer per receipt, in order (see guarantee
    /// `queue.batches`).
    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>>;
}

/// Flow control and what workers report: pause, rate limits, progress, releasing a delivery as it
/// was. Part of [`FleetBackend`](super::FleetBackend).
///
/// # Guarantees
///
/// 20. **queue_pause** (`queue.pause`) — while a queue is paused, `queue_reserve` and
///     `queue_reserve_many` hand out nothing (a waiting call keeps waiting until its timeout, or
///     until a resume wakes it) and move nothing, nor does `queue_promote_due`: delayed tasks and
///     retries that fall due stay scheduled (counted in `due`) until the first reserve or promotion
///     after the resume moves them to their tiers' ends, on every backend alike; pushes and submits
///     are still taken; acks, nacks, extends, fails and sweeps of deliveries made before the pause
///     still work. `queue_pause` and `queue_resume` say whether they changed the state; the state
///     outlives the queue's tasks. [`QueueStats::paused`](super::QueueStats) shows it.
/// 21. **queue_rate_limit** (`queue.rate_limit`) — with a [`RateLimit`] set, reservations on the
///     queue, by every consumer of every process, take one token each from a bucket kept in the
///     backend: at most `max` in a burst, then `max` per `per`. A reserve that finds no token hands
///     out nothing and waits for the next token within its timeout; `reserve_many` takes as many
///     tasks as there are whole tokens. Setting a limit starts it with a full bucket; `None`
///     removes it. [`QueueStats::rate_limit`](super::QueueStats) shows the limit and
///     [`QueueStats::throttled_ms`](super::QueueStats) how long until the next token (0 when one
///     is available or there is no limit).
/// 22. **queue_progress** (`queue.progress`) — `queue_progress` stores a progress document on the
///     current delivery only (`false` and nothing stored for a receipt that is not current),
///     replacing the last one; `queue_in_flight` lists the queue's reservations, soonest deadline
///     first, lapsed but unswept ones included, each with its last progress; the progress goes when
///     the delivery ends (ack, nack, release, fail, sweep). Documents over [`MAX_PROGRESS_BYTES`]
///     are [`Error::InvalidInput`].
/// 23. **queue_release** (`queue.release`) — `queue_release` ends the delivery and requeues the
///     body as it was delivered into its original tier, at the end or after `delay`, keeping the
///     attempt count, as a nack with the delivered body does (guarantee `queue.nack`); `false` and
///     nothing requeued when the receipt is not current. `queue_delivered` reads the current
///     delivery of a receipt (body, attempt, tier, deadline) and changes nothing; `None` when the
///     receipt is not current. They are what a worker that does not hold the body (an HTTP worker)
///     calls: to fail with a reason it reads the delivery, writes the reason into its copy and
///     calls `queue_fail`, which acts only if the receipt is still current.
#[async_trait]
pub trait QueueFlow: Send + Sync {
    /// Pauses reservations on the queue; `true` if it was running (see guarantee `queue.pause`).
    async fn queue_pause(&self, name: &str) -> Result<bool>;
    /// Resumes reservations and wakes waiting reservers; `true` if it was paused.
    async fn queue_resume(&self, name: &str) -> Result<bool>;
    /// Sets (or with `None` removes) the queue's rate limit, starting with a full bucket (see
    /// guarantee `queue.rate_limit`). A limit [`RateLimit::new`] would refuse (its fields are
    /// public) is [`Error::InvalidInput`].
    async fn queue_set_rate_limit(&self, name: &str, limit: Option<RateLimit>) -> Result<()>;
    /// Stores `progress` on the current delivery of `receipt`; `false` if it is not current (see
    /// guarantee `queue.progress`).
    async fn queue_progress(&self, name: &str, receipt: &Receipt, progress: &[u8]) -> Result<bool>;
    /// Up to `n` reservations of the queue, soonest deadline first, with their progress.
    async fn queue_in_flight(&self, name: &str, n: usize) -> Result<Vec<InFlight>>;
    /// Ends the delivery and requeues its delivered body, now or after `delay`; `false` if the
    /// receipt is not current (see guarantee `queue.release`).
    async fn queue_release(&self, name: &str, receipt: &Receipt, delay: Duration) -> Result<bool>;
    /// The current delivery of `receipt`, unchanged; `None` if it is not current (see guarantee
    /// 31).
    async fn queue_delivered(&self, name: &str, receipt: &Receipt) -> Result<Option<Delivery>>;
}

/// Recurring schedules, stored as documents the typed layer's scheduler reads. Part of
/// [`FleetBackend`](super::FleetBackend).
///
/// A schedule fires by [`queue_submit`](super::JobQueue::queue_submit) with an idempotency key per
/// schedule and tick, so any number of schedulers enqueue each tick once; the backend only keeps
/// the documents.
///
/// # Guarantees
///
/// 26. **schedules** (`schedule.stored`) — one document per schedule name: `schedule_put` upserts
///     it, `schedule_get` reads it back byte for byte, `schedule_list` returns every one by name
///     (hostile names included, sorted), `schedule_delete` says whether one existed and removes it
///     from the list.
#[async_trait]
pub trait Schedules: Send + Sync {
    /// Upserts the document of schedule `name`.
    async fn schedule_put(&self, name: &str, doc: &[u8]) -> Result<()>;
    /// The document of schedule `name`, if any.
    async fn schedule_get(&self, name: &str) -> Result<Option<Vec<u8>>>;
    /// Every schedule's document by name.
    async fn schedule_list(&self) -> Result<BTreeMap<String, Vec<u8>>>;
    /// Deletes schedule `name`; `true` if it existed.
    async fn schedule_delete(&self, name: &str) -> Result<bool>;
}
