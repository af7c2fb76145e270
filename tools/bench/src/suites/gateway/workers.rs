//! The HTTP worker API through the gateway (ADR 0340): 32 workers each reserve one task with a
//! long poll and ack it by its receipt, while producers submit tasks through the gateway's submit
//! route; against the library's push → reserve → ack with 32 workers on the same backend.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::{Value, json};
use switchyard_kit::core::FleetBackend;
use switchyard_kit::fleet::redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_kit::fleet::sqlite::SqliteFleetBackend;
use switchyard_kit::fleet::typed::Queue;
use tokio::sync::Semaphore;

use super::http::Http;
use super::{Cpu, Gateway, WORKER_API, failed, library_cpu, noop, redis_args};
use crate::Ctx;
use crate::commandstats::CommandStats;
use crate::measure::{Sample, join_samples};
use crate::report::Case;
use crate::suites::{at_least, case};

/// Workers, on the gateway and on the library alike.
const WORKERS: usize = 32;
/// Keep-alive connections submitting tasks through the gateway: as many as workers, so the
/// window fills and the workers are the limit (with half as many the producers were, and every
/// reservation on a near-empty queue cost the backend an empty attempt and a wake-up).
const PRODUCERS: usize = WORKERS;
/// Tasks submitted and not yet acked, at most: enough that a worker's reservation always finds
/// one, few enough that the queue stays short (a producer waits for an ack past it).
const WINDOW: usize = 4 * WORKERS;
/// The queue both sides use (each on its own backend file or key prefix).
const QUEUE: &str = "bench-http";

/// A receipt as one path segment: everything but unreserved characters percent-encoded.
pub(super) fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The receipt of the one task a reservation answered, or `None` when it answered none.
fn receipt_of(body: &Value) -> Result<Option<String>, String> {
    let tasks = body
        .get("tasks")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no `tasks` in {body}"))?;
    let Some(task) = tasks.first() else {
        return Ok(None);
    };
    if let Some(why) = task.get("malformed") {
        return Err(format!("malformed task: {why}"));
    }
    task.get("receipt")
        .and_then(Value::as_str)
        .map(|r| Some(r.to_string()))
        .ok_or_else(|| format!("no receipt in {task}"))
}

/// What the HTTP side measured.
struct HttpWorkers {
    /// One row per acked task: the worker's reserve + ack round.
    acked: Sample,
    /// Every submit.
    submits: Sample,
    /// Reservations that answered no task.
    empty: u64,
    /// Submits that waited for the window (the workers were behind); few means the producers
    /// were the limit.
    window_waits: u64,
    /// CPU per request of gateway and client.
    cpu: String,
    /// The no-op route on the same gateway, as many clients as producers and workers.
    noop: Sample,
    noop_cpu: String,
}

/// `WORKERS` long-polling workers and `PRODUCERS` submitting clients on one gateway for the
/// case's time.
async fn http_workers(ctx: &Ctx, gw: &Gateway) -> HttpWorkers {
    let port = gw.port;
    let cpu_before = Cpu::now(gw);
    let window = Arc::new(Semaphore::new(WINDOW));
    let empty = Arc::new(AtomicU64::new(0));
    let window_waits = Arc::new(AtomicU64::new(0));
    // Every request made, those past the end included, for the CPU per request.
    let sent = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + ctx.case_time;
    let submit_path: Arc<str> = format!("/v1/queues/{QUEUE}/tasks").into();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (window, path, sent, waits) = (
                window.clone(),
                submit_path.clone(),
                sent.clone(),
                window_waits.clone(),
            );
            tokio::spawn(async move {
                let mut c = match Http::open(port, "producer").await {
                    Ok(c) => c,
                    Err(failed) => return failed,
                };
                let mut s = Sample::default();
                let mut i = 0u64;
                loop {
                    // Waits while the window is full; the permit returns when a worker acks.
                    let permit = match window.try_acquire() {
                        Ok(p) => p,
                        Err(_) => {
                            waits.fetch_add(1, Ordering::Relaxed);
                            let Ok(p) = window.acquire().await else {
                                break;
                            };
                            p
                        }
                    };
                    permit.forget();
                    let t = Instant::now();
                    let body = json!({"payload": {"producer": p, "i": i}});
                    let r = c.post(&path, &body).await;
                    sent.fetch_add(1, Ordering::Relaxed);
                    if Instant::now() > until {
                        break;
                    }
                    s.lat.push(t.elapsed());
                    s.ops += 1;
                    if let Err(e) = r {
                        s.errors += 1;
                        s.first_error.get_or_insert(format!("submit: {e}"));
                        window.add_permits(1);
                    }
                    i += 1;
                }
                s
            })
        })
        .collect();
    let start = Instant::now();
    let reserve_path: Arc<str> = format!("/v1/queues/{QUEUE}/reservations").into();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (window, empty, path, sent) = (
                window.clone(),
                empty.clone(),
                reserve_path.clone(),
                sent.clone(),
            );
            tokio::spawn(async move {
                let mut c = match Http::open(port, "worker").await {
                    Ok(c) => c,
                    Err(failed) => return failed,
                };
                let mut s = Sample::default();
                let reserve = json!({"max": 1, "wait_seconds": 1, "visibility_seconds": 60});
                while Instant::now() < until {
                    let t = Instant::now();
                    sent.fetch_add(1, Ordering::Relaxed);
                    let receipt = match c
                        .post_json(&path, &reserve)
                        .await
                        .and_then(|b| receipt_of(&b))
                    {
                        Ok(Some(r)) => r,
                        Ok(None) => {
                            empty.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        Err(e) => {
                            s.errors += 1;
                            s.first_error.get_or_insert(format!("reserve: {e}"));
                            continue;
                        }
                    };
                    let ack = format!("{path}/{}/ack", encode_segment(&receipt));
                    let r = c.post(&ack, &json!({})).await;
                    sent.fetch_add(1, Ordering::Relaxed);
                    if r.is_ok() {
                        window.add_permits(1);
                    }
                    // Only rounds that ended inside the measured time count (a long poll
                    // straddling the end would stretch it).
                    if Instant::now() > until {
                        break;
                    }
                    s.lat.push(t.elapsed());
                    s.ops += 1;
                    if let Err(e) = r {
                        s.errors += 1;
                        s.first_error.get_or_insert(format!("ack: {e}"));
                    }
                }
                s
            })
        })
        .collect();
    let mut acked = join_samples(workers, "worker").await;
    acked.elapsed = until.saturating_duration_since(start);
    acked.lat.sort_unstable();
    // Producers blocked on a full window stop here.
    window.close();
    let mut submits = join_samples(producers, "producer").await;
    submits.elapsed = acked.elapsed;
    submits.lat.sort_unstable();
    let empty = empty.load(Ordering::Relaxed);
    let cpu = Cpu::per_request(cpu_before, Cpu::now(gw), sent.load(Ordering::Relaxed));
    let (noop, noop_cpu) = noop(ctx, gw, WORKERS + PRODUCERS).await;
    HttpWorkers {
        acked,
        submits,
        empty,
        window_waits: window_waits.load(Ordering::Relaxed),
        cpu,
        noop,
        noop_cpu,
    }
}

/// The library's rate on the same backend: `WORKERS` tasks each push → reserve → ack through the
/// typed queue, back to back.
async fn library_workers(ctx: &Ctx, backend: Arc<dyn FleetBackend>) -> Sample {
    let queue: Arc<Queue<Value>> = Arc::new(Queue::new(backend, QUEUE));
    crate::suites::queue::typed_cycles(ctx, queue, WORKERS).await
}

/// `redis`: the server's calls and time per task through the gateway, and per library task.
fn worker_case(
    adapter: &str,
    gw: HttpWorkers,
    (lib, lib_cpu): (Sample, String),
    redis: Option<(String, String)>,
) -> Case {
    let lib_rate = lib.rate();
    let ms = |p: Option<f64>| p.map_or("?".into(), |p| format!("{p:.2}"));
    let c = case("gateway", adapter, WORKER_API, "tasks/s", &gw.acked, 1.0).against(
        &format!("library push → reserve → ack, {WORKERS} workers ({adapter})"),
        (lib.errors == 0).then_some(lib_rate),
    );
    let met = at_least(c.ratio, 0.3) && c.errors == 0 && gw.submits.errors == 0;
    let mut c = c.target("≥ 0.3× the library's rate", met).note(format!(
        "tasks submitted through POST /v1/queues/{{q}}/tasks by {PRODUCERS} keep-alive \
             clients, at most {WINDOW} unacked; latency = one worker's reserve (long poll, \
             max 1) + ack; submit p50 {} ms, p99 {} ms ({} submits, {} of them waited for the \
             window); {} empty reservations; \
             library in the same run: {lib_rate:.0} tasks/s, p99 {} ms (push + reserve + ack), \
             {lib_cpu}; \
             {}; no-op GET /healthz on the same gateway, {} clients: {:.0} requests/s, a \
             ceiling of {:.0} tasks/s at 3 requests a task ({})",
        ms(gw.submits.pct_ms(50.0)),
        ms(gw.submits.pct_ms(99.0)),
        gw.submits.ops,
        gw.window_waits,
        gw.empty,
        ms(lib.pct_ms(99.0)),
        gw.cpu,
        WORKERS + PRODUCERS,
        gw.noop.rate(),
        gw.noop.rate() / 3.0,
        gw.noop_cpu,
    ));
    if let Some((gw, lib)) = redis {
        c = c.note(format!(
            "per task through the gateway, {}; per library task, {}",
            gw.replace("per request", "per task"),
            lib.replace("per request", "per task")
        ));
    }
    if let Some(e) = &gw.submits.first_error {
        c = c.note(format!("{} submit errors, first: {e}", gw.submits.errors));
    }
    if let Some(e) = &lib.first_error {
        c = c.note(format!("{} library errors, first: {e}", lib.errors));
    }
    c
}

pub(super) async fn sqlite(ctx: &Ctx, bin: &Path) -> Case {
    let lib = match SqliteFleetBackend::open(ctx.sqlite_dir.join("gateway-library-fleet.db")).await
    {
        Ok(b) => b,
        Err(e) => return failed("sqlite", WORKER_API, e),
    };
    let lib_sample = library_cpu(library_workers(ctx, Arc::new(lib))).await;
    let db = ctx.sqlite_dir.join("gateway-workers.db");
    let backend = vec!["--sqlite".to_string(), db.display().to_string()];
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &backend, 0).await {
        Ok(g) => g,
        Err(e) => return failed("sqlite", WORKER_API, e),
    };
    let got = http_workers(ctx, &gw).await;
    drop(gw);
    worker_case("sqlite", got, lib_sample, None)
}

pub(super) async fn redis(ctx: &Ctx, bin: &Path) -> Case {
    let config =
        RedisFleetConfig::new(ctx.redis()).with_prefix(format!("{}:gwlibfleet:", ctx.prefix));
    let lib = match RedisFleetBackend::with_config(config).await {
        Ok(b) => b,
        Err(e) => return failed("redis", WORKER_API, e),
    };
    let before = CommandStats::now(ctx.redis()).await;
    let lib_sample = library_cpu(library_workers(ctx, Arc::new(lib))).await;
    let lib_redis = CommandStats::per_request(
        before.as_ref(),
        CommandStats::now(ctx.redis()).await.as_ref(),
        lib_sample.0.ops,
    );
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &redis_args(ctx, "gwq"), 0).await {
        Ok(g) => g,
        Err(e) => return failed("redis", WORKER_API, e),
    };
    let before = CommandStats::now(ctx.redis()).await;
    let got = http_workers(ctx, &gw).await;
    // Tasks acked in the measured time; the few after it and the no-op route add little.
    let gw_redis = CommandStats::per_request(
        before.as_ref(),
        CommandStats::now(ctx.redis()).await.as_ref(),
        got.acked.ops,
    );
    drop(gw);
    worker_case("redis", got, lib_sample, Some((gw_redis, lib_redis)))
}
