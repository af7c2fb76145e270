//! A quick load of the SQLite job queue for profiling (`perf record`), without the bench
//! harness: the 1-row write-transaction floor, then 64 workers doing push → reserve → ack, then
//! 64 workers doing batches of 100. `cargo xtask bench --suite queue-sqlite` is the measurement
//! of record; this only needs this crate built.
//!
//! ```sh
//! cargo run --release -p switchyard-fleet-sqlite --example queue_load -- [secs] [calls|batch|all]
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{ConnectOptions, Connection};
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_sqlite::SqliteFleetBackend;

const VIS: Duration = Duration::from_secs(60);

fn body(w: usize, i: u64, k: usize) -> Vec<u8> {
    format!(r#"{{"id":"{w}-{i}-{k}","payload":{{"worker":{w},"i":{i}}},"attempts":0}}"#)
        .into_bytes()
}

async fn floor(dir: &std::path::Path, secs: f64) -> f64 {
    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.join("floor.db"))
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
        .connect()
        .await
        .expect("floor");
    sqlx::query("CREATE TABLE f (id INTEGER PRIMARY KEY AUTOINCREMENT, data TEXT NOT NULL)")
        .execute(&mut c)
        .await
        .expect("create");
    let row = "x".repeat(230);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut n = 0u64;
    while Instant::now() < until {
        let mut tx = c.begin_with("BEGIN IMMEDIATE").await.expect("begin");
        sqlx::query("INSERT INTO f (data) VALUES (?1)")
            .bind(&row)
            .execute(&mut *tx)
            .await
            .expect("insert");
        tx.commit().await.expect("commit");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

async fn run(b: Arc<SqliteFleetBackend>, secs: f64, batch: bool) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..64 {
        let (b, done) = (b.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < until {
                i += 1;
                if batch {
                    let bodies: Vec<Vec<u8>> = (0..100).map(|k| body(w, i, k)).collect();
                    b.queue_push_many("q", &bodies, Priority::Normal)
                        .await
                        .expect("push");
                    let mut got = Vec::new();
                    while got.len() < 100 {
                        let more = b
                            .queue_reserve_many("q", 100 - got.len(), Duration::from_secs(1), VIS)
                            .await
                            .expect("reserve");
                        assert!(!more.is_empty(), "reserve_many timed out");
                        got.extend(more.into_iter().map(|d| d.receipt));
                    }
                    let acked = b.queue_ack_many("q", &got).await.expect("ack");
                    assert!(acked.iter().all(|a| *a));
                    done.fetch_add(100, Ordering::Relaxed);
                } else {
                    b.queue_push("q", &body(w, i, 0), Priority::Normal)
                        .await
                        .expect("push");
                    let d = b
                        .queue_reserve("q", Duration::from_secs(1), VIS)
                        .await
                        .expect("reserve")
                        .expect("a task");
                    assert!(b.queue_ack("q", &d.receipt).await.expect("ack"));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("worker");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let which = args.next().unwrap_or_else(|| "all".into());
    let dir = tempfile_dir();
    let f = floor(&dir, secs.min(2.0)).await;
    println!("floor: {f:.0} tx/s");
    if which == "calls" || which == "all" {
        let b = Arc::new(
            SqliteFleetBackend::open(dir.join("calls.db"))
                .await
                .expect("open"),
        );
        let r = run(b.clone(), secs, false).await;
        println!("calls: {r:.0} tasks/s = {:.2}x floor", r / f);
        b.close().await;
    }
    if which == "batch" || which == "all" {
        let b = Arc::new(
            SqliteFleetBackend::open(dir.join("batch.db"))
                .await
                .expect("open"),
        );
        let r = run(b.clone(), secs, true).await;
        println!("batch: {r:.0} tasks/s = {:.2}x floor", r / f);
        b.close().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("queue-load-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}
