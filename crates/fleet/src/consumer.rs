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

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::BoxError;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use switchyard_core::fleet::{FleetBackend, MAX_BATCH, Receipt};
use tokio::sync::{Notify, mpsc};

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

/// How a [`Consumer`] prefetches tasks and batches its acks (ADR 0376). The default is on and
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
    fn buffer(&self, concurrency: usize) -> usize {
        self.prefetch.unwrap_or(concurrency).min(MAX_BATCH)
    }

    /// The ack batch size, capped at [`MAX_BATCH`]; 1 means no batching.
    fn acks(&self) -> usize {
        self.ack_batch.clamp(1, MAX_BATCH)
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

struct Slot<T, H> {
    queue: Queue<T>,
    config: ConsumerConfig,
    handler: Arc<H>,
    counters: Arc<Counters>,
    stop: watch::Receiver<bool>,
    settled: Arc<Notify>,
    /// The prefetch buffer this slot takes its tasks from; `None` when it reserves its own.
    local: Option<Arc<Local<T>>>,
    /// Where successful acks go to be sent in batches; `None` when the slot acks on its own.
    acks: Option<mpsc::Sender<Ack>>,
}

/// The prefetched tasks of one consumer: filled by its feeder, emptied by its slots, extended by
/// its keeper, and given back by the feeder when the consumer stops.
struct Local<T> {
    buf: Mutex<VecDeque<Reserved<T>>>,
    /// Tasks were added (slots wait on it).
    ready: Notify,
    /// A task was taken (the feeder waits on it for room).
    room: Notify,
    /// How many times a slot found the buffer empty and waited (the feeder grows the buffer
    /// when this moves during a refill).
    waited: AtomicU64,
}

impl<T> Local<T> {
    fn new() -> Self {
        Local {
            buf: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            room: Notify::new(),
            waited: AtomicU64::new(0),
        }
    }

    /// The buffer, even after a panic elsewhere while it was held (the buffer's items are whole
    /// either way, so going on is safe).
    fn lock(&self) -> MutexGuard<'_, VecDeque<Reserved<T>>> {
        self.buf.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    fn take(&self) -> Option<Reserved<T>> {
        let task = self.lock().pop_front();
        if task.is_some() {
            self.room.notify_one();
        }
        task
    }
}

/// A successful outcome waiting to be acked in a batch, and which count it bumps once acked.
struct Ack {
    receipt: Receipt,
    expired: bool,
}

impl Consumer {
    /// Runs `handler` on `queue`'s tasks with `config.concurrency` slots, on the current tokio
    /// runtime, until [`ConsumerHandle::shutdown`]. Prefetches and batches acks with the default
    /// [`Batching`].
    pub fn spawn<T, H, Fut>(queue: Queue<T>, config: ConsumerConfig, handler: H) -> ConsumerHandle
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        Consumer::spawn_with(queue, config, Batching::default(), handler)
    }

    /// [`Consumer::spawn`] with explicit prefetch and ack-batching settings.
    pub fn spawn_with<T, H, Fut>(
        queue: Queue<T>,
        config: ConsumerConfig,
        batching: Batching,
        handler: H,
    ) -> ConsumerHandle
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
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
            )));
        }
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

/// The heartbeat period of a config: its own, or a third of the visibility; at least 10 ms.
fn beat_of(config: &ConsumerConfig) -> Duration {
    config
        .heartbeat
        .unwrap_or(config.visibility / 3)
        .max(Duration::from_millis(10))
}

/// How far the feeder may grow the buffer over its starting size (see [`feeder`]).
const GROWTH: usize = 16;

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
async fn feeder<T: Serialize + DeserializeOwned>(
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
/// slot's. A buffered task whose reservation was already lost is dropped from the buffer.
async fn keeper<T: Serialize + DeserializeOwned>(
    queue: Queue<T>,
    local: Arc<Local<T>>,
    config: ConsumerConfig,
    mut stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
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
        for (delivery, answer) in held.iter().zip(answers) {
            match answer {
                Ok(true) => {}
                // Either a slot took and ended it meanwhile, or the reservation lapsed.
                Ok(false) => gone.push(delivery.receipt.clone()),
                Err(e) => {
                    bump(&counters.errors);
                    tracing::warn!(queue = queue.name(), error = %e, "heartbeat of a prefetched task failed");
                }
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

/// Sends successful acks in batches: takes the first waiting ack, then whatever else arrives
/// within `window` (or until `batch` are gathered), and acks them in one `queue_ack_many` call.
/// Ends, after sending what is left, when every slot has ended.
async fn acker<T: Serialize + DeserializeOwned + Send + 'static>(
    queue: Queue<T>,
    mut rx: mpsc::Receiver<Ack>,
    batch: usize,
    window: Duration,
    counters: Arc<Counters>,
    settled: Arc<Notify>,
) {
    // Two batches may be on their way at once, so gathering the next batch does not wait for a
    // commit; the order of concurrent acks of different tasks is not observable.
    let mut flights = tokio::task::JoinSet::new();
    while let Some(first) = rx.recv().await {
        let mut pending: Vec<Ack> = Vec::with_capacity(batch);
        pending.push(first);
        let deadline = tokio::time::Instant::now() + window;
        while pending.len() < batch {
            match rx.try_recv() {
                Ok(ack) => pending.push(ack),
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some(ack)) => pending.push(ack),
                        Ok(None) | Err(_) => break,
                    }
                }
            }
        }
        while flights.len() >= 2 {
            let _ = flights.join_next().await;
        }
        flights.spawn(flush(
            queue.clone(),
            pending,
            counters.clone(),
            settled.clone(),
        ));
    }
    while flights.join_next().await.is_some() {}
}

/// Acks one batch in one `queue_ack_many` call and counts each answer.
async fn flush<T: Serialize + DeserializeOwned>(
    queue: Queue<T>,
    pending: Vec<Ack>,
    counters: Arc<Counters>,
    settled: Arc<Notify>,
) {
    let receipts: Vec<Receipt> = pending.iter().map(|a| a.receipt.clone()).collect();
    match queue
        .backend()
        .queue_ack_many(queue.name(), &receipts)
        .await
    {
        Ok(answers) => {
            for (ack, current) in pending.iter().zip(answers) {
                match (current, ack.expired) {
                    (true, false) => bump(&counters.acked),
                    (true, true) => bump(&counters.expired),
                    (false, _) => bump(&counters.lost),
                }
            }
        }
        Err(e) => {
            bump(&counters.errors);
            tracing::warn!(
                queue = queue.name(),
                error = %e,
                tasks = pending.len(),
                "batched ack failed; these tasks come back after their visibility"
            );
        }
    }
    settled.notify_waiters();
}

impl<T, H, Fut> Slot<T, H>
where
    T: Serialize + DeserializeOwned + Send + 'static,
    H: Fn(Task<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    async fn run(mut self) {
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
