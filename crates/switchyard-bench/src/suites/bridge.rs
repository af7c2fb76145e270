//! Stream bridge: idle subscribers (connections, memory) and publish-to-delivery latency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use switchyard::core::{StreamBridge, StreamItem};
use switchyard::stream_bridge_redis::{RedisStreamBridge, RedisStreamBridgeConfig};
use tokio::time::MissedTickBehavior;

use fred::interfaces::{ClientInterface, ClientLike};

use super::case;
use crate::Ctx;
use crate::floor::client;
use crate::measure::{Sample, err};
use crate::report::Case;
use crate::suites::store::failed;

pub(crate) const IDLE: &str = "bridge: 10,000 idle subscribers";
pub(crate) const LATENCY: &str = "bridge: 1,000 subscribers, 1,000 events/s";

async fn bridge(ctx: &Ctx, tag: &str) -> Result<RedisStreamBridge, String> {
    let mut config = RedisStreamBridgeConfig::new(ctx.redis());
    config.key_prefix = format!("{}:bridge:{tag}", ctx.prefix);
    RedisStreamBridge::connect(config).await.map_err(err)
}

/// Client connections the server has open right now.
async fn connections(url: &str) -> Option<usize> {
    let c = client(url).await.ok()?;
    let list: String = c.client_list::<String, String>(None, None).await.ok()?;
    let _ = c.quit().await;
    Some(list.lines().filter(|l| !l.trim().is_empty()).count())
}

/// Resident memory of this process, bytes.
fn rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

async fn wait_watched(b: &RedisStreamBridge, n: usize, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while b.watched_keys() < n {
        if Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

pub(crate) async fn run(ctx: &Ctx) -> Vec<Case> {
    let mut out = Vec::new();
    if ctx.wants(IDLE) {
        out.push(idle(ctx).await);
    }
    if ctx.wants(LATENCY) {
        out.push(latency(ctx).await);
    }
    out
}

async fn idle(ctx: &Ctx) -> Case {
    const SUBS: usize = 10_000;
    let url = ctx.redis().to_string();
    let before = connections(&url).await;
    let rss0 = rss();
    let b = match bridge(ctx, "idle").await {
        Ok(b) => b,
        Err(e) => return failed("redis", e),
    };
    let start = Instant::now();
    let tasks: Vec<_> = (0..SUBS)
        .map(|i| {
            // One run per subscriber: the readers must watch 10,000 keys.
            let mut s = b.subscribe(&format!("idle-{i}"), None, Duration::from_secs(300));
            tokio::spawn(async move {
                while let Some(item) = s.next().await {
                    match item {
                        Ok(StreamItem::Event(_) | StreamItem::Heartbeat) => {}
                        _ => break,
                    }
                }
            })
        })
        .collect();
    let attached = wait_watched(&b, SUBS, Duration::from_secs(30)).await;
    let attach = start.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let during = connections(&url).await;
    let rss1 = rss();
    let used = match (before, during) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let per_sub = match (rss0, rss1) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / SUBS as f64),
        _ => None,
    };
    let _ = b.close().await;
    for t in tasks {
        t.abort();
    }
    let s = Sample {
        ops: b.watched_keys().max(if attached { SUBS } else { 0 }) as u64,
        elapsed: attach,
        ..Sample::default()
    };
    let mut c = case("bridge", "redis", IDLE, "subscribers attached/s", &s, 1.0);
    let met = attached && used.is_some_and(|n| n <= 8);
    c = c.target("≤ 8 Redis connections", met);
    c.note(format!(
        "Redis connections (CLIENT LIST delta): {}; memory per idle subscriber: {} (RSS delta); {}",
        used.map_or("unknown".into(), |n| n.to_string()),
        per_sub.map_or("unknown".into(), |b| format!("{:.1} KiB", b / 1024.0)),
        if attached {
            "all attached".to_string()
        } else {
            format!("only {} keys watched after 30 s", b.watched_keys())
        }
    ))
}

async fn latency(ctx: &Ctx) -> Case {
    const SUBS: usize = 1_000;
    let b = match bridge(ctx, "latency").await {
        Ok(b) => Arc::new(b),
        Err(e) => return failed("redis", e),
    };
    let base = Instant::now();
    // One subscriber per run (a browser per run), the publisher spreads 1,000 events/s over them.
    let tasks: Vec<_> = (0..SUBS)
        .map(|i| {
            let mut s = b.subscribe(&format!("lat-{i}"), None, Duration::from_secs(300));
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut error = None;
                while let Some(item) = s.next().await {
                    match item {
                        Ok(StreamItem::Event(e)) => {
                            let sent = e.data["t"].as_u64().unwrap_or(0);
                            let now = base.elapsed().as_micros() as u64;
                            lat.push(Duration::from_micros(now.saturating_sub(sent)));
                        }
                        Ok(StreamItem::Heartbeat) => {}
                        Ok(StreamItem::End) => break,
                        Ok(StreamItem::Gap(g)) => {
                            error = Some(format!("gap: {g:?}"));
                            break;
                        }
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                }
                (lat, error)
            })
        })
        .collect();
    if !wait_watched(&b, SUBS, Duration::from_secs(30)).await {
        let _ = b.close().await;
        return failed("redis", format!("{LATENCY}: subscribers did not attach"));
    }
    let mut publish_errors = 0u64;
    let mut published = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let start = Instant::now();
    while start.elapsed() < ctx.case_time.max(Duration::from_millis(500)) {
        tick.tick().await;
        let run = format!("lat-{}", published as usize % SUBS);
        let t = base.elapsed().as_micros() as u64;
        match b
            .publish(&run, "values", &json!({"i": published, "t": t}))
            .await
        {
            Ok(_) => {}
            Err(_) => publish_errors += 1,
        }
        published += 1;
    }
    let publishing = start.elapsed();
    // Let the last deliveries land before ending the runs.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for i in 0..SUBS {
        let _ = b.publish_end(&format!("lat-{i}")).await;
    }
    let mut s = Sample {
        elapsed: publishing,
        errors: publish_errors,
        ..Sample::default()
    };
    for t in tasks {
        match tokio::time::timeout(Duration::from_secs(10), t).await {
            Ok(Ok((lat, error))) => {
                s.ops += lat.len() as u64;
                s.lat.extend(lat);
                if let Some(e) = error {
                    s.errors += 1;
                    s.first_error.get_or_insert(e);
                }
            }
            _ => {
                s.errors += 1;
                s.first_error
                    .get_or_insert("a subscriber did not end".into());
            }
        }
    }
    s.lat.sort_unstable();
    for i in 0..SUBS {
        let _ = b.cleanup(&format!("lat-{i}"), Duration::ZERO).await;
    }
    let _ = b.close().await;
    let c = case("bridge", "redis", LATENCY, "deliveries/s", &s, 1.0);
    let met = c.p99_ms.is_some_and(|p| p < 50.0) && c.errors == 0 && s.ops == published;
    c.target("p99 < 50 ms", met).note(format!(
        "1 subscriber per run, events spread over the runs; {published} published at {:.0}/s, {} delivered; latency = publish call to delivery",
        published as f64 / publishing.as_secs_f64(),
        s.ops
    ))
}
