//! Processes, not only tasks, sharing one PostgreSQL schema: this test binary re-runs itself as
//! child consumers (`child_process_entry`, inert unless the child environment variable is set).

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_conformance::harness::{postgres_url, unique_schema};
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet::{Consumer, ConsumerConfig, Queue};
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};
use switchyard_postgres_support::Schema;

const ROLE: &str = "SWITCHYARD_FLEET_CHILD_ROLE";
const URL: &str = "SWITCHYARD_FLEET_CHILD_URL";
const SCHEMA: &str = "SWITCHYARD_FLEET_CHILD_SCHEMA";
const QUEUE: &str = "jobs";
const TASKS: usize = 3000;

/// Where the parent and its children meet: the shared server and a schema of this test's own.
struct Db {
    url: String,
    schema: String,
}

impl Db {
    fn new() -> Db {
        Db {
            url: postgres_url(),
            schema: unique_schema("processes"),
        }
    }

    async fn open(url: &str, schema: &str) -> PostgresFleetBackend {
        let options = PostgresFleetOptions {
            pool: PostgresFleetOptions::default()
                .pool
                .schema(Schema::new(schema).expect("schema")),
            ..PostgresFleetOptions::default()
        };
        PostgresFleetBackend::open_with(url, options)
            .await
            .expect("open")
    }
}

fn spawn_child(role: &str, db: &Db) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    Command::new(exe)
        .args([
            "--exact",
            "child_process_entry",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(ROLE, role)
        .env(URL, &db.url)
        .env(SCHEMA, &db.schema)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn child")
}

async fn wait_child(mut child: Child) -> std::process::ExitStatus {
    tokio::task::spawn_blocking(move || child.wait().expect("wait child"))
        .await
        .expect("join")
}

/// The child side. Roles: `consume` takes tasks until the producer is done and the queue is
/// empty, counting each delivery under `delivered:{id}`; `hang` reserves one task and never
/// finishes (the parent SIGKILLs it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let url = std::env::var(URL).expect("url");
    let schema = std::env::var(SCHEMA).expect("schema");
    let b = Db::open(&url, &schema).await;
    match role.as_str() {
        "consume" => loop {
            match b
                .queue_reserve(QUEUE, Duration::from_millis(200), Duration::from_secs(60))
                .await
                .expect("reserve")
            {
                Some(d) => {
                    let id = d.task_id.clone().expect("task id");
                    b.counter_incr(&format!("delivered:{id}"), 1)
                        .await
                        .expect("count");
                    if !b.queue_ack(QUEUE, &d.receipt).await.expect("ack") {
                        b.counter_incr("late_acks", 1).await.expect("count");
                    }
                }
                None => {
                    if b.counter_get("producer_done").await.expect("get") == 1
                        && b.queue_size(QUEUE).await.expect("size") == 0
                    {
                        return;
                    }
                }
            }
        },
        "hang" => {
            let d = b
                .queue_reserve(QUEUE, Duration::from_secs(10), Duration::from_millis(500))
                .await
                .expect("reserve")
                .expect("a task to hang on");
            b.counter_set("hung_attempt", i64::from(d.attempt))
                .await
                .expect("signal");
            futures::future::pending::<()>().await;
        }
        other => panic!("unknown child role {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_share_one_schema_and_ack_each_task_once() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let db = Db::new();
    let b = Db::open(&db.url, &db.schema).await;
    let children: Vec<Child> = (0..4).map(|_| spawn_child("consume", &db)).collect();
    // Produce while the consumers run.
    for i in 0..TASKS {
        let body = format!(r#"{{"id": "t{i}", "payload": {{}}, "attempt": 0}}"#);
        b.queue_push(QUEUE, body.as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    b.counter_set("producer_done", 1).await.expect("done");
    for child in children {
        let status = tokio::time::timeout(Duration::from_secs(120), wait_child(child))
            .await
            .expect("children finish within 120 s");
        assert!(status.success(), "child failed: {status}");
    }
    let mut twice = Vec::new();
    for i in 0..TASKS {
        let n = b
            .counter_get(&format!("delivered:t{i}"))
            .await
            .expect("count");
        if n != 1 {
            twice.push((i, n));
        }
    }
    assert!(
        twice.is_empty(),
        "tasks not delivered exactly once: {twice:?}"
    );
    assert_eq!(b.counter_get("late_acks").await.expect("late"), 0);
    assert_eq!(b.queue_size(QUEUE).await.expect("size"), 0);
    assert!(
        b.queue_reserve(QUEUE, Duration::ZERO, Duration::from_secs(1))
            .await
            .expect("reserve")
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_consumers_task_returns_counted_and_dead_letters_after_its_maximum() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let db = Db::new();
    let b: Arc<dyn FleetBackend> = Arc::new(Db::open(&db.url, &db.schema).await);
    b.queue_push(
        QUEUE,
        br#"{"id": "victim", "payload": {}, "attempt": 0, "submitted_at": 1e10, "max_attempts": 2}"#,
        Priority::High,
    )
    .await
    .expect("push");
    for attempt in 1..=2 {
        b.counter_set("hung_attempt", 0).await.expect("reset");
        let mut child = spawn_child("hang", &db);
        let mut seen = 0;
        for _ in 0..600 {
            seen = b.counter_get("hung_attempt").await.expect("get");
            if seen != 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(seen, attempt, "delivery {attempt} counted");
        child.kill().expect("SIGKILL");
        wait_child(child).await;
        // The reservation lapses; the sweep returns it.
        let mut swept = 0;
        for _ in 0..100 {
            swept = b.queue_sweep_expired(QUEUE).await.expect("sweep");
            if swept > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(swept, 1, "the killed consumer's task came back");
    }
    // Two deliveries died with their workers: the next one is past the maximum.
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let q: Queue<serde_json::Value> = Queue::new(b.clone(), QUEUE);
    let cfg = ConsumerConfig {
        poll: Duration::from_millis(50),
        sweep_every: None,
        ..ConsumerConfig::default()
    };
    let handle = Consumer::spawn(q.clone(), cfg, move |_t| {
        let c = c.clone();
        async move {
            *c.lock().expect("lock") += 1;
            Ok(())
        }
    });
    for _ in 0..400 {
        if handle.stats().dead_lettered == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let stats = handle.shutdown().await;
    assert_eq!(stats.dead_lettered, 1);
    assert_eq!(*calls.lock().expect("lock"), 0, "not run a third time");
    let dead = q.dlq_peek_raw(5).await.expect("dlq");
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].starts_with(br#"{"id": "victim", "payload": {}, "attempt": 3"#),
        "{}",
        String::from_utf8_lossy(&dead[0])
    );
}
