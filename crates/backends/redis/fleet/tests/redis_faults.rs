//! Fault injection on a private Redis: connections killed (`CLIENT KILL`) while consumers run.
//! No task may be lost: every pushed task is acked (at least once), nothing is left reserved.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_conformance::harness::{RedisServer, redis_cmd, unique_prefix};
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

const TASKS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_kill_during_queue_operations_loses_no_task() {
    let server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let mut config = RedisFleetConfig::new(&url).with_prefix(format!("{}:", unique_prefix("kill")));
    config.command_timeout = Duration::from_secs(2);
    let b = Arc::new(
        RedisFleetBackend::with_config(config)
            .await
            .expect("connect"),
    );
    for i in 0..TASKS {
        b.queue_push(
            "q",
            format!(r#"{{"id": "t-{i}"}}"#).as_bytes(),
            Priority::Normal,
        )
        .await
        .expect("push");
    }

    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let uncertain = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut consumers = Vec::new();
    for _ in 0..8 {
        let (b, acked, uncertain, stop) =
            (b.clone(), acked.clone(), uncertain.clone(), stop.clone());
        consumers.push(tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Errors are expected while connections are killed; the task stays reserved and
                // comes back through the sweep.
                let Ok(Some(d)) = b
                    .queue_reserve("q", Duration::from_millis(200), Duration::from_secs(1))
                    .await
                else {
                    let _ = b.queue_sweep_expired("q").await;
                    continue;
                };
                let id = d.task_id.clone().expect("id");
                match b.queue_ack("q", &d.receipt).await {
                    Ok(true) => acked.lock().expect("lock").push(id),
                    // A killed connection can lose the reply of an ack that did run (and fred
                    // may re-send it, which then answers `false`): outcome unknown.
                    _ => uncertain.lock().expect("lock").push(id),
                }
            }
        }));
    }

    let killer_url = url.clone();
    let killer = tokio::task::spawn_blocking(move || {
        for _ in 0..15 {
            std::thread::sleep(Duration::from_millis(30));
            let _ = redis_cmd(&killer_url, &["CLIENT", "KILL", "TYPE", "normal"]);
        }
    });
    killer.await.expect("killer");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(45);
    loop {
        let distinct: HashSet<String> = acked.lock().expect("lock").iter().cloned().collect();
        let waiting = b.queue_size("q").await.unwrap_or(1);
        let held = redis_cmd(&url, &["KEYS", "*processing"]).unwrap_or_default();
        if distinct.len() == TASKS
            || (waiting == 0 && held.is_empty())
            || tokio::time::Instant::now() > deadline
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in consumers {
        c.await.expect("consumer");
    }
    let acked = acked.lock().expect("lock").clone();
    let uncertain = uncertain.lock().expect("lock").clone();
    let distinct: HashSet<&String> = acked.iter().chain(&uncertain).collect();
    eprintln!(
        "{} acks, {} with unknown outcome",
        acked.len(),
        uncertain.len()
    );
    assert_eq!(
        distinct.len(),
        TASKS,
        "every task acked: {} acks, {} with unknown outcome",
        acked.len(),
        uncertain.len()
    );
    assert_eq!(b.queue_size("q").await.expect("size"), 0);
    assert_eq!(b.dlq_length("q").await.expect("dlq"), 0);
    let processing = redis_cmd(&url, &["KEYS", "*processing"]).expect("keys");
    assert!(processing.is_empty(), "nothing left reserved: {processing}");
    drop(server);
}
