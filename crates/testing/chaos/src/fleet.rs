//! Fleet queue load: pushers push bodies with unique ids; workers reserve and ack (or fail one task
//! in ten into the dead-letter queue); a sweeper returns lapsed reservations. After the faults the
//! pushers stop and the workers drain the queue without faults. Checked: no task acked twice (or
//! acked and dead); every task whose push returned Ok was acked, is dead, or had an ack/fail with
//! an unknown outcome; every fail that returned true is in the DLQ; nothing is left queued; no
//! delivery of a task never pushed. A canceller cancels one pushed task in seven while it waits
//! or runs (ADR 0380): no task completes after its cancel answered `Cancelled` or
//! `CancelRequested`, none answered `Cancelled` is delivered after the answer, and every cancelled
//! task's record ends `cancelled`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchyard_conformance::harness::{unique_prefix, unique_schema};
use switchyard_core::Error;
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{CancelOutcome, Priority, TaskState};
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_postgres_support::Schema;
use tokio::task::JoinHandle;

use crate::env::Backend;

use crate::env::Target;
use crate::report::AdapterReport;
use crate::{Flags, Scale};

const VISIBILITY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct Log {
    pushed_ok: BTreeSet<String>,
    pushed_err: BTreeSet<String>,
    /// Per task, the `attempt` of each delivery (1 = a body's first delivery).
    delivered: BTreeMap<String, Vec<u32>>,
    /// Per task, when each delivery was reserved (parallel to `delivered`).
    delivered_at: BTreeMap<String, Vec<Instant>>,
    acked: BTreeMap<String, u32>,
    /// Per task, when the first ack that returned true returned.
    first_ack_at: BTreeMap<String, Instant>,
    failed: BTreeMap<String, u32>,
    /// An ack or fail that returned an error: it may have been applied.
    unknown: BTreeSet<String>,
    /// Acks / fails that returned `false` (receipt no longer current), per task.
    stale: BTreeMap<String, u32>,
    ok: u64,
    errored: u64,
    untyped: Vec<String>,
    disconnect_rejected: Vec<String>,
    last_delivery: Option<Instant>,
    /// Per task, what its cancel answered and when the answer came.
    cancels: BTreeMap<String, (CancelOutcome, Instant)>,
    /// Holders told by ack or fail that the task was cancelled.
    told_cancelled: BTreeSet<String>,
}

impl Log {
    fn outcome<T>(&mut self, r: &Result<T, Error>) {
        match r {
            Ok(_) => self.ok += 1,
            Err(e) => {
                self.errored += 1;
                if e.is_transient() || matches!(e, Error::Cancelled { .. }) {
                } else if e.to_string().contains("Failed to route command") {
                    // fred's "no connection to send this on" (ErrorKind::Unknown) mapped to
                    // Rejected: an outage reported as a permanent error. Checked on its own.
                    self.disconnect_rejected.push(e.to_string());
                } else {
                    self.untyped.push(e.to_string());
                }
            }
        }
    }
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) struct Load {
    connect: Connect,
    queue: String,
    log: Arc<Mutex<Log>>,
    pushers: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    drained: Arc<AtomicBool>,
    setup_error: Option<String>,
}

/// How the load (and the checks, with fresh clients) open the fleet backend under test.
#[derive(Debug, Clone)]
enum Connect {
    Redis(RedisFleetConfig),
    Postgres {
        url: String,
        options: PostgresFleetOptions,
    },
}

impl Connect {
    fn of(target: &Target) -> Connect {
        match target.backend {
            Backend::Redis => {
                let prefix = format!("{}:", unique_prefix("chaos-fleet"));
                let mut c = RedisFleetConfig::new(&target.url).with_prefix(prefix);
                c.command_timeout = Duration::from_secs(2);
                Connect::Redis(c)
            }
            Backend::Postgres => {
                let schema =
                    Schema::new(unique_schema("chaos_fleet")).unwrap_or_else(|_| Schema::default());
                Connect::Postgres {
                    url: target.url.clone(),
                    options: PostgresFleetOptions {
                        // Fail fast while the server is down: an error is an unknown outcome.
                        pool: PostgresFleetOptions::default()
                            .pool
                            .schema(schema)
                            .acquire_timeout(Duration::from_secs(2)),
                        ..PostgresFleetOptions::default()
                    },
                }
            }
        }
    }

    async fn open(&self) -> Result<Arc<dyn FleetBackend>, Error> {
        match self {
            Connect::Redis(c) => Ok(Arc::new(RedisFleetBackend::with_config(c.clone()).await?)),
            Connect::Postgres { url, options } => Ok(Arc::new(
                PostgresFleetBackend::open_with(url, options.clone()).await?,
            )),
        }
    }

    /// The queue the loads use: on a cluster, one whose slot the failover hits.
    async fn queue(&self, target: &Target) -> String {
        match self {
            Connect::Redis(c) => {
                let Ok(b) = RedisFleetBackend::with_config(c.clone()).await else {
                    return "q-0".into();
                };
                let keys = b.keys().clone();
                b.close().await;
                let t = target.clone();
                tokio::task::spawn_blocking(move || {
                    crate::name_on_target(&t, "q", |q| keys.queue(q).normal)
                })
                .await
                .unwrap_or_else(|_| "q-0".into())
            }
            Connect::Postgres { .. } => "q-0".into(),
        }
    }
}

/// One task in seven (of those not failed) is cancelled.
fn cancelled(id: &str) -> bool {
    !fails(id) && id.bytes().map(u32::from).sum::<u32>() % 7 == 3
}

/// One task in ten goes to the dead-letter queue.
fn fails(id: &str) -> bool {
    id.bytes().map(u32::from).sum::<u32>().is_multiple_of(10)
}

impl Load {
    pub async fn start(target: &Target, scale: &Scale, flags: &Flags) -> Load {
        let connect = Connect::of(target);
        let mut load = Load {
            connect: connect.clone(),
            queue: String::new(),
            log: Arc::default(),
            pushers: Vec::new(),
            workers: Vec::new(),
            drained: Arc::default(),
            setup_error: None,
        };
        let backend = match connect.open().await {
            Ok(b) => b,
            Err(e) => {
                load.setup_error = Some(format!("connect: {e}"));
                return load;
            }
        };
        // One queue = one slot: put it on the master the failover kills.
        load.queue = connect.queue(target).await;
        for p in 0..scale.pushers {
            let (b, q, log, flags) = (
                backend.clone(),
                load.queue.clone(),
                load.log.clone(),
                flags.clone(),
            );
            load.pushers.push(tokio::spawn(async move {
                let mut n = 0u64;
                while !flags.stopped() {
                    let id = format!("p{p}-{n}");
                    n += 1;
                    let body = format!(r#"{{"id": "{id}"}}"#);
                    let r = b.queue_push(&q, body.as_bytes(), Priority::Normal).await;
                    let pushed = r.is_ok();
                    {
                        let mut l = lock(&log);
                        l.outcome(&r);
                        if pushed {
                            l.pushed_ok.insert(id.clone());
                        } else {
                            l.pushed_err.insert(id.clone());
                        }
                    }
                    if pushed && cancelled(&id) {
                        // Cancel it later, while it waits or runs.
                        let (b, q, log) = (b.clone(), q.clone(), log.clone());
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(rand::random_range(0..8)))
                                .await;
                            let r = b.task_cancel(&q, &id).await;
                            let mut l = lock(&log);
                            l.outcome(&r);
                            if let Ok(outcome) = r {
                                l.cancels.insert(id, (outcome, Instant::now()));
                            }
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(rand::random_range(1..4))).await;
                }
            }));
        }
        for _ in 0..scale.workers {
            let (b, q, log, drained) = (
                backend.clone(),
                load.queue.clone(),
                load.log.clone(),
                load.drained.clone(),
            );
            load.workers.push(tokio::spawn(async move {
                worker(b, q, log, drained).await;
            }));
        }
        {
            let (b, q, log, drained) = (
                backend.clone(),
                load.queue.clone(),
                load.log.clone(),
                load.drained.clone(),
            );
            load.workers.push(tokio::spawn(async move {
                while !drained.load(Ordering::SeqCst) {
                    let r = b.queue_sweep_expired(&q).await;
                    lock(&log).outcome(&r);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }));
        }
        load
    }

    pub async fn finish(self, target: &Target, scale: &Scale, lossy: bool) -> AdapterReport {
        let mut report = AdapterReport::new("fleet-queue");
        if let Some(e) = self.setup_error {
            report.check("setup", String::new(), vec![e]);
            return report;
        }
        let mut hangs = crate::stop_all(self.pushers, scale.settle_timeout, "a pusher").await;
        // Drain without faults: until nothing is waiting and nothing was delivered for longer
        // than a reservation lasts (so nothing is in flight either).
        let fresh = self.connect.open().await;
        let fresh = match fresh {
            Ok(f) => f,
            Err(e) => {
                self.drained.store(true, Ordering::SeqCst);
                report.check("fresh_client", String::new(), vec![format!("connect: {e}")]);
                return report;
            }
        };
        let deadline = Instant::now() + scale.settle_timeout;
        let quiet = VISIBILITY + Duration::from_millis(700);
        let mut drained = false;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let waiting = fresh.queue_size(&self.queue).await;
            let last = lock(&self.log).last_delivery;
            if waiting.is_ok_and(|w| w == 0) && last.is_none_or(|t| t.elapsed() > quiet) {
                drained = true;
                break;
            }
        }
        self.drained.store(true, Ordering::SeqCst);
        hangs.extend(crate::stop_all(self.workers, scale.settle_timeout, "a worker").await);
        if !drained {
            hangs.push(format!(
                "the queue did not drain within {:?} after the faults",
                scale.settle_timeout
            ));
        }
        report.check(
            "drains_after_faults",
            "pushers and workers stopped, the queue drained".into(),
            hangs,
        );

        let log = std::mem::take(&mut *lock(&self.log));
        report.ok = log.ok;
        report.errored = log.errored;
        report.check(
            "errors_are_transient",
            format!("{} errors, all Unavailable", log.errored),
            log.untyped.clone(),
        );
        report.check(
            "disconnect_is_unavailable",
            "a call made while the connection is down fails as Unavailable (retryable)".into(),
            log.disconnect_rejected.clone(),
        );
        check(fresh.as_ref(), &self.queue, &log, lossy, &mut report).await;
        let _ = target;
        drop(fresh);
        report
    }
}

async fn worker(
    b: Arc<dyn FleetBackend>,
    q: String,
    log: Arc<Mutex<Log>>,
    drained: Arc<AtomicBool>,
) {
    while !drained.load(Ordering::SeqCst) {
        let reserved_at = Instant::now();
        let r = b
            .queue_reserve(&q, Duration::from_millis(200), VISIBILITY)
            .await;
        lock(&log).outcome(&r);
        let d = match r {
            Ok(Some(d)) => d,
            Ok(None) => continue,
            Err(_) => {
                // A reserve whose reply was lost holds a task until it lapses: keep the drain
                // waiting for it.
                lock(&log).last_delivery = Some(Instant::now());
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let id = d.task_id.clone().unwrap_or_else(|| "<no id>".into());
        {
            let mut l = lock(&log);
            l.delivered.entry(id.clone()).or_default().push(d.attempt);
            l.delivered_at
                .entry(id.clone())
                .or_default()
                .push(reserved_at);
            l.last_delivery = Some(Instant::now());
        }
        let fail = fails(&id);
        let r = if fail {
            b.queue_fail(&q, &d.receipt, &d.body).await
        } else {
            b.queue_ack(&q, &d.receipt).await
        };
        let mut l = lock(&log);
        l.outcome(&r);
        match r {
            Ok(true) if fail => *l.failed.entry(id).or_default() += 1,
            Ok(true) => {
                l.first_ack_at
                    .entry(id.clone())
                    .or_insert_with(Instant::now);
                *l.acked.entry(id).or_default() += 1;
            }
            Ok(false) => *l.stale.entry(id).or_default() += 1,
            Err(Error::Cancelled { .. }) => {
                // The backend ended it `cancelled`: a known outcome, not an error.
                l.errored -= 1;
                l.ok += 1;
                l.told_cancelled.insert(id);
            }
            Err(_) => {
                l.unknown.insert(id);
            }
        }
        l.last_delivery = Some(Instant::now());
    }
}

async fn check(b: &dyn FleetBackend, q: &str, log: &Log, lossy: bool, report: &mut AdapterReport) {
    let dead = match b.dlq_peek(q, 1_000_000).await {
        Ok(d) => d,
        Err(e) => {
            report.check("dlq_readable", String::new(), vec![e.to_string()]);
            return;
        }
    };
    let mut dead_count: BTreeMap<String, u32> = BTreeMap::new();
    for body in &dead {
        let id = switchyard_core::fleet::task_id_of(body).unwrap_or_else(|| "<no id>".into());
        *dead_count.entry(id).or_default() += 1;
    }
    let waiting = b.queue_size(q).await;
    report.check(
        "nothing_left_queued",
        format!(
            "{} waiting after the drain, {} dead",
            waiting.as_ref().map_or(-1, |w| *w as i64),
            dead.len()
        ),
        match waiting {
            Ok(0) => Vec::new(),
            Ok(n) => vec![format!("{n} tasks still waiting")],
            Err(e) => vec![e.to_string()],
        },
    );

    let v = judge(log, &dead_count, lossy);
    let Verdicts {
        twice,
        lost,
        false_stale,
        lost_at_failover,
        phantom,
        fail_not_dead,
        done_acked,
        done_dead,
        done_unknown,
        done_cancelled,
    } = v;
    report.check(
        "no_task_completed_twice",
        format!(
            "{} pushed ok, {} pushes unknown; each acked or dead at most once",
            log.pushed_ok.len(),
            log.pushed_err.len()
        ),
        twice,
    );
    report.check(
        "no_pushed_task_lost",
        format!(
            "{done_acked} acked, {done_dead} dead, {done_cancelled} cancelled, {done_unknown} with \
             an ack of unknown outcome"
        ),
        lost,
    );
    report.check(
        "false_ack_means_not_acked",
        format!(
            "{} acks/fails returned false; each such task came back",
            log.stale.values().sum::<u32>()
        ),
        false_stale,
    );
    report.check(
        "failed_tasks_in_dlq",
        format!(
            "{} fails returned true, all in the DLQ",
            log.failed.values().sum::<u32>()
        ),
        fail_not_dead,
    );
    report.check(
        "no_phantom_tasks",
        "every delivered or dead task was pushed".into(),
        phantom,
    );
    let cancel_losses = check_cancels(b, q, log, lossy, report).await;
    let lost_at_failover = lost_at_failover + cancel_losses;
    if lost_at_failover > 0 {
        report.note(format!(
            "{lost_at_failover} acknowledged queue writes (pushes, acks, fails) missing after the \
             failover (asynchronous replication; an undone ack shows as a task delivered again)"
        ));
    }
}

/// What the checks found, before they are reported.
#[derive(Debug, Default)]
struct Verdicts {
    twice: Vec<String>,
    lost: Vec<String>,
    false_stale: Vec<String>,
    lost_at_failover: usize,
    phantom: Vec<String>,
    fail_not_dead: Vec<String>,
    done_acked: usize,
    done_dead: usize,
    done_unknown: usize,
    done_cancelled: usize,
}

/// Checks every cancel that answered against what the workers saw and the records say, through
/// a fresh client; how many findings the failover's replication window explains (`lossy`).
async fn check_cancels(
    b: &dyn FleetBackend,
    q: &str,
    log: &Log,
    lossy: bool,
    report: &mut AdapterReport,
) -> usize {
    let mut problems = Vec::new();
    let mut lost = 0usize;
    let mut counts = [0usize; 3];
    for (id, (outcome, answered_at)) in &log.cancels {
        let stopped = match outcome {
            CancelOutcome::Cancelled => {
                counts[0] += 1;
                let late = log
                    .delivered_at
                    .get(id)
                    .is_some_and(|at| at.iter().any(|t| t > answered_at));
                if late {
                    problems.push(format!(
                        "{id}: reserved after its cancel answered Cancelled"
                    ));
                }
                true
            }
            CancelOutcome::CancelRequested => {
                counts[1] += 1;
                true
            }
            CancelOutcome::Finished(_) => {
                counts[2] += 1;
                false
            }
            CancelOutcome::Unknown => {
                if lossy {
                    lost += 1;
                } else {
                    problems.push(format!("{id}: pushed (Ok), unknown to its cancel"));
                }
                false
            }
        };
        if !stopped {
            continue;
        }
        if log.acked.contains_key(id) {
            if lossy {
                lost += 1;
            } else {
                problems.push(format!(
                    "{id}: an ack returned true though its cancel answered {outcome:?}"
                ));
            }
        }
        match b.task_get(q, id).await {
            Ok(Some(t)) if t.state == TaskState::Cancelled => {}
            Ok(other) if lossy => {
                lost += 1;
                let _ = other;
            }
            Ok(other) => problems.push(format!(
                "{id}: cancel answered {outcome:?}, the record says {:?}",
                other.map(|t| t.state)
            )),
            Err(e) => problems.push(format!("{id}: task_get: {e}")),
        }
    }
    report.check(
        "no_completion_after_cancel",
        format!(
            "{} cancelled while waiting, {} while running, {} already ended; none completed \
             after its cancel answered, every record cancelled",
            counts[0], counts[1], counts[2]
        ),
        problems,
    );
    lost
}

/// Judges every task the load saw against the DLQ's contents.
fn judge(log: &Log, dead_count: &BTreeMap<String, u32>, lossy: bool) -> Verdicts {
    let all: BTreeSet<&String> = log
        .pushed_ok
        .iter()
        .chain(&log.pushed_err)
        .chain(log.delivered.keys())
        .chain(dead_count.keys())
        .collect();
    let mut twice = Vec::new();
    let mut lost = Vec::new();
    let mut false_stale = Vec::new();
    let mut lost_at_failover = 0usize;
    let mut phantom = Vec::new();
    let mut fail_not_dead = Vec::new();
    let (mut done_acked, mut done_dead, mut done_unknown) = (0usize, 0usize, 0usize);
    let mut done_cancelled = 0usize;
    let get = |m: &BTreeMap<String, u32>, id: &str| m.get(id).copied().unwrap_or(0);
    let attempts = |id: &str| log.delivered.get(id).cloned().unwrap_or_default();
    for id in all {
        let acked = get(&log.acked, id);
        let dead = get(dead_count, id);
        let failed = get(&log.failed, id);
        let completions = acked + dead;
        if completions > 1 {
            let a = attempts(id);
            // Delivered again by a reserve sent after an ack had returned true: the ack was undone.
            let redelivered_after_ack = log.first_ack_at.get(id).is_some_and(|acked_at| {
                log.delivered_at
                    .get(id)
                    .is_some_and(|at| at.iter().any(|t| t > acked_at))
            });
            // Two deliveries that were each a first attempt are two copies of the body.
            if a.iter().filter(|n| **n == 1).count() > 1 {
                twice.push(format!(
                    "{id}: acked {acked}x, dead {dead}x, delivery attempts {a:?} (two copies of \
                     the body were queued: one push applied twice)"
                ));
            } else if lossy && redelivered_after_ack {
                lost_at_failover += 1;
            } else {
                let when = if redelivered_after_ack {
                    "reserved again after its ack returned true: the ack was undone"
                } else {
                    "reserved again before its ack returned true: a stale receipt was accepted"
                };
                twice.push(format!(
                    "{id}: acked {acked}x, dead {dead}x, delivery attempts {a:?} ({when})"
                ));
            }
        }
        if failed > dead {
            if lossy {
                lost_at_failover += 1;
            } else {
                fail_not_dead.push(format!("{id}: queue_fail returned true, not in the DLQ"));
            }
        }
        let pushed = log.pushed_ok.contains(id) || log.pushed_err.contains(id);
        if !pushed {
            phantom.push(format!("{id}: delivered or dead, never pushed"));
        }
        if log.pushed_ok.contains(id) {
            if acked > 0 {
                done_acked += 1;
            } else if dead > 0 {
                done_dead += 1;
            } else if log.told_cancelled.contains(id)
                || log.cancels.get(id).is_some_and(|(o, _)| {
                    matches!(o, CancelOutcome::Cancelled | CancelOutcome::CancelRequested)
                })
            {
                done_cancelled += 1;
            } else if log.unknown.contains(id) {
                done_unknown += 1;
            } else if get(&log.stale, id) > 0 {
                // `false` promises the ack did nothing, so the task must come back; it did not.
                false_stale.push(format!(
                    "{id}: ack/fail returned false (receipt not current), delivery attempts {:?}, \
                     never delivered again: the call was applied and a re-sent copy answered false",
                    attempts(id)
                ));
            } else if lossy {
                lost_at_failover += 1;
            } else {
                lost.push(format!(
                    "{id}: pushed (Ok), delivery attempts {:?}, never acked, not dead",
                    attempts(id)
                ));
            }
        }
    }
    Verdicts {
        twice,
        lost,
        false_stale,
        lost_at_failover,
        phantom,
        fail_not_dead,
        done_acked,
        done_dead,
        done_unknown,
        done_cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn judge_finds_copies_losses_and_false_stale_acks() {
        let mut log = Log {
            pushed_ok: ids(&["ok", "copy", "redo", "lost", "stale", "unknown", "dead"]),
            pushed_err: ids(&["maybe"]),
            ..Log::default()
        };
        for (id, attempts) in [
            ("ok", vec![1]),
            ("copy", vec![1, 1]),
            ("redo", vec![1, 2]),
            ("lost", vec![1]),
            ("stale", vec![1]),
            ("unknown", vec![1]),
            ("dead", vec![1]),
            ("ghost", vec![1]),
        ] {
            log.delivered.insert(id.into(), attempts);
        }
        log.acked.insert("ok".into(), 1);
        log.acked.insert("copy".into(), 2);
        // "redo": acked, then reserved again after that ack had returned.
        let t0 = Instant::now();
        log.acked.insert("redo".into(), 2);
        log.first_ack_at
            .insert("redo".into(), t0 + Duration::from_millis(1));
        log.delivered_at
            .insert("redo".into(), vec![t0, t0 + Duration::from_millis(2)]);
        log.stale.insert("stale".into(), 1);
        log.unknown.insert("unknown".into());
        log.failed.insert("dead".into(), 1);
        let dead = BTreeMap::from([("dead".to_string(), 1)]);

        let v = judge(&log, &dead, false);
        assert_eq!(v.twice.len(), 2);
        assert!(v.twice[0].starts_with("copy:") && v.twice[0].contains("two copies"));
        assert!(v.twice[1].starts_with("redo:") && v.twice[1].contains("ack was undone"));
        assert_eq!(v.lost.len(), 1);
        assert!(v.lost[0].starts_with("lost:"));
        assert_eq!(v.false_stale.len(), 1);
        assert!(v.false_stale[0].starts_with("stale:"));
        assert_eq!(v.phantom.len(), 1, "ghost was never pushed");
        assert!(v.fail_not_dead.is_empty());
        assert_eq!((v.done_acked, v.done_dead, v.done_unknown), (3, 1, 1));

        // On a cluster a plain loss is the replication window, not a violation; so is an undone
        // ack (a redelivery after it). Two copies of one push are not.
        let v = judge(&log, &BTreeMap::new(), true);
        assert!(v.lost.is_empty());
        assert_eq!(v.twice.len(), 1, "{:?}", v.twice);
        assert_eq!(
            v.lost_at_failover, 4,
            "lost, the dead letter twice (fail + push), the undone ack"
        );
    }
}
