//! The settings of a consumer: [`ConsumerConfig`] and [`Batching`].

use std::time::Duration;

use switchyard_core::fleet::MAX_BATCH;

use crate::retry::{Backoff, Jitter, RetryPolicy};

/// Settings of a [`Consumer`](crate::Consumer).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerConfig {
    /// Handlers running at once (the seed's slots). Default 1.
    pub concurrency: usize,
    /// Visibility of a reservation; the heartbeat renews it. Default 300 s (the seed's).
    pub visibility: Duration,
    /// Deliveries before dead-lettering, unless the envelope says otherwise. Default 3.
    pub max_attempts: u32,
    /// How long one reserve call waits for a task (also bounds how fast shutdown is noticed).
    /// Default 1 s.
    pub poll: Duration,
    /// Heartbeat period; `None` means a third of `visibility`.
    pub heartbeat: Option<Duration>,
    /// Retry delay unit: attempt `a` waits `min(backoff_cap, backoff_unit · 2^(a−1))`
    /// (exponential) or `min(backoff_cap, backoff_unit)` (fixed). Default 1 s. A task's own
    /// `retry` policy (its envelope's) overrides each field it sets.
    pub backoff_unit: Duration,
    /// Longest retry delay. Default 60 s.
    pub backoff_cap: Duration,
    /// How the retry delay grows. Default [`Backoff::Exponential`].
    pub backoff: Backoff,
    /// The random share of the retry delay. Default [`Jitter::None`] (today's delays).
    pub jitter: Jitter,
    /// How long one attempt may run when its envelope has no `timeout_seconds`; `None` (the
    /// default) lets it run for ever. A timed-out attempt is a failed one ("timed out after
    /// {t} s"): retried after the policy's delay or, at its last attempt, dead-lettered.
    pub timeout: Option<Duration>,
    /// How long a handler may go on after its [`CancelToken`](crate::CancelToken) fired for a
    /// cancel or a timeout before it is aborted. Default 10 s.
    pub cancel_grace: Duration,
    /// Also sweep lapsed reservations of this queue this often (sweeping is atomic, so every
    /// consumer may do it). Default every 10 s; `None` leaves it to someone else.
    pub sweep_every: Option<Duration>,
    /// How long shutdown waits for running handlers before releasing their tasks (their tokens
    /// fire at once, with [`CancelReason::Shutdown`](crate::CancelReason)). Default 30 s.
    pub shutdown_grace: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            concurrency: 1,
            visibility: Duration::from_secs(300),
            max_attempts: 3,
            poll: Duration::from_secs(1),
            heartbeat: None,
            backoff_unit: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(60),
            sweep_every: Some(Duration::from_secs(10)),
            shutdown_grace: Duration::from_secs(30),
            backoff: Backoff::Exponential,
            jitter: Jitter::None,
            timeout: None,
            cancel_grace: Duration::from_secs(10),
        }
    }
}

impl ConsumerConfig {
    /// The delay before retry number `attempt` (1-based) before jitter:
    /// `min(cap, unit · 2^(attempt−1))`, or `min(cap, unit)` when fixed.
    pub fn backoff(&self, attempt: u32) -> Duration {
        self.retry_policy().ceiling(attempt)
    }

    /// The config's retry policy, every field set: what a task without its own uses.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            backoff: Some(self.backoff),
            base: Some(self.backoff_unit),
            cap: Some(self.backoff_cap),
            jitter: Some(self.jitter),
        }
    }
}

/// How a [`Consumer`](crate::Consumer) prefetches tasks and batches its acks (ADR 0376). The default is on and
/// needs no tuning; [`Batching::off`] gives the one-task-per-call loop.
///
/// ```
/// use std::time::Duration;
/// use switchyard_fleet::Batching;
/// let b = Batching::default().prefetch(128).ack_window(Duration::from_millis(2));
/// assert_eq!(b.prefetch, Some(128));
/// assert_eq!(Batching::off().prefetch, Some(0));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Batching {
    /// Tasks held reserved in the local buffer, beyond those running. `None` (the default)
    /// starts at the consumer's concurrency and doubles, up to 16 times that (at most 1000),
    /// while slots find it empty during a refill's round trip, halving back when the
    /// queue runs low; so slow handlers hold only their concurrency. `Some(n)` holds up to `n`,
    /// fixed; `Some(0)` turns prefetching off (each slot reserves its own task). At most
    /// [`MAX_BATCH`] (1000).
    pub prefetch: Option<usize>,
    /// The most acks sent in one `queue_ack_many` call. Default 256 (at most [`MAX_BATCH`]);
    /// 0 or 1 acks each task on its own, as soon as its handler returns.
    pub ack_batch: usize,
    /// How long the first of a batch of acks waits for others before the batch is sent.
    /// Default 1 ms.
    pub ack_window: Duration,
}

impl Default for Batching {
    fn default() -> Self {
        Batching {
            prefetch: None,
            ack_batch: 256,
            ack_window: Duration::from_millis(1),
        }
    }
}

impl Batching {
    /// No prefetching, no ack batching: every slot reserves and acks its own task, one call each.
    pub fn off() -> Self {
        Batching {
            prefetch: Some(0),
            ack_batch: 1,
            ack_window: Duration::ZERO,
        }
    }

    /// Holds up to `n` prefetched tasks (0 turns prefetching off).
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n);
        self
    }

    /// Sends up to `n` acks per call (0 or 1 acks each task on its own).
    pub fn ack_batch(mut self, n: usize) -> Self {
        self.ack_batch = n;
        self
    }

    /// Lets the first ack of a batch wait up to `window` for others.
    pub fn ack_window(mut self, window: Duration) -> Self {
        self.ack_window = window;
        self
    }

    /// The buffer size for `concurrency` slots: the setting, or the concurrency, capped at
    /// [`MAX_BATCH`] so one refill is one `queue_reserve_many` call.
    pub(super) fn buffer(&self, concurrency: usize) -> usize {
        self.prefetch.unwrap_or(concurrency).min(MAX_BATCH)
    }

    /// The ack batch size, capped at [`MAX_BATCH`]; 1 means no batching.
    pub(super) fn acks(&self) -> usize {
        self.ack_batch.clamp(1, MAX_BATCH)
    }
}

/// The heartbeat period of a config: its own, or a third of the visibility; at least 10 ms.
pub(super) fn beat_of(config: &ConsumerConfig) -> Duration {
    config
        .heartbeat
        .unwrap_or(config.visibility / 3)
        .max(Duration::from_millis(10))
}
