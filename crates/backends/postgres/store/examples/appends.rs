//! Appends per second against the floors of the same server in the same run: a 1-row `INSERT`
//! transaction (`BEGIN; INSERT; COMMIT`) on one connection, and the same on 64 connections.
//!
//! ```sh
//! cargo run --release -p switchyard-store-postgres --example appends [-- SECONDS]
//! ```
//!
//! Cases (SECONDS each, default 3): one writer appending one event at a time to one run; 64
//! writers on 64 runs; 64 writers on one run (they take turns on its row lock). The harness's
//! server (fsync off) unless `POSTGRES_URL` names another.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::PgPoolOptions;
use switchyard_conformance::harness::{postgres_url, unique_schema};
use switchyard_core::event::{MessageText, Payload};
use switchyard_core::{EventStore, RunContext};
use switchyard_store_postgres::{PostgresEventStore, PostgresOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let duration = Duration::from_secs(seconds);
    let url = postgres_url();
    let schema = unique_schema("appends");
    let store = Arc::new(
        PostgresEventStore::open_with(
            &url,
            PostgresOptions::default()
                .schema(&schema)
                .max_connections(64),
        )
        .await?,
    );
    let pool = PgPoolOptions::new()
        .max_connections(64)
        .connect(&url)
        .await?;
    sqlx::query(&format!(
        "CREATE TABLE {schema}.floor (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, data TEXT NOT NULL)"
    ))
    .execute(&pool)
    .await?;
    let insert = format!("INSERT INTO {schema}.floor (data) VALUES ($1)");
    let data = r#"{"v":{"major":3,"minor":1},"kind":"text.delta","seq":0,"payload":{"text":"hi"}}"#;

    let floor = |workers: usize| {
        let (pool, insert) = (pool.clone(), insert.clone());
        rate(workers, duration, move |_| {
            let (pool, insert) = (pool.clone(), insert.clone());
            async move {
                let mut conn = pool.acquire().await.expect("connection");
                let mut tx = conn.begin().await.expect("begin");
                sqlx::query(&insert)
                    .bind(data)
                    .execute(&mut *tx)
                    .await
                    .expect("insert");
                tx.commit().await.expect("commit");
            }
        })
    };
    let appends = |workers: usize, runs: usize| {
        let store = store.clone();
        let ctxs: Vec<RunContext> = (0..runs)
            .map(|i| RunContext::new(format!("run-{runs}-{i}")))
            .collect();
        rate(workers, duration, move |worker| {
            let (store, ctx) = (store.clone(), ctxs[worker % ctxs.len()].clone());
            async move {
                let payload = Payload::TextDelta(MessageText {
                    message_id: "m".into(),
                    text: "hi".into(),
                });
                store
                    .append(&ctx, vec![payload], "bench")
                    .await
                    .expect("append");
            }
        })
    };
    let floor_1 = floor(1).await;
    let one_writer = appends(1, 1).await;
    let floor_64 = floor(64).await;
    let many_runs = appends(64, 64).await;
    let one_run = appends(64, 1).await;
    println!("| case | ops/s | ratio to its floor |");
    println!("|---|---|---|");
    println!("| floor: 1-row INSERT transaction, 1 connection | {floor_1:.0} | 1.00 |");
    println!(
        "| append, 1 writer, 1 run | {one_writer:.0} | {:.2} |",
        one_writer / floor_1
    );
    println!("| floor: 1-row INSERT transaction, 64 connections | {floor_64:.0} | 1.00 |");
    println!(
        "| append, 64 writers, 64 runs | {many_runs:.0} | {:.2} |",
        many_runs / floor_64
    );
    println!(
        "| append, 64 writers, 1 run | {one_run:.0} | {:.2} |",
        one_run / floor_64
    );
    Ok(())
}

/// Runs `op` in a loop on `workers` tasks for `duration`; operations per second.
async fn rate<F, Fut>(workers: usize, duration: Duration, op: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|worker| {
            let (op, done) = (op.clone(), done.clone());
            tokio::spawn(async move {
                while start.elapsed() < duration {
                    op(worker).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}
