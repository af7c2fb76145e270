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
//!
//! By default a consumer prefetches and batches (ADR 0376, [`Batching`]): one feeder keeps a
//! local buffer of reserved tasks filled with `queue_reserve_many` (as many as the consumer's
//! concurrency, refilled once half of it is taken, and grown up to 16-fold while the handlers
//! outrun the backend's round trips), a keeper extends the buffered
//! tasks' reservations on the heartbeat period so none lapses while it waits, and successful
//! acks are gathered and sent with `queue_ack_many` (up to 256 at once, or after 1 ms). Shutdown
//! and dropping the handle give every buffered, unstarted task back at once (`queue_release`,
//! no delay). A task that was prefetched but not started when the process dies comes back after
//! its visibility, like any reservation of a dead worker; a task whose handler succeeded but
//! whose ack had not been sent yet runs again after its visibility too (the same as a worker
//! dying just before its ack). Retries, dead letters and malformed bodies are ended one by one,
//! as without batching.
//!
//! Task control (ADR 0380, section 8): each [`Task`] carries a [`CancelToken`](crate::CancelToken)
//! and its `deadline`. The token fires when the task is cancelled (the notice on
//! `fleet.cancel.{queue}`, which the consumer follows with one subscription, or a heartbeat's
//! `Cancelled`), when its timeout passes (the envelope's `timeout_seconds`, else
//! [`ConsumerConfig::timeout`]), and at shutdown; a handler still running `cancel_grace` after a
//! cancel or a timeout is aborted. A cancelled task is ended with a release the backend answers
//! `Cancelled`, counted `cancelled`, and never retried. A timed-out attempt is a failed one
//! ("timed out after {t} s"). The retry delay is the task's policy (the envelope's `retry`, else
//! the config's `backoff_unit`, `backoff_cap`, `backoff` and `jitter`). A [`Permanent`] error is
//! dead-lettered at once. A handler returning [`Output<R>`] has `R` stored as JSON with the
//! task's end (`queue_complete`); a result larger than the backend takes is dead-lettered as
//! permanent. A handler that fails after its token fired for shutdown has its task given back
//! (no delay, not a failed attempt).

mod acker;
mod buffer;
mod cancel;
mod config;
mod outcome;
mod slot;
mod stats;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::BoxError;
use switchyard_core::fleet::{FleetBackend, MAX_BATCH};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use super::queue::{Queue, Task};
use acker::acker;
use buffer::{GROWTH, Local, feeder, keeper};
use cancel::{Running, listener};
pub use config::{Batching, ConsumerConfig};
pub use outcome::{Output, Permanent, TaskOutput};
use slot::Slot;
pub use stats::ConsumerStats;
use stats::{Counters, bump};

/// What a handler returns on failure.
pub type HandlerError = BoxError;

/// Starts consumers; see the module docs.
#[derive(Debug)]
pub struct Consumer;

/// A running consumer. Dropping it without [`ConsumerHandle::shutdown`] stops reserving too and
/// still gives the prefetched tasks back, but does not wait.
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

    /// Stops reserving, gives every prefetched task that has not started back at once (no
    /// delay), lets running handlers finish within the grace period (releasing the rest), sends
    /// the acks still waiting in a batch, and returns the final counts.
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

impl Consumer {
    /// Runs `handler` on `queue`'s tasks with `config.concurrency` slots, on the current tokio
    /// runtime, until [`ConsumerHandle::shutdown`]. Prefetches and batches acks with the default
    /// [`Batching`]. The handler returns `Ok(())`, or `Ok(Output(r))` to store `r` as the task's
    /// result.
    pub fn spawn<T, H, Fut, O>(
        queue: Queue<T>,
        config: ConsumerConfig,
        handler: H,
    ) -> ConsumerHandle
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, HandlerError>> + Send + 'static,
        O: TaskOutput,
    {
        Consumer::spawn_with(queue, config, Batching::default(), handler)
    }

    /// [`Consumer::spawn`] with explicit prefetch and ack-batching settings.
    pub fn spawn_with<T, H, Fut, O>(
        queue: Queue<T>,
        config: ConsumerConfig,
        batching: Batching,
        handler: H,
    ) -> ConsumerHandle
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, HandlerError>> + Send + 'static,
        O: TaskOutput,
    {
        let (stop, stop_rx) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let handler = Arc::new(handler);
        let settled = Arc::new(Notify::new());
        let concurrency = config.concurrency.max(1);
        let mut tasks = Vec::new();

        let buffer = batching.buffer(concurrency);
        // Grown only when the size is left to the consumer: an explicit size is kept.
        let most = match batching.prefetch {
            None => buffer.saturating_mul(GROWTH).min(MAX_BATCH).max(buffer),
            Some(_) => buffer,
        };
        let local = (buffer > 0).then(|| Arc::new(Local::new()));
        if let Some(local) = &local {
            tasks.push(tokio::spawn(feeder(
                queue.clone(),
                local.clone(),
                (buffer, most),
                config.clone(),
                stop_rx.clone(),
                counters.clone(),
                settled.clone(),
            )));
            tasks.push(tokio::spawn(keeper(
                queue.clone(),
                local.clone(),
                config.clone(),
                stop_rx.clone(),
                counters.clone(),
                settled.clone(),
            )));
        }
        let running = Arc::new(Running::default());
        tasks.push(tokio::spawn(listener(
            queue.clone(),
            running.clone(),
            local.clone(),
            stop_rx.clone(),
            counters.clone(),
            settled.clone(),
        )));
        let batch = batching.acks();
        let acks = if batch > 1 {
            // Room for two full batches: slots rarely wait for the acker, and a slot that does
            // is held back only while one batch is being sent.
            let (tx, rx) = mpsc::channel(batch.saturating_mul(2));
            tasks.push(tokio::spawn(acker(
                queue.clone(),
                rx,
                batch,
                batching.ack_window,
                counters.clone(),
                settled.clone(),
            )));
            Some(tx)
        } else {
            None
        };
        for _ in 0..concurrency {
            let slot = Slot {
                queue: queue.clone(),
                config: config.clone(),
                handler: handler.clone(),
                counters: counters.clone(),
                stop: stop_rx.clone(),
                settled: settled.clone(),
                local: local.clone(),
                acks: acks.clone(),
                running: running.clone(),
            };
            tasks.push(tokio::spawn(slot.run()));
        }
        // The slots hold the only senders: the acker sends what is left and ends once every
        // slot has ended.
        drop(acks);
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

/// How often at most a consumer runs the queue's retention and repair (`queue_maintain`).
const MAINTAIN_EVERY: Duration = Duration::from_secs(10);

/// Sweeps the queue's lapsed reservations every `every`, and runs `queue_maintain` with it at
/// most every 10 s (ADR 0380, section 5); a backend that keeps no task records (it answers
/// `Rejected`) is not asked again.
async fn sweeper<T: Serialize + DeserializeOwned>(
    queue: Queue<T>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
) {
    let mut maintained: Option<tokio::time::Instant> = None;
    let mut records = true;
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = queue.sweep_expired().await {
            bump(&counters.errors);
            tracing::warn!(queue = queue.name(), error = %e, "sweep failed");
        }
        if records && maintained.is_none_or(|at| at.elapsed() >= MAINTAIN_EVERY) {
            maintained = Some(tokio::time::Instant::now());
            match queue.maintain().await {
                Ok(_) => {}
                Err(switchyard_core::Error::Rejected { .. }) => records = false,
                Err(e) => {
                    bump(&counters.errors);
                    tracing::warn!(queue = queue.name(), error = %e, "maintaining task records failed");
                }
            }
        }
    }
}
