//! The queue maintainer: returns lapsed reservations to their queues, moves due scheduled tasks
//! to their tiers and evicts idle workers, whoever the workers of a queue are (ADR 0352).
//!
//! A [`Consumer`](super::Consumer) sweeps the queue it serves, and a reserve moves that queue's
//! due tasks, so a queue served only by workers of ours kept itself going. A queue served by
//! HTTP workers, or by the Python seed's workers, did not: a reservation whose worker died
//! stayed in flight for ever, and a delayed task in a form the seed does not read was never
//! delivered. The maintainer does both for every queue it knows, on a short period, with no
//! worker of ours running: a lapsed reservation is reservable again within its visibility, one
//! period and the time of one round.
//!
//! Each round also runs `queue_maintain` on every known queue (ADR 0380, section 5): the
//! retention of finished task records and of the end-event log, and the repair of records a
//! consumer without records moved. A backend that keeps no task records answers it `Rejected`;
//! that queue is then not asked again.
//!
//! Each step is one atomic, idempotent backend call (`queue_sweep_expired`, guarantee
//! `queue.sweep`; `queue_promote_due`, guarantee `queue.promote_due`), so any number of maintainers
//! may run against one backend — several gateways, a library process beside them — and a seed
//! worker may share the queue: a task is returned or moved once, whoever gets there first.
//!
//! The queues it knows: those it was given ([`MaintainerOptions::queue`]), those
//! [`MaintainerHandle::note_queue`] told it of (the gateway notes every queue it reserves on or
//! submits to, so a reservation it handed out is maintained from that moment), and those the
//! backend lists as holding a task (`queue_names`, guarantee `queue.names`), read again every
//! [`MaintainerOptions::discover_every`]: a queue written only by other processes is found
//! within that time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchyard_core::fleet::FleetBackend;
use switchyard_core::{Error, Result};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::registry::WorkerRegistry;
use super::unix_now;

/// The most queues maintained at once in one round: a backend with thousands of queues is
/// swept a few dozen calls at a time, not with one burst.
const CONCURRENT_QUEUES: usize = 16;

/// Settings of a [`Maintainer`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MaintainerOptions {
    /// Time between rounds (each round sweeps, promotes and maintains every known queue). Default 1 s;
    /// at least 10 ms.
    pub period: Duration,
    /// How often the backend's list of queues is read again. Default 5 s. Listing is a scan of
    /// the queue keys on Redis, so it runs less often than the rounds.
    pub discover_every: Duration,
    /// Queues maintained whether or not they hold a task.
    pub queues: Vec<String>,
    /// Remove registered workers whose last heartbeat is older than this (the registry's idle
    /// eviction); `None` keeps every worker. Default `None`.
    pub worker_idle_ttl: Option<Duration>,
}

impl Default for MaintainerOptions {
    fn default() -> Self {
        MaintainerOptions {
            period: Duration::from_secs(1),
            discover_every: Duration::from_secs(5),
            queues: Vec::new(),
            worker_idle_ttl: None,
        }
    }
}

impl MaintainerOptions {
    /// Sets the period between rounds.
    pub fn period(mut self, period: Duration) -> Self {
        self.period = period;
        self
    }

    /// Sets how often the backend's queues are listed again.
    pub fn discover_every(mut self, every: Duration) -> Self {
        self.discover_every = every;
        self
    }

    /// Adds a queue to maintain whether or not it holds a task.
    pub fn queue(mut self, name: impl Into<String>) -> Self {
        self.queues.push(name.into());
        self
    }

    /// Evicts workers idle for longer than `ttl` (`None`: never).
    pub fn worker_idle_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.worker_idle_ttl = ttl;
        self
    }
}

/// What a maintainer moved in one queue since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueMaintained {
    /// Lapsed reservations returned to their tier.
    pub swept: u64,
    /// Due scheduled tasks moved to their tier.
    pub promoted: u64,
    /// Task records removed by retention or repaired (`queue_maintain`).
    pub maintained: u64,
    /// Backend calls that failed (the next round tries again).
    pub errors: u64,
}

/// Totals of a maintainer since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MaintainerStats {
    /// Rounds run.
    pub rounds: u64,
    /// Workers evicted as idle.
    pub workers_evicted: u64,
    /// Per queue, what was moved.
    pub queues: BTreeMap<String, QueueMaintained>,
}

#[derive(Debug, Default)]
struct State {
    known: BTreeSet<String>,
    /// Queues whose backend answered `queue_maintain` with `Rejected` (it keeps no records).
    no_records: BTreeSet<String>,
    stats: MaintainerStats,
}

/// Keeps every known queue going; see the module docs.
#[derive(Debug, Clone)]
pub struct Maintainer {
    backend: Arc<dyn FleetBackend>,
    options: MaintainerOptions,
    state: Arc<Mutex<State>>,
}

/// A running [`Maintainer`]. Dropping it stops the maintainer after its current round.
#[derive(Debug)]
pub struct MaintainerHandle {
    maintainer: Maintainer,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl MaintainerHandle {
    /// Maintains `queue` from the next round on (a queue the caller reserves on or submits to).
    pub fn note_queue(&self, queue: &str) {
        self.maintainer.note_queue(queue);
    }

    /// What the maintainer moved so far.
    pub fn stats(&self) -> MaintainerStats {
        self.maintainer.stats()
    }

    /// Asks the maintainer to stop after its current round.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Stops and waits until the current round has ended.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for MaintainerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl Maintainer {
    /// A maintainer over `backend`; [`Maintainer::run_once`] runs one round,
    /// [`Maintainer::spawn`] runs rounds until stopped.
    pub fn new(backend: Arc<dyn FleetBackend>, options: MaintainerOptions) -> Self {
        let state = State {
            known: options.queues.iter().cloned().collect(),
            no_records: BTreeSet::new(),
            stats: MaintainerStats::default(),
        };
        Maintainer {
            backend,
            options,
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// Runs a maintainer on the current tokio runtime until the handle stops it; see
    /// [`Maintainer::start`].
    pub fn spawn(backend: Arc<dyn FleetBackend>, options: MaintainerOptions) -> MaintainerHandle {
        Maintainer::new(backend, options).start()
    }

    /// Runs this maintainer's rounds on the current tokio runtime until the handle stops it
    /// (clones share what they know and count, so a caller may keep one to note queues). A
    /// failing round (the backend is down) is logged once and tried again every period.
    pub fn start(&self) -> MaintainerHandle {
        let (stop, mut stop_rx) = watch::channel(false);
        let worker = self.clone();
        let task = tokio::spawn(async move {
            let period = worker.options.period.max(Duration::from_millis(10));
            let mut last_discovery: Option<Instant> = None;
            let mut failing = false;
            while !*stop_rx.borrow() {
                let discover =
                    last_discovery.is_none_or(|at| at.elapsed() >= worker.options.discover_every);
                if discover {
                    last_discovery = Some(Instant::now());
                }
                match worker.round(discover).await {
                    Ok(()) if failing => {
                        failing = false;
                        tracing::info!("queue maintenance recovered");
                    }
                    Ok(()) => {}
                    // Logged once per outage, not once per period.
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "queue maintenance round failed; retrying every period");
                    }
                    Err(_) => {}
                }
                tokio::select! {
                    _ = stop_rx.wait_for(|s| *s) => {}
                    _ = tokio::time::sleep(period) => {}
                }
            }
        });
        MaintainerHandle {
            maintainer: self.clone(),
            stop,
            task: Some(task),
        }
    }

    /// Maintains `queue` from the next round on.
    pub fn note_queue(&self, queue: &str) {
        if queue.is_empty() {
            return;
        }
        let mut state = self.lock();
        if !state.known.contains(queue) {
            state.known.insert(queue.to_string());
        }
    }

    /// What was moved so far.
    pub fn stats(&self) -> MaintainerStats {
        self.lock().stats.clone()
    }

    /// One round: lists the backend's queues, then sweeps and promotes every known queue and
    /// evicts idle workers. Fails only when listing the queues fails; a queue whose calls fail
    /// is counted in its `errors` and tried again next round.
    pub async fn run_once(&self) -> Result<()> {
        self.round(true).await
    }

    async fn round(&self, discover: bool) -> Result<()> {
        use futures::StreamExt as _;
        let listed = if discover {
            Some(self.backend.queue_names().await)
        } else {
            None
        };
        let queues: Vec<String> = {
            let mut state = self.lock();
            if let Some(Ok(names)) = &listed {
                state.known.extend(names.iter().cloned());
            }
            state.known.iter().cloned().collect()
        };
        let moved: Vec<(String, QueueMaintained)> = futures::stream::iter(queues)
            .map(|name| async move {
                let moved = self.maintain(&name).await;
                (name, moved)
            })
            .buffer_unordered(CONCURRENT_QUEUES)
            .collect()
            .await;
        let evicted = self.evict_idle_workers().await;
        {
            let mut state = self.lock();
            state.stats.rounds += 1;
            state.stats.workers_evicted += evicted;
            for (name, m) in moved {
                let entry = state.stats.queues.entry(name).or_default();
                entry.swept += m.swept;
                entry.promoted += m.promoted;
                entry.maintained += m.maintained;
                entry.errors += m.errors;
            }
        }
        match listed {
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Sweeps then promotes one queue (a swept reservation is reservable at once, a promoted
    /// task from its due time), then runs its task-record maintenance.
    async fn maintain(&self, name: &str) -> QueueMaintained {
        let mut m = QueueMaintained::default();
        match self.backend.queue_sweep_expired(name).await {
            Ok(n) => m.swept = n,
            Err(e) => {
                m.errors += 1;
                tracing::debug!(queue = name, error = %e, "sweep failed");
            }
        }
        match self.backend.queue_promote_due(name).await {
            Ok(n) => m.promoted = n,
            Err(e) => {
                m.errors += 1;
                tracing::debug!(queue = name, error = %e, "promoting due tasks failed");
            }
        }
        if !self.lock().no_records.contains(name) {
            match self.backend.queue_maintain(name).await {
                Ok(n) => m.maintained = n,
                Err(Error::Rejected { .. }) => {
                    self.lock().no_records.insert(name.to_string());
                }
                Err(e) => {
                    m.errors += 1;
                    tracing::debug!(queue = name, error = %e, "maintaining task records failed");
                }
            }
        }
        if m.swept > 0 {
            tracing::info!(
                queue = name,
                tasks = m.swept,
                "returned lapsed reservations to the queue"
            );
        }
        m
    }

    async fn evict_idle_workers(&self) -> u64 {
        let Some(ttl) = self.options.worker_idle_ttl.filter(|t| !t.is_zero()) else {
            return 0;
        };
        let types: BTreeSet<String> = match self.backend.worker_list(None).await {
            Ok(list) => list.into_iter().map(|(t, _)| t).collect(),
            Err(e) => {
                tracing::debug!(error = %e, "listing workers failed");
                return 0;
            }
        };
        let (now, ttl) = (unix_now(), ttl.as_secs_f64());
        let mut evicted = 0;
        for automation_type in types {
            let registry = WorkerRegistry::new(self.backend.clone(), automation_type.as_str());
            match self.evict_silent(&registry, now, ttl).await {
                Ok(n) => evicted += n,
                Err(e) => tracing::debug!(error = %e, "evicting idle workers failed"),
            }
        }
        evicted
    }

    /// The registry's idle eviction, except for workers that never reported (`last_seen` 0): a
    /// worker registered by a process that only writes records (the seed's master, a test) has
    /// no heartbeat to judge it by, and removing it would reset its config generation.
    async fn evict_silent(&self, registry: &WorkerRegistry, now: f64, ttl: f64) -> Result<u64> {
        let mut evicted = 0;
        for id in registry.list().await? {
            let Some(record) = registry.get(&id).await? else {
                continue;
            };
            if record.last_seen > 0.0
                && now - record.last_seen > ttl
                && registry.remove(&id).await?
            {
                tracing::info!(automation_type = registry.automation_type(), worker_id = %id, "evicted an idle worker");
                evicted += 1;
            }
        }
        Ok(evicted)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves plain counters behind: still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
