//! One slot of a consumer: takes a task, runs the handler with its heartbeat, its timeout and
//! its cancel token, and ends the delivery (ack or complete, retry, dead letter or release).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::fleet::Delivery;
use switchyard_core::{Error, Result};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

use super::HandlerError;
use super::acker::Ack;
use super::buffer::Local;
use super::cancel::Running;
use super::config::{ConsumerConfig, beat_of};
use super::outcome::{TaskOutput, is_permanent};
use super::stats::{Counters, bump};
use crate::cancel::CancelReason;
use crate::envelope::LastError;
use crate::queue::{Queue, Reserved, Task};
use crate::retry::{RetryPolicy, seconds_value};
use crate::{Envelope, unix_now};

pub(super) struct Slot<T, H> {
    pub(super) queue: Queue<T>,
    pub(super) config: ConsumerConfig,
    pub(super) handler: Arc<H>,
    pub(super) counters: Arc<Counters>,
    pub(super) stop: watch::Receiver<bool>,
    pub(super) settled: Arc<Notify>,
    /// The prefetch buffer this slot takes its tasks from; `None` when it reserves its own.
    pub(super) local: Option<Arc<Local<T>>>,
    /// Where successful acks go to be sent in batches; `None` when the slot acks on its own.
    pub(super) acks: Option<mpsc::Sender<Ack>>,
    /// The tokens of running tasks, which the cancel listener fires.
    pub(super) running: Arc<Running>,
}

/// How a failed attempt ends.
enum Failure {
    /// Retry after the policy's delay, or dead-letter at the last attempt.
    Attempt,
    /// Dead-letter now: a retry would not help.
    Permanent,
}

/// A running task's facts the slot needs once its handler is done.
struct Held {
    id: String,
    delivery: Delivery,
    envelope: Envelope,
    attempt: u32,
    max: u32,
    policy: RetryPolicy,
}

impl<T, H, Fut, O> Slot<T, H>
where
    T: Serialize + DeserializeOwned + Send + 'static,
    H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<O, HandlerError>> + Send + 'static,
    O: TaskOutput,
{
    pub(super) async fn run(mut self) {
        match self.local.clone() {
            Some(local) => self.run_buffered(local).await,
            None => self.run_reserving().await,
        }
    }

    /// Takes tasks from the prefetch buffer until the consumer stops; a task left in the buffer
    /// then is the feeder's to give back.
    async fn run_buffered(&mut self, local: Arc<Local<T>>) {
        loop {
            // Registered before the look, so a refill in between is not missed.
            let ready = local.ready.notified();
            if *self.stop.borrow() {
                return;
            }
            if let Some(reserved) = local.take() {
                self.process(reserved).await;
                self.settled.notify_waiters();
                continue;
            }
            bump(&local.waited);
            tokio::select! {
                _ = ready => {}
                _ = self.stop.wait_for(|s| *s) => return,
            }
        }
    }

    /// Reserves one task per call (prefetching off).
    async fn run_reserving(&mut self) {
        let mut pause = Duration::from_millis(50);
        while !*self.stop.borrow() {
            // Reserve is never cancelled midway, so a task is never reserved and forgotten.
            match self
                .queue
                .reserve(self.config.poll, self.config.visibility)
                .await
            {
                Ok(Some(reserved)) => {
                    pause = Duration::from_millis(50);
                    self.process(reserved).await;
                    self.settled.notify_waiters();
                }
                Ok(None) => {}
                Err(e) => {
                    bump(&self.counters.errors);
                    tracing::warn!(queue = self.queue.name(), error = %e, "reserve failed");
                    tokio::select! {
                        _ = self.stop.wait_for(|s| *s) => {}
                        _ = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
    fn note(&self, what: &'static str, res: Result<bool>, ok: &AtomicU64) {
        self.counters.note(self.queue.name(), what, res, ok);
    }

    async fn process(&mut self, reserved: Reserved<T>) {
        let c = self.counters.clone();
        let mut task = match reserved {
            Reserved::Malformed { delivery, error } => {
                tracing::warn!(queue = self.queue.name(), error = %error, "dead-lettering a malformed task");
                let res = self.queue.fail(&delivery, &delivery.body).await;
                self.note("fail", res, &c.malformed);
                return;
            }
            Reserved::Task(task) => task,
        };
        if task.envelope.expired_at(unix_now()) {
            self.ack(&task.delivery, &task.id, true).await;
            return;
        }
        let attempt = task.attempt.max(1);
        let max = task
            .envelope
            .max_attempts()
            .unwrap_or(self.config.max_attempts)
            .max(1);
        task.envelope.set_attempt(attempt);
        task.envelope.set_max_attempts(max);
        let held = Held {
            id: task.id.clone(),
            delivery: task.delivery.clone(),
            envelope: task.envelope.clone(),
            attempt,
            max,
            policy: task
                .envelope
                .retry()
                .unwrap_or_default()
                .or(self.config.retry_policy()),
        };
        if attempt > max {
            // Earlier deliveries died with their workers (or timed out) up to the maximum: the
            // task is not run again (the seed's consumer looped on such a task forever).
            let res = self
                .queue
                .fail(&held.delivery, &held.envelope.to_bytes())
                .await;
            self.note("dead-letter", res, &c.dead_lettered);
            return;
        }

        let timeout = task.envelope.timeout().or(self.config.timeout);
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        task.deadline = deadline.map(Instant::into_std);
        let token = task.cancel.clone();
        self.running
            .insert(&held.id, &held.delivery.receipt, &token);
        if *self.stop.borrow() {
            token.fire(CancelReason::Shutdown);
        }

        // The handler runs in its own task, so a panic is a failure, not a dead slot.
        let mut handle = tokio::spawn((self.handler)(task));
        let beat = beat_of(&self.config);
        let mut ticker = tokio::time::interval_at(Instant::now() + beat, beat);
        let mut stop = self.stop.clone();
        let mut beating = true;
        let mut stopping = false;
        let mut token_seen = false;
        // When the handler is aborted: set once the token fires for a cancel or a timeout
        // (`cancel_grace`) or the consumer stops (`shutdown_grace`), the earliest kept.
        let mut abort_at: Option<Instant> = None;
        let later = |grace: Duration| Instant::now().checked_add(grace);
        let earliest = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let outcome = loop {
            tokio::select! {
                res = &mut handle => break Some(res),
                _ = ticker.tick(), if beating => {
                    match self.queue.extend(&held.delivery, self.config.visibility).await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(queue = self.queue.name(), "reservation lost while running"),
                        Err(Error::Cancelled { .. }) => {
                            // The guaranteed path of a cancel: stop beating, tell the handler.
                            beating = false;
                            token.fire(CancelReason::Cancelled);
                        }
                        Err(e) => {
                            bump(&c.errors);
                            tracing::warn!(queue = self.queue.name(), error = %e, "heartbeat failed");
                        }
                    }
                }
                _ = sleep_until(deadline), if deadline.is_some() && !token_seen => {
                    token.fire(CancelReason::TimedOut);
                }
                reason = token.cancelled(), if !token_seen => {
                    token_seen = true;
                    if reason != CancelReason::Shutdown {
                        abort_at = earliest(abort_at, later(self.config.cancel_grace));
                    }
                }
                // The guard `wait_for` returns is not `Send`: dropped inside.
                _ = async { let _ = stop.wait_for(|s| *s).await; }, if !stopping => {
                    stopping = true;
                    token.fire(CancelReason::Shutdown);
                    abort_at = earliest(abort_at, later(self.config.shutdown_grace));
                }
                _ = sleep_until(abort_at), if abort_at.is_some() => {
                    handle.abort();
                    // Gone before its task is given back or ended, so no two handlers of one
                    // task overlap here (bounded: a handler blocking its thread never yields).
                    let _ = tokio::time::timeout(Duration::from_secs(1), &mut handle).await;
                    break None;
                }
            }
        };
        self.running.remove(&held.id, &held.delivery.receipt);
        match (token.reason(), outcome) {
            // Cancelled: whatever the handler did, the backend ends the task `cancelled` (a
            // release answers `Cancelled`); never retried, no result.
            (Some(CancelReason::Cancelled), _) => self.release_cancelled(&held).await,
            (Some(CancelReason::TimedOut), _) => {
                let t = timeout.map_or_else(String::new, |t| seconds_value(t).to_string());
                bump(&c.timed_out);
                self.failed(held, format!("timed out after {t} s"), Failure::Attempt)
                    .await;
            }
            (_, None) => {
                // Aborted at shutdown: given back at once for another worker.
                let res = self
                    .queue
                    .nack(&held.delivery, &held.envelope, Duration::ZERO)
                    .await;
                self.note("release", res, &c.released);
            }
            (_, Some(Ok(Ok(output)))) => self.succeeded(held, output).await,
            (reason, Some(Ok(Err(e)))) => {
                let kind = if is_permanent(&e) {
                    Failure::Permanent
                } else if reason == Some(CancelReason::Shutdown) {
                    // Stopped because we asked it to: not a failed attempt.
                    let res = self
                        .queue
                        .nack(&held.delivery, &held.envelope, Duration::ZERO)
                        .await;
                    self.note("release", res, &c.released);
                    return;
                } else {
                    Failure::Attempt
                };
                self.failed(held, e.to_string(), kind).await;
            }
            (_, Some(Err(e))) => {
                let message = if e.is_panic() {
                    format!("handler panicked: {}", panic_message(e.into_panic()))
                } else {
                    format!("handler task failed: {e}")
                };
                self.failed(held, message, Failure::Attempt).await;
            }
        }
    }

    /// Ends a task that was cancelled while it ran: a release, which the backend answers
    /// `Cancelled` having ended it so. A backend that had not recorded the cancel requeues it.
    async fn release_cancelled(&self, held: &Held) {
        let c = &self.counters;
        match self.queue.release(&held.delivery, Duration::ZERO).await {
            Err(Error::Cancelled { .. }) => bump(&c.cancelled),
            res => self.note("release", res, &c.released),
        }
    }

    /// A handler succeeded: ack, or complete with its result. A result the backend would not
    /// store is a permanent failure (a retry would not shrink it).
    async fn succeeded(&self, held: Held, output: O) {
        let result = match output.into_result() {
            Ok(None) => return self.ack(&held.delivery, &held.id, false).await,
            Ok(Some(result)) => result,
            Err(e) => return self.failed(held, e.to_string(), Failure::Permanent).await,
        };
        let limit = self.queue.backend().max_result_bytes();
        if result.len() > limit {
            let message = format!(
                "the result is {} bytes, more than the {limit} a task may store",
                result.len()
            );
            return self.failed(held, message, Failure::Permanent).await;
        }
        let res = self
            .queue
            .backend()
            .queue_complete(self.queue.name(), &held.delivery.receipt, &result)
            .await;
        match res {
            Err(Error::InvalidInput { field, reason }) if field == "result" => {
                self.failed(held, format!("result {reason}"), Failure::Permanent)
                    .await;
            }
            res => self.note("complete", res, &self.counters.acked),
        }
    }

    /// Acks a task whose handler succeeded (or that expired): hands it to the acker when acks
    /// are batched, else acks it now. Counted once the ack lands.
    async fn ack(&self, delivery: &Delivery, id: &str, expired: bool) {
        if let Some(acks) = &self.acks {
            let ack = Ack {
                receipt: delivery.receipt.clone(),
                expired,
                id: id.to_string(),
            };
            if acks.send(ack).await.is_ok() {
                return;
            }
            // The acker is gone (only when its task was aborted): ack here instead.
        }
        let res = self.queue.ack(delivery).await;
        let counter = if expired {
            &self.counters.expired
        } else {
            &self.counters.acked
        };
        self.note("ack", res, counter);
    }

    /// A failed attempt: logged, recorded as `last_error`, then retried after the task's
    /// policy's delay, or dead-lettered at its last attempt or when permanent.
    async fn failed(&self, held: Held, message: String, kind: Failure) {
        let c = &self.counters;
        let Held {
            id,
            delivery,
            mut envelope,
            attempt,
            max,
            policy,
        } = held;
        let last = matches!(kind, Failure::Permanent) || attempt >= max;
        tracing::warn!(
            task_id = %id,
            queue = self.queue.name(),
            attempt,
            max_attempts = max,
            dead_letter = last,
            permanent = matches!(kind, Failure::Permanent),
            error = %message,
            "task handler failed"
        );
        envelope.set_last_error(&LastError {
            message,
            attempt,
            at: unix_now(),
        });
        if last {
            let res = self.queue.fail(&delivery, &envelope.to_bytes()).await;
            self.note("dead-letter", res, &c.dead_lettered);
        } else {
            let delay = policy.delay(attempt);
            let res = self.queue.nack(&delivery, &envelope, delay).await;
            self.note("retry", res, &c.retried);
        }
    }
}

/// Sleeps until `at`, or for ever without one (a `select!` branch guarded on `is_some`).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The text of a panic payload (`panic!` with a literal or a formatted message).
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_string(),
            Err(_) => "a non-text payload".to_string(),
        },
    }
}
