//! Operator commands: read runs, queues and workers straight from the backends (any URL).

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use switchyard_kit::core::stream::StreamItem;
use switchyard_kit::core::{Error, Result, RunContext, RunStatus, status_of};
use switchyard_kit::{BackendUrl, Config, Port};

use crate::OpArgs;
use crate::backends;
use crate::gateway::{body_json, parse_priority_text, stats_json, worker_records};

fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

pub fn context(
    run: &str,
    session: Option<String>,
    namespace: Option<String>,
) -> Result<RunContext> {
    let mut ctx = RunContext::new(run);
    if let Some(s) = session {
        ctx = ctx.with_session(s);
    }
    if let Some(n) = namespace {
        ctx = ctx.with_namespace(n)?;
    }
    Ok(ctx)
}

pub async fn runs_ls(
    config: &Config,
    op: &OpArgs,
    namespace: Option<String>,
    status: Option<String>,
) -> Result<ExitCode> {
    let store = backends::event_store(config, op.url.as_deref()).await?;
    let ctx = context("list", None, namespace)?;
    let status = status.map(|s| s.parse::<RunStatus>()).transpose()?;
    let mut runs = store.list_runs(&ctx, status).await?;
    runs.sort_by(|a, b| (&a.log_key, &a.run_id).cmp(&(&b.log_key, &b.run_id)));
    if op.json {
        print_json(&json!(
            runs.iter()
                .map(|r| json!({"run_id": r.run_id, "log_key": r.log_key, "status": r.status.as_str()}))
                .collect::<Vec<_>>()
        ));
    } else {
        println!("{:<40} {:<40} STATUS", "RUN", "LOG");
        for r in &runs {
            println!("{:<40} {:<40} {}", r.run_id, r.log_key, r.status);
        }
        eprintln!("{} run(s)", runs.len());
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn runs_show(
    config: &Config,
    op: &OpArgs,
    run: &str,
    session: Option<String>,
    namespace: Option<String>,
    from_seq: u64,
) -> Result<ExitCode> {
    let store = backends::event_store(config, op.url.as_deref()).await?;
    let ctx = context(run, session, namespace)?;
    let events = store
        .read_run(ctx.log_key(), ctx.run_id(), &ctx, from_seq)
        .await?;
    let status = if from_seq == 0 {
        status_of(&events)
    } else {
        store.run_status(ctx.log_key(), ctx.run_id(), &ctx).await?
    };
    if events.is_empty() && status == RunStatus::Pending {
        eprintln!(
            "no run {run:?} in log {:?} (pass --session for a run that has one)",
            ctx.log_key()
        );
        return Ok(ExitCode::from(4));
    }
    if op.json {
        print_json(&json!({
            "run_id": ctx.run_id(),
            "log_key": ctx.log_key(),
            "status": status.as_str(),
            "events": events.iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)).collect::<Vec<_>>(),
        }));
    } else {
        println!(
            "run {}  log {}  status {}",
            ctx.run_id(),
            ctx.log_key(),
            status
        );
        for e in &events {
            let payload = serde_json::to_value(&e.payload).unwrap_or(Value::Null);
            println!(
                "{:>5}  {}  {:<20} {}",
                e.seq,
                switchyard_kit::core::event::format_ts(&e.ts),
                e.kind(),
                payload
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn runs_tail(
    config: &Config,
    op: &OpArgs,
    ctx: &switchyard_kit::core::RunContext,
    last_event_id: Option<String>,
) -> Result<ExitCode> {
    let url = backends::url_for(config, Port::StreamBridge, op.url.as_deref())?;
    if BackendUrl::parse("stream_bridge", &url)? == BackendUrl::Memory {
        return Err(Error::config(
            "--url",
            "the memory stream bridge lives inside one gateway process; tail a shared bridge with --url redis://… or --redis",
        ));
    }
    let bridge = backends::stream_bridge(
        config,
        Some(&url),
        switchyard_core::stream::DEFAULT_QUEUE_MAXSIZE,
    )
    .await?;
    let stream_id = switchyard_core::stream::run_stream_id(ctx);
    let mut items = bridge.subscribe(
        &stream_id,
        last_event_id.as_deref(),
        Duration::from_secs(15),
    );
    let mut code = ExitCode::SUCCESS;
    while let Some(item) = items.next().await {
        match item? {
            StreamItem::Event(e) => {
                if op.json {
                    println!("{}", json!({"id": e.id, "event": e.event, "data": e.data}));
                } else {
                    println!("{}  {:<20} {}", e.id, e.event, e.data);
                }
            }
            StreamItem::Heartbeat => {}
            StreamItem::End => {
                eprintln!("end of run {}", ctx.run_id());
                break;
            }
            StreamItem::Gap(gap) => {
                eprintln!(
                    "gap: {:?} is no longer retained (earliest {}, latest {}); read the run from the event store",
                    gap.requested, gap.earliest, gap.latest
                );
                code = ExitCode::from(3);
                break;
            }
        }
        let _ = std::io::stdout().flush();
    }
    let _ = bridge.close().await;
    Ok(code)
}

pub async fn queue_stats(config: &Config, op: &OpArgs, queue: &str) -> Result<ExitCode> {
    let fleet = backends::fleet(config, op.url.as_deref()).await?;
    let stats = fleet.queue_stats(queue).await?;
    if op.json {
        print_json(&stats_json(queue, &stats));
    } else {
        println!("queue         {queue}");
        println!(
            "waiting       {}  (high {}, normal {}, low {})",
            stats.waiting(),
            stats.high,
            stats.normal,
            stats.low
        );
        println!(
            "in flight     {}  ({} overdue, back at the next sweep)",
            stats.in_flight, stats.overdue
        );
        println!(
            "scheduled     {}  ({} due, back at the next reserve)",
            stats.scheduled, stats.due
        );
        println!("dead letters  {}", stats.dead);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_bodies(op: &OpArgs, bodies: &[Vec<u8>]) {
    let values: Vec<Value> = bodies.iter().map(|b| body_json(b)).collect();
    if op.json {
        print_json(&Value::Array(values));
    } else {
        for v in &values {
            let id = v
                .get("id")
                .map_or_else(|| "-".to_string(), |i| i.to_string());
            let attempt = v
                .get("attempt")
                .map_or_else(|| "-".to_string(), |a| a.to_string());
            let payload = v.get("payload").unwrap_or(v);
            println!("{id:<36} attempt {attempt:<3} {payload}");
        }
        eprintln!("{} task(s)", values.len());
    }
}

pub async fn queue_peek(
    config: &Config,
    op: &OpArgs,
    queue: &str,
    limit: usize,
) -> Result<ExitCode> {
    let fleet = backends::fleet(config, op.url.as_deref()).await?;
    print_bodies(op, &fleet.queue_peek(queue, limit).await?);
    Ok(ExitCode::SUCCESS)
}

pub async fn dlq_ls(config: &Config, op: &OpArgs, queue: &str, limit: usize) -> Result<ExitCode> {
    let fleet = backends::fleet(config, op.url.as_deref()).await?;
    print_bodies(op, &fleet.dlq_peek(queue, limit).await?);
    Ok(ExitCode::SUCCESS)
}

/// Replays in batches so a long replay shows progress and can be interrupted between batches
/// without losing anything (each batch moves atomically).
pub async fn dlq_replay(
    config: &Config,
    op: &OpArgs,
    queue: &str,
    limit: Option<u64>,
    priority: &str,
) -> Result<ExitCode> {
    const BATCH: u64 = 100;
    let priority = parse_priority_text(priority)?;
    let fleet = backends::fleet(config, op.url.as_deref()).await?;
    let total = match limit {
        Some(n) => n.min(fleet.dlq_length(queue).await?),
        None => fleet.dlq_length(queue).await?,
    };
    let mut done = 0u64;
    while done < total {
        let n = BATCH.min(total - done);
        let moved = fleet
            .dlq_requeue(queue, usize::try_from(n).unwrap_or(usize::MAX), priority)
            .await?;
        done += moved;
        eprint!("\rreplayed {done}/{total}");
        if moved == 0 {
            break;
        }
    }
    if total > 0 {
        eprintln!();
    }
    if op.json {
        print_json(&json!({"queue": queue, "replayed": done}));
    } else {
        println!("replayed {done} dead letter(s) of {queue}");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn workers_ls(
    config: &Config,
    op: &OpArgs,
    automation_type: Option<String>,
) -> Result<ExitCode> {
    let fleet = backends::fleet(config, op.url.as_deref()).await?;
    let workers = worker_records(fleet.as_ref(), automation_type.as_deref()).await?;
    if op.json {
        print_json(&Value::Array(workers));
    } else {
        println!(
            "{:<24} {:<24} {:<10} {:>6} LAST SEEN",
            "TYPE", "WORKER", "STATE", "GEN"
        );
        for w in &workers {
            let s = |k: &str| w.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
            println!(
                "{:<24} {:<24} {:<10} {:>6} {}",
                s("automation_type"),
                s("worker_id"),
                s("state"),
                w.get("config_gen")
                    .map_or_else(String::new, Value::to_string),
                w.get("last_seen")
                    .map_or_else(String::new, Value::to_string),
            );
        }
        eprintln!("{} worker(s)", workers.len());
    }
    Ok(ExitCode::SUCCESS)
}
