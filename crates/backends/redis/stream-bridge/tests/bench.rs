//! Cheap measurements, run on demand (never asserted):
//! `cargo test -p switchyard-stream-bridge-redis --release --test bench -- --ignored --nocapture`

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use switchyard_conformance::harness::{RedisServer, unique_prefix};
use switchyard_core::{StreamBridge, StreamItem};
use switchyard_stream_bridge_redis::{RedisStreamBridge, RedisStreamBridgeConfig};

async fn bridge(url: &str) -> Arc<RedisStreamBridge> {
    let mut c = RedisStreamBridgeConfig::new(url);
    c.key_prefix = unique_prefix("bench");
    Arc::new(RedisStreamBridge::connect(c).await.expect("connect"))
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run with --ignored --nocapture"]
async fn publish_throughput() {
    let server = RedisServer::start().expect("server");
    let b = bridge(&server.url()).await;
    const TASKS: usize = 32;
    const PER_TASK: usize = 1_000;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let b = b.clone();
        tasks.push(tokio::spawn(async move {
            let run = format!("run-{}", t % 8);
            for i in 0..PER_TASK {
                b.publish(
                    &run,
                    "values",
                    &json!({"i": i, "messages": ["hello world"]}),
                )
                .await
                .expect("publish");
            }
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "publish: {} events from {TASKS} tasks in {secs:.2} s = {:.0} events/s",
        TASKS * PER_TASK,
        (TASKS * PER_TASK) as f64 / secs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run with --ignored --nocapture"]
async fn delivery_latency_1000_subscribers() {
    const SUBS: usize = 1_000;
    const EVENTS: usize = 100;
    let server = RedisServer::start_with(&["--maxclients", "20000"]).expect("server");
    let b = bridge(&server.url()).await;
    let run = "latency-run";
    let base = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Duration>();
    let mut tasks = Vec::new();
    for _ in 0..SUBS {
        let mut s = b.subscribe(run, None, Duration::from_secs(60));
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(Ok(item)) = s.next().await {
                match item {
                    StreamItem::Event(e) => {
                        let sent = e.data["t"].as_u64().unwrap_or(0);
                        let now = base.elapsed().as_micros() as u64;
                        let _ = tx.send(Duration::from_micros(now.saturating_sub(sent)));
                    }
                    StreamItem::End | StreamItem::Gap(_) => break,
                    StreamItem::Heartbeat => {}
                }
            }
        }));
    }
    drop(tx);
    while b.watched_keys() < 1 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for i in 0..EVENTS {
        let t = base.elapsed().as_micros() as u64;
        b.publish(run, "values", &json!({"i": i, "t": t}))
            .await
            .expect("publish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.publish_end(run).await.expect("end");
    let mut lat = Vec::new();
    while let Some(d) = rx.recv().await {
        lat.push(d);
    }
    lat.sort_unstable();
    println!(
        "delivery latency, {SUBS} subscribers on one run, {EVENTS} events at 50/s: {} deliveries, p50 {:?}, p99 {:?}, max {:?}",
        lat.len(),
        pct(&lat, 0.50),
        pct(&lat, 0.99),
        lat.last().copied().unwrap_or_default()
    );
}
