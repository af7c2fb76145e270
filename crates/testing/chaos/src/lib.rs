//! # switchyard-chaos
//!
//! The fault suite (ADR 0120): every Redis and Postgres adapter under load while faults happen, then checks
//! from the data, through fresh clients, that nothing acknowledged was lost and nothing was done
//! twice.
//!
//! * Scenarios ([`Scenario`]): `CLIENT KILL` of the adapters' connections in a loop on a standalone
//!   server; SIGKILL of a standalone `redis-server` (`appendonly yes`, `appendfsync always`) and a
//!   restart on its data directory, in a loop; a 3-master / 3-replica cluster whose master is
//!   killed so its replica takes over; a PostgreSQL (fsync on) whose client connections are ended
//!   with `pg_terminate_backend` in a loop and which is SIGKILLed and restarted in turn (the
//!   event store and the fleet on Postgres).
//! * Load during each: the event store (claims, appends, closes), the stream bridge (publishers,
//!   live and reconnecting subscribers), the fleet queue (push, reserve, ack / fail, a sweeper)
//!   and the checkpoint cache (get / set).
//! * A call that returned an error has an unknown outcome: its effect may or may not be there,
//!   but never twice. A call that returned success must be there — except on a cluster, where a
//!   write acknowledged by a master shortly before it died may be missing on the promoted replica
//!   (asynchronous replication); those are counted and printed as notes, not violations.
//!
//! `cargo xtask chaos [--quick]` runs the binary; `tests/short.rs` runs every scenario small.
//! `tests/consumer_kill.rs` kills a process instead of a server: a typed consumer holding a
//! prefetched batch (the `switchyard-chaos-consumer` binary), on SQLite, Redis and PostgreSQL.
//! `tests/enqueue_kill.rs` kills clients of a session's line (ADR 0394): runs enqueued behind a
//! holder, one `switchyard-chaos-runner` process each, SIGKILLed while waiting, mid-run and
//! between their end and their hand-off, on SQLite, Redis and PostgreSQL; with a short
//! `stale_after`, the data must show every run started exactly once, in claim order, none while
//! the run before it was open and fresh, and an empty line.
//!
//! One scenario lives with the gateway binary it needs: HTTP workers (plain Python processes)
//! SIGKILLed mid-task while the gateway's queue maintainer returns what they held, checked from
//! the data through a fresh gateway (`crates/cli/tests/e2e/worker_faults.rs`, ADR 0352),
//! and a gateway SIGKILLed under HTTP worker load (`tests/e2e/maintenance.rs`).

mod bridge;
mod cache;
pub mod children;
mod env;
mod fleet;
mod report;
mod store;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use report::{AdapterReport, Check, ScenarioReport};

/// A fault scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// `CLIENT KILL TYPE normal|pubsub` every few ms on a standalone server.
    ClientKill,
    /// SIGKILL of a standalone `redis-server` with `appendonly yes`, `appendfsync always`, and a
    /// restart on the same data directory, in a loop.
    SigKill,
    /// A 3+3 cluster: the master serving the loads' namespace and queue is killed and its replica
    /// takes over.
    Failover,
    /// A private PostgreSQL (fsync on) under the Postgres event store and fleet:
    /// `pg_terminate_backend` of the adapters' connections in a loop, and SIGKILL of the server
    /// and a restart on its data directory, in turn.
    Postgres,
}

impl Scenario {
    /// Every scenario, in the order the suite runs them.
    pub const ALL: [Scenario; 4] = [
        Scenario::ClientKill,
        Scenario::SigKill,
        Scenario::Failover,
        Scenario::Postgres,
    ];

    /// The name used by `--scenario`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::ClientKill => "client-kill",
            Scenario::SigKill => "sigkill",
            Scenario::Failover => "failover",
            Scenario::Postgres => "postgres",
        }
    }

    /// Parses a `--scenario` name.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How much load and how many faults.
#[derive(Debug, Clone)]
pub struct Scale {
    /// How long the faults run (client kills, server kills); failovers take what they take.
    pub fault_for: Duration,
    /// Pause between two `CLIENT KILL` rounds.
    pub kill_every: Duration,
    /// Server up-time between two SIGKILLs (and before / after each failover).
    pub up_between_kills: Duration,
    /// Server down-time after a SIGKILL.
    pub down_for: Duration,
    /// Failovers in the cluster scenario (the killed master rejoins as a replica between rounds).
    pub failovers: usize,
    /// Event store: sessions, claiming tasks, appends per won run.
    pub sessions: usize,
    pub store_tasks: usize,
    pub appends_per_run: usize,
    /// Stream bridge: runs (each with one publisher, one live and one hopping subscriber).
    pub bridge_runs: usize,
    /// Fleet queue: pushing tasks and workers.
    pub pushers: usize,
    pub workers: usize,
    /// Checkpoint cache: tasks doing get / set.
    pub cache_tasks: usize,
    /// Longest wait for anything after the faults (drains, subscribers, joins) before it counts
    /// as a hang.
    pub settle_timeout: Duration,
}

impl Scale {
    /// `cargo xtask chaos` without `--quick`.
    pub fn full() -> Scale {
        Scale {
            fault_for: Duration::from_secs(20),
            kill_every: Duration::from_millis(5),
            up_between_kills: Duration::from_millis(700),
            down_for: Duration::from_millis(200),
            failovers: 2,
            sessions: 16,
            store_tasks: 8,
            appends_per_run: 8,
            bridge_runs: 8,
            pushers: 4,
            workers: 6,
            cache_tasks: 4,
            settle_timeout: Duration::from_secs(30),
        }
    }

    /// `--quick`: a few seconds of faults per scenario.
    pub fn quick() -> Scale {
        Scale {
            fault_for: Duration::from_secs(4),
            failovers: 1,
            sessions: 8,
            store_tasks: 6,
            appends_per_run: 5,
            bridge_runs: 4,
            pushers: 2,
            workers: 4,
            cache_tasks: 2,
            ..Scale::full()
        }
    }

    /// The short version of the normal test run.
    pub fn tiny() -> Scale {
        Scale {
            fault_for: Duration::from_millis(1500),
            up_between_kills: Duration::from_millis(400),
            down_for: Duration::from_millis(100),
            failovers: 1,
            sessions: 4,
            store_tasks: 3,
            appends_per_run: 3,
            bridge_runs: 2,
            pushers: 1,
            workers: 2,
            cache_tasks: 1,
            settle_timeout: Duration::from_secs(20),
            ..Scale::full()
        }
    }
}

/// Stop flags the loads watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flags {
    /// The faults are over: producers stop producing.
    pub stop: Arc<AtomicBool>,
}

impl Flags {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// Runs one scenario at `scale` and checks it. Never panics on a violation: it is in the report.
pub async fn run_scenario(scenario: Scenario, scale: &Scale) -> ScenarioReport {
    let started = Instant::now();
    let mut report = ScenarioReport {
        scenario,
        faults: String::new(),
        fault_count: 0,
        elapsed: Duration::ZERO,
        adapters: Vec::new(),
        setup_error: None,
    };
    let (servers, target) = match tokio::task::spawn_blocking(move || env::start(scenario)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            report.setup_error = Some(e);
            return report;
        }
        Err(e) => {
            report.setup_error = Some(format!("server start panicked: {e}"));
            return report;
        }
    };
    let servers = Arc::new(servers);
    let flags = Flags::default();

    // Loads first, so the faults hit work in flight. Postgres runs the event store and the
    // fleet (its stream bridge and cache are not part of this suite).
    let redis = target.backend == env::Backend::Redis;
    let store = store::Load::start(&target, scale, &flags).await;
    let bridge = match redis {
        true => Some(bridge::Load::start(&target, scale, &flags).await),
        false => None,
    };
    let fleet = fleet::Load::start(&target, scale, &flags).await;
    let cache = match redis {
        true => Some(cache::Load::start(&target, scale, &flags).await),
        false => None,
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    let fault_log: env::SharedLog = Arc::default();
    let stop_faults = Arc::new(AtomicBool::new(false));
    let injector = {
        let (servers, target, scale, stop, log) = (
            servers.clone(),
            target.clone(),
            scale.clone(),
            stop_faults.clone(),
            fault_log.clone(),
        );
        tokio::task::spawn_blocking(move || {
            env::inject(scenario, &servers, &target, &scale, &stop, &log)
        })
    };
    if scenario == Scenario::Failover {
        // The failover rounds end by themselves.
        let _ = injector.await;
    } else {
        tokio::time::sleep(scale.fault_for).await;
        stop_faults.store(true, Ordering::SeqCst);
        let _ = injector.await;
    }
    flags.stop.store(true, Ordering::SeqCst);
    report.faults = env::describe(scenario, &fault_log);
    report.fault_count = env::count(scenario, &fault_log);

    // Settle and check, each adapter with fresh clients.
    let lossy = target.is_cluster();
    let (s, b, f, c) = tokio::join!(
        store.finish(&target, scale, lossy),
        async {
            match bridge {
                Some(b) => Some(b.finish(&target, scale, lossy).await),
                None => None,
            }
        },
        fleet.finish(&target, scale, lossy),
        async {
            match cache {
                Some(c) => Some(c.finish(&target, scale).await),
                None => None,
            }
        },
    );
    report.adapters = [Some(s), b, Some(f), c].into_iter().flatten().collect();
    if let Ok(errors) = fault_log.errors.lock()
        && !errors.is_empty()
    {
        report.setup_error = Some(format!("fault injector: {}", errors.join("; ")));
    }
    // Dropping the servers kills them (off the async threads: it waits for the processes).
    let _ = tokio::task::spawn_blocking(move || drop(servers)).await;
    report.elapsed = started.elapsed();
    report
}

/// Runs `scenarios` one after the other.
pub async fn run(scenarios: &[Scenario], scale: &Scale) -> Vec<ScenarioReport> {
    let mut out = Vec::new();
    for s in scenarios {
        out.push(run_scenario(*s, scale).await);
    }
    out
}

/// Waits up to `timeout` for each load task; one line per task that panicked or did not stop
/// (it is aborted), named `what`.
pub(crate) async fn stop_all(
    tasks: Vec<tokio::task::JoinHandle<()>>,
    timeout: std::time::Duration,
    what: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for t in tasks {
        let abort = t.abort_handle();
        match tokio::time::timeout(timeout, t).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => problems.push(format!("{what} failed: {e}")),
            Err(_) => {
                abort.abort();
                problems.push(format!("{what} did not stop"));
            }
        }
    }
    problems
}

/// Picks `<tag>-<n>` for the first `n` whose key (built by `key_of`) lives on the fault's target
/// (any name on a standalone server). Blocking.
pub(crate) fn name_on_target(
    target: &env::Target,
    tag: &str,
    key_of: impl Fn(&str) -> String,
) -> String {
    for n in 0..512 {
        let name = format!("{tag}-{n}");
        if target.on_target(&key_of(&name)) {
            return name;
        }
    }
    format!("{tag}-0")
}
