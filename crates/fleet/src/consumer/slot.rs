//! One slot of a consumer: takes a task, runs the handler with its heartbeat, and ends the
//! delivery (ack, retry, dead letter or release).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, mpsc, watch};

use super::HandlerError;
use super::acker::Ack;
use super::buffer::Local;
use super::config::{ConsumerConfig, beat_of};
use super::stats::{Counters, bump};
use crate::envelope::LastError;
use crate::queue::{Queue, Reserved, Task};
use crate::unix_now;

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
}

impl<T, H, Fut> Slot<T, H>
where
    T: Serialize + DeserializeOwned + Send + 'static,
    H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
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

    fn note(&self, what: &'static str, res: switchyard_core::Result<bool>, ok: &AtomicU64) {
        match res {
            Ok(true) => bump(ok),
            Ok(false) => bump(&self.counters.lost),
            Err(e) => {
                bump(&self.counters.errors);
                tracing::warn!(queue = self.queue.name(), error = %e, "{what} failed");
            }
        }
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
            self.ack(&task.delivery, true).await;
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
        let envelope = task.envelope.clone();
        let delivery = task.delivery.clone();
        if attempt > max {
            // Earlier deliveries died with their workers (or timed out) up to the maximum: the
            // task is not run again (the seed's consumer looped on such a task forever).
            let res = self.queue.fail(&delivery, &envelope.to_bytes()).await;
            self.note("dead-letter", res, &c.dead_lettered);
            return;
        }

        // The handler runs in its own task, so a panic is a failure, not a dead slot.
        let mut handle = tokio::spawn((self.handler)(task));
        let beat = beat_of(&self.config);
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
        let grace = self.config.shutdown_grace;
        let mut stop = self.stop.clone();
        let give_up = async move {
            let _ = stop.wait_for(|s| *s).await;
            tokio::time::sleep(grace).await;
        };
        tokio::pin!(give_up);
        let outcome = loop {
            tokio::select! {
                res = &mut handle => break Some(res),
                _ = ticker.tick() => {
                    match self.queue.extend(&delivery, self.config.visibility).await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(queue = self.queue.name(), "reservation lost while running"),
                        Err(e) => {
                            bump(&c.errors);
                            tracing::warn!(queue = self.queue.name(), error = %e, "heartbeat failed");
                        }
                    }
                }
                _ = &mut give_up => {
                    handle.abort();
                    break None;
                }
            }
        };
        match outcome {
            None => {
                let res = self.queue.nack(&delivery, &envelope, Duration::ZERO).await;
                self.note("release", res, &c.released);
            }
            Some(Ok(Ok(()))) => self.ack(&delivery, false).await,
            Some(Ok(Err(e))) => {
                self.failed(delivery, envelope, attempt, max, e.to_string())
                    .await
            }
            Some(Err(e)) => {
                let message = if e.is_panic() {
                    format!("handler panicked: {}", panic_message(e.into_panic()))
                } else {
                    format!("handler task failed: {e}")
                };
                self.failed(delivery, envelope, attempt, max, message).await;
            }
        }
    }

    /// Acks a task whose handler succeeded (or that expired): hands it to the acker when acks
    /// are batched, else acks it now. Counted once the ack lands.
    async fn ack(&self, delivery: &switchyard_core::Delivery, expired: bool) {
        if let Some(acks) = &self.acks {
            let ack = Ack {
                receipt: delivery.receipt.clone(),
                expired,
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

    /// A failed attempt: logged, recorded as `last_error`, then retried or dead-lettered.
    async fn failed(
        &self,
        delivery: switchyard_core::Delivery,
        mut envelope: crate::Envelope,
        attempt: u32,
        max: u32,
        message: String,
    ) {
        let c = &self.counters;
        let last = attempt >= max;
        tracing::warn!(
            task_id = %envelope.id(),
            queue = self.queue.name(),
            attempt,
            max_attempts = max,
            dead_letter = last,
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
            let delay = self.config.backoff(attempt);
            let res = self.queue.nack(&delivery, &envelope, delay).await;
            self.note("retry", res, &c.retried);
        }
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
