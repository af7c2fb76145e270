//! Job queue: push → reserve → ack through the typed `Queue`, at concurrency 64; then the typed
//! `Consumer`'s cases on the same backend (`consumer.rs`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_kit::core::FleetBackend;
use switchyard_kit::fleet::redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_kit::fleet::sqlite::SqliteFleetBackend;
use switchyard_kit::fleet::typed::{Queue, Reserved};
use switchyard_postgres_support::Schema;

use super::{at_least, case, consumer, tasks};
use crate::Ctx;
use crate::floor::{PG_TX64, SET64, SQLITE_TX};
use crate::measure::{Sample, closed_loop, err};
use crate::report::Case;
use crate::suites::store::failed;
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};

pub(crate) const QUEUE_64: &str = "queue push → reserve → ack, concurrency 64";

pub(crate) async fn redis(ctx: &Ctx) -> Vec<Case> {
    if !ctx.wants(QUEUE_64) && !wants_consumer(ctx) && !tasks::wanted(ctx) {
        return Vec::new();
    }
    let config = RedisFleetConfig::new(ctx.redis()).with_prefix(format!("{}:fleet:", ctx.prefix));
    match RedisFleetBackend::with_config(config).await {
        Ok(b) => {
            let b: Arc<dyn FleetBackend> = Arc::new(b);
            let mut out = Vec::new();
            if ctx.wants(QUEUE_64) {
                let c = measure(ctx, "redis", b.clone()).await;
                let c = c.against(SET64, ctx.floors.redis_set64);
                let met = c.rate >= 10_000.0 && c.errors == 0;
                out.push(c.target("≥ 10,000 tasks/s", met));
            }
            let floor = consumer::Floor {
                name: SET64,
                rate: ctx.floors.redis_set64,
                drain_min: 1.0,
                drain_target: "≥ 1.0× 64-connection SET floor",
            };
            out.extend(consumer::cases(ctx, "redis", b.clone(), floor).await);
            out.extend(tasks::records(ctx, "redis", b.clone()).await);
            out.extend(tasks::round_trip(ctx, b).await);
            out
        }
        Err(e) => vec![failed("redis", e)],
    }
}

/// Whether any of the consumer cases is chosen.
fn wants_consumer(ctx: &Ctx) -> bool {
    [
        consumer::DRAIN_OFF,
        consumer::DRAIN_ON,
        consumer::FEED_OFF,
        consumer::FEED_ON,
    ]
    .iter()
    .any(|n| ctx.wants(n))
}

pub(crate) async fn sqlite(ctx: &Ctx) -> Vec<Case> {
    if !ctx.wants(QUEUE_64) && !wants_consumer(ctx) && !tasks::wanted(ctx) {
        return Vec::new();
    }
    match SqliteFleetBackend::open(ctx.sqlite_dir.join("fleet.db")).await {
        Ok(b) => {
            let b: Arc<dyn FleetBackend> = Arc::new(b);
            let mut out = Vec::new();
            if ctx.wants(QUEUE_64) {
                let c = measure(ctx, "sqlite", b.clone()).await;
                let c = c.against(SQLITE_TX, ctx.floors.sqlite_tx);
                let met = c.rate >= 3_000.0 && c.errors == 0;
                out.push(c.target("≥ 3,000 tasks/s", met));
            }
            let floor = consumer::Floor {
                name: SQLITE_TX,
                rate: ctx.floors.sqlite_tx,
                drain_min: 4.0,
                drain_target: "≥ 4× 1-row write transaction",
            };
            out.extend(consumer::cases(ctx, "sqlite", b.clone(), floor).await);
            out.extend(tasks::records(ctx, "sqlite", b).await);
            out
        }
        Err(e) => vec![failed("sqlite", e)],
    }
}

pub(crate) async fn postgres(ctx: &Ctx) -> Vec<Case> {
    if !ctx.wants(QUEUE_64) && !wants_consumer(ctx) && !tasks::wanted(ctx) {
        return Vec::new();
    }
    let schema = match Schema::new(ctx.pg_schema("queue")) {
        Ok(s) => s,
        Err(e) => return vec![failed("postgres", e)],
    };
    // One connection per concurrent caller, as the floor has.
    let options = PostgresFleetOptions {
        pool: PostgresFleetOptions::default()
            .pool
            .schema(schema)
            .max_connections(64),
        ..PostgresFleetOptions::default()
    };
    match PostgresFleetBackend::open_with(ctx.postgres(), options).await {
        Ok(b) => {
            let b: Arc<dyn FleetBackend> = Arc::new(b);
            let mut out = Vec::new();
            if ctx.wants(QUEUE_64) {
                let c = measure(ctx, "postgres", b.clone()).await;
                let c = c.against(PG_TX64, ctx.floors.postgres_tx64);
                let met = at_least(c.ratio, 0.5) && c.errors == 0;
                out.push(c.target("≥ 0.5× 64-connection INSERT floor", met));
            }
            let floor = consumer::Floor {
                name: PG_TX64,
                rate: ctx.floors.postgres_tx64,
                drain_min: 3.5,
                drain_target: "≥ 3.5× 64-connection INSERT floor",
            };
            out.extend(consumer::cases(ctx, "postgres", b.clone(), floor).await);
            out.extend(tasks::records(ctx, "postgres", b).await);
            out
        }
        Err(e) => vec![failed("postgres", e)],
    }
}

async fn measure(ctx: &Ctx, adapter: &str, backend: Arc<dyn FleetBackend>) -> Case {
    let queue: Arc<Queue<Value>> = Arc::new(Queue::new(backend, "bench"));
    let s = typed_cycles(ctx, queue.clone(), 64).await;
    let left = queue.len().await.map_or_else(
        |e| format!("len failed: {e}"),
        |n| format!("{n} left queued"),
    );
    case("queue", adapter, QUEUE_64, "tasks/s", &s, 1.0)
        .note(format!("typed Queue<Value>, default options; {left}"))
}

/// `workers` tasks each push → reserve → ack through the typed queue, back to back, for the
/// case's time (the queue cases and the gateway's worker case use the same cycle).
pub(crate) async fn typed_cycles(ctx: &Ctx, queue: Arc<Queue<Value>>, workers: usize) -> Sample {
    closed_loop(workers, ctx.case_time, move |w, i| {
        let q = queue.clone();
        async move {
            q.push(&json!({"worker": w, "i": i})).await.map_err(err)?;
            let got = q
                .reserve(Duration::from_secs(1), Duration::from_secs(60))
                .await
                .map_err(err)?;
            match got {
                Some(Reserved::Task(t)) => match q.ack(&t.delivery).await.map_err(err)? {
                    true => Ok(()),
                    false => Err("ack refused".to_string()),
                },
                Some(Reserved::Malformed { error, .. }) => Err(format!("malformed: {error}")),
                None => Err("nothing to reserve after a push".to_string()),
            }
        }
    })
    .await
}
