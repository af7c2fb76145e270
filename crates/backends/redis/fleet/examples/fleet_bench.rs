//! Throughput of the Redis fleet backend, one process:
//! push → reserve → ack round trips per second at concurrency 64, and lock acquire/release per
//! second at concurrency 64 (each on its own lock).
//!
//! `cargo run --release -p switchyard-fleet-redis --example fleet_bench [seconds]`
//! Uses `REDIS_URL` if set, otherwise starts a private `redis-server` (as the tests do).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

const CONCURRENCY: usize = 64;

#[tokio::main]
async fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let url = redis_url();
    let mut config =
        RedisFleetConfig::new(&url).with_prefix(format!("{}:", unique_prefix("bench")));
    config.pool_size = 8;
    let backend = Arc::new(
        RedisFleetBackend::with_config(config)
            .await
            .expect("connect"),
    );

    let b0 = backend.clone();
    let queue_rate = run(secs, move |i| {
        let b = b0.clone();
        async move {
            let body = format!(r#"{{"id": "t-{i}", "payload": {{}}, "attempt": 0}}"#);
            b.queue_push("bench", body.as_bytes(), Priority::Normal)
                .await
                .expect("push");
            let d = b
                .queue_reserve("bench", Duration::from_secs(1), Duration::from_secs(60))
                .await
                .expect("reserve")
                .expect("a task");
            assert!(b.queue_ack("bench", &d.receipt).await.expect("ack"));
        }
    })
    .await;
    println!(
        "queue push+reserve+ack: {queue_rate:.0} tasks/s (concurrency {CONCURRENCY}, {secs} s)"
    );

    let b1 = backend.clone();
    let lock_rate = run(secs, move |i| {
        let b = b1.clone();
        async move {
            let name = format!("lock-{}", i % CONCURRENCY as u64);
            let g = b
                .lock_acquire(&name, Duration::from_secs(10), Duration::from_secs(1))
                .await
                .expect("acquire")
                .expect("free");
            assert!(b.lock_release(&name, &g.token).await.expect("release"));
        }
    })
    .await;
    println!("lock acquire+release: {lock_rate:.0} pairs/s (concurrency {CONCURRENCY}, {secs} s)");
    println!(
        "leftover in queue: {}",
        backend.queue_size("bench").await.expect("size")
    );
}

/// Runs `op` in `CONCURRENCY` loops for `secs` seconds; completed operations per second.
async fn run<F, Fut>(secs: u64, op: F) -> f64
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for w in 0..CONCURRENCY as u64 {
        let (op, done) = (op.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while Instant::now() < end {
                op(i).await;
                done.fetch_add(1, Ordering::Relaxed);
                i += CONCURRENCY as u64;
            }
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}
