//! Stream bridge: idle subscribers (connections, memory) and publish-to-delivery latency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use switchyard_kit::core::{StreamBridge, StreamItem};
use switchyard_kit::stream_bridge_redis::{RedisStreamBridge, RedisStreamBridgeConfig};

use fred::interfaces::{ClientInterface, ClientLike};

use super::case;
use crate::Ctx;
use crate::floor::client;
use crate::measure::{Sample, err};
use crate::report::Case;
use crate::suites::store::failed;

pub(crate) const IDLE: &str = "bridge: 10,000 idle subscribers";
pub(crate) const IDLE_50K: &str = "bridge: 50,000 idle subscribers";
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
    crate::measure::rss_of("/proc/self/status")
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
        out.push(idle(ctx, IDLE, 10_000).await);
    }
    if ctx.wants(IDLE_50K) {
        out.push(idle(ctx, IDLE_50K, 50_000).await);
    }
    if ctx.wants(LATENCY) {
        out.push(latency(ctx).await);
    }
    out
}

/// `subs` subscribers, each on its own run (the readers must watch `subs` keys), parked with a
/// heartbeat longer than the case.
async fn idle(ctx: &Ctx, name: &str, subs: usize) -> Case {
    let url = ctx.redis().to_string();
    let before = connections(&url).await;
    let rss0 = rss();
    let b = match bridge(ctx, "idle").await {
        Ok(b) => b,
        Err(e) => return failed("redis", e),
    };
    let start = Instant::now();
    let tasks: Vec<_> = (0..subs)
        .map(|i| {
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
    let limit = Duration::from_secs(30).max(Duration::from_millis(3 * subs as u64));
    let attached = wait_watched(&b, subs, limit).await;
    let attach = start.elapsed();
    // Every subscriber has registered; let the last snapshots return and the readers settle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = connections(&url).await;
    let rss1 = rss();
    let used = match (before, during) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let per_sub = match (rss0, rss1) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / subs as f64),
        _ => None,
    };
    let _ = b.close().await;
    for t in tasks {
        t.abort();
    }
    let s = Sample {
        ops: b.watched_keys().max(if attached { subs } else { 0 }) as u64,
        elapsed: attach,
        ..Sample::default()
    };
    let mut c = case("bridge", "redis", name, "subscribers attached/s", &s, 1.0);
    let met = attached && used.is_some_and(|n| n <= 8) && per_sub.is_some_and(|b| b <= 2048.0);
    c = c.target("≤ 8 Redis connections, ≤ 2 KiB per idle subscriber", met);
    c.note(format!(
        "Redis connections (CLIENT LIST delta): {}; memory per idle subscriber: {} (RSS delta); {}",
        used.map_or("unknown".into(), |n| n.to_string()),
        per_sub.map_or("unknown".into(), |b| format!("{:.1} KiB", b / 1024.0)),
        if attached {
            "all attached".to_string()
        } else {
            format!(
                "only {} keys watched after {} s",
                b.watched_keys(),
                limit.as_secs()
            )
        }
    ))
}

async fn latency(ctx: &Ctx) -> Case {
    const SUBS: usize = 1_000;
    const RATE: f64 = 1_000.0;
    const PUBLISHERS: u64 = 8;
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
    // Open loop: event k is due at start + k ms, whatever happened to the earlier ones. Several
    // publisher tasks take turns (k mod PUBLISHERS), so a slow publish delays only its own task
    // and up to PUBLISHERS publishes are in flight; one awaiting publisher cannot offer 1,000/s
    // once a publish takes over 1 ms.
    let span = ctx.case_time.max(Duration::from_millis(500));
    let due = (span.as_secs_f64() * RATE) as u64;
    let start = tokio::time::Instant::now();
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|w| {
            let b = b.clone();
            tokio::spawn(async move {
                let (mut published, mut errors, mut late) = (0u64, 0u64, Duration::ZERO);
                let mut k = w;
                while k < due {
                    let at = start + Duration::from_secs_f64(k as f64 / RATE);
                    tokio::time::sleep_until(at).await;
                    late = late.max(at.elapsed());
                    let run = format!("lat-{}", k as usize % SUBS);
                    let t = base.elapsed().as_micros() as u64;
                    if b.publish(&run, "values", &json!({"i": k, "t": t}))
                        .await
                        .is_err()
                    {
                        errors += 1;
                    }
                    published += 1;
                    k += PUBLISHERS;
                }
                (published, errors, late)
            })
        })
        .collect();
    let (mut published, mut publish_errors, mut late) = (0u64, 0u64, Duration::ZERO);
    for p in publishers {
        match p.await {
            Ok((n, e, l)) => {
                published += n;
                publish_errors += e;
                late = late.max(l);
            }
            Err(_) => publish_errors += 1,
        }
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
    let offered = published as f64 / publishing.as_secs_f64();
    // The schedule must really have been offered (5% slack for timer granularity at the end).
    let met = c.p99_ms.is_some_and(|p| p < 50.0)
        && c.errors == 0
        && s.ops == published
        && offered >= 0.95 * RATE;
    c.target("p99 < 50 ms at 1,000 events/s offered", met).note(format!(
        "1 subscriber per run, events spread over the runs; open loop, {PUBLISHERS} publisher tasks; offered {offered:.0} events/s ({published} published, latest start {:.1} ms behind schedule), delivered {:.0}/s ({} events); latency = publish call to delivery",
        late.as_secs_f64() * 1e3,
        s.ops as f64 / publishing.as_secs_f64(),
        s.ops
    ))
}
