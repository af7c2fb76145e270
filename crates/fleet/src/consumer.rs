//! The worker loop: runs a handler on a [`Queue`]'s tasks with concurrency N (the seed's
//! `SlotRunner`, with its flaws fixed).
//!
//! Per task: a body that is not a valid envelope is dead-lettered once, atomically; an
//! expired task (`now − submitted_at > ttl_seconds`) is acked and dropped; otherwise the handler
//! runs while a heartbeat extends the visibility. Success acks. Failure (an error or a
//! panic) retries after `min(60, 2^(attempt−1))` s into the task's own tier, or, at
//! `max_attempts`, dead-letters the updated envelope in one step. The attempt is the
//! backend's delivery count, so crashes and timeouts count: a delivery past the maximum
//! (its predecessors died with their workers) is dead-lettered without running.
//!
//! Every handler failure is logged (`tracing`, warn: task id, queue, attempt, error) and kept in
//! the envelope as `last_error` before the retry or the dead letter, so a dead letter says why
//! it died (ADR 0250).
//!
//! Shutdown stops reserving, gives running handlers `shutdown_grace` to finish, then aborts the
//! rest and releases their tasks at once (nack, no delay) for another worker.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::BoxError;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use switchyard_core::fleet::FleetBackend;
use tokio::sync::Notify;

use super::envelope::LastError;
use super::queue::{Queue, Reserved, Task};
use super::unix_now;

/// What a handler returns on failure.
pub type HandlerError = BoxError;

/// Settings of a [`Consumer`].
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
    /// Retry delay unit: attempt `a` waits `min(backoff_cap, backoff_unit · 2^(a−1))`.
    /// Default 1 s.
    pub backoff_unit: Duration,
    /// Longest retry delay. Default 60 s.
    pub backoff_cap: Duration,
    /// Also sweep lapsed reservations of this queue this often (sweeping is atomic, so every
    /// consumer may do it). Default every 10 s; `None` leaves it to someone else.
    pub sweep_every: Option<Duration>,
    /// How long shutdown waits for running handlers before releasing their tasks. Default 30 s.
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
        }
    }
}

impl ConsumerConfig {
    /// The delay before retry number `attempt` (1-based): `min(cap, unit · 2^(attempt−1))`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        self.backoff_unit
            .saturating_mul(1u32 << exp)
            .min(self.backoff_cap)
    }
}

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
struct Counters {
    acked: AtomicU64,
    retried: AtomicU64,
    dead_lettered: AtomicU64,
    expired: AtomicU64,
    malformed: AtomicU64,
    released: AtomicU64,
    lost: AtomicU64,
    errors: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> ConsumerStats {
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

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// Starts consumers; see the module docs.
#[derive(Debug)]
pub struct Consumer;

/// A running consumer. Dropping it without [`ConsumerHandle::shutdown`] stops reserving too,
/// but does not wait.
#[derive(Debug)]
pub struct ConsumerHandle {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    counters: Arc<Counters>,
    backend: Arc<dyn FleetBackend>,
    queue: String,
    settled: Arc<Notify>,
}

impl ConsumerHandle {
    /// What the consumer did so far.
    pub fn stats(&self) -> ConsumerStats {
        self.counters.snapshot()
    }

    /// Waits until the queue is drained: nothing waiting in any tier, nothing reserved and no
    /// delayed retry pending, as the backend counts them (so tasks of other consumers and
    /// producers count too). Wakes when one of this consumer's tasks settles, and looks again
    /// every 100 ms for work that settled elsewhere. A backend error ends the wait with it.
    pub async fn wait_idle(&self) -> switchyard_core::Result<()> {
        loop {
            // Registered before the look, so a task settling in between is not missed.
            let settled = self.settled.notified();
            let s = self.backend.queue_stats(&self.queue).await?;
            if s.high == 0 && s.normal == 0 && s.low == 0 && s.in_flight == 0 && s.scheduled == 0 {
                return Ok(());
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), settled).await;
        }
    }

    /// [`ConsumerHandle::wait_idle`] under the other name people look for.
    pub async fn drained(&self) -> switchyard_core::Result<()> {
        self.wait_idle().await
    }

    /// Stops reserving, lets running handlers finish within the grace period (releasing the
    /// rest), and returns the final counts.
    pub async fn shutdown(mut self) -> ConsumerStats {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        self.counters.snapshot()
    }
}

impl Drop for ConsumerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

struct Slot<T, H> {
    queue: Queue<T>,
    config: ConsumerConfig,
    handler: Arc<H>,
    counters: Arc<Counters>,
    stop: watch::Receiver<bool>,
    settled: Arc<Notify>,
}

impl Consumer {
    /// Runs `handler` on `queue`'s tasks with `config.concurrency` slots, on the current tokio
    /// runtime, until [`ConsumerHandle::shutdown`].
    pub fn spawn<T, H, Fut>(queue: Queue<T>, config: ConsumerConfig, handler: H) -> ConsumerHandle
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        let (stop, stop_rx) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let handler = Arc::new(handler);
        let settled = Arc::new(Notify::new());
        let mut tasks = Vec::new();
        for _ in 0..config.concurrency.max(1) {
            let slot = Slot {
                queue: queue.clone(),
                config: config.clone(),
                handler: handler.clone(),
                counters: counters.clone(),
                stop: stop_rx.clone(),
                settled: settled.clone(),
            };
            tasks.push(tokio::spawn(slot.run()));
        }
        if let Some(every) = config.sweep_every.filter(|d| !d.is_zero()) {
            tasks.push(tokio::spawn(sweeper(
                queue.clone(),
                every,
                stop_rx.clone(),
                counters.clone(),
            )));
        }
        ConsumerHandle {
            stop,
            tasks,
            counters,
            backend: queue.backend().clone(),
            queue: queue.name().to_string(),
            settled,
        }
    }
}

async fn sweeper<T: Serialize + DeserializeOwned>(
    queue: Queue<T>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
) {
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = queue.sweep_expired().await {
            bump(&counters.errors);
            tracing::warn!(queue = queue.name(), error = %e, "sweep failed");
        }
    }
}

impl<T, H, Fut> Slot<T, H>
where
    T: Serialize + DeserializeOwned + Send + 'static,
    H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    async fn run(mut self) {
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
            let res = self.queue.ack(&task.delivery).await;
            self.note("ack", res, &c.expired);
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
        let beat = self
            .config
            .heartbeat
            .unwrap_or(self.config.visibility / 3)
            .max(Duration::from_millis(10));
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
            Some(Ok(Ok(()))) => {
                let res = self.queue.ack(&delivery).await;
                self.note("ack", res, &c.acked);
            }
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

    /// A failed attempt: logged, recorded as `last_error`, then retried or dead-lettered.
    async fn failed(
        &self,
        delivery: switchyard_core::Delivery,
        mut envelope: super::Envelope,
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
