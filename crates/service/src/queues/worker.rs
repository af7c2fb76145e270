//! The worker calls (ADR 0306): reserve tasks, then ack, nack, fail, extend or report progress
//! on each reservation by its receipt; list what is in flight.
//!
//! A remote worker holds the receipt and the payload it was handed, not the body the backend
//! stored, so nack and fail go through the port's `queue_release` and `queue_delivered`
//! (guarantee `queue.release`) instead of sending a body back: a worker can never rewrite a task.
//!
//! Attempts are kept as the library consumer keeps them (ADR 0352): a reservation carries
//! `max_attempts`; a task delivered past it (its earlier reservations lapsed: the workers died
//! or ran past their visibility) is dead-lettered instead of handed out, and a nack of the last
//! attempt dead-letters, both with `last_error`. A task whose `ttl_seconds` passed is dropped
//! unrun.
//!
//! A task's own `timeout_seconds` and `retry` (ADR 0380, section 8) reach the worker with the
//! reservation as `deadline` and `retry`. The service keeps the deadline: an extend or progress
//! past it ends the attempt as a timeout (a nack with the task's retry delay, or the dead letter
//! at the last attempt, with `last_error` "timed out after …") and answers 409 `timed_out`. A nack
//! without `delay_seconds` waits what the task's own `retry` says; a task without one comes back
//! at once, as before.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::{Delivery, Receipt};
use switchyard_fleet::{Envelope, LastError};
use utoipa::{IntoParams, ToSchema};

use super::{
    MAX_DURATION_SECS, Queues, at_most, body_json, priority_name, seconds_at_most, secs, unix_now,
};
use crate::{Error, Result};

/// The most tasks one reservation request takes.
pub const MAX_RESERVE: u64 = 100;
/// The longest visibility a worker may ask for: 12 hours. A longer job extends its reservation.
pub const MAX_VISIBILITY_SECS: f64 = 43_200.0;
/// The visibility of a reservation that names none.
pub const DEFAULT_VISIBILITY_SECS: f64 = 30.0;
/// The longest long-poll: a request holds a connection and a task of the caller meanwhile.
pub const MAX_WAIT_SECS: f64 = 30.0;
/// The longest failure reason kept in the envelope.
pub const MAX_REASON_BYTES: usize = 4096;
/// The most reservations one in-flight listing returns.
pub const MAX_IN_FLIGHT_PAGE: usize = 1000;

/// The attempts of a task whose envelope names none (and of a body that is not an envelope):
/// the library consumer's default, so a task is tried as often whoever works it.
fn default_max_attempts() -> u32 {
    switchyard_fleet::ConsumerConfig::default().max_attempts
}

/// A reservation request (`POST /v1/queues/{queue}/reservations`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReserveBody {
    /// How many tasks at most (1..=100, default 1).
    #[schema(minimum = 1, maximum = 100)]
    pub max: Option<u64>,
    /// Seconds each reservation lasts unless extended (default 30, at most 43200).
    #[schema(exclusive_minimum = 0, maximum = 43200)]
    pub visibility_seconds: Option<f64>,
    /// Seconds to wait while nothing is due (default 0, at most 30): a long poll.
    #[schema(minimum = 0, maximum = 30)]
    pub wait_seconds: Option<f64>,
}

/// A checked reservation request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReserveOptions {
    /// Tasks at most, 1..=100.
    pub max: usize,
    /// How long each reservation lasts unless extended.
    pub visibility: Duration,
    /// How long to wait while nothing is due (the caller may shorten it, never lengthen it).
    pub wait: Duration,
}

impl ReserveBody {
    /// The options, or a 422 naming the field out of bounds.
    pub fn options(&self) -> Result<ReserveOptions> {
        let max = match at_most("max", self.max, MAX_RESERVE)? {
            Some(0) => return Err(Error::invalid("max", "`max` must be at least 1")),
            Some(n) => usize::try_from(n).unwrap_or(1),
            None => 1,
        };
        let visibility =
            positive_visibility(self.visibility_seconds)?.unwrap_or(DEFAULT_VISIBILITY_SECS);
        let wait = seconds_at_most("wait_seconds", self.wait_seconds, MAX_WAIT_SECS)?;
        Ok(ReserveOptions {
            max,
            visibility: secs(visibility),
            wait: secs(wait.unwrap_or(0.0)),
        })
    }
}

/// A visibility of `0 < seconds ≤ 43200` (422 naming `visibility_seconds` otherwise).
fn positive_visibility(value: Option<f64>) -> Result<Option<f64>> {
    let value = seconds_at_most("visibility_seconds", value, MAX_VISIBILITY_SECS)?;
    if value.is_some_and(|v| v <= 0.0) {
        return Err(Error::invalid(
            "visibility_seconds",
            "`visibility_seconds` must be more than 0",
        ));
    }
    Ok(value)
}

/// The failure a previous attempt recorded (ADR 0250).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LastErrorJson {
    pub message: String,
    pub attempt: u32,
    /// Unix seconds.
    pub at: f64,
}

/// One reserved task.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReservedTask {
    /// The envelope's task id (null when the body is not an envelope).
    pub id: Option<String>,
    /// Pass it back to ack, nack, fail, extend or report progress; it names this delivery only.
    pub receipt: String,
    /// The task's payload (the whole body when it is not an envelope).
    pub payload: Value,
    /// This delivery's attempt number, counted by the backend (1 on the first).
    pub attempt: u32,
    /// The attempts the task is given: a nack of attempt `max_attempts` dead-letters it, and
    /// so does a delivery past it (the earlier reservations lapsed). The envelope's own, else
    /// 3, the library consumer's default.
    pub max_attempts: u32,
    /// The tier the task came from: `high`, `normal` or `low`.
    pub priority: String,
    /// Unix seconds (backend clock) when the reservation lapses unless extended.
    pub visible_until: f64,
    /// Why the previous attempt failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastErrorJson>,
    /// Unix seconds (backend clock) by which this attempt must end: the reservation's start
    /// plus the task's `timeout_seconds`. Past it, extend and progress answer 409 `timed_out`
    /// and the attempt ends as a timeout. Absent when the task has no timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<f64>,
    /// The task's own retry policy (`{backoff, base_seconds, cap_seconds, jitter}`), as
    /// submitted: a nack without `delay_seconds` waits what it says. Absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub retry: Option<Value>,
    /// Set when the body is not a task envelope: why. Fail such a task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<String>,
}

/// The reservations handed out (empty when nothing was due).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Reservations {
    pub tasks: Vec<ReservedTask>,
}

/// A nack (`…/nack`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NackBody {
    /// Seconds before the task is reservable again (default 0).
    #[schema(minimum = 0)]
    pub delay_seconds: Option<f64>,
    /// Why this attempt failed; kept in the task's `last_error` (at most 4096 bytes).
    pub reason: Option<String>,
}

/// What a nack did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Nacked {
    pub ok: bool,
    /// True when this was the task's last attempt: it went to the dead letters, not back to
    /// the queue.
    pub dead_lettered: bool,
    /// The attempt that was nacked.
    pub attempt: u32,
    pub max_attempts: u32,
}

/// A fail (`…/fail`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailBody {
    /// Why the task failed; kept in the dead letter's `last_error` (at most 4096 bytes).
    pub reason: Option<String>,
}

/// An extension (`…/extend`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendBody {
    /// The reservation lasts this many seconds from now (at most 43200).
    #[schema(exclusive_minimum = 0, maximum = 43200)]
    pub visibility_seconds: f64,
}

/// One reservation as an observer sees it: no receipt.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InFlightTask {
    pub id: Option<String>,
    pub attempt: u32,
    /// `high`, `normal` or `low`.
    pub priority: String,
    pub visible_until: f64,
    /// The last progress document its worker reported on this delivery, or null.
    pub progress: Value,
    /// The task's payload (the whole body when it is not an envelope).
    pub payload: Value,
}

/// A queue's reservations (`GET /v1/queues/{queue}/in-flight`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct InFlightList {
    pub in_flight: Vec<InFlightTask>,
}

/// `?limit=` of the in-flight listing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InFlightQuery {
    /// At most this many (default 100, at most 1000).
    #[param(maximum = 1000)]
    pub limit: Option<usize>,
}

/// The refusal of a receipt that is not the current delivery's.
pub fn not_current() -> Error {
    Error::conflict(
        "receipt_not_current",
        "this reservation is no longer yours: its visibility lapsed (the task went back to the \
         queue for another worker) or it was already acked, nacked or failed. Stop working on \
         it; reserve again, and extend long jobs before their visibility lapses",
    )
}

fn checked_reason(reason: Option<String>) -> Result<Option<String>> {
    if reason.as_ref().is_some_and(|r| r.len() > MAX_REASON_BYTES) {
        return Err(Error::invalid(
            "reason",
            format!("`reason` is longer than {MAX_REASON_BYTES} bytes"),
        ));
    }
    Ok(reason)
}

/// The payload and last error of a delivered body, or why it is not an envelope.
fn decode(body: &[u8]) -> (Value, Option<LastErrorJson>, Option<String>) {
    match Envelope::parse(body) {
        Ok(env) => (
            env.payload().clone(),
            env.last_error().map(|e| LastErrorJson {
                message: e.message,
                attempt: e.attempt,
                at: e.at,
            }),
            None,
        ),
        Err(e) => (body_json(body), None, Some(e.to_string())),
    }
}

fn reserved(d: Delivery, max_attempts: u32, visibility: Duration) -> ReservedTask {
    let (payload, last_error, malformed) = decode(&d.body);
    let env = Envelope::parse(&d.body).ok();
    // The reservation started `visibility` before its first deadline, on the backend's clock.
    let started = d.visible_until - visibility.as_secs_f64();
    let deadline = env
        .as_ref()
        .and_then(Envelope::timeout)
        .map(|t| started + t.as_secs_f64());
    let retry = env.as_ref().and_then(Envelope::retry).map(|p| p.to_value());
    ReservedTask {
        deadline,
        retry,
        id: d.task_id,
        receipt: d.receipt.as_str().to_string(),
        payload,
        attempt: d.attempt,
        max_attempts,
        priority: priority_name(d.priority).to_string(),
        visible_until: d.visible_until,
        last_error,
        malformed,
    }
}

/// What happens to a delivery before a worker sees it.
enum Screened {
    /// Hand it out with this many attempts.
    Hand(Delivery, u32),
    /// Its `ttl_seconds` passed: ack it unrun.
    Expired(Delivery),
    /// Delivered past its maximum: dead-letter this body.
    Exhausted(Delivery, Vec<u8>),
}

fn screen(d: Delivery, now: f64) -> Screened {
    let Ok(mut env) = Envelope::parse(&d.body) else {
        let max = default_max_attempts();
        return if d.attempt > max {
            let body = d.body.clone();
            Screened::Exhausted(d, body)
        } else {
            Screened::Hand(d, max)
        };
    };
    let max = env
        .max_attempts()
        .unwrap_or_else(default_max_attempts)
        .max(1);
    if env.expired_at(now) {
        return Screened::Expired(d);
    }
    if d.attempt <= max {
        return Screened::Hand(d, max);
    }
    let lapsed = d.attempt - 1;
    env.set_attempt(lapsed);
    env.set_max_attempts(max);
    env.set_last_error(&LastError {
        message: format!(
            "no worker finished the task in {lapsed} attempt(s) (max_attempts {max}): each \
             reservation lapsed without an ack, nack or fail (its worker died, or ran past its \
             visibility without extending it)"
        ),
        attempt: lapsed,
        at: now,
    });
    let body = env.to_bytes();
    Screened::Exhausted(d, body)
}

impl Queues {
    /// Reserves up to `opts.max` due tasks of `queue`, waiting up to `opts.wait` while none is.
    /// Deliveries past their attempts are dead-lettered and expired ones acked on the way, as
    /// the library consumer does, so a worker never sees them. Dropping the future mid-wait
    /// reserves nothing more.
    pub async fn reserve(&self, queue: &str, opts: ReserveOptions) -> Result<Reservations> {
        let deadline = tokio::time::Instant::now() + opts.wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            // One task is the port's single reserve: adapters batch concurrent single reserves
            // (the Redis fleet's lanes, the SQL group commits), which a one-task batch call
            // skips.
            let deliveries: Vec<Delivery> = if opts.max == 1 {
                let one = self.fleet.queue_reserve(queue, left, opts.visibility);
                one.await?.into_iter().collect()
            } else {
                let many = self
                    .fleet
                    .queue_reserve_many(queue, opts.max, left, opts.visibility);
                many.await?
            };
            let got = !deliveries.is_empty();
            let now = unix_now();
            let mut tasks = Vec::with_capacity(deliveries.len());
            for d in deliveries {
                match screen(d, now) {
                    Screened::Hand(d, max) => tasks.push(reserved(d, max, opts.visibility)),
                    Screened::Expired(d) => {
                        ended_anyway(self.fleet.queue_ack(queue, &d.receipt).await)?;
                        tracing::info!(queue, task_id = ?d.task_id, "dropped a task past its ttl_seconds unrun");
                    }
                    Screened::Exhausted(d, body) => {
                        ended_anyway(self.fleet.queue_fail(queue, &d.receipt, &body).await)?;
                        tracing::warn!(
                            queue, task_id = ?d.task_id, attempt = d.attempt,
                            "dead-lettered a task delivered past its max_attempts (its reservations lapsed)"
                        );
                    }
                }
            }
            if !tasks.is_empty() || !got || left.is_zero() {
                return Ok(Reservations { tasks });
            }
        }
    }

    /// The delivery `receipt` names, or [`not_current`].
    async fn current(&self, queue: &str, receipt: &Receipt) -> Result<Delivery> {
        let delivered = self.fleet.queue_delivered(queue, receipt).await?;
        delivered.ok_or_else(not_current)
    }

    /// Ends the delivery successfully, or [`not_current`].
    pub async fn ack(&self, queue: &str, receipt: &Receipt) -> Result<()> {
        current_or_refused(self.fleet.queue_ack(queue, receipt).await?)
    }

    /// Ends the delivery and puts the task back (same tier, same attempt count), now or after
    /// `delay_seconds`, with `reason` kept in its `last_error`; a nack of the last attempt
    /// dead-letters it instead.
    pub async fn nack(&self, queue: &str, receipt: &Receipt, body: NackBody) -> Result<Nacked> {
        let delay = seconds_at_most(
            "delay_seconds",
            body.delay_seconds,
            MAX_DURATION_SECS as f64,
        )?;
        let reason = checked_reason(body.reason)?;
        let delivery = self.current(queue, receipt).await?;
        let attempt = delivery.attempt;
        let envelope = Envelope::parse(&delivery.body).ok();
        // No delay given: the task's own retry policy, else at once (as before task policies).
        let delay = match delay {
            Some(d) => secs(d),
            None => envelope
                .as_ref()
                .and_then(Envelope::retry)
                .map_or(Duration::ZERO, |p| p.delay(attempt)),
        };
        let max = envelope
            .as_ref()
            .and_then(Envelope::max_attempts)
            .unwrap_or_else(default_max_attempts)
            .max(1);
        let last = attempt >= max;
        // The service, not the worker, rewrites the stored body: only `last_error` (and, at the
        // end, the attempt bookkeeping) changes, as the consumer writes them.
        let rewritten = envelope.map(|mut env| {
            let message = reason.clone().unwrap_or_else(|| {
                if last {
                    format!("nacked at its last attempt ({attempt} of {max})")
                } else {
                    format!("nacked at attempt {attempt} of {max}")
                }
            });
            env.set_last_error(&LastError {
                message,
                attempt,
                at: unix_now(),
            });
            if last {
                env.set_attempt(attempt);
                env.set_max_attempts(max);
            }
            env.to_bytes()
        });
        let done = match (last, rewritten) {
            (true, Some(body)) => self.fleet.queue_fail(queue, receipt, &body).await?,
            (true, None) => {
                self.fleet
                    .queue_fail(queue, receipt, &delivery.body)
                    .await?
            }
            (false, Some(body)) if reason.is_some() => {
                self.fleet.queue_nack(queue, receipt, &body, delay).await?
            }
            (false, _) => self.fleet.queue_release(queue, receipt, delay).await?,
        };
        current_or_refused(done)?;
        Ok(Nacked {
            ok: true,
            dead_lettered: last,
            attempt,
            max_attempts: max,
        })
    }

    /// Ends the delivery and dead-letters the task, with `reason` kept in its `last_error`.
    pub async fn fail(&self, queue: &str, receipt: &Receipt, body: FailBody) -> Result<()> {
        let reason = checked_reason(body.reason)?
            .unwrap_or_else(|| "failed by the worker (no reason given)".to_string());
        let delivery = self.current(queue, receipt).await?;
        // The reason goes into the envelope as the consumer writes it (ADR 0250); a body that is
        // not an envelope is dead-lettered as it is.
        let body = match Envelope::parse(&delivery.body) {
            Ok(mut env) => {
                env.set_last_error(&LastError {
                    message: reason,
                    attempt: delivery.attempt,
                    at: unix_now(),
                });
                env.to_bytes()
            }
            Err(_) => delivery.body,
        };
        current_or_refused(self.fleet.queue_fail(queue, receipt, &body).await?)
    }

    /// Sets the reservation's deadline to now + `visibility_seconds`; past the task's own
    /// deadline, ends the attempt as a timeout and answers `timed_out`.
    pub async fn extend(&self, queue: &str, receipt: &Receipt, body: ExtendBody) -> Result<()> {
        let visibility = positive_visibility(Some(body.visibility_seconds))?.unwrap_or(0.0);
        self.within_deadline(queue, receipt).await?;
        let done = self
            .fleet
            .queue_extend(queue, receipt, secs(visibility))
            .await?;
        current_or_refused(done)
    }

    /// Stores a progress document (any JSON, at most 64 KiB compact) on the current delivery.
    pub async fn progress(&self, queue: &str, receipt: &Receipt, doc: &Value) -> Result<()> {
        // Stored compact, so the limit is on what is kept, not on the client's whitespace.
        let doc = serde_json::to_vec(doc).map_err(|e| Error::invalid("body", e.to_string()))?;
        if doc.len() > switchyard_core::fleet::MAX_PROGRESS_BYTES {
            return Err(Error::invalid(
                "body",
                "the progress document is larger than 64 KiB; report a small status, not results",
            ));
        }
        self.within_deadline(queue, receipt).await?;
        current_or_refused(self.fleet.queue_progress(queue, receipt, &doc).await?)
    }

    /// `Ok` unless the delivery's task has a `timeout_seconds` and its attempt started longer ago
    /// than that; then the attempt is ended as a timeout (the task's retry delay, or the dead
    /// letter at its last attempt) and the answer is 409 `timed_out`. Costs one read of the
    /// delivery, and one of the task's record for a task with a timeout.
    async fn within_deadline(&self, queue: &str, receipt: &Receipt) -> Result<()> {
        let delivery = self.current(queue, receipt).await?;
        let Ok(env) = Envelope::parse(&delivery.body) else {
            return Ok(());
        };
        let (Some(timeout), Some(id)) = (env.timeout(), delivery.task_id.as_deref()) else {
            return Ok(());
        };
        let started = match self.fleet.task_get(queue, id).await {
            Ok(Some(t)) if t.state == switchyard_core::fleet::TaskState::Running => t.started_at,
            // No record (a backend without them), or not ours to judge.
            _ => None,
        };
        let Some(started) = started else {
            return Ok(());
        };
        let secs_allowed = timeout.as_secs_f64();
        if unix_now() <= started + secs_allowed {
            return Ok(());
        }
        let reason = format!("timed out after {secs_allowed} s");
        let nacked = self
            .nack(
                queue,
                receipt,
                NackBody {
                    delay_seconds: None,
                    reason: Some(reason.clone()),
                },
            )
            .await;
        let mut details = serde_json::Map::new();
        details.insert("timeout_seconds".into(), Value::from(secs_allowed));
        if let Ok(n) = &nacked {
            details.insert("dead_lettered".into(), Value::from(n.dead_lettered));
        }
        Err(Error::Conflict {
            code: "timed_out",
            message: format!(
                "the task {reason} (its `timeout_seconds`): this attempt was ended; stop working \
                 on it"
            ),
            details,
        })
    }

    /// `queue`'s reservations, soonest deadline first (default 100, at most 1000), with their
    /// progress and without their receipts.
    pub async fn in_flight(&self, queue: &str, limit: Option<usize>) -> Result<InFlightList> {
        let limit = limit.unwrap_or(100);
        if limit > MAX_IN_FLIGHT_PAGE {
            return Err(Error::invalid(
                "limit",
                format!("`limit` must be at most {MAX_IN_FLIGHT_PAGE}"),
            ));
        }
        let list = self.fleet.queue_in_flight(queue, limit).await?;
        let in_flight = list
            .into_iter()
            .map(|r| InFlightTask {
                payload: decode(&r.body).0,
                id: r.task_id,
                attempt: r.attempt,
                priority: priority_name(r.priority).to_string(),
                visible_until: r.visible_until,
                progress: r.progress.map(|p| body_json(&p)).unwrap_or(Value::Null),
            })
            .collect();
        Ok(InFlightList { in_flight })
    }
}

/// A delivery the reserve itself ends (past its ttl or its attempts) may carry a cancel request
/// (ADR 0380): the backend then ended it `cancelled` instead, which is as good an end; the other
/// tasks of the reservation are still handed out.
fn ended_anyway(done: switchyard_core::Result<bool>) -> Result<bool> {
    match done {
        Err(switchyard_core::Error::Cancelled { .. }) => Ok(true),
        other => Ok(other?),
    }
}

/// `Ok` when the port did it, [`not_current`] when the receipt had lost its delivery.
fn current_or_refused(done: bool) -> Result<()> {
    if done { Ok(()) } else { Err(not_current()) }
}
