//! Enqueued runs whose processes die (ADR 0394), on SQLite, Redis and PostgreSQL: a
//! holder run is open on a session, and child processes (`switchyard-chaos-runner`, one per
//! run) each enqueue a run behind it, poll `turn` until it starts, work, end it through
//! `append_if_open` and hand off. Some children are SIGKILLed at chosen steps, picked at random
//! among them: while waiting in the line (their run is started by someone else's hand-off and
//! nobody works it), mid-run (their run is left open) and between the end and the hand-off (the
//! next waiter's poll moves the line). Claims use a short `stale_after`, so a run left open goes
//! stale and the next hand-off steps over it; the surviving waiters, then a janitor loop here
//! calling `hand_off`, drive the line to its end. Checked from the data through a fresh store:
//!
//! * every waiting run started, exactly once (one `run.started` each), and nothing is left in
//!   the line;
//! * in line order: each run's `run.started` comes after that of every run with a smaller place
//!   (the place each claim answered), the holder's first;
//! * none started while the run before it was open and fresh: before each start, the previous
//!   run either ended or its last event was at least `stale_after` older than the start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use switchyard_chaos::children::{completed, open_event_store, opening};
use switchyard_conformance::harness::{
    TempSqlite, postgres_url, redis_url, unique_id, unique_prefix, unique_schema,
};
use switchyard_core::RunContext;
use switchyard_core::event::{Event, MessageText, Payload};
use switchyard_core::status::TERMINAL_KINDS;
use switchyard_core::store::MAX_LINE;

/// Runs enqueued behind the holder, one child process each.
const CHILDREN: usize = 12;
/// Every claim's `stale_after`: short, so each run left open costs the line only this long.
const STALE_AFTER: Duration = Duration::from_secs(2);
/// Timestamps are stored with microsecond precision at best; a stale step-over judged by the
/// store at exactly `stale_after` may read a hair under it here.
const CLOCK_SLACK: Duration = Duration::from_millis(1);
const ORIGIN: &str = "chaos-check";

/// Where the children and this test meet: a URL all open, and the Redis key prefix.
struct Shared {
    url: String,
    prefix: String,
}

/// The step after which a child stops and is killed (`switchyard-chaos-runner`'s `HOLD_AT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kill {
    Never,
    /// Waiting in the line.
    Queued,
    /// Started, one event of work appended.
    Working,
    /// Its `run.completed` stored, the hand-off not yet called.
    Ended,
}

impl Kill {
    fn hold_at(self) -> &'static str {
        match self {
            Kill::Never => "none",
            Kill::Queued => "queued",
            Kill::Working => "working",
            Kill::Ended => "ended",
        }
    }
}

/// Which child is killed where: one while waiting, two mid-run, two between the end and the
/// hand-off, the rest run to the end; which children get which is random. The two runs left
/// open (plus the one killed while waiting, which someone else starts) each cost the line one
/// `stale_after`, which keeps a backend's case well under 20 s.
fn kill_plan() -> Vec<Kill> {
    let mut plan = vec![
        Kill::Queued,
        Kill::Working,
        Kill::Working,
        Kill::Ended,
        Kill::Ended,
    ];
    plan.resize(CHILDREN, Kill::Never);
    plan.shuffle(&mut rand::rng());
    plan
}

struct Runner {
    run: String,
    kill: Kill,
    log: PathBuf,
    child: Child,
    /// Exited by itself, or killed and reaped.
    done: bool,
    killed: bool,
}

fn steps_of(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The last step a child logged, without its argument (`queued 3` is `queued`).
fn last_step(log: &Path) -> Option<&'static str> {
    let steps = steps_of(log);
    let word = steps.last()?.split(' ').next()?.to_string();
    [Kill::Queued, Kill::Working, Kill::Ended]
        .into_iter()
        .map(Kill::hold_at)
        .find(|step| *step == word)
}

/// A child still running when the test fails would wait forever at its kill point: it goes
/// with the test.
impl Drop for Runner {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Kills a child (SIGKILL on Unix) and reaps it.
fn kill(r: &mut Runner) {
    r.child.kill().expect("kill a child");
    r.child.wait().expect("reap a child");
    r.done = true;
    r.killed = true;
}

async fn enqueued_runs_with_kills(shared: Shared) {
    let began = Instant::now();
    let dir = tempfile::tempdir().expect("temporary directory");
    let session = unique_id("line");
    let store = open_event_store(&shared.url, &shared.prefix)
        .await
        .expect("open the store");
    let holder = RunContext::new("holder").with_session(session.as_str());
    let (claim, _) = store
        .claim_start(&holder, opening("hold"), ORIGIN, STALE_AFTER)
        .await
        .expect("the holder's claim");
    assert!(claim.won(), "the holder's claim on a new session lost");

    let mut runners: Vec<Runner> = kill_plan()
        .into_iter()
        .enumerate()
        .map(|(n, kill)| {
            let run = format!("w{n:02}");
            let log = dir.path().join(format!("{run}.log"));
            let child = Command::new(env!("CARGO_BIN_EXE_switchyard-chaos-runner"))
                .args([&shared.url, &shared.prefix, &session, &run])
                .arg(STALE_AFTER.as_millis().to_string())
                .arg(&log)
                .arg(kill.hold_at())
                .stdin(Stdio::null())
                .spawn()
                .expect("start a child runner");
            Runner {
                run,
                kill,
                log,
                child,
                done: false,
                killed: false,
            }
        })
        .collect();

    // The holder stays open and fresh until every child's claim has answered, so all of them
    // wait in the line behind it (a claim on a stale holder would start at once).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for r in &mut runners {
            if let Ok(Some(status)) = r.child.try_wait() {
                panic!("{} exited before its claim answered: {status}", r.run);
            }
        }
        if runners.iter().all(|r| !steps_of(&r.log).is_empty()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the children's claims did not all answer in 30 s"
        );
        store
            .append(&holder, vec![heartbeat()], ORIGIN)
            .await
            .expect("the holder's heartbeat");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut places = BTreeMap::new();
    for r in &runners {
        let steps = steps_of(&r.log);
        let place: u64 = steps
            .first()
            .and_then(|s| s.strip_prefix("queued "))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{}'s claim did not answer Queued: {steps:?}", r.run));
        assert!(
            places.insert(place, r.run.clone()).is_none(),
            "two claims answered place {place}"
        );
    }
    assert_eq!(
        places.keys().copied().collect::<Vec<_>>(),
        (1..=CHILDREN as u64).collect::<Vec<_>>(),
        "the places are not 1..={CHILDREN}"
    );

    // The holder ends as the gateway ends a run: the ending append, then a hand-off.
    let ended = store
        .append_if_open(&holder, vec![completed()], ORIGIN)
        .await
        .expect("the holder's end");
    assert!(ended.not_open().is_none(), "the holder was not open");
    store
        .hand_off(&holder)
        .await
        .expect("the holder's hand-off");

    // Each child runs its turn; a child with a kill point is killed once it logs that step.
    let deadline = Instant::now() + Duration::from_secs(60);
    while runners.iter().any(|r| !r.done) {
        for r in runners.iter_mut().filter(|r| !r.done) {
            if let Some(status) = r.child.try_wait().expect("poll a child") {
                assert!(
                    r.kill == Kill::Never,
                    "{} exited ({status}) before it was killed at {:?}",
                    r.run,
                    r.kill
                );
                assert!(status.success(), "{} failed: {status}", r.run);
                r.done = true;
            } else if r.kill != Kill::Never && last_step(&r.log) == Some(r.kill.hold_at()) {
                kill(r);
            }
        }
        if Instant::now() > deadline {
            // The children left are killed as the runners drop.
            let left: Vec<(&str, Vec<String>)> = runners
                .iter()
                .filter(|r| !r.done)
                .map(|r| (r.run.as_str(), steps_of(&r.log)))
                .collect();
            panic!("children still running after 60 s: {left:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The janitor: a run killed while waiting may be last in the line, and a run left open
    // holds the line until it goes stale; hand-offs move it to the end.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        store
            .hand_off(&holder)
            .await
            .expect("the janitor's hand-off");
        let line = store
            .line_read(&holder, MAX_LINE)
            .await
            .expect("read the line");
        if line.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "runs still waiting after 30 s of hand-offs: {:?}",
            line.iter().map(|q| &q.run_id).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // From the data, through a fresh store.
    let fresh = open_event_store(&shared.url, &shared.prefix)
        .await
        .expect("open the store");
    let left = fresh
        .line_read(&holder, MAX_LINE)
        .await
        .expect("read the line");
    assert!(left.is_empty(), "left in the line: {left:?}");
    let log = fresh
        .read(&holder, 0, None)
        .await
        .expect("read the session");
    let order: Vec<&str> = std::iter::once("holder")
        .chain(places.values().map(String::as_str))
        .collect();
    let mut previous_start: Option<usize> = None;
    let mut stepped_over = 0;
    for (k, run) in order.iter().enumerate() {
        let starts: Vec<usize> = log
            .iter()
            .enumerate()
            .filter(|(_, e)| e.run_id == *run && e.kind() == "run.started")
            .map(|(at, _)| at)
            .collect();
        let [start] = starts.as_slice() else {
            panic!("{run} started {} times, not once", starts.len());
        };
        // Line order: after the start of every run with a smaller place.
        if let Some(before) = previous_start {
            assert!(
                *start > before,
                "{run} (place {k}) started before the run ahead of it in the line"
            );
        }
        previous_start = Some(*start);
        if k == 0 {
            continue;
        }
        // Not while the run before it was open and fresh.
        let prev = order[k - 1];
        let prev_events: Vec<&Event> = log[..*start].iter().filter(|e| e.run_id == prev).collect();
        if prev_events
            .iter()
            .any(|e| TERMINAL_KINDS.contains(&e.kind()))
        {
            continue;
        }
        let last = prev_events
            .last()
            .unwrap_or_else(|| panic!("{run} started before {prev} had any event"));
        let idle = (log[*start].ts - last.ts)
            .to_std()
            .unwrap_or(Duration::ZERO);
        assert!(
            idle + CLOCK_SLACK >= STALE_AFTER,
            "{run} started while {prev} was open and fresh (its last event {idle:?} before)"
        );
        stepped_over += 1;
    }
    let place_of = |run: &str| order.iter().position(|r| *r == run).unwrap_or(0);
    let killed: Vec<String> = runners
        .iter()
        .filter(|r| r.killed)
        .map(|r| format!("place {} {:?}", place_of(&r.run), r.kill))
        .collect();
    assert_eq!(killed.len(), 5, "not every planned kill happened");
    println!(
        "{}: {CHILDREN} enqueued runs started once each, in line order; killed {killed:?}; \
         {stepped_over} stale runs stepped over; {:.1} s",
        shared.url,
        began.elapsed().as_secs_f64()
    );
}

fn heartbeat() -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "holder".into(),
        text: "still working".into(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_enqueued_runs_start_once_in_order_when_processes_die() {
    let db = TempSqlite::new();
    enqueued_runs_with_kills(Shared {
        url: db.url(),
        prefix: "-".into(),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_enqueued_runs_start_once_in_order_when_processes_die() {
    enqueued_runs_with_kills(Shared {
        url: redis_url(),
        prefix: unique_prefix("enqueue-kill"),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_enqueued_runs_start_once_in_order_when_processes_die() {
    let url = postgres_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    enqueued_runs_with_kills(Shared {
        url: format!("{url}{sep}schema={}", unique_schema("enqueue_kill")),
        prefix: "-".into(),
    })
    .await;
}
