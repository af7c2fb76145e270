//! Measures the SQLite event store on this machine (numbers for ADR 0031 and the report):
//!
//! * `claim_start` on a fresh session against a session with 500 closed runs;
//! * the seed's open-run query on that same session, for comparison;
//! * single-event and 100-event appends per second, one writer.
//!
//! `cargo run --release -p switchyard-store-sqlite --example bench` (about 20 s).

use std::time::{Duration, Instant};

use sqlx::Connection;
use switchyard_conformance::harness::TempSqlite;
use switchyard_core::event::{
    Block, InvocableKind, MessageText, Payload, RunCompleted, RunStarted, Usage,
};
use switchyard_core::{EventStore, RunContext};
use switchyard_store_sqlite::SqliteEventStore;

const HOUR: Duration = Duration::from_secs(3600);
const CLOSED_RUNS: usize = 500;
const DELTAS_PER_RUN: usize = 8;
const SAMPLES: usize = 300;

fn started() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![Block::text("done")],
        usage: Usage {
            input_tokens: 10,
            output_tokens: 20,
            usd: None,
        },
    })
}

fn delta(i: usize) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: format!("a chunk of streamed text, number {i}"),
    })
}

/// One closed run: claimed, some streamed text, completed.
async fn closed_run(store: &SqliteEventStore, session: &str, run: &str) {
    let ctx = RunContext::new(run).with_session(session);
    let (claim, _) = store
        .claim_start(&ctx, started(), "helper", HOUR)
        .await
        .expect("claim");
    assert!(claim.won());
    store
        .append(&ctx, (0..DELTAS_PER_RUN).map(delta).collect(), "helper")
        .await
        .expect("append");
    store
        .append(&ctx, vec![completed()], "helper")
        .await
        .expect("append");
}

/// Times one winning claim on `session`, then closes the claimed run (untimed) so the next claim
/// takes the same path.
async fn time_claim(store: &SqliteEventStore, session: &str, run: &str) -> Duration {
    let ctx = RunContext::new(run).with_session(session);
    let t = Instant::now();
    let (claim, _) = store
        .claim_start(&ctx, started(), "helper", HOUR)
        .await
        .expect("claim");
    let took = t.elapsed();
    assert!(claim.won());
    store
        .append(&ctx, vec![completed()], "helper")
        .await
        .expect("close");
    took
}

fn summary(times: &mut [Duration]) -> (f64, f64) {
    times.sort_unstable();
    let median = times[times.len() / 2].as_secs_f64() * 1e6;
    let mean = times.iter().map(Duration::as_secs_f64).sum::<f64>() / times.len() as f64 * 1e6;
    (median, mean)
}

#[tokio::main]
async fn main() {
    let file = TempSqlite::new();
    let store = SqliteEventStore::open(file.path()).await.expect("open");

    for r in 0..CLOSED_RUNS {
        closed_run(&store, "long", &format!("closed-{r:03}")).await;
    }
    // Warm up, then alternate the two cases so drift (WAL growth, machine load) hits both alike.
    for i in 0..50 {
        time_claim(&store, &format!("warm-{i}"), "warm").await;
    }
    let mut fresh = Vec::with_capacity(SAMPLES);
    let mut long = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        fresh.push(time_claim(&store, &format!("fresh-{i}"), "timed").await);
        long.push(time_claim(&store, "long", &format!("timed-{i}")).await);
    }
    let (fresh_median, fresh_mean) = summary(&mut fresh);
    let (long_median, long_mean) = summary(&mut long);

    // The seed's open-run query (agentdeck's own SQL) on the same session, for comparison.
    let mut conn = sqlx::SqliteConnection::connect_with(
        &sqlx::sqlite::SqliteConnectOptions::new().filename(file.path()),
    )
    .await
    .expect("connect");
    let seed_query = "SELECT run_id, data, MAX(id) FROM events \
        WHERE namespace = ?1 AND log_key = ?2 AND json_extract(data, '$.kind') IN \
        ('run.started', 'run.paused', 'run.resumed', 'run.interrupted', 'run.completed', \
        'run.failed', 'run.cancelled') GROUP BY run_id";
    let mut seed = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        sqlx::query(seed_query)
            .bind("")
            .bind("long")
            .fetch_all(&mut conn)
            .await
            .expect("seed query");
        seed.push(t.elapsed());
    }
    let (seed_median, _) = summary(&mut seed);

    // One writer, single-event appends, then 100-event batches, ~3 s each.
    let ctx = RunContext::new("appender").with_session("append");
    let mut n = 0usize;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        store
            .append(&ctx, vec![delta(n)], "helper")
            .await
            .expect("append");
        n += 1;
    }
    let single = n as f64 / t.elapsed().as_secs_f64();
    let ctx = RunContext::new("batcher").with_session("append");
    let mut events = 0usize;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        store
            .append(&ctx, (0..100).map(delta).collect(), "helper")
            .await
            .expect("append");
        events += 100;
    }
    let batched = events as f64 / t.elapsed().as_secs_f64();

    println!("| measurement | median µs | mean µs |");
    println!("|---|---|---|");
    println!(
        "| claim_start, fresh session ({SAMPLES} samples) | {fresh_median:.0} | {fresh_mean:.0} |"
    );
    println!(
        "| claim_start, {CLOSED_RUNS}+ closed runs of {} events ({SAMPLES} samples) | {long_median:.0} | {long_mean:.0} |",
        DELTAS_PER_RUN + 2
    );
    println!("| seed's open-run query alone, same session | {seed_median:.0} | |");
    println!();
    println!(
        "claim_start ratio (median, {CLOSED_RUNS} closed / fresh): {:.2}x",
        long_median / fresh_median
    );
    println!("append, one writer, 1 event per call: {single:.0} events/s");
    println!("append, one writer, 100 events per call: {batched:.0} events/s");
}
