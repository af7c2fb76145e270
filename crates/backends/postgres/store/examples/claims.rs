//! Measures the three ways to make `claim_start` exactly-once on PostgreSQL's switchyard layout
//! (ADR 0223): the store's per-log row lock, an advisory lock, and SERIALIZABLE with retry. Each
//! runs the store's own `claim_start` function, with its lock replaced, against the harness's
//! server.
//!
//! ```sh
//! cargo run -p switchyard-store-postgres --example claims [-- SECONDS]
//! ```
//!
//! Workload: 64 claimers for SECONDS (default 3) per case. "one log": all on one session, each
//! won run is completed at once so the next claim can win (the contended case). "64 logs": one
//! claimer per session. Prints claims per second (won or refused), wins per second and, for
//! SERIALIZABLE, the share of attempts that aborted and were retried.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use switchyard_conformance::harness::{postgres_url, unique_schema};
use switchyard_store_postgres::{PostgresEventStore, PostgresLayout, PostgresOptions};

const MIGRATION: &str = include_str!("../migrations/1_events.sql");
const ROW_LOCK: &str =
    "    INSERT INTO logs AS l (namespace, log_key) VALUES (p_namespace, p_log_key)
        ON CONFLICT DO NOTHING;
    PERFORM 1 FROM logs AS l
        WHERE l.namespace = p_namespace AND l.log_key = p_log_key FOR UPDATE;";
const WORKERS: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Strategy {
    RowLock,
    Advisory,
    Serializable,
}

#[derive(Default)]
struct Counts {
    claims: AtomicU64,
    wins: AtomicU64,
    aborts: AtomicU64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let url = postgres_url();
    println!("| strategy | logs | claims/s | wins/s | aborted attempts |");
    println!("|---|---|---|---|---|");
    for strategy in [
        Strategy::RowLock,
        Strategy::Advisory,
        Strategy::Serializable,
    ] {
        for logs in [1, WORKERS] {
            let schema = unique_schema("claims");
            // The switchyard layout's function is the one whose lock is replaced (ADR 0378).
            let store = PostgresEventStore::open_with(
                &url,
                PostgresOptions::default()
                    .schema(&schema)
                    .layout(PostgresLayout::Switchyard),
            )
            .await?;
            store.close().await;
            let pool = PgPoolOptions::new()
                .max_connections(WORKERS as u32)
                .connect_with(
                    url.parse::<sqlx::postgres::PgConnectOptions>()?
                        .options([("search_path", schema.as_str())]),
                )
                .await?;
            install(&pool, strategy).await?;
            let counts = run(&pool, strategy, logs, Duration::from_secs(seconds)).await;
            let per_s = |n: &AtomicU64| n.load(Ordering::Relaxed) as f64 / seconds as f64;
            let attempts =
                counts.claims.load(Ordering::Relaxed) + counts.aborts.load(Ordering::Relaxed);
            println!(
                "| {strategy:?} | {logs} | {:.0} | {:.0} | {:.1} % |",
                per_s(&counts.claims),
                per_s(&counts.wins),
                100.0 * counts.aborts.load(Ordering::Relaxed) as f64 / attempts.max(1) as f64
            );
            pool.close().await;
        }
    }
    Ok(())
}

/// Replaces the schema's `claim_start` with the strategy's variant.
async fn install(pool: &PgPool, strategy: Strategy) -> Result<(), sqlx::Error> {
    let function = &MIGRATION[MIGRATION.find("CREATE FUNCTION claim_start(").unwrap_or(0)..];
    let lock = match strategy {
        Strategy::RowLock => return Ok(()),
        Strategy::Advisory => {
            "    PERFORM pg_advisory_xact_lock(hashtext(p_namespace), hashtext(p_log_key));"
        }
        Strategy::Serializable => "",
    };
    let sql = function
        .replacen("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
        .replace(ROW_LOCK, lock);
    sqlx::raw_sql(&sql).execute(pool).await.map(drop)
}

async fn run(pool: &PgPool, strategy: Strategy, logs: usize, duration: Duration) -> Arc<Counts> {
    let counts = Arc::new(Counts::default());
    let deadline = Instant::now() + duration;
    let tasks: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let (pool, counts) = (pool.clone(), counts.clone());
            tokio::spawn(async move {
                let log = format!("log-{}", worker % logs);
                let mut n = 0u64;
                while Instant::now() < deadline {
                    n += 1;
                    let run = format!("w{worker}-{n}");
                    match claim(&pool, strategy, &log, &run, &counts).await {
                        Ok(true) => {
                            counts.wins.fetch_add(1, Ordering::Relaxed);
                            // Close it at once, so the next claim on the log can win.
                            let _ = sqlx::query("UPDATE runs SET status = 'run.completed' WHERE namespace = '' AND log_key = $1 AND run_id = $2")
                                .bind(&log)
                                .bind(&run)
                                .execute(&pool)
                                .await;
                        }
                        Ok(false) => {}
                        Err(e) => eprintln!("{strategy:?}: {e}"),
                    }
                    counts.claims.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    counts
}

/// One claim; `Ok(true)` when it won. SERIALIZABLE retries aborted attempts.
async fn claim(
    pool: &PgPool,
    strategy: Strategy,
    log: &str,
    run: &str,
    counts: &Counts,
) -> Result<bool, sqlx::Error> {
    let call = "SELECT outcome FROM claim_start('', $1, $2, 3600000000, NULL, '{\"seq\":', ',\"ts\":\"', '\"}')";
    loop {
        let mut conn = pool.acquire().await?;
        let result: Result<Vec<String>, sqlx::Error> = if strategy == Strategy::Serializable {
            let mut tx = conn.begin().await?;
            sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
                .execute(&mut *tx)
                .await?;
            match sqlx::query_scalar(call)
                .bind(log)
                .bind(run)
                .fetch_all(&mut *tx)
                .await
            {
                Ok(rows) => tx.commit().await.map(|()| rows),
                Err(e) => Err(e),
            }
        } else {
            sqlx::query_scalar(call)
                .bind(log)
                .bind(run)
                .fetch_all(&mut *conn)
                .await
        };
        match result {
            Ok(rows) => return Ok(rows.iter().any(|o| o == "won")),
            Err(e) if switchyard_postgres_support::is_retryable(&e) => {
                counts.aborts.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
}
