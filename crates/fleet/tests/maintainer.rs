//! The queue `Maintainer` (ADR 0352) on the memory backend, SQLite and Redis: with no consumer
//! running, it returns lapsed reservations, moves due delayed tasks of every tier, finds queues
//! from the data, shares the work with other maintainers without moving a task twice, and
//! evicts workers whose heartbeats stopped (but not workers that never reported).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchyard_conformance::harness::{TempSqlite, redis_url, unique_prefix};
use switchyard_core::MemoryFleetBackend;
use switchyard_core::fleet::{FleetBackend, Priority, RunAt, Submit, WorkerState};
use switchyard_fleet::{Maintainer, MaintainerOptions};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_fleet_sqlite::SqliteFleetBackend;

type B = Arc<dyn FleetBackend>;

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A lapsed reservation and due delayed tasks of a queue the maintainer was never told of: one
/// round finds the queue, returns the task and moves the delayed ones into their tiers.
async fn sweeps_and_promotes_discovered_queues(b: B) {
    b.queue_push("found", b"{\"id\":\"lapsed\"}", Priority::Normal)
        .await
        .expect("push");
    let held = b
        .queue_reserve("found", Duration::ZERO, Duration::from_millis(50))
        .await
        .expect("reserve")
        .expect("a task");
    for (body, tier) in [("h", Priority::High), ("l", Priority::Low)] {
        let submit = Submit::new()
            .priority(tier)
            .run_at(RunAt::After(Duration::from_millis(50)));
        b.queue_submit("found", body.as_bytes(), &submit)
            .await
            .expect("delayed submit");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    let m = Maintainer::new(b.clone(), MaintainerOptions::default());
    m.run_once().await.expect("round");
    let moved = m.stats().queues.get("found").copied().unwrap_or_default();
    assert_eq!((moved.swept, moved.promoted, moved.errors), (1, 2, 0));
    let s = b.queue_stats("found").await.expect("stats");
    assert_eq!((s.high, s.normal, s.low), (1, 1, 1), "{s:?}");
    assert_eq!((s.in_flight, s.scheduled), (0, 0), "{s:?}");
    // The first holder lost it; the returned copy is a fresh delivery with its attempt counted.
    assert!(!b.queue_ack("found", &held.receipt).await.expect("late ack"));
    let order: Vec<_> = futures_bodies(&b, "found", 3).await;
    assert_eq!(order, ["h", "{\"id\":\"lapsed\"}", "l"]);

    // A second round finds nothing more to move.
    m.run_once().await.expect("round");
    let again = m.stats().queues.get("found").copied().unwrap_or_default();
    assert_eq!((again.swept, again.promoted), (1, 2));
}

async fn futures_bodies(b: &B, queue: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        let d = b
            .queue_reserve(queue, Duration::ZERO, Duration::from_secs(30))
            .await
            .expect("reserve")
            .expect("a task");
        out.push(String::from_utf8(d.body.clone()).expect("utf-8"));
        assert!(b.queue_ack(queue, &d.receipt).await.expect("ack"));
    }
    out
}

/// Several spawned maintainers on one backend: every lapsed reservation comes back exactly once
/// between them, within a few periods.
async fn concurrent_maintainers_move_each_task_once(b: B) {
    const TASKS: usize = 40;
    for i in 0..TASKS {
        b.queue_push("shared", format!("t{i}").as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    for _ in 0..TASKS {
        b.queue_reserve("shared", Duration::ZERO, Duration::from_millis(100))
            .await
            .expect("reserve")
            .expect("a task");
    }
    let options = MaintainerOptions::default()
        .period(Duration::from_millis(20))
        .queue("shared");
    let handles: Vec<_> = (0..4)
        .map(|_| Maintainer::spawn(b.clone(), options.clone()))
        .collect();
    let swept = || -> u64 {
        handles
            .iter()
            .map(|h| h.stats().queues.get("shared").map_or(0, |q| q.swept))
            .sum()
    };
    // A maintainer records its counts at the end of its round, after the queue already shows the
    // tasks back: wait for both, then give the rounds a few more periods to double-count if they
    // would.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = b.queue_stats("shared").await.expect("stats");
        if s.normal == TASKS as u64 && swept() >= TASKS as u64 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never swept: {s:?}, counted {}",
            swept()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let swept = swept();
    for h in handles {
        h.shutdown().await;
    }
    assert_eq!(swept, TASKS as u64, "each lapsed reservation returned once");
    let s = b.queue_stats("shared").await.expect("stats");
    assert_eq!((s.normal, s.in_flight), (TASKS as u64, 0), "{s:?}");
}

/// A worker whose last heartbeat is older than the idle TTL is removed; one that never reported
/// and one that reported just now stay.
async fn evicts_silent_workers(b: B) {
    let t = "maint-type";
    for w in ["silent", "fresh", "never"] {
        b.worker_register(t, w, &json!({})).await.expect("register");
    }
    let seen = |at: f64| WorkerState {
        state: "RUNNING",
        last_error: None,
        last_seen: at,
        applied_gen: None,
    };
    assert!(
        b.worker_set_state(t, "silent", seen(unix_now() - 600.0))
            .await
            .expect("state")
    );
    assert!(
        b.worker_set_state(t, "fresh", seen(unix_now()))
            .await
            .expect("state")
    );
    let m = Maintainer::new(
        b.clone(),
        MaintainerOptions::default().worker_idle_ttl(Some(Duration::from_secs(60))),
    );
    m.run_once().await.expect("round");
    assert_eq!(m.stats().workers_evicted, 1);
    let left: Vec<_> = b
        .worker_list(Some(t))
        .await
        .expect("list")
        .into_iter()
        .map(|(_, w)| w)
        .collect();
    assert_eq!(left, ["fresh", "never"]);
}

async fn memory() -> B {
    Arc::new(MemoryFleetBackend::new())
}

async fn sqlite() -> B {
    let db: &'static TempSqlite = Box::leak(Box::new(TempSqlite::new()));
    Arc::new(SqliteFleetBackend::open(db.path()).await.expect("open"))
}

async fn redis() -> B {
    let config =
        RedisFleetConfig::new(redis_url()).with_prefix(format!("{}:", unique_prefix("maint")));
    Arc::new(
        RedisFleetBackend::with_config(config)
            .await
            .expect("connect"),
    )
}

macro_rules! maintainer_checks {
    ($($check:ident),* $(,)?) => {
        mod on_memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::memory().await).await;
                }
            )*
        }
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::sqlite().await).await;
                }
            )*
        }
        mod on_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::redis().await).await;
                }
            )*
        }
    };
}

maintainer_checks!(
    sweeps_and_promotes_discovered_queues,
    concurrent_maintainers_move_each_task_once,
    evicts_silent_workers,
);
