//! What task records cost on Redis (ADR 0380, section 9): push → reserve → ack at concurrency 64
//! with bodies that carry an id against bodies without one, alternated. A measurement, not a
//! check: run with `--ignored --nocapture` (the bench's gate is `tools/bench`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchyard_conformance::harness::{redis_cmd, redis_url, unique_prefix};
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

async fn rate(b: &RedisFleetBackend, queue: &str, ids: bool, time: Duration) -> f64 {
    let serial = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for w in 0..64 {
        let (b, q, serial, done) = (b.clone(), queue.to_owned(), serial.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            while start.elapsed() < time {
                let n = serial.fetch_add(1, Ordering::Relaxed);
                let body = if ids {
                    format!(r#"{{"id": "t{n}", "worker": {w}}}"#)
                } else {
                    format!(r#"{{"worker": {w}, "n": {n}}}"#)
                };
                b.queue_push(&q, body.as_bytes(), Priority::Normal)
                    .await
                    .expect("push");
                let d = b
                    .queue_reserve(&q, Duration::from_secs(1), Duration::from_secs(60))
                    .await
                    .expect("reserve")
                    .expect("task");
                b.queue_ack(&q, &d.receipt).await.expect("ack");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for w in workers {
        w.await.expect("worker");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement"]
async fn records_cost_at_most_fifteen_percent() {
    let config =
        RedisFleetConfig::new(redis_url()).with_prefix(format!("{}:", unique_prefix("cost")));
    let b = RedisFleetBackend::with_config(config)
        .await
        .expect("connect");
    let time = Duration::from_secs(3);
    let (mut plain, mut recorded) = (0.0, 0.0);
    let stats = |what: &str| {
        let info = redis_cmd(&redis_url(), &["INFO", "commandstats"]).unwrap_or_default();
        for line in info.lines().filter(|l| l.contains("evalsha")) {
            println!("{what}: {line}");
        }
        let _ = redis_cmd(&redis_url(), &["CONFIG", "RESETSTAT"]);
    };
    stats("before");
    let _ = redis_cmd(
        &redis_url(),
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
    );
    let _ = redis_cmd(
        &redis_url(),
        &["CONFIG", "SET", "slowlog-max-len", "200000"],
    );
    for round in 0..2 {
        plain += rate(&b, &format!("plain-{round}"), false, time).await;
        stats("plain");
        recorded += rate(&b, &format!("ids-{round}"), true, time).await;
        stats("ids");
        if std::env::var_os("SLOWLOG_OUT").is_some() {
            let log = redis_cmd(&redis_url(), &["SLOWLOG", "GET", "200000"]).unwrap_or_default();
            std::fs::write(format!("/tmp/slowlog-{round}.txt"), log).expect("write");
        }
        let _ = redis_cmd(&redis_url(), &["SLOWLOG", "RESET"]);
        println!(
            "{}",
            redis_cmd(&redis_url(), &["HGETALL", "prof"]).unwrap_or_default()
        );
    }
    println!(
        "plain {:.0}/s, with ids {:.0}/s, ratio {:.3}",
        plain / 2.0,
        recorded / 2.0,
        recorded / plain
    );
}
