//! Throughput of `SqliteFleetBackend` at concurrency 64: push → reserve → ack round trips per
//! second, and lock acquire → release per second. Run with
//! `cargo run --release -p switchyard-fleet-sqlite --example sqlite_bench [seconds]`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchyard_core::fleet::{FleetBackend, Priority};
use switchyard_fleet_sqlite::SqliteFleetBackend;

const CONCURRENCY: usize = 64;

async fn run<F, Fut>(secs: u64, op: F) -> (u64, f64)
where
    F: Fn(usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let until = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for w in 0..CONCURRENCY {
        let (done, op) = (done.clone(), op.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while Instant::now() < until {
                op(w, i).await;
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("worker");
    }
    let n = done.load(Ordering::Relaxed);
    (n, n as f64 / start.elapsed().as_secs_f64())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("switchyard-fleet-bench-{}", std::process::id()));
    let path = dir.join("fleet.db");
    let b: Arc<dyn FleetBackend> = Arc::new(SqliteFleetBackend::open(&path).await.expect("open"));

    // Bodies with ids (a task record, an end event and default retention per task, ADR 0380)
    // against bodies without, alternated so drift falls on both alike.
    let mut rates = [0.0f64; 2];
    for round in 0..2 {
        for ids in [false, true] {
            let qb = b.clone();
            let queue = format!("bench-{round}-{ids}");
            let (n, rate) = run(secs, move |w, i| {
                let (b, q) = (qb.clone(), queue.clone());
                async move {
                    let body = if ids {
                        format!(r#"{{"id": "t-{w}-{i}", "payload": {{}}, "attempt": 0}}"#)
                    } else {
                        format!(r#"{{"task": "t-{w}-{i}", "payload": {{}}, "attempt": 0}}"#)
                    };
                    b.queue_push(&q, body.as_bytes(), Priority::Normal)
                        .await
                        .expect("push");
                    let d = b
                        .queue_reserve(&q, Duration::ZERO, Duration::from_secs(60))
                        .await
                        .expect("reserve")
                        .expect("a task is waiting");
                    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
                }
            })
            .await;
            let what = if ids { "with ids" } else { "without ids" };
            println!(
                "sqlite push->reserve->ack, concurrency {CONCURRENCY}, bodies {what}: {n} tasks in {secs} s = {rate:.0} tasks/s"
            );
            rates[usize::from(ids)] += rate;
        }
    }
    println!(
        "bodies with ids / without: {:.2}x",
        rates[1] / rates[0].max(f64::MIN_POSITIVE)
    );

    let lb = b.clone();
    let (n, rate) = run(secs, move |w, _| {
        let b = lb.clone();
        async move {
            let name = format!("lock-{w}");
            let g = b
                .lock_acquire(&name, Duration::from_secs(30), Duration::from_secs(5))
                .await
                .expect("acquire")
                .expect("free");
            assert!(b.lock_release(&name, &g.token).await.expect("release"));
        }
    })
    .await;
    println!(
        "sqlite lock acquire->release, concurrency {CONCURRENCY}: {n} in {secs} s = {rate:.0} pairs/s"
    );
    drop(b);
    let _ = std::fs::remove_dir_all(dir);
}
