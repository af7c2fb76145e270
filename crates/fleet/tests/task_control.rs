//! Task control in the typed layer (ADR 0380, sections 4, 5, 6 and 8): the consumer's cancel
//! token, timeouts, retry policies, `Permanent`, `Output<R>` results, and `Queue`'s task methods.
//!
//! On the memory backend, the reference adapter of task records; the other adapters join as
//! their records land (until then they answer `Rejected`, which the maintainer checks here too).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_conformance::harness::TempSqlite;
use switchyard_core::MemoryFleetBackend;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::fleet::adapter::TaskOps;
use switchyard_fleet::{
    Backoff, CancelOutcome, CancelReason, Consumer, ConsumerConfig, ConsumerHandle, ConsumerStats,
    DeadLetter, HandlerError, Jitter, Keep, Maintainer, MaintainerOptions, Output, Permanent,
    PushOptions, Queue, Retention, RetryPolicy, TaskState, Waited,
};
use switchyard_fleet_sqlite::SqliteFleetBackend;
use tokio::sync::Notify;

type B = Arc<dyn FleetBackend>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Job {
    n: u32,
}

fn mem() -> (Arc<MemoryFleetBackend>, B) {
    let m = Arc::new(MemoryFleetBackend::new());
    let b: B = m.clone();
    (m, b)
}

/// A consumer config with a slow heartbeat (5 s), fast retries and short graces.
fn config() -> ConsumerConfig {
    ConsumerConfig {
        concurrency: 2,
        visibility: Duration::from_secs(15),
        poll: Duration::from_millis(50),
        backoff_unit: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(20),
        sweep_every: None,
        shutdown_grace: Duration::from_secs(5),
        cancel_grace: Duration::from_secs(5),
        ..ConsumerConfig::default()
    }
}

/// Waits (up to 10 s) until the consumer's stats satisfy `done`.
async fn until(handle: &ConsumerHandle, done: impl Fn(&ConsumerStats) -> bool) -> ConsumerStats {
    for _ in 0..1000 {
        let s = handle.stats();
        if done(&s) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting; stats {:?}", handle.stats());
}

/// A handler that says when it started, then waits for its token and reports how it fired.
struct Probe {
    started: Notify,
    fired: Mutex<Option<(CancelReason, Instant)>>,
}

impl Probe {
    fn new() -> Arc<Self> {
        Arc::new(Probe {
            started: Notify::new(),
            fired: Mutex::new(None),
        })
    }

    fn fired(&self) -> Option<(CancelReason, Instant)> {
        *self.fired.lock().expect("lock")
    }
}

/// Spawns a consumer whose handler waits for its token, records it, and returns an error.
fn waiting_consumer(q: &Queue<Job>, cfg: ConsumerConfig, probe: Arc<Probe>) -> ConsumerHandle {
    Consumer::spawn(q.clone(), cfg, move |task| {
        let probe = probe.clone();
        async move {
            probe.started.notify_one();
            let reason = task.cancel.cancelled().await;
            *probe.fired.lock().expect("lock") = Some((reason, Instant::now()));
            Err::<(), HandlerError>("stopped".into())
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_of_a_running_task_reaches_its_token_via_the_notice() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-notice");
    let probe = Probe::new();
    // Heartbeat 5 s: a token fired well before that came by pub/sub.
    let handle = waiting_consumer(&q, config(), probe.clone());
    let started = probe.started.notified();
    let id = q.push(&Job { n: 1 }).await.expect("push");
    started.await;
    let asked = Instant::now();
    assert_eq!(
        q.cancel(&id).await.expect("cancel"),
        CancelOutcome::CancelRequested
    );
    let s = until(&handle, |s| s.cancelled == 1).await;
    let (reason, at) = probe.fired().expect("the token fired");
    assert_eq!(reason, CancelReason::Cancelled);
    assert!(
        at.duration_since(asked) < Duration::from_secs(1),
        "the notice took {:?}",
        at.duration_since(asked)
    );
    assert_eq!((s.retried, s.dead_lettered, s.acked), (0, 0, 0), "{s:?}");
    let info = q.get(&id).await.expect("get").expect("a record");
    assert_eq!(info.state, TaskState::Cancelled);
    // Never retried: nothing left to run.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.total(), stats.cancelled), (0, 1), "{stats:?}");
    let s = handle.shutdown().await;
    assert_eq!((s.cancelled, s.retried, s.errors), (1, 0, 0), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_without_the_notice_reaches_the_token_within_one_heartbeat() {
    let (m, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-beat");
    let probe = Probe::new();
    let beat = Duration::from_millis(300);
    let cfg = ConsumerConfig {
        heartbeat: Some(beat),
        ..config()
    };
    let handle = waiting_consumer(&q, cfg, probe.clone());
    let started = probe.started.notified();
    let id = q.push(&Job { n: 1 }).await.expect("push");
    started.await;
    // The adapter's step alone: no notice is published, so only the heartbeat can tell.
    let asked = Instant::now();
    let out = TaskOps::task_cancel(&*m, "tc-beat", std::slice::from_ref(&id))
        .await
        .expect("cancel");
    assert_eq!(out, vec![CancelOutcome::CancelRequested]);
    until(&handle, |s| s.cancelled == 1).await;
    let (reason, at) = probe.fired().expect("the token fired");
    assert_eq!(reason, CancelReason::Cancelled);
    let took = at.duration_since(asked);
    assert!(took <= beat + Duration::from_millis(300), "took {took:?}");
    assert_eq!(
        q.get(&id).await.expect("get").expect("record").state,
        TaskState::Cancelled
    );
    let s = handle.shutdown().await;
    assert_eq!((s.retried, s.dead_lettered, s.errors), (0, 0, 0), "{s:?}");
}

/// Sets a flag when dropped: shows a handler's future was aborted.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_ignoring_its_token_is_aborted_after_the_grace() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-grace");
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let cfg = ConsumerConfig {
        cancel_grace: Duration::from_millis(300),
        ..config()
    };
    let (d, s) = (dropped.clone(), started.clone());
    let handle = Consumer::spawn(q.clone(), cfg, move |_task| {
        let guard = Dropped(d.clone());
        let s = s.clone();
        async move {
            let _guard = guard;
            s.notify_one();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        }
    });
    let wait_start = started.notified();
    let id = q.push(&Job { n: 1 }).await.expect("push");
    wait_start.await;
    let asked = Instant::now();
    q.cancel(&id).await.expect("cancel");
    until(&handle, |s| s.cancelled == 1).await;
    let took = asked.elapsed();
    assert!(dropped.load(Ordering::SeqCst), "the handler was aborted");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "aborted after {took:?}"
    );
    assert_eq!(
        q.get(&id).await.expect("get").expect("record").state,
        TaskState::Cancelled
    );
    let s = handle.shutdown().await;
    assert_eq!((s.retried, s.released, s.errors), (0, 0, 0), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefetched_task_cancelled_before_it_starts_never_runs() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-buffer");
    let ran: Arc<Mutex<Vec<u32>>> = Arc::default();
    let gate = Arc::new(Notify::new());
    let cfg = ConsumerConfig {
        concurrency: 1,
        ..config()
    };
    let (r, g) = (ran.clone(), gate.clone());
    // The first task holds the only slot until the gate opens; the second waits in the buffer.
    let first = q.push(&Job { n: 1 }).await.expect("push");
    let second = q.push(&Job { n: 2 }).await.expect("push");
    let handle = Consumer::spawn_with(
        q.clone(),
        cfg,
        switchyard_fleet::Batching::default().prefetch(2),
        move |task| {
            let (r, g) = (r.clone(), g.clone());
            async move {
                r.lock().expect("lock").push(task.payload.n);
                if task.payload.n == 1 {
                    g.notified().await;
                }
                Ok(())
            }
        },
    );
    for _ in 0..500 {
        let info = q.get(&second).await.expect("get").expect("record");
        if info.state == TaskState::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        q.cancel(&second).await.expect("cancel"),
        CancelOutcome::CancelRequested
    );
    until(&handle, |s| s.cancelled == 1).await;
    gate.notify_one();
    until(&handle, |s| s.acked == 1).await;
    assert_eq!(*ran.lock().expect("lock"), vec![1]);
    assert_eq!(
        q.get(&second).await.expect("get").expect("record").state,
        TaskState::Cancelled
    );
    assert_eq!(
        q.get(&first).await.expect("get").expect("record").state,
        TaskState::Completed
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_is_a_failed_attempt_then_a_retry_then_the_dead_letter() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-timeout");
    let probe = Probe::new();
    let opts = PushOptions {
        max_attempts: Some(2),
        timeout: Some(Duration::from_millis(200)),
        retry: Some(
            RetryPolicy::default()
                .backoff(Backoff::Fixed)
                .base(Duration::ZERO),
        ),
        ..PushOptions::default()
    };
    let handle = waiting_consumer(&q, config(), probe.clone());
    let id = q.push_with(&Job { n: 1 }, opts).await.expect("push");
    let s = until(&handle, |s| s.dead_lettered == 1).await;
    assert_eq!((s.timed_out, s.retried, s.cancelled), (2, 1, 0), "{s:?}");
    assert_eq!(probe.fired().map(|f| f.0), Some(CancelReason::TimedOut));
    let dead = q.dlq_peek(1).await.expect("peek");
    let Some(DeadLetter::Task(t)) = dead.first() else {
        panic!("a dead task: {dead:?}");
    };
    let last = t.last_error.as_ref().expect("last_error");
    assert_eq!(last.message, "timed out after 0.2 s");
    assert_eq!(last.attempt, 2);
    let info = q.get(&id).await.expect("get").expect("record");
    assert_eq!(info.state, TaskState::Dead);
    assert_eq!(info.last_error.as_deref(), Some("timed out after 0.2 s"));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumers_timeout_applies_and_aborts_a_handler_that_ignores_it() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-timeout-config");
    let deadlines: Arc<Mutex<Vec<bool>>> = Arc::default();
    let cfg = ConsumerConfig {
        timeout: Some(Duration::from_millis(100)),
        cancel_grace: Duration::from_millis(100),
        max_attempts: 1,
        ..config()
    };
    let d = deadlines.clone();
    let handle = Consumer::spawn(q.clone(), cfg, move |task| {
        d.lock().expect("lock").push(task.deadline.is_some());
        async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        }
    });
    q.push(&Job { n: 1 }).await.expect("push");
    let s = until(&handle, |s| s.dead_lettered == 1).await;
    assert_eq!((s.timed_out, s.retried), (1, 0), "{s:?}");
    assert_eq!(*deadlines.lock().expect("lock"), vec![true]);
    let dead = q.dlq_peek(1).await.expect("peek");
    assert_eq!(
        dead[0].last_error().map(|e| e.message.as_str()),
        Some("timed out after 0.1 s")
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_are_dead_lettered_at_once() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-permanent");
    let calls = Arc::new(AtomicU32::new(0));
    let cfg = ConsumerConfig {
        max_attempts: 5,
        ..config()
    };
    let c = calls.clone();
    let handle = Consumer::spawn(q.clone(), cfg, move |_task| {
        c.fetch_add(1, Ordering::SeqCst);
        async move { Err::<(), HandlerError>(Permanent::new("bad input").into()) }
    });
    let id = q.push(&Job { n: 1 }).await.expect("push");
    let s = until(&handle, |s| s.dead_lettered == 1).await;
    assert_eq!((s.retried, calls.load(Ordering::SeqCst)), (0, 1), "{s:?}");
    let dead = q.dlq_peek(1).await.expect("peek");
    assert_eq!(
        dead[0]
            .last_error()
            .map(|e| (e.message.as_str(), e.attempt)),
        Some(("bad input", 1))
    );
    assert_eq!(
        q.get(&id).await.expect("get").expect("record").state,
        TaskState::Dead
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_are_stored_and_read_back_with_result_and_wait() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-results");
    let small = q.push(&Job { n: 1 }).await.expect("push");
    let large = q.push(&Job { n: 2 }).await.expect("push");
    // A wait that starts before any consumer: it follows the event log.
    let waiting = {
        let q = q.clone();
        let small = small.clone();
        tokio::spawn(async move { q.wait::<Value>(&small, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let handle = Consumer::spawn(q.clone(), config(), |task| async move {
        // Over 1 KiB for the second: too long to ride in its event.
        let text = "x".repeat(if task.payload.n == 2 { 4096 } else { 3 });
        Ok(Output(json!({"n": task.payload.n, "text": text})))
    });
    let Waited::Ended(end) = waiting.await.expect("joins").expect("wait") else {
        panic!("ended");
    };
    assert_eq!(end.state, TaskState::Completed);
    assert_eq!(end.result, Some(json!({"n": 1, "text": "xxx"})));
    let end = q
        .wait::<Value>(&large, Duration::from_secs(10))
        .await
        .expect("wait")
        .ended()
        .expect("ended");
    assert_eq!(
        end.result.expect("a result")["text"].as_str().map(str::len),
        Some(4096)
    );
    until(&handle, |s| s.acked == 2).await;
    let end = q
        .result::<Value>(&small)
        .await
        .expect("result")
        .expect("ended");
    assert_eq!(
        (end.state, end.result),
        (TaskState::Completed, Some(json!({"n": 1, "text": "xxx"})))
    );
    assert!(end.finished_at.is_some());
    handle.shutdown().await;

    // A wait that times out, and one for an id no record has.
    let pending = q.push(&Job { n: 3 }).await.expect("push");
    let t0 = Instant::now();
    assert_eq!(
        q.wait::<Value>(&pending, Duration::from_millis(200))
            .await
            .expect("wait"),
        Waited::TimedOut
    );
    assert!(t0.elapsed() >= Duration::from_millis(180));
    assert!(q.result::<Value>(&pending).await.expect("result").is_none());
    assert_eq!(
        q.wait::<Value>("no-such-task", Duration::from_secs(5))
            .await
            .expect("wait"),
        Waited::Unknown
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_limit_is_a_permanent_failure() {
    let (_, b) = mem();
    let limit = b.max_result_bytes();
    let q: Queue<Job> = Queue::new(b, "tc-too-large");
    let handle = Consumer::spawn(q.clone(), config(), move |_task| async move {
        Ok(Output("y".repeat(limit + 1)))
    });
    let id = q.push(&Job { n: 1 }).await.expect("push");
    let s = until(&handle, |s| s.dead_lettered == 1).await;
    assert_eq!((s.retried, s.acked), (0, 0), "{s:?}");
    let info = q.get(&id).await.expect("get").expect("record");
    assert_eq!(info.state, TaskState::Dead);
    assert!(
        info.last_error
            .as_deref()
            .is_some_and(|e| e.contains("bytes")),
        "{info:?}"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_stopping_for_shutdown_gives_its_task_back() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-shutdown");
    let probe = Probe::new();
    let handle = waiting_consumer(&q, config(), probe.clone());
    let started = probe.started.notified();
    let id = q.push(&Job { n: 1 }).await.expect("push");
    started.await;
    let s = handle.shutdown().await;
    assert_eq!(probe.fired().map(|f| f.0), Some(CancelReason::Shutdown));
    // Given back, not failed (the feeder's last reserve may take it once more and give it
    // back again, so it can count twice).
    assert!(s.released >= 1, "{s:?}");
    assert_eq!((s.retried, s.dead_lettered), (0, 0), "{s:?}");
    let info = q.get(&id).await.expect("get").expect("record");
    assert_eq!(info.state, TaskState::Waiting);
    assert_eq!(info.last_error, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_of_a_task_decides_its_delay() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-policy");
    // Config: 10 ms, at most 20 ms; the task: fixed 400 ms, at most 1 s (a cap it does not set
    // is the consumer's).
    let opts = PushOptions {
        max_attempts: Some(2),
        retry: Some(
            RetryPolicy::default()
                .backoff(Backoff::Fixed)
                .base(Duration::from_millis(400))
                .cap(Duration::from_secs(1))
                .jitter(Jitter::None),
        ),
        ..PushOptions::default()
    };
    let seen: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let s2 = seen.clone();
    let handle = Consumer::spawn(q.clone(), config(), move |_task| {
        s2.lock().expect("lock").push(Instant::now());
        async move { Err::<(), HandlerError>("again".into()) }
    });
    q.push_with(&Job { n: 1 }, opts).await.expect("push");
    until(&handle, |s| s.dead_lettered == 1).await;
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].duration_since(seen[0]);
    assert!(gap >= Duration::from_millis(380), "retried after {gap:?}");
    handle.shutdown().await;
}

#[test]
fn jitter_keeps_every_delay_in_its_bounds() {
    let cfg = ConsumerConfig {
        backoff_unit: Duration::from_secs(1),
        backoff_cap: Duration::from_secs(30),
        jitter: Jitter::Full,
        ..ConsumerConfig::default()
    };
    let full = cfg.retry_policy();
    let equal = full.jitter(Jitter::Equal);
    for attempt in 1..=10 {
        let d = full.ceiling(attempt);
        assert_eq!(d, cfg.backoff(attempt));
        for _ in 0..200 {
            assert!(full.delay(attempt) <= d);
            let e = equal.delay(attempt);
            assert!(e >= d / 2 && e <= d, "{e:?} of {d:?}");
        }
    }
    // Today's delays when nothing is set.
    let today = ConsumerConfig::default();
    assert_eq!(today.retry_policy().delay(3), Duration::from_secs(4));
}

#[tokio::test]
async fn queue_task_methods_cancel_purge_events_retention() {
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b, "tc-methods");
    let ids: Vec<String> = q
        .push_many(
            &[Job { n: 1 }, Job { n: 2 }, Job { n: 3 }],
            PushOptions::default(),
        )
        .await
        .expect("push");
    let out = q
        .cancel_many(&[ids[0].clone(), "nope".to_string()])
        .await
        .expect("cancel");
    assert_eq!(out, vec![CancelOutcome::Cancelled, CancelOutcome::Unknown]);
    assert_eq!(q.purge().await.expect("purge"), 2);
    let read = q.events(None, 10, Duration::ZERO).await.expect("events");
    assert_eq!(read.events.len(), 3);
    assert!(read.events.iter().all(|e| e.state == TaskState::Cancelled));
    assert_eq!(
        q.retention().await.expect("retention"),
        Retention::default()
    );
    let r = Retention {
        failed: Keep::new(1, Duration::from_secs(60)),
        ..Retention::default()
    };
    q.set_retention(r).await.expect("set");
    assert_eq!(q.retention().await.expect("retention"), r);
    q.maintain().await.expect("maintain");
    let left = futures::future::join_all(ids.iter().map(|id| q.get(id))).await;
    let kept = left
        .into_iter()
        .filter(|r| matches!(r, Ok(Some(_))))
        .count();
    assert_eq!(kept, 1, "retention keeps one cancelled record");
    // Bounds of the envelope's new keys are checked where they are written.
    let bad = PushOptions {
        timeout: Some(Duration::ZERO),
        ..PushOptions::default()
    };
    let e = q
        .push_with(&Job { n: 4 }, bad)
        .await
        .expect_err("bad timeout");
    assert!(e.to_string().contains("timeout_seconds"), "{e}");
}

#[tokio::test]
async fn the_maintainer_runs_queue_maintain_and_skips_backends_without_records() {
    // Memory keeps records: maintain runs and trims what the new retention drops.
    let (_, b) = mem();
    let q: Queue<Job> = Queue::new(b.clone(), "tc-maint");
    let ids = q
        .push_many(
            &(0..20).map(|n| Job { n }).collect::<Vec<_>>(),
            PushOptions::default(),
        )
        .await
        .expect("push");
    assert_eq!(q.purge().await.expect("purge"), 20);
    q.set_retention(Retention {
        failed: Keep::new(5, Duration::from_secs(3600)),
        ..Retention::default()
    })
    .await
    .expect("set");
    let m = Maintainer::new(b, MaintainerOptions::default().queue("tc-maint"));
    m.run_once().await.expect("round");
    let stats = m.stats();
    let got = stats.queues.get("tc-maint").copied().unwrap_or_default();
    assert_eq!(got.errors, 0, "{got:?}");
    assert_eq!(got.maintained, 15, "{got:?}");
    let mut kept = 0;
    for id in &ids {
        kept += usize::from(q.get(id).await.expect("get").is_some());
    }
    assert_eq!(kept, 5);

    // SQLite keeps no records yet (`Rejected`): skipped quietly, no error counted.
    let db: &'static TempSqlite = Box::leak(Box::new(TempSqlite::new()));
    let s: B = Arc::new(SqliteFleetBackend::open(db.path()).await.expect("open"));
    let m = Maintainer::new(s, MaintainerOptions::default().queue("tc-maint"));
    m.run_once().await.expect("round");
    m.run_once().await.expect("round");
    let got = m
        .stats()
        .queues
        .get("tc-maint")
        .copied()
        .unwrap_or_default();
    assert_eq!((got.errors, got.maintained), (0, 0), "{got:?}");
}

/// A consumer whose handler cancels its own task through the adapter's step (no notice, and
/// the heartbeat is 5 s away), then succeeds: the ack meets the cancel.
async fn cancelled_before_its_ack(batching: switchyard_fleet::Batching, queue: &str) {
    let (m, b) = mem();
    let q: Queue<Job> = Queue::new(b, queue);
    let name = queue.to_string();
    let handle = Consumer::spawn_with(q.clone(), config(), batching, move |task| {
        let (m, name) = (m.clone(), name.clone());
        async move {
            let out = TaskOps::task_cancel(&*m, &name, std::slice::from_ref(&task.id)).await?;
            assert_eq!(out, vec![CancelOutcome::CancelRequested]);
            Ok(())
        }
    });
    let id = q.push(&Job { n: 1 }).await.expect("push");
    let s = until(&handle, |s| s.cancelled == 1).await;
    assert_eq!(
        (s.acked, s.lost, s.retried, s.errors),
        (0, 0, 0, 0),
        "{s:?}"
    );
    assert_eq!(
        q.get(&id).await.expect("get").expect("record").state,
        TaskState::Cancelled
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_ack_of_a_cancelled_task_counts_it_cancelled() {
    cancelled_before_its_ack(switchyard_fleet::Batching::default(), "tc-ack-many").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_ack_of_a_cancelled_task_counts_it_cancelled() {
    cancelled_before_its_ack(switchyard_fleet::Batching::off(), "tc-ack-one").await;
}
