//! The queue features of issue 16 through the typed layer (`Queue<T>`, `Consumer`) on the memory
//! backend, SQLite and Redis: delayed and idempotent submits, batches, pause, rate limits,
//! progress, release and chosen dead letters.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use switchyard_conformance::harness::{TempSqlite, redis_url, unique_id, unique_prefix};
use switchyard_core::Error;
use switchyard_core::MemoryFleetBackend;
use switchyard_core::fleet::{FleetBackend, Priority, RateLimit, RunAt};
use switchyard_fleet::{
    Consumer, ConsumerConfig, DeadLetter, PushOptions, Queue, Reserved, Submitted, Task,
};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_fleet_sqlite::SqliteFleetBackend;

type B = Arc<dyn FleetBackend>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Job {
    page: u32,
}

fn queue(b: &B) -> Queue<Job> {
    Queue::new(b.clone(), unique_id("q"))
}

const VIS: Duration = Duration::from_secs(30);

fn task(r: Reserved<Job>) -> Task<Job> {
    match r {
        Reserved::Task(t) => t,
        Reserved::Malformed { error, .. } => panic!("malformed: {error}"),
    }
}

async fn delayed_and_idempotent_submits(b: B) {
    let q = queue(&b);
    let id = q
        .push_at(&Job { page: 1 }, RunAt::After(Duration::from_secs(3600)))
        .await
        .expect("delayed push");
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.scheduled, stats.waiting()), (1, 0));
    assert!(
        q.reserve(Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .is_none()
    );

    // A past instant is now.
    let now_id = q
        .push_at(&Job { page: 2 }, RunAt::At(1.0))
        .await
        .expect("past push");
    let t = task(
        q.reserve(Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .expect("a task"),
    );
    assert_eq!((t.id.as_str(), t.payload.page), (now_id.as_str(), 2));
    assert!(q.ack(&t.delivery).await.expect("ack"));
    assert_ne!(id, now_id);

    // Idempotent and delayed in one step: the duplicate answers the first id.
    let first = q
        .submit(
            &Job { page: 3 },
            PushOptions::default(),
            RunAt::After(Duration::from_secs(3600)),
            Some("k"),
        )
        .await
        .expect("submit");
    let Submitted::Enqueued(first_id) = first else {
        panic!("first submit enqueues: {first:?}")
    };
    let dup = q
        .submit(
            &Job { page: 4 },
            PushOptions::default(),
            RunAt::Now,
            Some("k"),
        )
        .await
        .expect("submit");
    assert_eq!(dup, Submitted::Duplicate(first_id));
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.scheduled, stats.waiting()), (2, 0));
    // The key is the one submit_once uses.
    let again = q
        .submit_once("k", &Job { page: 5 }, PushOptions::default())
        .await
        .expect("submit_once");
    assert!(matches!(again, Submitted::Duplicate(_)));
}

async fn batches(b: B) {
    let q = queue(&b);
    let jobs: Vec<Job> = (0..5).map(|page| Job { page }).collect();
    let ids = q
        .push_many(&jobs, PushOptions::default())
        .await
        .expect("push_many");
    assert_eq!(ids.len(), 5);
    assert_eq!(
        q.push_many(&[], PushOptions::default())
            .await
            .expect("empty"),
        Vec::<String>::new()
    );
    let with_id = PushOptions {
        id: Some("same".into()),
        ..PushOptions::default()
    };
    assert!(matches!(
        q.push_many(&jobs, with_id).await,
        Err(Error::InvalidInput { .. })
    ));
    let too_many: Vec<Job> = (0..1001).map(|page| Job { page }).collect();
    assert!(matches!(
        q.push_many(&too_many, PushOptions::default()).await,
        Err(Error::InvalidInput { .. })
    ));

    let got: Vec<Task<Job>> = q
        .reserve_many(3, Duration::ZERO, VIS)
        .await
        .expect("reserve_many")
        .into_iter()
        .map(task)
        .collect();
    assert_eq!(
        got.iter().map(|t| t.payload.page).collect::<Vec<_>>(),
        vec![0, 1, 2],
        "in push order"
    );
    assert_eq!(
        got.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        ids[..3].to_vec()
    );
    let acked = q
        .ack_many(got.iter().map(|t| &t.delivery))
        .await
        .expect("ack_many");
    assert_eq!(acked, vec![true, true, true]);
    // Acked already: not current any more.
    assert_eq!(
        q.ack_many([&got[0].delivery]).await.expect("ack_many"),
        vec![false]
    );
    assert_eq!(q.len().await.expect("len"), 2);
}

async fn pause_resume_and_rate_limit(b: B) {
    let q = queue(&b);
    q.push(&Job { page: 1 }).await.expect("push");
    assert!(q.pause().await.expect("pause"));
    assert!(!q.pause().await.expect("pause again"));
    assert!(q.stats().await.expect("stats").paused);
    assert!(
        q.reserve(Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .is_none()
    );
    q.push(&Job { page: 2 })
        .await
        .expect("pushes are taken while paused");
    assert!(q.resume().await.expect("resume"));
    assert!(!q.stats().await.expect("stats").paused);

    let limit = RateLimit::new(2, Duration::from_secs(3600)).expect("limit");
    q.set_rate_limit(Some(limit)).await.expect("set");
    assert_eq!(q.stats().await.expect("stats").rate_limit, Some(limit));
    q.push(&Job { page: 3 }).await.expect("push");
    // Two tokens: two of the three tasks, then nothing until a token comes back in ~30 min.
    let got = q
        .reserve_many(3, Duration::ZERO, VIS)
        .await
        .expect("reserve_many");
    assert_eq!(got.len(), 2);
    assert!(
        q.reserve(Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .is_none()
    );
    assert!(q.stats().await.expect("stats").throttled_ms > 0);
    q.set_rate_limit(None).await.expect("remove");
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.rate_limit, stats.throttled_ms), (None, 0));
    assert!(
        q.reserve(Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .is_some()
    );
}

async fn progress_and_in_flight(b: B) {
    let q = queue(&b);
    let id = q.push(&Job { page: 7 }).await.expect("push");
    let t = task(
        q.reserve(Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .expect("a task"),
    );
    assert!(
        t.report_progress(&json!({"done": 1, "of": 4}))
            .await
            .expect("progress")
    );
    assert!(
        q.progress(&t.delivery, &json!({"done": 2, "of": 4}))
            .await
            .expect("progress")
    );
    let flying = q.in_flight(10).await.expect("in_flight");
    assert_eq!(flying.len(), 1);
    let f = &flying[0];
    assert_eq!(f.id.as_deref(), Some(id.as_str()));
    assert_eq!(f.payload, Some(Job { page: 7 }));
    assert_eq!((f.attempt, f.priority), (1, Priority::Normal));
    assert_eq!(f.progress, Some(json!({"done": 2, "of": 4})));
    // Released as delivered: the attempt count stays, the progress goes.
    assert!(
        q.release(&t.delivery, Duration::ZERO)
            .await
            .expect("release")
    );
    assert!(
        !t.report_progress(&json!("late"))
            .await
            .expect("not current")
    );
    assert!(q.in_flight(10).await.expect("in_flight").is_empty());
    let again = task(
        q.reserve(Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .expect("a task"),
    );
    assert_eq!((again.id.as_str(), again.attempt), (id.as_str(), 2));
    assert_eq!(
        again.delivery.body, t.delivery.body,
        "the body as delivered"
    );
    assert!(q.ack(&again.delivery).await.expect("ack"));
}

async fn consumer_handlers_report_progress(b: B) {
    let q = queue(&b);
    q.push(&Job { page: 1 }).await.expect("push");
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel::<()>();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let seen_tx = std::sync::Mutex::new(Some(seen_tx));
    let go_rx = Arc::new(tokio::sync::Mutex::new(Some(go_rx)));
    let config = ConsumerConfig {
        poll: Duration::from_millis(50),
        sweep_every: None,
        ..ConsumerConfig::default()
    };
    let handle = Consumer::spawn(q.clone(), config, move |task: Task<Job>| {
        let seen = seen_tx.lock().expect("lock").take();
        let go = go_rx.clone();
        async move {
            task.report_progress(&json!({"step": "halfway"})).await?;
            if let Some(seen) = seen {
                let _ = seen.send(());
            }
            if let Some(go) = go.lock().await.take() {
                let _ = go.await;
            }
            Ok(())
        }
    });
    tokio::time::timeout(Duration::from_secs(20), seen_rx)
        .await
        .expect("the handler ran")
        .expect("signal");
    let flying = q.in_flight(10).await.expect("in_flight");
    assert_eq!(flying.len(), 1);
    assert_eq!(flying[0].progress, Some(json!({"step": "halfway"})));
    let _ = go_tx.send(());
    handle.wait_idle().await.expect("idle");
    assert_eq!(handle.shutdown().await.acked, 1);
}

async fn chosen_dead_letters(b: B) {
    let q = queue(&b);
    for page in 0..3 {
        q.push(&Job { page }).await.expect("push");
    }
    for _ in 0..3 {
        let t = task(
            q.reserve(Duration::ZERO, VIS)
                .await
                .expect("reserve")
                .expect("a task"),
        );
        assert!(q.fail(&t.delivery, &t.delivery.body).await.expect("fail"));
    }
    b.queue_dead(q.name(), b"not json").await.expect("dead");
    let letters = q.dlq_peek(10).await.expect("peek");
    assert_eq!(letters.len(), 4);
    // Pick the second task and the malformed body, by their stored bytes.
    let chosen: Vec<Vec<u8>> = letters
        .iter()
        .filter(|l| match l {
            DeadLetter::Task(t) => t.payload.page == 1,
            DeadLetter::Malformed { .. } => true,
        })
        .map(|l| l.body().to_vec())
        .collect();
    assert_eq!(chosen.len(), 2);
    let mut with_gone = chosen.clone();
    with_gone.push(b"never dead".to_vec());
    let answers = q
        .dlq_requeue_chosen(&with_gone, Priority::High)
        .await
        .expect("requeue chosen");
    assert_eq!(answers, vec![true, true, false]);
    let left: Vec<u32> = q
        .dlq_peek(10)
        .await
        .expect("peek")
        .iter()
        .map(|l| match l {
            DeadLetter::Task(t) => t.payload.page,
            DeadLetter::Malformed { .. } => panic!("the malformed body was requeued"),
        })
        .collect();
    assert_eq!(left, vec![0, 2], "the others keep their order");
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.high, stats.dead), (2, 2));
    assert!(
        q.dlq_requeue_chosen(&[], Priority::Normal)
            .await
            .expect("empty")
            .is_empty()
    );
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
        RedisFleetConfig::new(redis_url()).with_prefix(format!("{}:", unique_prefix("flow")));
    Arc::new(
        RedisFleetBackend::with_config(config)
            .await
            .expect("connect"),
    )
}

macro_rules! flow_checks {
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

flow_checks!(
    delayed_and_idempotent_submits,
    batches,
    pause_resume_and_rate_limit,
    progress_and_in_flight,
    consumer_handlers_report_progress,
    chosen_dead_letters,
);
