//! A typed consumer killed holding a prefetched batch (ADR 0376), on SQLite, Redis and
//! PostgreSQL: a child process (`switchyard-chaos-consumer`, prefetch and batched acks on) drains
//! a backlog and is SIGKILLed mid-drain; a second consumer here drains the rest after the child's
//! reservations lapse. The child finishes its first runs and holds every later one, so its slots
//! fill and its prefetch buffer stays full; the kill waits until the data shows the finished
//! runs acked and reservations beyond the held runs (a prefetched batch), so it catches one on a
//! loaded machine too. Checked from the data through a fresh client:
//!
//! * nothing lost: every task ends `completed`;
//! * nothing run twice after an ack: a task whose result is the child's (its ack landed) never
//!   ran here, and a task both ran is completed with this consumer's result (the child's ack of
//!   it never landed);
//! * the kill did catch a prefetched batch: some task the child reserved (it came back as a
//!   second delivery) was never started by it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_chaos::children::open_fleet;
use switchyard_conformance::harness::{
    TempSqlite, postgres_url, redis_url, unique_id, unique_prefix, unique_schema,
};
use switchyard_core::fleet::TaskState;
use switchyard_fleet::{Consumer, ConsumerConfig, Output, PushOptions, Queue};

const TASKS: usize = 200;
/// Runs the child finishes (and acks); every later run holds its task until the kill.
const CHILD_FINISHES: usize = 8;
/// The child's concurrency (`switchyard-chaos-consumer`'s): the runs it holds at the kill.
const CHILD_HOLDS: usize = 4;
/// Runs the child logs before it is killed.
const KILL_AFTER_RUNS: usize = CHILD_FINISHES + CHILD_HOLDS;

/// Where the child and this test meet: a URL both open, and the Redis key prefix.
struct Shared {
    url: String,
    prefix: String,
}

fn runs_of(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

async fn killed_consumer_holding_a_batch(shared: Shared) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let runlog = dir.path().join("child-runs.log");
    let queue = unique_id("killed");
    let q: Queue<Value> = Queue::new(
        open_fleet(&shared.url, &shared.prefix)
            .await
            .expect("open the fleet"),
        queue.clone(),
    );
    let payloads: Vec<Value> = (0..TASKS).map(|n| json!({ "n": n })).collect();
    let ids = q
        .push_many(&payloads, PushOptions::default())
        .await
        .expect("push the backlog");

    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard-chaos-consumer"))
        .args([&shared.url, &shared.prefix, &queue])
        .arg(&runlog)
        .arg(CHILD_FINISHES.to_string())
        .stdin(Stdio::null())
        .spawn()
        .expect("start the child consumer");
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the child consumer exited by itself: {status}");
        }
        let runs = runs_of(&runlog).len();
        assert!(runs <= KILL_AFTER_RUNS, "the child ran {runs} tasks");
        if runs == KILL_AFTER_RUNS {
            // Its finished runs' acks landed, and it holds a reservation beyond its held runs:
            // one it prefetched and never started.
            let stats = q.stats().await.expect("stats");
            if stats.completed == CHILD_FINISHES as u64 && stats.in_flight > CHILD_HOLDS as u64 {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the child ran {runs} tasks in 60 s and did not come to hold a prefetched batch: {:?}",
            q.stats().await
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // SIGKILL on Unix: no shutdown, no release of what it holds, acks in flight cut off.
    child.kill().expect("kill the child");
    child.wait().expect("reap the child");
    let child_runs = runs_of(&runlog);

    // This consumer sweeps the child's reservations back once they lapse (its visibility is
    // 5 s) and runs them.
    let here: Arc<Mutex<Vec<String>>> = Arc::default();
    let ran = here.clone();
    let config = ConsumerConfig {
        concurrency: 8,
        visibility: Duration::from_secs(30),
        poll: Duration::from_millis(50),
        sweep_every: Some(Duration::from_millis(250)),
        shutdown_grace: Duration::from_secs(1),
        ..ConsumerConfig::default()
    };
    let handle = Consumer::spawn(q.clone(), config, move |task| {
        let ran = ran.clone();
        async move {
            ran.lock().expect("lock").push(task.id.clone());
            Ok(Output("parent"))
        }
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let stats = q.stats().await.expect("stats");
        if stats.high + stats.normal + stats.low + stats.in_flight + stats.scheduled == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "not drained in 90 s: {stats:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle.shutdown().await;
    let parent_runs = here.lock().expect("lock").clone();

    // From the data, through a fresh client.
    let fresh: Queue<Value> = Queue::new(
        open_fleet(&shared.url, &shared.prefix)
            .await
            .expect("open the fleet"),
        queue,
    );
    let mut by_child = BTreeMap::<&str, usize>::new();
    for id in &child_runs {
        *by_child.entry(id.as_str()).or_default() += 1;
    }
    let by_parent: BTreeSet<&str> = parent_runs.iter().map(String::as_str).collect();
    assert_eq!(
        by_parent.len(),
        parent_runs.len(),
        "this consumer ran a task twice"
    );
    let mut came_back_unstarted = 0;
    let mut childs_results = 0;
    for id in &ids {
        let info = fresh
            .get(id)
            .await
            .expect("task_get")
            .unwrap_or_else(|| panic!("task {id} has no record"));
        assert_eq!(
            info.state,
            TaskState::Completed,
            "task {id} was lost: {info:?}"
        );
        let result: Option<String> = info
            .result
            .as_deref()
            .map(|r| serde_json::from_slice(r).expect("a JSON result"));
        let (child_ran, parent_ran) = (
            by_child.contains_key(id.as_str()),
            by_parent.contains(id.as_str()),
        );
        assert!(
            child_ran || parent_ran,
            "task {id} completed but no handler ran it"
        );
        match result.as_deref() {
            Some("child") => {
                childs_results += 1;
                assert!(
                    !parent_ran,
                    "task {id} ran again after the child's ack of it landed"
                );
            }
            Some("parent") => assert!(parent_ran, "task {id} has this consumer's result unrun"),
            other => panic!("task {id} completed with result {other:?}"),
        }
        if !child_ran && info.attempt >= 2 {
            came_back_unstarted += 1;
        }
    }
    println!(
        "{}: the child ran {} (its acks landed for {childs_results}), {came_back_unstarted} \
         reserved by it came back unstarted, this consumer ran {}",
        shared.url,
        child_runs.len(),
        parent_runs.len()
    );
    assert!(
        by_child.values().all(|&n| n == 1),
        "the child ran a task twice: {by_child:?}"
    );
    assert!(
        came_back_unstarted > 0,
        "the kill caught no prefetched task (child ran {}, this consumer {})",
        child_runs.len(),
        parent_runs.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_consumer_killed_holding_a_prefetched_batch() {
    let db: &'static TempSqlite = Box::leak(Box::new(TempSqlite::new()));
    killed_consumer_holding_a_batch(Shared {
        url: db.url(),
        prefix: "-".into(),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_consumer_killed_holding_a_prefetched_batch() {
    killed_consumer_holding_a_batch(Shared {
        url: redis_url(),
        prefix: format!("{}:", unique_prefix("killed")),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_consumer_killed_holding_a_prefetched_batch() {
    let url = postgres_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    killed_consumer_holding_a_batch(Shared {
        url: format!("{url}{sep}schema={}", unique_schema("killed")),
        prefix: "-".into(),
    })
    .await;
}
