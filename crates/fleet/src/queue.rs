//! `Queue<T>`: typed tasks in the seed's envelope on a [`FleetBackend`] job queue.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::fleet::{
    Delivery, FleetBackend, IdempotencyKey, InFlight, Priority, QueueStats, RateLimit, RunAt,
    Submit, SubmitOutcome, check_batch,
};
use switchyard_core::{Error, Result};

use super::envelope::LastError;

mod tasks;
use super::{CancelReason, CancelToken, Envelope, RetryPolicy, unix_now, uuid4_hex};
pub use tasks::{TaskEnd, Waited};

/// How long an idempotency key is remembered by default (the seed's
/// `FLEET_IDEMPOTENCY_TTL_SECONDS`).
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(86_400);

/// Options of [`Queue::push_with`] and [`Queue::submit_once`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PushOptions {
    /// The task id; `uuid4().hex` when `None`.
    pub id: Option<String>,
    /// The tier (default normal).
    pub priority: Priority,
    /// `ttl_seconds`: the consumer drops the task once it is older than this.
    pub ttl_seconds: Option<u64>,
    /// `max_attempts` written into the envelope (the consumer's default otherwise).
    pub max_attempts: Option<u32>,
    /// `timeout_seconds` written into the envelope: how long one attempt may run (more than 0,
    /// at most a day; the consumer's [`ConsumerConfig::timeout`](crate::ConsumerConfig) otherwise).
    pub timeout: Option<Duration>,
    /// `retry` written into the envelope: the task's own retry policy (unset fields, or `None`,
    /// come from the consumer's config).
    pub retry: Option<RetryPolicy>,
}

/// Outcome of [`Queue::submit_once`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// Enqueued under this task id.
    Enqueued(String),
    /// The idempotency key was seen before: nothing was enqueued; this is the first task's id.
    Duplicate(String),
}

/// A typed job queue. Cheap to clone.
pub struct Queue<T> {
    backend: Arc<dyn FleetBackend>,
    name: String,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Queue {
            backend: self.backend.clone(),
            name: self.name.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.name)
            .field("backend", &self.backend)
            .finish()
    }
}

/// A reserved task whose envelope and payload parsed.
#[derive(Debug, Clone)]
pub struct Task<T> {
    /// The task id.
    pub id: String,
    /// The decoded payload.
    pub payload: T,
    /// This delivery's attempt, counted by the backend (1 on the first delivery).
    pub attempt: u32,
    /// Why the previous attempt failed, if a consumer recorded it (ADR 0250).
    pub last_error: Option<LastError>,
    /// The envelope as delivered.
    pub envelope: Envelope,
    /// The delivery (receipt, raw body, tier, visibility deadline).
    pub delivery: Delivery,
    /// Fires when the handler should stop: the task was cancelled, its timeout passed, or the
    /// consumer is shutting down ([`CancelToken::reason`] says which). A
    /// [`Consumer`](crate::Consumer) aborts a handler still running `cancel_grace` after it fired.
    pub cancel: CancelToken,
    /// When this attempt times out (the envelope's `timeout_seconds`, else the consumer's
    /// `timeout`, from the start of the attempt); `None` without a timeout.
    pub deadline: Option<Instant>,
    /// Where it was reserved, so the task can report progress on itself.
    origin: Origin,
}

/// The queue a task was reserved from.
#[derive(Debug, Clone)]
struct Origin {
    backend: Arc<dyn FleetBackend>,
    queue: String,
}

impl<T> Task<T> {
    /// Stores `progress` (any serializable value, as JSON, at most 64 KiB) on this delivery, for
    /// [`Queue::in_flight`] readers; `false` when the delivery is no longer current (guarantee
    /// 29). A [`Consumer`](crate::Consumer) handler owns its task and may call this as it goes.
    /// [`Error::Cancelled`] means the task was cancelled: stop (the token fires too).
    pub async fn report_progress<P: Serialize + ?Sized>(&self, progress: &P) -> Result<bool> {
        let doc = serde_json::to_vec(progress).map_err(|e| Error::invalid("progress", e))?;
        let res = self
            .origin
            .backend
            .queue_progress(&self.origin.queue, &self.delivery.receipt, &doc)
            .await;
        if let Err(Error::Cancelled { .. }) = &res {
            self.cancel.fire(CancelReason::Cancelled);
        }
        res
    }
}

/// One reservation of a queue as [`Queue::in_flight`] reads it, decoded where it parses.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InFlightTask<T> {
    /// The envelope's id, when the body has one.
    pub id: Option<String>,
    /// The payload, when the body is a valid envelope for `T`.
    pub payload: Option<T>,
    /// The delivery's attempt (1 on the first).
    pub attempt: u32,
    /// The tier it came from.
    pub priority: Priority,
    /// Unix seconds (store clock) when the reservation lapses unless extended.
    pub visible_until: f64,
    /// The last progress reported on this delivery, when it is JSON (as
    /// [`Task::report_progress`] writes it).
    pub progress: Option<serde_json::Value>,
    /// The entry as the backend returned it (body and progress bytes untouched).
    pub raw: InFlight,
}

/// What [`Queue::reserve`] hands out: a task, or a body that is not a valid envelope for `T`.
#[derive(Debug)]
pub enum Reserved<T> {
    /// A well-formed task.
    Task(Task<T>),
    /// The body did not parse; dead-letter it with [`Queue::fail`] (the consumer does).
    Malformed {
        /// The delivery, body untouched.
        delivery: Delivery,
        /// Why it did not parse.
        error: Error,
    },
}

/// One dead-lettered body, decoded: what [`Queue::dlq_peek`] returns.
#[derive(Debug)]
pub enum DeadLetter<T> {
    /// A task that used up its attempts.
    Task(DeadTask<T>),
    /// A body that was not a valid envelope for `T`, dead-lettered as it came.
    Malformed {
        /// The body, untouched.
        body: Vec<u8>,
        /// Why it did not parse.
        error: Error,
    },
}

/// A dead-lettered task whose envelope and payload parsed.
#[derive(Debug, Clone)]
pub struct DeadTask<T> {
    /// The task id.
    pub id: String,
    /// The decoded payload.
    pub payload: T,
    /// The attempt it died on.
    pub attempt: u32,
    /// `max_attempts` of its envelope.
    pub max_attempts: Option<u32>,
    /// Why its last attempt failed; `None` when no handler error was recorded (a task
    /// dead-lettered by a consumer older than ADR 0250, or one whose earlier deliveries died
    /// with their workers).
    pub last_error: Option<LastError>,
    /// The envelope as stored.
    pub envelope: Envelope,
    /// The body exactly as stored: what [`Queue::dlq_requeue_chosen`] names it by.
    pub body: Vec<u8>,
}

impl<T> DeadLetter<T> {
    /// The task id, when the body parsed that far.
    pub fn id(&self) -> Option<&str> {
        match self {
            DeadLetter::Task(t) => Some(&t.id),
            DeadLetter::Malformed { .. } => None,
        }
    }

    /// The body exactly as stored, parsed or not: pass it to [`Queue::dlq_requeue_chosen`].
    pub fn body(&self) -> &[u8] {
        match self {
            DeadLetter::Task(t) => &t.body,
            DeadLetter::Malformed { body, .. } => body,
        }
    }

    /// Why the task died, when a consumer recorded it.
    pub fn last_error(&self) -> Option<&LastError> {
        match self {
            DeadLetter::Task(t) => t.last_error.as_ref(),
            DeadLetter::Malformed { .. } => None,
        }
    }
}

impl<T> Reserved<T> {
    /// The delivery, either way.
    pub fn delivery(&self) -> &Delivery {
        match self {
            Reserved::Task(t) => &t.delivery,
            Reserved::Malformed { delivery, .. } => delivery,
        }
    }
}

impl<T: Serialize + DeserializeOwned> Queue<T> {
    /// The queue `name` on `backend`.
    pub fn new(backend: Arc<dyn FleetBackend>, name: impl Into<String>) -> Self {
        Queue {
            backend,
            name: name.into(),
            _t: PhantomData,
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The backend it runs on.
    pub fn backend(&self) -> &Arc<dyn FleetBackend> {
        &self.backend
    }

    /// Builds the envelope the seed's producers push.
    pub fn envelope(&self, payload: &T, opts: &PushOptions) -> Result<Envelope> {
        let payload = serde_json::to_value(payload).map_err(|e| Error::invalid("payload", e))?;
        let id = opts.id.clone().unwrap_or_else(uuid4_hex);
        if id.is_empty() {
            return Err(Error::invalid("id", "must not be empty"));
        }
        let mut env = Envelope::new(id, payload, unix_now(), opts.ttl_seconds, opts.max_attempts);
        if opts.timeout.is_some() {
            env.set_timeout(opts.timeout)?;
        }
        if let Some(retry) = &opts.retry {
            env.set_retry(Some(retry))?;
        }
        Ok(env)
    }

    /// Pushes `payload` at normal priority; returns its task id (guarantee `queue.priority_fifo`).
    pub async fn push(&self, payload: &T) -> Result<String> {
        self.push_with(payload, PushOptions::default()).await
    }

    /// Pushes `payload` with options; returns its task id (guarantee `queue.priority_fifo`).
    pub async fn push_with(&self, payload: &T, opts: PushOptions) -> Result<String> {
        let env = self.envelope(payload, &opts)?;
        self.backend
            .queue_push(&self.name, &env.to_bytes(), opts.priority)
            .await?;
        Ok(env.id())
    }

    /// Pushes `payload` unless `key` was submitted in the last 24 h, atomically:
    /// the key lives in KV namespace `idem:{queue}` with the task id as its value, like the seed
    /// (guarantee `queue.submit_once`).
    pub async fn submit_once(
        &self,
        key: &str,
        payload: &T,
        opts: PushOptions,
    ) -> Result<Submitted> {
        let env = self.envelope(payload, &opts)?;
        let id = env.id();
        let ns = format!("idem:{}", self.name);
        let outcome = self
            .backend
            .queue_submit_once(
                &self.name,
                &env.to_bytes(),
                opts.priority,
                IdempotencyKey {
                    ns: &ns,
                    key,
                    value: id.as_bytes(),
                    ttl: Some(IDEMPOTENCY_TTL),
                },
            )
            .await?;
        Ok(match outcome {
            SubmitOutcome::Enqueued => Submitted::Enqueued(id),
            SubmitOutcome::Duplicate(v) => {
                Submitted::Duplicate(String::from_utf8_lossy(&v).into_owned())
            }
        })
    }

    /// Reserves the next task for `visibility`, waiting up to `timeout` (guarantees
    /// `queue.priority_fifo`, `queue.reserve_atomic` and `queue.attempts`; nothing while the queue
    /// is paused or rate-limited, 27 and 28).
    pub async fn reserve(
        &self,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Reserved<T>>> {
        let Some(delivery) = self
            .backend
            .queue_reserve(&self.name, timeout, visibility)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(self.decode(delivery)))
    }

    /// Submits `payload` now or at `run_at` (backend clock), and, with `idempotency_key`,
    /// only if that key was not submitted in the last 24 h, in one step (guarantees `queue.delayed`
    /// and `queue.submit_once`; the key lives where [`Queue::submit_once`] keeps it). A delayed
    /// task is counted in `QueueStats::scheduled` until due.
    pub async fn submit(
        &self,
        payload: &T,
        opts: PushOptions,
        run_at: RunAt,
        idempotency_key: Option<&str>,
    ) -> Result<Submitted> {
        let env = self.envelope(payload, &opts)?;
        let id = env.id();
        let ns = format!("idem:{}", self.name);
        let mut submit = Submit::new().priority(opts.priority).run_at(run_at);
        if let Some(key) = idempotency_key {
            submit = submit.idem(IdempotencyKey {
                ns: &ns,
                key,
                value: id.as_bytes(),
                ttl: Some(IDEMPOTENCY_TTL),
            });
        }
        let outcome = self
            .backend
            .queue_submit(&self.name, &env.to_bytes(), &submit)
            .await?;
        Ok(match outcome {
            SubmitOutcome::Enqueued => Submitted::Enqueued(id),
            SubmitOutcome::Duplicate(v) => {
                Submitted::Duplicate(String::from_utf8_lossy(&v).into_owned())
            }
        })
    }

    /// Pushes `payload` at normal priority to become reservable at `run_at`, e.g.
    /// `RunAt::After(Duration::from_secs(30))`; returns its task id (guarantee `queue.delayed`).
    pub async fn push_at(&self, payload: &T, run_at: RunAt) -> Result<String> {
        match self
            .submit(payload, PushOptions::default(), run_at, None)
            .await?
        {
            Submitted::Enqueued(id) | Submitted::Duplicate(id) => Ok(id),
        }
    }

    /// Pushes every payload, in order, to the end of `opts.priority`'s tier in one atomic step
    /// (guarantee `queue.batches`); returns their task ids. `opts.id` must be `None` (each task
    /// gets its own); at most [`MAX_BATCH`](switchyard_core::fleet::MAX_BATCH) payloads.
    pub async fn push_many(&self, payloads: &[T], opts: PushOptions) -> Result<Vec<String>> {
        check_batch("payloads", payloads.len())?;
        if opts.id.is_some() {
            return Err(Error::invalid(
                "id",
                "must be None for push_many: every task gets its own id",
            ));
        }
        let mut ids = Vec::with_capacity(payloads.len());
        let mut bodies = Vec::with_capacity(payloads.len());
        for payload in payloads {
            let env = self.envelope(payload, &opts)?;
            ids.push(env.id());
            bodies.push(env.to_bytes());
        }
        if bodies.is_empty() {
            return Ok(ids);
        }
        self.backend
            .queue_push_many(&self.name, &bodies, opts.priority)
            .await?;
        Ok(ids)
    }

    /// Reserves up to `max` tasks in one step, waiting up to `timeout` while none is ready
    /// (guarantee `queue.batches`); each has its own receipt.
    pub async fn reserve_many(
        &self,
        max: usize,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Vec<Reserved<T>>> {
        Ok(self
            .backend
            .queue_reserve_many(&self.name, max, timeout, visibility)
            .await?
            .into_iter()
            .map(|d| self.decode(d))
            .collect())
    }

    /// Acks every delivery in one step; one answer per delivery, `false` for one no longer
    /// current (guarantee `queue.batches`).
    pub async fn ack_many<'a>(
        &self,
        deliveries: impl IntoIterator<Item = &'a Delivery>,
    ) -> Result<Vec<bool>> {
        let receipts: Vec<_> = deliveries.into_iter().map(|d| d.receipt.clone()).collect();
        check_batch("deliveries", receipts.len())?;
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        self.backend.queue_ack_many(&self.name, &receipts).await
    }

    /// Stops handing out tasks (pushes are still taken); `true` if the queue was running
    /// (guarantee `queue.pause`). The state is kept by the backend, for every consumer.
    pub async fn pause(&self) -> Result<bool> {
        self.backend.queue_pause(&self.name).await
    }

    /// Hands out tasks again and wakes waiting reservers; `true` if the queue was paused
    /// (guarantee `queue.pause`).
    pub async fn resume(&self) -> Result<bool> {
        self.backend.queue_resume(&self.name).await
    }

    /// Limits reservations, by every consumer of every process, to `limit` (a token bucket kept
    /// by the backend, starting full), or removes the limit with `None` (guarantee
    /// `queue.rate_limit`).
    pub async fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        self.backend.queue_set_rate_limit(&self.name, limit).await
    }

    /// Every count of the queue in one snapshot, with its pause state and rate limit
    /// (guarantees `queue.stats`, `queue.pause` and `queue.rate_limit`).
    pub async fn stats(&self) -> Result<QueueStats> {
        self.backend.queue_stats(&self.name).await
    }

    /// Stores `progress` (as JSON) on the current delivery; `false` if it is no longer current
    /// (guarantee `queue.progress`). [`Task::report_progress`] does the same from a task.
    pub async fn progress<P: Serialize + ?Sized>(
        &self,
        delivery: &Delivery,
        progress: &P,
    ) -> Result<bool> {
        let doc = serde_json::to_vec(progress).map_err(|e| Error::invalid("progress", e))?;
        self.backend
            .queue_progress(&self.name, &delivery.receipt, &doc)
            .await
    }

    /// Up to `n` reservations, soonest deadline first, decoded, each with its last progress
    /// (guarantee `queue.progress`).
    pub async fn in_flight(&self, n: usize) -> Result<Vec<InFlightTask<T>>> {
        Ok(self
            .backend
            .queue_in_flight(&self.name, n)
            .await?
            .into_iter()
            .map(|raw| {
                let payload = Envelope::parse(&raw.body)
                    .ok()
                    .and_then(|e| serde_json::from_value::<T>(e.payload().clone()).ok());
                let progress = raw
                    .progress
                    .as_deref()
                    .and_then(|p| serde_json::from_slice(p).ok());
                InFlightTask {
                    id: raw.task_id.clone(),
                    payload,
                    attempt: raw.attempt,
                    priority: raw.priority,
                    visible_until: raw.visible_until,
                    progress,
                    raw,
                }
            })
            .collect())
    }

    /// Ends the delivery and requeues its body as delivered into its tier, now or after
    /// `delay`, keeping the attempt count; `false` if no longer current (guarantee
    /// `queue.release`).
    pub async fn release(&self, delivery: &Delivery, delay: Duration) -> Result<bool> {
        self.backend
            .queue_release(&self.name, &delivery.receipt, delay)
            .await
    }

    /// Ends the delivery successfully; `false` if it is no longer current (guarantee
    /// `queue.receipts`).
    pub async fn ack(&self, delivery: &Delivery) -> Result<bool> {
        self.backend.queue_ack(&self.name, &delivery.receipt).await
    }

    /// Requeues `envelope` into the delivery's tier after `delay`; `false` if no longer current
    /// (guarantees `queue.receipts` and `queue.nack`).
    pub async fn nack(
        &self,
        delivery: &Delivery,
        envelope: &Envelope,
        delay: Duration,
    ) -> Result<bool> {
        self.backend
            .queue_nack(&self.name, &delivery.receipt, &envelope.to_bytes(), delay)
            .await
    }

    /// Pushes the visibility deadline to now + `visibility`; `false` if no longer current
    /// (guarantee `queue.sweep`).
    pub async fn extend(&self, delivery: &Delivery, visibility: Duration) -> Result<bool> {
        self.backend
            .queue_extend(&self.name, &delivery.receipt, visibility)
            .await
    }

    /// Ends the delivery and dead-letters `body` in one step; `false` if no longer current
    /// (guarantee `queue.fail_atomic`).
    pub async fn fail(&self, delivery: &Delivery, body: &[u8]) -> Result<bool> {
        self.backend
            .queue_fail(&self.name, &delivery.receipt, body)
            .await
    }

    /// Returns lapsed reservations to their tiers; how many (guarantee `queue.sweep`).
    pub async fn sweep_expired(&self) -> Result<u64> {
        self.backend.queue_sweep_expired(&self.name).await
    }

    /// Moves due scheduled tasks to the end of their tiers without reserving any; how many.
    /// Nothing while the queue is paused (guarantee `queue.promote_due`).
    pub async fn promote_due(&self) -> Result<u64> {
        self.backend.queue_promote_due(&self.name).await
    }

    /// Tasks waiting (not scheduled, not reserved; guarantee `queue.priority_fifo`).
    pub async fn len(&self) -> Result<u64> {
        self.backend.queue_size(&self.name).await
    }

    /// Whether no task is waiting.
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }

    /// Up to `n` waiting envelopes in serve order (raw bodies; guarantee `queue.priority_fifo`).
    pub async fn peek(&self, n: usize) -> Result<Vec<Vec<u8>>> {
        self.backend.queue_peek(&self.name, n).await
    }

    /// Up to `n` dead-lettered tasks, oldest first, decoded (with why each died, ADR 0250).
    /// The names of the dead-letter operations are the port's (`dlq_peek`, `dlq_length`,
    /// `dlq_clear`, `dlq_requeue`), here, in the CLI and over HTTP alike.
    pub async fn dlq_peek(&self, n: usize) -> Result<Vec<DeadLetter<T>>> {
        Ok(self
            .dlq_peek_raw(n)
            .await?
            .into_iter()
            .map(decode_dead)
            .collect())
    }

    /// Up to `n` dead-lettered bodies, oldest first, as stored (guarantee `dlq.fifo_atomic`).
    pub async fn dlq_peek_raw(&self, n: usize) -> Result<Vec<Vec<u8>>> {
        self.backend.dlq_peek(&self.name, n).await
    }

    /// Number of dead-lettered bodies.
    pub async fn dlq_length(&self) -> Result<u64> {
        self.backend.dlq_length(&self.name).await
    }

    /// Number of dead-lettered bodies.
    #[deprecated(since = "0.1.1", note = "use `dlq_length`, the port's name (ADR 0251)")]
    pub async fn dlq_len(&self) -> Result<u64> {
        self.dlq_length().await
    }

    /// Deletes every dead-lettered body; how many there were (guarantee `dlq.fifo_atomic`).
    pub async fn dlq_clear(&self) -> Result<u64> {
        self.backend.dlq_clear(&self.name).await
    }

    /// Moves up to `n` dead-lettered tasks back to the `priority` tier in one atomic step, with a
    /// fresh attempt count (guarantee `dlq.fifo_atomic`; the seed popped and pushed one by one,
    /// losing tasks on a crash).
    /// Their `last_error` stays in the envelope until a handler fails again.
    pub async fn dlq_requeue(&self, n: usize, priority: Priority) -> Result<u64> {
        self.backend.dlq_requeue(&self.name, n, priority).await
    }

    /// Moves the chosen dead letters, named by their stored bytes ([`DeadLetter::body`]), back
    /// to `priority`'s tier in one step with a fresh attempt count; one answer per body, `false`
    /// when no such letter was left (guarantee `dlq.requeue_chosen`). A body given twice moves two
    /// copies.
    pub async fn dlq_requeue_chosen(
        &self,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<Vec<bool>> {
        check_batch("bodies", bodies.len())?;
        if bodies.is_empty() {
            return Ok(Vec::new());
        }
        self.backend
            .dlq_requeue_chosen(&self.name, bodies, priority)
            .await
    }

    /// Parses a delivery into a typed task that can report progress on itself.
    pub(crate) fn decode(&self, delivery: Delivery) -> Reserved<T> {
        decode(
            delivery,
            Origin {
                backend: self.backend.clone(),
                queue: self.name.clone(),
            },
        )
    }

    /// [`Queue::dlq_requeue`] into the normal tier.
    #[deprecated(
        since = "0.1.1",
        note = "use `dlq_requeue(n, priority)`, the port's name (ADR 0251)"
    )]
    pub async fn dlq_replay(&self, n: usize) -> Result<u64> {
        self.dlq_requeue(n, Priority::Normal).await
    }
}

/// Parses a dead-lettered body into a typed view.
fn decode_dead<T: DeserializeOwned>(body: Vec<u8>) -> DeadLetter<T> {
    let envelope = match Envelope::parse(&body) {
        Ok(e) => e,
        Err(error) => return DeadLetter::Malformed { body, error },
    };
    match serde_json::from_value::<T>(envelope.payload().clone()) {
        Ok(payload) => DeadLetter::Task(DeadTask {
            id: envelope.id(),
            payload,
            attempt: envelope.attempt(),
            max_attempts: envelope.max_attempts(),
            last_error: envelope.last_error(),
            envelope,
            body,
        }),
        Err(e) => DeadLetter::Malformed {
            body,
            error: Error::invalid("envelope.payload", e),
        },
    }
}

/// Parses a delivery into a typed task.
fn decode<T: DeserializeOwned>(delivery: Delivery, origin: Origin) -> Reserved<T> {
    let envelope = match Envelope::parse(&delivery.body) {
        Ok(e) => e,
        Err(error) => return Reserved::Malformed { delivery, error },
    };
    match serde_json::from_value::<T>(envelope.payload().clone()) {
        Ok(payload) => Reserved::Task(Task {
            id: envelope.id(),
            cancel: CancelToken::default(),
            deadline: envelope
                .timeout()
                .and_then(|t| Instant::now().checked_add(t)),
            payload,
            attempt: delivery.attempt,
            last_error: envelope.last_error(),
            envelope,
            delivery,
            origin,
        }),
        Err(e) => Reserved::Malformed {
            delivery,
            error: Error::invalid("envelope.payload", e),
        },
    }
}
