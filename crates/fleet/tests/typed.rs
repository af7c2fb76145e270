//! The typed layer (`Queue<T>`, `Consumer`, `Lock`, …) on the memory backend, SQLite and Redis.
//!
//! Each check is one `async fn` over an `Arc<dyn FleetBackend>`, stamped once per backend.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_conformance::harness::{TempSqlite, redis_url, unique_id, unique_prefix};
use switchyard_core::fleet::{FleetBackend, Priority, Tags, WorkerState};
use switchyard_core::{Error, MemoryFleetBackend};
use switchyard_fleet::{
    Catalog, Consumer, ConsumerConfig, ConsumerHandle, ConsumerStats, Counter, DeadLetter,
    Envelope, Events, Kv, Lock, Pool, PushOptions, Queue, Reserved, Stream, Submitted,
    WorkerRegistry,
};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_fleet_sqlite::SqliteFleetBackend;

type B = Arc<dyn FleetBackend>;

/// A handler call: the attempt and the envelope bytes it saw.
type Seen = (u32, Vec<u8>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Job {
    query: String,
    page: u32,
}

fn job(page: u32) -> Job {
    Job {
        query: "café".into(),
        page,
    }
}

/// A consumer config that retries fast and never sweeps on its own.
fn fast() -> ConsumerConfig {
    ConsumerConfig {
        concurrency: 4,
        visibility: Duration::from_secs(30),
        max_attempts: 3,
        poll: Duration::from_millis(50),
        heartbeat: None,
        backoff_unit: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(40),
        sweep_every: None,
        shutdown_grace: Duration::from_secs(5),
        ..ConsumerConfig::default()
    }
}

/// Waits (up to 20 s) until the consumer's stats satisfy `done`.
async fn until(handle: &ConsumerHandle, done: impl Fn(&ConsumerStats) -> bool) -> ConsumerStats {
    for _ in 0..2000 {
        let s = handle.stats();
        if done(&s) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("consumer did not get there: {:?}", handle.stats());
}

async fn envelope_is_the_seeds(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    let id = q
        .push_with(
            &job(1),
            PushOptions {
                id: Some("t-1".into()),
                ttl_seconds: Some(60),
                ..PushOptions::default()
            },
        )
        .await
        .expect("push");
    assert_eq!(id, "t-1");
    let body = String::from_utf8(q.peek(1).await.expect("peek").remove(0)).expect("ascii");
    let (head, rest) = body
        .split_once(r#", "submitted_at": "#)
        .expect("submitted_at follows attempt");
    assert_eq!(
        head,
        r#"{"id": "t-1", "payload": {"query": "caf\u00e9", "page": 1}, "attempt": 0"#
    );
    let (ts, tail) = rest.split_once(", ").expect("ttl follows");
    assert!(ts.parse::<f64>().expect("float") > 1.7e9, "{ts}");
    assert!(ts.contains('.'), "a Python float: {ts}");
    assert_eq!(tail, r#""ttl_seconds": 60}"#);

    let generated = q.push(&job(2)).await.expect("push");
    assert_eq!(generated.len(), 32);
    assert!(generated.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(&generated[12..13], "4", "uuid4");

    // A body written by the Python seed is read as a typed task.
    let seed = br#"{"id": "py-1", "payload": {"query": "caf\u00e9", "page": 7}, "attempt": 0, "submitted_at": 1795999426.797343}"#;
    let q2: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    b.queue_push(q2.name(), seed, Priority::Normal)
        .await
        .expect("push raw");
    let Some(Reserved::Task(t)) = q2
        .reserve(Duration::ZERO, Duration::from_secs(30))
        .await
        .expect("reserve")
    else {
        panic!("seed body is a task");
    };
    assert_eq!(
        (t.id.as_str(), t.payload.clone(), t.attempt),
        ("py-1", job(7), 1)
    );
    assert_eq!(t.envelope.submitted_at(), Some(1795999426.797343));
    assert!(q2.ack(&t.delivery).await.expect("ack"));
}

async fn submit_once_is_idempotent(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    let first = q
        .submit_once("k", &job(1), PushOptions::default())
        .await
        .expect("submit");
    let Submitted::Enqueued(id) = first else {
        panic!("first submit enqueues")
    };
    let dup = q
        .submit_once("k", &job(2), PushOptions::default())
        .await
        .expect("submit");
    assert_eq!(dup, Submitted::Duplicate(id.clone()));
    assert_eq!(q.len().await.expect("len"), 1);
    let kv = Kv::new(b, format!("idem:{}", q.name()));
    assert_eq!(kv.get("k").await.expect("kv"), Some(id.into_bytes()));
}

async fn consumer_acks_each_task_once(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    for i in 0..40 {
        q.push(&job(i)).await.expect("push");
    }
    let seen: Arc<Mutex<HashMap<u32, u32>>> = Arc::default();
    let s = seen.clone();
    let handle = Consumer::spawn(q.clone(), fast(), move |task| {
        let s = s.clone();
        async move {
            *s.lock()
                .expect("lock")
                .entry(task.payload.page)
                .or_default() += 1;
            Ok(())
        }
    });
    until(&handle, |s| s.acked == 40).await;
    let stats = handle.shutdown().await;
    assert_eq!(stats.acked, 40);
    assert_eq!((stats.retried, stats.dead_lettered, stats.lost), (0, 0, 0));
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 40);
    assert!(seen.values().all(|n| *n == 1), "each task handled once");
    assert_eq!(q.len().await.expect("len"), 0);
    assert_eq!(b.queue_sweep_expired(q.name()).await.expect("sweep"), 0);
}

async fn consumer_retries_then_dead_letters(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    q.push_with(
        &job(1),
        PushOptions {
            id: Some("doomed".into()),
            priority: Priority::High,
            ..PushOptions::default()
        },
    )
    .await
    .expect("push");
    let attempts: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let a = attempts.clone();
    let handle = Consumer::spawn(q.clone(), fast(), move |task| {
        let a = a.clone();
        async move {
            a.lock()
                .expect("lock")
                .push((task.attempt, task.envelope.to_bytes()));
            // A handler that never succeeds names its success type (`()` here).
            Err::<(), _>("boom".into())
        }
    });
    // Drained: nothing waiting, reserved or scheduled once the task is dead-lettered.
    handle.wait_idle().await.expect("wait_idle");
    let stats = handle.shutdown().await;
    assert_eq!((stats.retried, stats.dead_lettered), (2, 1));
    let attempts = attempts.lock().expect("lock").clone();
    assert_eq!(
        attempts.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    // Each retry carries the previous attempt's error.
    let seen_errors: Vec<_> = attempts
        .iter()
        .map(|(_, body)| {
            Envelope::parse(body)
                .expect("envelope")
                .last_error()
                .map(|e| (e.message, e.attempt))
        })
        .collect();
    assert_eq!(
        seen_errors,
        vec![None, Some(("boom".into(), 1)), Some(("boom".into(), 2))]
    );
    let raw = q.dlq_peek_raw(10).await.expect("dlq");
    assert_eq!(raw.len(), 1);
    assert!(
        String::from_utf8_lossy(&raw[0]).contains(
            r#", "max_attempts": 3, "last_error": {"message": "boom", "attempt": 3, "at": "#
        ),
        "max_attempts appended like the seed's retry, then last_error: {}",
        String::from_utf8_lossy(&raw[0])
    );
    let dead = q.dlq_peek(10).await.expect("dlq");
    let [DeadLetter::Task(t)] = &dead[..] else {
        panic!("one typed dead letter, got {dead:?}");
    };
    assert_eq!((t.id.as_str(), &t.payload), ("doomed", &job(1)));
    assert_eq!((t.attempt, t.max_attempts), (3, Some(3)));
    let err = t.last_error.as_ref().expect("last_error");
    assert_eq!((err.message.as_str(), err.attempt), ("boom", 3));
    assert!(err.at > 1.7e9, "unix seconds, got {}", err.at);
    assert_eq!(q.len().await.expect("len"), 0);

    // Requeue puts it back into the tier asked for, with a fresh count and its last error.
    assert_eq!(q.dlq_requeue(10, Priority::Low).await.expect("requeue"), 1);
    let Some(Reserved::Task(t)) = q
        .reserve(Duration::ZERO, Duration::from_secs(30))
        .await
        .expect("reserve")
    else {
        panic!("requeued task");
    };
    assert_eq!((t.id.as_str(), t.attempt), ("doomed", 1));
    assert_eq!(t.delivery.priority, Priority::Low);
    assert_eq!(t.last_error.map(|e| e.attempt), Some(3));
    assert!(q.ack(&t.delivery).await.expect("ack"));
}

async fn consumer_dead_letters_malformed_once(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    let bad: Vec<&[u8]> = vec![
        b"not json",
        br#"{"payload": {"query": "x", "page": 1}}"#,
        br#"{"id": "wrong-type", "payload": {"query": 5}}"#,
        br#"{"id": "", "payload": {}}"#,
    ];
    for body in &bad {
        b.queue_push(q.name(), body, Priority::Normal)
            .await
            .expect("push");
    }
    let calls = Arc::new(Mutex::new(0u32));
    let c = calls.clone();
    let handle = Consumer::spawn(q.clone(), fast(), move |_task| {
        let c = c.clone();
        async move {
            *c.lock().expect("lock") += 1;
            Ok(())
        }
    });
    until(&handle, |s| s.malformed == 4).await;
    // Give it time to (wrongly) loop on them.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = handle.shutdown().await;
    assert_eq!(stats.malformed, 4);
    assert_eq!(*calls.lock().expect("lock"), 0);
    let mut dead = q.dlq_peek_raw(10).await.expect("dlq");
    assert!(
        q.dlq_peek(10)
            .await
            .expect("dlq")
            .iter()
            .all(|d| matches!(d, DeadLetter::Malformed { .. })),
        "every body is a typed malformed dead letter"
    );
    let mut want: Vec<Vec<u8>> = bad.iter().map(|b| b.to_vec()).collect();
    dead.sort();
    want.sort();
    assert_eq!(dead, want, "each original body dead-lettered once");
    assert_eq!(q.len().await.expect("len"), 0);
}

async fn consumer_drops_expired_tasks(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    let old = br#"{"id": "old", "payload": {"query": "x", "page": 1}, "attempt": 0, "submitted_at": 1.0, "ttl_seconds": 60}"#;
    b.queue_push(q.name(), old, Priority::Normal)
        .await
        .expect("push");
    q.push_with(
        &job(2),
        PushOptions {
            ttl_seconds: Some(3600),
            ..PushOptions::default()
        },
    )
    .await
    .expect("push fresh");
    let handled = Arc::new(Mutex::new(Vec::new()));
    let h = handled.clone();
    let handle = Consumer::spawn(q.clone(), fast(), move |task| {
        let h = h.clone();
        async move {
            h.lock().expect("lock").push(task.payload.page);
            Ok(())
        }
    });
    until(&handle, |s| s.expired == 1 && s.acked == 1).await;
    handle.shutdown().await;
    assert_eq!(*handled.lock().expect("lock"), vec![2]);
    assert_eq!(q.dlq_length().await.expect("dlq"), 0);
    assert_eq!(q.len().await.expect("len"), 0);
}

async fn consumer_heartbeat_keeps_the_task(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    q.push(&job(1)).await.expect("push");
    let cfg = ConsumerConfig {
        concurrency: 1,
        visibility: Duration::from_millis(300),
        heartbeat: Some(Duration::from_millis(50)),
        ..fast()
    };
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let started = Arc::new(Mutex::new(Some(started_tx)));
    let handle = Consumer::spawn(q.clone(), cfg, move |_task| {
        let started = started.clone();
        async move {
            if let Some(tx) = started.lock().expect("lock").take() {
                let _ = tx.send(());
            }
            tokio::time::sleep(Duration::from_millis(1200)).await;
            Ok(())
        }
    });
    started_rx.await.expect("handler started");
    // Well past the 300 ms visibility: the heartbeat must have kept it reserved.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            q.sweep_expired().await.expect("sweep"),
            0,
            "heartbeat extended"
        );
    }
    let stats = until(&handle, |s| s.acked == 1).await;
    handle.shutdown().await;
    assert_eq!(stats.lost, 0);
    assert_eq!(q.len().await.expect("len"), 0);
}

async fn consumer_shutdown_releases_unfinished(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    q.push(&job(1)).await.expect("push");
    let cfg = ConsumerConfig {
        concurrency: 1,
        shutdown_grace: Duration::from_millis(100),
        ..fast()
    };
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let started = Arc::new(Mutex::new(Some(started_tx)));
    let handle = Consumer::spawn(q.clone(), cfg, move |_task| {
        let started = started.clone();
        async move {
            if let Some(tx) = started.lock().expect("lock").take() {
                let _ = tx.send(());
            }
            futures::future::pending::<()>().await;
            Ok(())
        }
    });
    started_rx.await.expect("handler started");
    let stats = handle.shutdown().await;
    assert_eq!((stats.released, stats.acked), (1, 0));
    let Some(Reserved::Task(t)) = q
        .reserve(Duration::ZERO, Duration::from_secs(30))
        .await
        .expect("reserve")
    else {
        panic!("released task is back");
    };
    assert_eq!(t.attempt, 2, "the released delivery counted");
    assert!(q.ack(&t.delivery).await.expect("ack"));
}

async fn crashed_deliveries_count_toward_max(b: B) {
    let q: Queue<Job> = Queue::new(b.clone(), unique_id("q"));
    q.push_with(
        &job(1),
        PushOptions {
            max_attempts: Some(2),
            ..PushOptions::default()
        },
    )
    .await
    .expect("push");
    // A worker reserves and dies: the reservation lapses and is swept.
    let r = q
        .reserve(Duration::ZERO, Duration::from_millis(100))
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(r.delivery().attempt, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(q.sweep_expired().await.expect("sweep"), 1);
    let handle = Consumer::spawn(q.clone(), fast(), |_task| async {
        Err::<(), _>("still failing".into())
    });
    let stats = until(&handle, |s| s.dead_lettered == 1).await;
    handle.shutdown().await;
    assert_eq!(
        stats.retried, 0,
        "the crash was attempt 1, this failure is the last"
    );
    assert_eq!(q.dlq_length().await.expect("dlq"), 1);
}

async fn lock_guard(b: B) {
    let lock = Lock::new(b.clone(), unique_id("lock"));
    let g1 = lock
        .try_acquire(Duration::from_secs(30))
        .await
        .expect("acquire")
        .expect("free");
    assert!(!g1.is_lost());
    assert!(
        lock.try_acquire(Duration::from_secs(30))
            .await
            .expect("acquire")
            .is_none()
    );
    assert!(g1.extend(Duration::from_secs(30)).await.expect("extend"));
    let f1 = g1.fence();
    assert!(g1.release().await.expect("release"));

    // Lost by lapse: `lost()` resolves and a new holder gets a higher fence.
    let g2 = lock
        .try_acquire(Duration::from_millis(200))
        .await
        .expect("acquire")
        .expect("free");
    assert!(g2.fence() > f1);
    tokio::time::timeout(Duration::from_secs(5), g2.lost())
        .await
        .expect("lost within 5 s");
    assert!(g2.is_lost());
    let g3 = lock
        .acquire(Duration::from_secs(30), Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("lapsed");
    assert!(
        !g2.extend(Duration::from_secs(30)).await.expect("extend"),
        "taken over"
    );
    assert!(!g2.release().await.expect("release"), "not ours any more");
    assert!(!g3.is_lost());

    // keep_alive holds it past its hold.
    let mut g3 = g3;
    g3.extend(Duration::from_millis(300)).await.expect("extend");
    g3.keep_alive(Duration::from_millis(100), Duration::from_millis(300));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!g3.is_lost());
    assert!(
        lock.try_acquire(Duration::from_secs(30))
            .await
            .expect("acquire")
            .is_none(),
        "renewed lock still held"
    );
    drop(g3);
    // Dropping released it (in the background).
    let g4 = lock
        .acquire(Duration::from_secs(30), Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("released on drop");
    g4.release().await.expect("release");
}

async fn pool_counter_kv(b: B) {
    let pool = Pool::new(b.clone(), unique_id("pool"));
    let tags: Tags = serde_json::from_value(json!({"region": "eu"})).expect("tags");
    pool.put_json("p1", &json!({"host": "a"}), &tags, None)
        .await
        .expect("put");
    pool.put("p2", b"raw", &Tags::new(), Some(Duration::from_secs(60)))
        .await
        .expect("put");
    assert_eq!(pool.len().await.expect("len"), 2);
    let lease = pool
        .claim(&tags, Duration::from_secs(30))
        .await
        .expect("claim")
        .expect("eu item");
    assert_eq!(lease.item().id, "p1");
    assert_eq!(lease.json::<Value>().expect("json"), json!({"host": "a"}));
    assert!(
        pool.claim(&tags, Duration::from_secs(30))
            .await
            .expect("claim")
            .is_none()
    );
    assert!(lease.release().await.expect("release"));
    assert!(pool.remove("p1").await.expect("remove"));
    assert_eq!(pool.list().await.expect("list").len(), 1);

    let c = Counter::new(b.clone(), unique_id("ctr"));
    assert_eq!(c.incr(5).await.expect("incr"), 5);
    assert_eq!(c.incr(-2).await.expect("incr"), 3);
    assert_eq!(c.get().await.expect("get"), 3);
    c.set(10).await.expect("set");
    assert!(c.del().await.expect("del"));
    assert_eq!(c.get().await.expect("get"), 0);

    let kv = Kv::new(b.clone(), unique_id("ns"));
    kv.set_json("a", &json!({"x": "é"}), None)
        .await
        .expect("set");
    assert_eq!(
        kv.get("a").await.expect("get"),
        Some(br#"{"x": "\u00e9"}"#.to_vec())
    );
    assert_eq!(
        kv.get_json::<Value>("a").await.expect("get"),
        Some(json!({"x": "é"}))
    );
    kv.set("bad", b"{", None).await.expect("set");
    assert!(matches!(
        kv.get_json::<Value>("bad").await,
        Err(Error::Corrupt { .. })
    ));
    assert!(!kv.set_nx("a", b"2", None).await.expect("nx"));
    assert!(kv.del("a").await.expect("del"));
}

async fn stream_and_events(b: B) {
    let s = Stream::new(b.clone(), unique_id("s"));
    let mut notes = s.notifications().await.expect("subscribe");
    let id = s.emit(3, &json!({"v": 1})).await.expect("emit");
    let got = s.peek(10).await.expect("peek");
    assert_eq!(got.len(), 1);
    let env: Value = serde_json::from_slice(&got[0]).expect("json");
    assert_eq!(env["id"], json!(id));
    assert_eq!(env["slot_id"], json!(3));
    assert_eq!(env["payload"], json!({"v": 1}));
    let keys: Vec<&String> = env.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["id", "slot_id", "ts", "payload"]);
    let note = tokio::time::timeout(Duration::from_secs(5), notes.next())
        .await
        .expect("note")
        .expect("open");
    let score: f64 = String::from_utf8(note)
        .expect("utf8")
        .parse()
        .expect("score");
    assert_eq!(Some(score), env["ts"].as_f64());
    assert_eq!(s.pop(5).await.expect("pop").len(), 1);
    assert!(s.is_empty().await.expect("len"));

    let ev = Events::new(b.clone());
    let topic = unique_id("topic");
    let mut sub = ev
        .subscribe(&topic)
        .await
        .expect("subscribe")
        .json::<Value>()
        .boxed();
    ev.publish_json(&topic, &json!({"type": "config_changed", "config_gen": 2}))
        .await
        .expect("publish");
    ev.publish(&topic, b"not json").await.expect("publish");
    let first = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("message")
        .expect("open")
        .expect("json");
    assert_eq!(first, json!({"type": "config_changed", "config_gen": 2}));
    let second = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("message")
        .expect("open");
    assert!(matches!(second, Err(Error::Corrupt { .. })));
}

async fn registry_and_catalog(b: B) {
    let reg = WorkerRegistry::new(b.clone(), unique_id("at"));
    assert_eq!(
        reg.patch_config("w", &serde_json::Map::new())
            .await
            .expect("patch"),
        None,
        "unregistered"
    );
    reg.register("w", &json!({"cpu": 2}))
        .await
        .expect("register");
    reg.set_config("w", &json!({"slots": 1, "enabled": true}), None)
        .await
        .expect("set");
    // Concurrent patches lose nothing.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let reg = reg.clone();
        tasks.push(tokio::spawn(async move {
            let mut patch = serde_json::Map::new();
            patch.insert(format!("k{i}"), json!(i));
            reg.patch_config("w", &patch).await.expect("patch")
        }));
    }
    for t in tasks {
        assert!(t.await.expect("join").is_some());
    }
    let (cfg, generation) = reg.config("w").await.expect("config");
    assert_eq!(generation, 9);
    for i in 0..8 {
        assert_eq!(cfg[format!("k{i}")], json!(i));
    }
    assert_eq!(cfg["slots"], json!(1));
    assert!(
        reg.set_state(
            "w",
            WorkerState {
                state: "RUNNING",
                last_error: None,
                last_seen: 100.0,
                applied_gen: Some(9),
            },
        )
        .await
        .expect("state")
    );
    assert!(
        reg.push_stats("w", 1.0, &json!({"n": 1}), 240)
            .await
            .expect("stats")
    );
    assert_eq!(
        reg.stats_history("w", 0.0, 10).await.expect("history"),
        vec![json!({"n": 1})]
    );
    assert_eq!(reg.list().await.expect("list"), vec!["w".to_string()]);
    assert!(
        reg.evict_idle(150.0, 100.0)
            .await
            .expect("evict")
            .is_empty()
    );
    assert_eq!(
        reg.evict_idle(250.0, 100.0).await.expect("evict"),
        vec!["w".to_string()]
    );
    reg.register("w", &json!({})).await.expect("register again");
    assert!(reg.config("w").await.expect("config").1 > 9, "W3");

    let cat = Catalog::new(b.clone());
    let at = unique_id("at");
    cat.set(&at, &json!({"name": "scraper", "v": 1.5}))
        .await
        .expect("set");
    assert_eq!(
        b.catalog_get(&at).await.expect("raw"),
        Some(br#"{"name": "scraper", "v": 1.5}"#.to_vec())
    );
    assert_eq!(
        cat.get(&at).await.expect("get"),
        Some(json!({"name": "scraper", "v": 1.5}))
    );
    assert!(cat.all().await.expect("all").contains_key(&at));
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
        RedisFleetConfig::new(redis_url()).with_prefix(format!("{}:", unique_prefix("typed")));
    Arc::new(
        RedisFleetBackend::with_config(config)
            .await
            .expect("connect"),
    )
}

macro_rules! typed_checks {
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

typed_checks!(
    envelope_is_the_seeds,
    submit_once_is_idempotent,
    consumer_acks_each_task_once,
    consumer_retries_then_dead_letters,
    consumer_dead_letters_malformed_once,
    consumer_drops_expired_tasks,
    consumer_heartbeat_keeps_the_task,
    consumer_shutdown_releases_unfinished,
    crashed_deliveries_count_toward_max,
    lock_guard,
    pool_counter_kv,
    stream_and_events,
    registry_and_catalog,
);
