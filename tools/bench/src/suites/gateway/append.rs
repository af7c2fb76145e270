//! HTTP appends through the gateway against the library's append rate on the same backend.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use switchyard_kit::core::event::{Block, InvocableKind, MessageText, Payload, RunStarted};
use switchyard_kit::core::{EventStore, RunContext};
use switchyard_kit::store_redis::{RedisEventStore, RedisStoreOptions};
use switchyard_kit::store_sqlite::SqliteEventStore;

use super::http::Http;
use super::{APPEND, Cpu, Gateway, WRITERS, failed, library_cpu, noop, redis_args};
use crate::Ctx;
use crate::commandstats::CommandStats;
use crate::measure::{Sample, closed_loop, err};
use crate::report::Case;
use crate::suites::{at_least, case};

fn start_body(run_id: &str) -> Value {
    let started = Payload::RunStarted(RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    });
    let mut v = serde_json::to_value(&started).unwrap_or(Value::Null);
    if let Some(map) = v.as_object_mut() {
        map.remove("kind");
        map.insert("run_id".into(), json!(run_id));
    }
    v
}

pub(super) fn delta(text: String) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text,
    })
}

/// Starts `runs` through the gateway, `WRITERS` at a time.
pub(super) async fn start_runs(port: u16, runs: Arc<Vec<String>>) -> Result<(), String> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..WRITERS.min(runs.len()))
        .map(|_| {
            let (runs, next) = (runs.clone(), next.clone());
            tokio::spawn(async move {
                let mut c = Http::connect(port).await.map_err(err)?;
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(run) = runs.get(i) else {
                        return Ok::<(), String>(());
                    };
                    c.post("/v1/runs", &start_body(run)).await?;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(err)??;
    }
    Ok(())
}

/// 64 keep-alive clients, each appending one event per request to its own run, back to back.
async fn http_appends(ctx: &Ctx, port: u16, tag: &str) -> Sample {
    let runs: Vec<String> = (0..WRITERS).map(|i| format!("{tag}-{i}")).collect();
    if let Err(e) = start_runs(port, Arc::new(runs.clone())).await {
        return Sample {
            errors: 1,
            first_error: Some(format!("starting runs: {e}")),
            ..Sample::default()
        };
    }
    let conns = match Http::pool(port, WRITERS).await {
        Ok(conns) => conns,
        Err(failed) => return failed,
    };
    let conns = Arc::new(conns);
    let paths: Arc<Vec<String>> = Arc::new(
        runs.iter()
            .map(|r| format!("/v1/runs/{r}/events"))
            .collect(),
    );
    closed_loop(WRITERS, ctx.case_time, move |w, i| {
        let (conns, paths) = (conns.clone(), paths.clone());
        async move {
            let body = serde_json::to_value(delta(format!("a chunk of streamed text, number {i}")))
                .map_err(err)?;
            conns[w].lock().await.post(&paths[w], &body).await
        }
    })
    .await
}

/// The library's rate on the same backend: 64 writers on 64 runs through the port.
async fn library_appends(ctx: &Ctx, store: Arc<dyn EventStore>, tag: &str) -> Sample {
    let tag = tag.to_owned();
    closed_loop(WRITERS, ctx.case_time, move |w, i| {
        let st = store.clone();
        let run = format!("{tag}-{w}");
        async move {
            let rc = RunContext::new(run);
            st.append(
                &rc,
                vec![delta(format!("a chunk of streamed text, number {i}"))],
                "bench",
            )
            .await
            .map(drop)
            .map_err(err)
        }
    })
    .await
}

/// The gateway's side of the append case: the appends, their CPU, and the no-op route after.
struct GatewayAppends {
    appends: Sample,
    cpu: String,
    noop: Sample,
    noop_cpu: String,
    /// On Redis: the server's calls and time per HTTP append, and per library append.
    redis: Option<(String, String)>,
}

async fn on_gateway(ctx: &Ctx, gw: &Gateway) -> GatewayAppends {
    let before = Cpu::now(gw);
    let appends = http_appends(ctx, gw.port, "gw").await;
    let cpu = Cpu::per_request(before, Cpu::now(gw), appends.ops);
    let (noop, noop_cpu) = noop(ctx, gw, WRITERS).await;
    GatewayAppends {
        appends,
        cpu,
        noop,
        noop_cpu,
        redis: None,
    }
}

fn append_case(adapter: &str, got: GatewayAppends, (lib, lib_cpu): (Sample, String)) -> Case {
    let gw = got.appends;
    let lib_rate = lib.rate();
    let lib_p99 = lib.pct_ms(99.0);
    let c = case("gateway", adapter, APPEND, "events/s", &gw, 1.0);
    let p99_ratio = match (c.p99_ms, lib_p99) {
        (Some(g), Some(l)) if l > 0.0 => format!("{:.1}×", g / l),
        _ => "unknown".into(),
    };
    let c = c.against(
        &format!("library append, 64 writers on 64 runs ({adapter})"),
        (lib.errors == 0).then_some(lib_rate),
    );
    let met = at_least(c.ratio, 0.5) && c.errors == 0;
    let noop_rate = got.noop.rate();
    let redis = got
        .redis
        .map(|(gw, lib)| format!("; gateway's {gw}; library's {lib}"))
        .unwrap_or_default();
    c.target("≥ 0.5× the library's append rate", met)
        .note(format!(
            "library in the same run: {lib_rate:.0} events/s, p99 {} ms, {lib_cpu}; gateway p99 / \
         library p99 = {p99_ratio}; each request also publishes to the gateway's stream \
         bridge; {}; no-op GET /healthz on the same gateway, {WRITERS} clients: \
         {noop_rate:.0} requests/s{} (appends = {:.2}× of it), {}{redis}",
            lib_p99.map_or("?".into(), |p| format!("{p:.2}")),
            got.cpu,
            if got.noop.errors > 0 {
                format!(" ({} errors)", got.noop.errors)
            } else {
                String::new()
            },
            gw.rate() / noop_rate.max(1e-9),
            got.noop_cpu,
        ))
}

pub(super) async fn append_sqlite(ctx: &Ctx, bin: &Path) -> Case {
    let lib = match SqliteEventStore::open(ctx.sqlite_dir.join("gateway-library.db")).await {
        Ok(s) => s,
        Err(e) => return failed("sqlite", APPEND, e),
    };
    let lib: Arc<dyn EventStore> = Arc::new(lib);
    let lib_sample = library_cpu(library_appends(ctx, lib.clone(), "lib")).await;
    drop(lib);
    let db = ctx.sqlite_dir.join("gateway.db");
    let backend = vec!["--sqlite".to_string(), db.display().to_string()];
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &backend, 0).await {
        Ok(g) => g,
        Err(e) => return failed("sqlite", APPEND, e),
    };
    let gw_sample = on_gateway(ctx, &gw).await;
    drop(gw);
    append_case("sqlite", gw_sample, lib_sample)
}

pub(super) async fn append_redis(ctx: &Ctx, bin: &Path) -> Case {
    let prefix = format!("{}:gwlib", ctx.prefix);
    let lib = match RedisEventStore::connect_with(
        ctx.redis(),
        RedisStoreOptions::default().prefix(prefix),
    )
    .await
    {
        Ok(s) => s,
        Err(e) => return failed("redis", APPEND, e),
    };
    let lib: Arc<dyn EventStore> = Arc::new(lib);
    let before = CommandStats::now(ctx.redis()).await;
    let lib_sample = library_cpu(library_appends(ctx, lib.clone(), "lib")).await;
    let lib_redis = CommandStats::per_request(
        before.as_ref(),
        CommandStats::now(ctx.redis()).await.as_ref(),
        lib_sample.0.ops,
    );
    drop(lib);
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &redis_args(ctx, "gw"), 0).await {
        Ok(g) => g,
        Err(e) => return failed("redis", APPEND, e),
    };
    let before = CommandStats::now(ctx.redis()).await;
    let mut gw_sample = on_gateway(ctx, &gw).await;
    // The no-op route after the appends asks Redis nothing.
    let gw_redis = CommandStats::per_request(
        before.as_ref(),
        CommandStats::now(ctx.redis()).await.as_ref(),
        gw_sample.appends.ops,
    );
    gw_sample.redis = Some((gw_redis, lib_redis));
    drop(gw);
    append_case("redis", gw_sample, lib_sample)
}
