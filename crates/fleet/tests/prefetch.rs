//! The consumer's prefetch buffer and batched acks (ADR 0376) on the memory backend, SQLite,
//! Redis and PostgreSQL: a backlog drained with prefetch runs every task once; stopping or
//! dropping a consumer gives its unstarted tasks back at once; buffered tasks stay reserved
//! behind a slow handler; acks really go out in batches.
//!
//! Every backend is wrapped in the call-observing decorator, so each check can count which port
//! calls the consumer made.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchyard_conformance::harness::{
    TempSqlite, postgres_url, redis_url, unique_id, unique_prefix, unique_schema,
};
use switchyard_core::MemoryFleetBackend;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::observe::{Call, Observed, Observer, Outcome};
use switchyard_fleet::{
    Batching, Consumer, ConsumerConfig, ConsumerHandle, ConsumerStats, PushOptions, Queue, Reserved,
};
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_fleet_sqlite::SqliteFleetBackend;
use switchyard_postgres_support::Schema;

type B = Arc<dyn FleetBackend>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Job {
    n: u32,
}

/// Counts the port calls made through it, by method name.
#[derive(Debug, Default)]
struct Calls(Mutex<HashMap<&'static str, u64>>);

impl Observer for Calls {
    fn finished(&self, call: &Call<'_>, _elapsed: Duration, _outcome: Outcome) {
        *self.0.lock().expect("lock").entry(call.name).or_default() += 1;
    }
}

impl Calls {
    fn get(&self, name: &str) -> u64 {
        self.0.lock().expect("lock").get(name).copied().unwrap_or(0)
    }
}

/// A backend under test, observed.
struct Under {
    b: B,
    calls: Arc<Calls>,
}

fn observed(inner: B) -> Under {
    let calls = Arc::new(Calls::default());
    let b: B = Observed::new(inner, "test", calls.clone()).into_arc();
    Under { b, calls }
}

fn config(concurrency: usize) -> ConsumerConfig {
    ConsumerConfig {
        concurrency,
        visibility: Duration::from_secs(30),
        poll: Duration::from_millis(50),
        sweep_every: None,
        shutdown_grace: Duration::from_millis(100),
        ..ConsumerConfig::default()
    }
}

async fn fill(q: &Queue<Job>, n: u32) {
    let mut next = 0;
    while next < n {
        let end = (next + 500).min(n);
        let jobs: Vec<Job> = (next..end).map(|n| Job { n }).collect();
        q.push_many(&jobs, PushOptions::default())
            .await
            .expect("push_many");
        next = end;
    }
}

/// Waits (up to 30 s) until the consumer's stats satisfy `done`.
async fn until(handle: &ConsumerHandle, done: impl Fn(&ConsumerStats) -> bool) -> ConsumerStats {
    for _ in 0..3000 {
        let s = handle.stats();
        if done(&s) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("consumer did not get there: {:?}", handle.stats());
}

/// Waits (up to 10 s) until `check` holds.
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..1000 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} never happened");
}

async fn backlog_drained_exactly_once(u: Under) {
    let q: Queue<Job> = Queue::new(u.b.clone(), unique_id("q"));
    const N: u32 = 3000;
    fill(&q, N).await;
    let seen: Arc<Mutex<HashMap<u32, u32>>> = Arc::default();
    let s = seen.clone();
    let handle = Consumer::spawn(q.clone(), config(16), move |task| {
        let s = s.clone();
        async move {
            *s.lock().expect("lock").entry(task.payload.n).or_default() += 1;
            Ok(())
        }
    });
    until(&handle, |s| s.acked == u64::from(N)).await;
    handle.wait_idle().await.expect("idle");
    let stats = handle.shutdown().await;
    assert_eq!(stats.acked, u64::from(N));
    assert_eq!(
        (stats.lost, stats.errors, stats.released, stats.retried),
        (0, 0, 0, 0)
    );
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), N as usize, "every task ran");
    assert!(seen.values().all(|n| *n == 1), "no task ran twice");
    let st = q.stats().await.expect("stats");
    assert_eq!((st.normal, st.in_flight, st.scheduled), (0, 0, 0));
    // The default consumer reserves in batches and never one task per call.
    assert_eq!(u.calls.get("queue_reserve"), 0);
    assert!(u.calls.get("queue_reserve_many") >= 1);
    assert!(
        u.calls.get("queue_reserve_many") < u64::from(N) / 4,
        "reserved {} times for {N} tasks",
        u.calls.get("queue_reserve_many")
    );
}

async fn acks_are_batched(u: Under) {
    let q: Queue<Job> = Queue::new(u.b.clone(), unique_id("q"));
    const N: u32 = 1000;
    fill(&q, N).await;
    let handle = Consumer::spawn(q.clone(), config(32), |_task| async { Ok(()) });
    until(&handle, |s| s.acked == u64::from(N)).await;
    let stats = handle.shutdown().await;
    assert_eq!(stats.acked, u64::from(N));
    let many = u.calls.get("queue_ack_many");
    assert_eq!(u.calls.get("queue_ack"), 0, "no task acked on its own");
    assert!(many >= 1);
    assert!(
        many * 4 <= u64::from(N),
        "{many} ack calls for {N} tasks: fewer than 4 acks per call"
    );

    // With batching off the same work takes one ack and one reserve per task.
    let q2: Queue<Job> = Queue::new(u.b.clone(), unique_id("q"));
    fill(&q2, 100).await;
    let before = (
        u.calls.get("queue_ack_many"),
        u.calls.get("queue_reserve_many"),
    );
    let handle = Consumer::spawn_with(q2.clone(), config(4), Batching::off(), |_task| async {
        Ok(())
    });
    until(&handle, |s| s.acked == 100).await;
    handle.shutdown().await;
    assert_eq!(u.calls.get("queue_ack"), 100);
    assert!(u.calls.get("queue_reserve") >= 100);
    assert_eq!(
        (
            u.calls.get("queue_ack_many"),
            u.calls.get("queue_reserve_many")
        ),
        before,
        "no batch calls with batching off"
    );
}

/// Parks every handler until the test lets go, counting how many started.
#[derive(Clone, Default)]
struct Gate {
    started: Arc<AtomicU64>,
}

impl Gate {
    fn handler(
        &self,
    ) -> impl Fn(
        switchyard_fleet::Task<Job>,
    )
        -> futures::future::BoxFuture<'static, Result<(), switchyard_fleet::HandlerError>>
    + Send
    + Sync
    + 'static {
        let started = self.started.clone();
        move |_task| {
            let started = started.clone();
            Box::pin(async move {
                started.fetch_add(1, Ordering::SeqCst);
                futures::future::pending::<()>().await;
                Ok(())
            })
        }
    }
}

async fn shutdown_gives_the_buffer_back_at_once(u: Under) {
    let q: Queue<Job> = Queue::new(u.b.clone(), unique_id("q"));
    const N: u32 = 40;
    fill(&q, N).await;
    let gate = Gate::default();
    let handle = Consumer::spawn_with(
        q.clone(),
        config(2),
        Batching::default().prefetch(10),
        gate.handler(),
    );
    // Both slots are running a task and the buffer holds more.
    let started = gate.started.clone();
    eventually("two handlers started", || {
        let started = started.clone();
        async move { started.load(Ordering::SeqCst) == 2 }
    })
    .await;
    eventually("the buffer filled", || {
        let q = q.clone();
        async move { q.stats().await.expect("stats").in_flight >= 6 }
    })
    .await;
    let held = q.stats().await.expect("stats").in_flight;
    let stats = handle.shutdown().await;
    assert_eq!(
        stats.released, held,
        "the running and the buffered tasks went back"
    );
    assert_eq!((stats.lost, stats.errors, stats.acked), (0, 0, 0));
    assert_eq!(
        gate.started.load(Ordering::SeqCst),
        2,
        "no buffered task started"
    );
    // Everything is reservable at once: nothing waits out its 30 s visibility.
    let st = q.stats().await.expect("stats");
    assert_eq!((st.normal, st.in_flight), (u64::from(N), 0));
    let got = q
        .reserve_many(1000, Duration::ZERO, Duration::from_secs(30))
        .await
        .expect("reserve_many");
    assert_eq!(got.len(), N as usize);
    let given_back = got.iter().filter(|r| r.delivery().attempt == 2).count() as u64;
    assert_eq!(given_back, held, "a given-back task counts its delivery");
    let acked = q
        .ack_many(got.iter().map(Reserved::delivery))
        .await
        .expect("ack");
    assert!(acked.iter().all(|a| *a));
}

async fn dropping_the_handle_gives_the_buffer_back(u: Under) {
    let q: Queue<Job> = Queue::new(u.b.clone(), unique_id("q"));
    const N: u32 = 40;
    fill(&q, N).await;
    let gate = Gate::default();
    let handle = Consumer::spawn_with(
        q.clone(),
        config(2),
        Batching::default().prefetch(10),
        gate.handler(),
    );
    eventually("the buffer filled", || {
        let q = q.clone();
        async move { q.stats().await.expect("stats").in_flight >= 6 }
    })
    .await;
    drop(handle);
    // Another consumer sees every task waiting again, long before their 30 s visibility ends.
    eventually("every task back in the queue", || {
        let q = q.clone();
        async move {
            let st = q.stats().await.expect("stats");
            st.normal == u64::from(N) && st.in_flight == 0
        }
    })
    .await;
    assert_eq!(q.sweep_expired().await.expect("sweep"), 0);
}

async fn buffered_tasks_stay_reserved_behind_a_slow_handler(u: Under) {
    let q: Queue<Job> = Queue::new(u.b.clone(), unique_id("q"));
    const N: u32 = 5;
    fill(&q, N).await;
    let cfg = ConsumerConfig {
        concurrency: 1,
        visibility: Duration::from_millis(400),
        heartbeat: Some(Duration::from_millis(50)),
        ..config(1)
    };
    let seen: Arc<Mutex<HashMap<u32, u32>>> = Arc::default();
    let s = seen.clone();
    let handle = Consumer::spawn_with(
        q.clone(),
        cfg,
        Batching::default().prefetch(4),
        move |task| {
            let s = s.clone();
            async move {
                *s.lock().expect("lock").entry(task.payload.n).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(())
            }
        },
    );
    eventually("the buffer filled", || {
        let q = q.clone();
        async move { q.stats().await.expect("stats").in_flight >= 4 }
    })
    .await;
    // The last task waits ~1.2 s behind the others, three times its visibility: only the
    // keeper's heartbeats keep it from lapsing (a sweep would return it to the queue).
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            q.sweep_expired().await.expect("sweep"),
            0,
            "a reservation lapsed"
        );
    }
    let stats = until(&handle, |s| s.acked == u64::from(N)).await;
    handle.shutdown().await;
    assert_eq!((stats.lost, stats.errors), (0, 0));
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), N as usize);
    assert!(seen.values().all(|n| *n == 1), "no task ran twice");
    assert!(
        u.calls.get("queue_extend") >= 4,
        "buffered tasks were extended"
    );
}

async fn slow_handlers_hold_only_their_concurrency(u: Under) {
    let q: Queue<Job> = Queue::new(u.b.clone(), unique_id("q"));
    const N: u32 = 16;
    fill(&q, N).await;
    // Handlers of 150 ms set the pace even when a loaded machine makes a round trip take tens of
    // milliseconds (with 40 ms handlers, a CI run under load saw the SQLite refills come back
    // after the slots had emptied the buffer, which rightly grew it).
    let handle = Consumer::spawn(q.clone(), config(2), |_task| async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        Ok(())
    });
    // The buffer does not grow when handlers, not round trips, set the pace: two running, at
    // most two waiting, and the two just finished whose acks may still wait in the acker's
    // window. A buffer grown to 4 would reach 8.
    let mut most = 0;
    while handle.stats().acked < u64::from(N) {
        most = most.max(q.stats().await.expect("stats").in_flight);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stats = handle.shutdown().await;
    assert_eq!((stats.acked, stats.lost), (u64::from(N), 0));
    assert!(most <= 6, "held {most} tasks with concurrency 2");
    assert!(most >= 3, "held {most}: the buffer was never used");
}

async fn memory() -> Under {
    observed(Arc::new(MemoryFleetBackend::new()))
}

async fn sqlite() -> Under {
    let db: &'static TempSqlite = Box::leak(Box::new(TempSqlite::new()));
    observed(Arc::new(
        SqliteFleetBackend::open(db.path()).await.expect("open"),
    ))
}

async fn redis() -> Under {
    let config =
        RedisFleetConfig::new(redis_url()).with_prefix(format!("{}:", unique_prefix("prefetch")));
    observed(Arc::new(
        RedisFleetBackend::with_config(config)
            .await
            .expect("connect"),
    ))
}

async fn postgres() -> Under {
    let options = PostgresFleetOptions {
        pool: PostgresFleetOptions::default()
            .pool
            .schema(Schema::new(unique_schema("prefetch")).expect("schema"))
            .max_connections(8),
        ..PostgresFleetOptions::default()
    };
    observed(Arc::new(
        PostgresFleetBackend::open_with(&postgres_url(), options)
            .await
            .expect("open"),
    ))
}

macro_rules! on {
    ($backend:ident: $($check:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::$backend().await).await;
                }
            )*
        }
    };
}

macro_rules! prefetch_checks {
    ($($check:ident),* $(,)?) => {
        on!(memory: $($check),*);
        on!(sqlite: $($check),*);
        on!(redis: $($check),*);
        on!(postgres: $($check),*);
    };
}

prefetch_checks!(
    backlog_drained_exactly_once,
    acks_are_batched,
    shutdown_gives_the_buffer_back_at_once,
    dropping_the_handle_gives_the_buffer_back,
    buffered_tasks_stay_reserved_behind_a_slow_handler,
    slow_handlers_hold_only_their_concurrency,
);
