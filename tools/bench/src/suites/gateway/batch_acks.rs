//! Draining a backlog through the HTTP worker API with batch acks (ADR 0387): workers that
//! reserve up to 100 tasks and end them with one `POST …/reservations/ack`, against the same
//! workers ending each task with its own ack request, on the same gateway, the same backlog, in
//! the same run.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::http::Http;
use super::{BATCH_ACKS, Gateway, failed, redis_args};
use crate::Ctx;
use crate::measure::{Sample, join_samples};
use crate::report::Case;
use crate::suites::{at_least, case};

/// Workers draining, each one keep-alive connection (the Python worker of the issue's
/// measurement was one process; four connections keep both gateway cores busy).
const WORKERS: usize = 4;
/// Tasks submitted before each drain.
const BACKLOG: usize = 10_000;
/// Connections submitting the backlog (not measured).
const FILLERS: usize = 32;
/// Tasks one reservation takes.
const RESERVE_MAX: usize = 100;

/// Submits `BACKLOG` tasks to `queue` through the gateway's submit route.
async fn fill(port: u16, queue: &str) -> Result<(), String> {
    let path: Arc<str> = format!("/v1/queues/{queue}/tasks").into();
    let fillers: Vec<_> = (0..FILLERS)
        .map(|f| {
            let path = path.clone();
            tokio::spawn(async move {
                let mut c = Http::connect(port).await.map_err(|e| e.to_string())?;
                let mut i = f;
                while i < BACKLOG {
                    c.post(&path, &json!({"payload": {"i": i}})).await?;
                    i += FILLERS;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for f in fillers {
        f.await.map_err(|e| format!("filler panicked: {e}"))??;
    }
    Ok(())
}

/// The receipts a reservation answered.
fn receipts(body: &Value) -> Result<Vec<String>, String> {
    body.get("tasks")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no `tasks` in {body}"))?
        .iter()
        .map(|t| {
            t.get("receipt")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("no receipt in {t}"))
        })
        .collect()
}

/// `WORKERS` workers drain `queue`: reserve up to `RESERVE_MAX`, then one batch ack (`batched`)
/// or one ack per task, until a reservation comes back empty. One latency row per round.
async fn drain(port: u16, queue: &str, batched: bool) -> Sample {
    let reserve_path: Arc<str> = format!("/v1/queues/{queue}/reservations").into();
    let start = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let path = reserve_path.clone();
            tokio::spawn(async move {
                let mut s = Sample::default();
                let mut c = match Http::open(port, "worker").await {
                    Ok(c) => c,
                    Err(failed) => return failed,
                };
                let reserve = json!({"max": RESERVE_MAX, "visibility_seconds": 300});
                loop {
                    let t = Instant::now();
                    let got = match c
                        .post_json(&path, &reserve)
                        .await
                        .and_then(|b| receipts(&b))
                    {
                        Ok(r) => r,
                        Err(e) => {
                            s.errors += 1;
                            s.first_error.get_or_insert(format!("reserve: {e}"));
                            break;
                        }
                    };
                    if got.is_empty() {
                        break;
                    }
                    let n = got.len() as u64;
                    let ended = if batched {
                        let acks: Vec<Value> = got.iter().map(|r| json!({"receipt": r})).collect();
                        c.post_json(&format!("{path}/ack"), &json!({"acks": acks}))
                            .await
                            .and_then(|b| {
                                let ok = b["results"]
                                    .as_array()
                                    .map_or(0, |r| r.iter().filter(|o| o["ok"] == true).count());
                                if ok == got.len() {
                                    Ok(())
                                } else {
                                    Err(format!("{ok} of {} acks landed: {b}", got.len()))
                                }
                            })
                    } else {
                        let mut res = Ok(());
                        for r in &got {
                            let ack = format!("{path}/{}/ack", super::workers::encode_segment(r));
                            if let Err(e) = c.post(&ack, &json!({})).await {
                                res = Err(e);
                                break;
                            }
                        }
                        res
                    };
                    if let Err(e) = ended {
                        s.errors += 1;
                        s.first_error.get_or_insert(format!("ack: {e}"));
                        break;
                    }
                    s.lat.push(t.elapsed());
                    s.ops += n;
                }
                s
            })
        })
        .collect();
    let mut all = join_samples(workers, "worker").await;
    all.elapsed = start.elapsed();
    all.lat.sort_unstable();
    all
}

/// Both drains on one gateway: per-task acks first, then batch acks, each on a fresh backlog.
async fn both(adapter: &str, gw: &Gateway) -> Case {
    let mut drains = Vec::new();
    for (queue, batched) in [("bench-drain-each", false), ("bench-drain-batch", true)] {
        if let Err(e) = fill(gw.port, queue).await {
            return failed(adapter, BATCH_ACKS, format!("filling {queue}: {e}"));
        }
        drains.push(drain(gw.port, queue, batched).await);
    }
    let (each, batch) = (&drains[0], &drains[1]);
    let ms = |p: Option<f64>| p.map_or("?".into(), |p| format!("{p:.1}"));
    let c = case("gateway", adapter, BATCH_ACKS, "tasks/s", batch, 1.0).against(
        "the same workers acking each task with its own request",
        (each.errors == 0 && each.ops > 0).then_some(each.rate()),
    );
    let drained = batch.ops == BACKLOG as u64 && each.ops == BACKLOG as u64;
    let met = at_least(c.ratio, 3.0) && c.errors == 0 && drained;
    let mut c = c
        .target("≥ 3× per-task acks, every task acked once", met)
        .note(format!(
            "a backlog of {BACKLOG} tasks (submitted through the gateway beforehand, not \
             measured) drained by {WORKERS} keep-alive workers reserving up to {RESERVE_MAX}; \
             latency = one round (reserve + its acks); batch: {} tasks, round p50 {} ms; \
             per-task acks: {} tasks at {:.0} tasks/s, round p50 {} ms",
            batch.ops,
            ms(batch.pct_ms(50.0)),
            each.ops,
            each.rate(),
            ms(each.pct_ms(50.0)),
        ));
    if let Some(e) = &each.first_error {
        c = c.note(format!("{} per-task errors, first: {e}", each.errors));
    }
    c
}

pub(super) async fn sqlite(ctx: &Ctx, bin: &Path) -> Case {
    let db = ctx.sqlite_dir.join("gateway-drain.db");
    let backend = vec!["--sqlite".to_string(), db.display().to_string()];
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &backend, 0).await {
        Ok(g) => g,
        Err(e) => return failed("sqlite", BATCH_ACKS, e),
    };
    both("sqlite", &gw).await
}

pub(super) async fn redis(ctx: &Ctx, bin: &Path) -> Case {
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &redis_args(ctx, "gwdrain"), 0).await {
        Ok(g) => g,
        Err(e) => return failed("redis", BATCH_ACKS, e),
    };
    both("redis", &gw).await
}
