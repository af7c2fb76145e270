//! Re-sent queue calls apply once (ADR 0140), the calls of guarantees `queue.delayed`,
//! `queue.batches`, `queue.pause`, `queue.rate_limit`, `queue.progress`, `dlq.requeue_chosen`,
//! `queue.release` and `schedule.stored` included, and the calls that move recorded tasks
//! (ADR 0380).
//!
//! fred re-sends the commands that were in flight when a connection dropped. A call whose first
//! send ran but whose reply was lost reaches Redis twice, with the same op token (the token is
//! minted per call, inside the command). `resend_probe` gives a backend whose every call carries
//! one fixed token, so calling it twice is exactly what a re-send looks like to the server.
//! The last test loses replies for real (a proxy cuts connections after commands ran) while
//! pushes and acks run; no token is fixed there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_conformance::harness::{
    LoseReply, RedisServer, redis_cmd, redis_url, reply_losing_proxy, unique_prefix,
};
use switchyard_core::Error;
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{
    CancelOutcome, IdempotencyKey, Priority, RunAt, Submit, SubmitOutcome, TaskState, Tasks,
};
use switchyard_fleet_redis::{KeyLayout, RedisFleetBackend, RedisFleetConfig};

const MIN: Duration = Duration::from_secs(60);

async fn backend(url: &str, layout: KeyLayout) -> RedisFleetBackend {
    let config = RedisFleetConfig::new(url)
        .with_prefix(format!("{}:", unique_prefix("resend")))
        .with_layout(layout);
    RedisFleetBackend::with_config(config)
        .await
        .expect("connect")
}

async fn every_call_applies_once(b: RedisFleetBackend, cluster: bool) {
    let q = "q";
    // push
    let p = b.resend_probe("push-1");
    p.queue_push(q, b"a", Priority::Normal).await.expect("push");
    p.queue_push(q, b"a", Priority::Normal)
        .await
        .expect("re-sent push");
    assert_eq!(b.queue_size(q).await.expect("size"), 1, "push applied once");

    // reserve: the re-send answers with the delivery already made, nothing more is reserved
    b.queue_push(q, b"b", Priority::Normal).await.expect("push");
    let p = b.resend_probe("reserve-1");
    let d1 = p
        .queue_reserve(q, Duration::ZERO, MIN)
        .await
        .expect("reserve")
        .expect("a task");
    let d2 = p
        .queue_reserve(q, Duration::ZERO, MIN)
        .await
        .expect("re-sent reserve")
        .expect("the same task");
    assert_eq!(d1, d2);
    assert_eq!(d1.body, b"a");
    assert_eq!(b.queue_size(q).await.expect("size"), 1, "one task reserved");

    // ack: the re-send answers `true` again; a genuine second ack is refused
    let p = b.resend_probe("ack-1");
    assert!(p.queue_ack(q, &d1.receipt).await.expect("ack"));
    assert!(p.queue_ack(q, &d1.receipt).await.expect("re-sent ack"));
    assert!(!b.queue_ack(q, &d1.receipt).await.expect("second ack"));

    // nack: requeued once
    let d = b
        .queue_reserve(q, Duration::ZERO, MIN)
        .await
        .expect("reserve")
        .expect("b");
    let p = b.resend_probe("nack-1");
    assert!(
        p.queue_nack(q, &d.receipt, b"b2", Duration::ZERO)
            .await
            .expect("nack")
    );
    assert!(
        p.queue_nack(q, &d.receipt, b"b2", Duration::ZERO)
            .await
            .expect("re-sent nack")
    );
    assert_eq!(
        b.queue_peek(q, 10).await.expect("peek"),
        vec![b"b2".to_vec()]
    );

    // fail: dead-lettered once
    let d = b
        .queue_reserve(q, Duration::ZERO, MIN)
        .await
        .expect("reserve")
        .expect("b2");
    assert_eq!(d.attempt, 2);
    let p = b.resend_probe("fail-1");
    assert!(p.queue_fail(q, &d.receipt, b"dead").await.expect("fail"));
    assert!(
        p.queue_fail(q, &d.receipt, b"dead")
            .await
            .expect("re-sent fail")
    );
    assert_eq!(b.dlq_length(q).await.expect("dlq"), 1);

    // queue_dead: appended once
    let p = b.resend_probe("dead-1");
    p.queue_dead(q, b"dead2").await.expect("dead");
    p.queue_dead(q, b"dead2").await.expect("re-sent dead");
    assert_eq!(b.dlq_length(q).await.expect("dlq"), 2);

    // dlq_requeue: moved once, same answer
    let p = b.resend_probe("requeue-1");
    assert_eq!(
        p.dlq_requeue(q, 1, Priority::High).await.expect("requeue"),
        1
    );
    assert_eq!(
        p.dlq_requeue(q, 1, Priority::High).await.expect("re-sent"),
        1
    );
    assert_eq!(
        b.dlq_peek(q, 10).await.expect("dlq"),
        vec![b"dead2".to_vec()]
    );
    assert_eq!(
        b.queue_peek(q, 10).await.expect("peek"),
        vec![b"dead".to_vec()]
    );

    // dlq_pop: the re-send returns what the first send popped, and pops nothing more
    b.queue_dead(q, b"dead3").await.expect("dead");
    let p = b.resend_probe("pop-1");
    let first = p.dlq_pop(q, 1).await.expect("pop");
    let again = p.dlq_pop(q, 1).await.expect("re-sent pop");
    assert_eq!(first, vec![b"dead2".to_vec()]);
    assert_eq!(again, first);
    assert_eq!(
        b.dlq_peek(q, 10).await.expect("dlq"),
        vec![b"dead3".to_vec()]
    );

    // dlq_clear: a body dead-lettered after the first send survives the re-send
    let p = b.resend_probe("clear-1");
    assert_eq!(p.dlq_clear(q).await.expect("clear"), 1);
    b.queue_dead(q, b"later").await.expect("dead");
    assert_eq!(p.dlq_clear(q).await.expect("re-sent clear"), 1);
    assert_eq!(b.dlq_length(q).await.expect("dlq"), 1);

    // submit_once: the re-send says Enqueued again and pushes nothing
    let idem = || IdempotencyKey {
        ns: "idem:q",
        key: "k",
        value: b"id-1",
        ttl: Some(MIN),
    };
    let before = b.queue_size(q).await.expect("size");
    let p = b.resend_probe("submit-1");
    let first = p
        .queue_submit_once(q, b"s", Priority::Normal, idem())
        .await
        .expect("submit");
    let again = p
        .queue_submit_once(q, b"s", Priority::Normal, idem())
        .await
        .expect("re-sent submit");
    assert_eq!(first, SubmitOutcome::Enqueued);
    if cluster {
        // The probe repeats the whole call, and on the cluster layout that starts with reading
        // the KV entry the first call mirrored (a fred re-send repeats only the script).
        assert_eq!(again, SubmitOutcome::Duplicate(b"id-1".to_vec()));
    } else {
        assert_eq!(again, SubmitOutcome::Enqueued);
    }
    assert_eq!(b.queue_size(q).await.expect("size"), before + 1);
    // A genuine duplicate (another call) is still a duplicate.
    assert_eq!(
        b.queue_submit_once(q, b"s", Priority::Normal, idem())
            .await
            .expect("duplicate"),
        SubmitOutcome::Duplicate(b"id-1".to_vec())
    );
}

/// The calls of guarantees `queue.delayed`, `queue.batches`, `queue.pause`, `queue.rate_limit`,
/// `queue.progress`, `dlq.requeue_chosen`, `queue.release` and `schedule.stored` that change state
/// (ADRs 0285–0287).
async fn every_flow_call_applies_once(b: RedisFleetBackend) {
    let q = "flow";
    // a delayed submit is scheduled once
    let p = b.resend_probe("delayed-1");
    let later = Submit::new().run_at(RunAt::After(MIN));
    for _ in 0..2 {
        assert_eq!(
            p.queue_submit(q, b"later", &later).await.expect("submit"),
            SubmitOutcome::Enqueued
        );
    }
    assert_eq!(b.queue_stats(q).await.expect("stats").scheduled, 1);

    // push_many appends the batch once
    let p = b.resend_probe("many-1");
    let bodies = vec![b"m1".to_vec(), b"m2".to_vec()];
    for _ in 0..2 {
        p.queue_push_many(q, &bodies, Priority::Normal)
            .await
            .expect("push_many");
    }
    assert_eq!(b.queue_size(q).await.expect("size"), 2);

    // reserve_many: the re-send answers the same deliveries; ack_many the same answers
    let p = b.resend_probe("rmany-1");
    let first = p
        .queue_reserve_many(q, 5, Duration::ZERO, MIN)
        .await
        .expect("reserve_many");
    let again = p
        .queue_reserve_many(q, 5, Duration::ZERO, MIN)
        .await
        .expect("re-sent reserve_many");
    assert_eq!(first.len(), 2);
    assert_eq!(first, again);

    // progress and pause answer `true` again; a genuine second pause says it changed nothing
    let p = b.resend_probe("progress-1");
    for _ in 0..2 {
        assert!(
            p.queue_progress(q, &first[0].receipt, b"half")
                .await
                .expect("progress")
        );
    }
    let p = b.resend_probe("pause-1");
    assert!(p.queue_pause(q).await.expect("pause"));
    assert!(p.queue_pause(q).await.expect("re-sent pause"));
    assert!(!b.queue_pause(q).await.expect("second pause"));
    assert!(b.queue_resume(q).await.expect("resume"));

    // release requeues the delivered body once
    let p = b.resend_probe("release-1");
    for _ in 0..2 {
        assert!(
            p.queue_release(q, &first[0].receipt, Duration::ZERO)
                .await
                .expect("release")
        );
    }
    assert_eq!(
        b.queue_peek(q, 10).await.expect("peek"),
        vec![b"m1".to_vec()]
    );
    let p = b.resend_probe("amany-1");
    let receipts = vec![first[1].receipt.clone(), first[0].receipt.clone()];
    for _ in 0..2 {
        assert_eq!(
            p.queue_ack_many(q, &receipts).await.expect("ack_many"),
            [true, false]
        );
    }

    // dlq_requeue_chosen moves each chosen letter once and answers alike
    for body in [b"x".as_slice(), b"y", b"x"] {
        b.queue_dead(q, body).await.expect("dead");
    }
    let p = b.resend_probe("chosen-1");
    let chosen = vec![b"x".to_vec(), b"z".to_vec()];
    for _ in 0..2 {
        assert_eq!(
            p.dlq_requeue_chosen(q, &chosen, Priority::Normal)
                .await
                .expect("requeue_chosen"),
            [true, false]
        );
    }
    assert_eq!(
        b.dlq_peek(q, 10).await.expect("dlq"),
        vec![b"y".to_vec(), b"x".to_vec()]
    );
    assert_eq!(
        b.queue_peek(q, 10).await.expect("peek"),
        vec![b"m1".to_vec(), b"x".to_vec()]
    );
}

/// A re-send of a call that moved a recorded task answers the first reply (a pushed id is not
/// "taken" by its own first send) and ends nothing twice.
async fn every_task_call_applies_once(b: RedisFleetBackend) {
    let q = "t";
    let p = b.resend_probe("tpush-1");
    for _ in 0..2 {
        p.queue_push(q, br#"{"id": "a"}"#, Priority::Normal)
            .await
            .expect("push with an id, and its re-send");
    }
    let p = b.resend_probe("tmany-1");
    let many = vec![br#"{"id": "b"}"#.to_vec(), br#"{"id": "c"}"#.to_vec()];
    for _ in 0..2 {
        p.queue_push_many(q, &many, Priority::Normal)
            .await
            .expect("push_many with ids, and its re-send");
    }
    let later = Submit::new().run_at(RunAt::After(MIN));
    let p = b.resend_probe("tsubmit-1");
    for _ in 0..2 {
        p.queue_submit(q, br#"{"id": "d"}"#, &later)
            .await
            .expect("submit with an id, and its re-send");
    }
    assert!(matches!(
        b.queue_push(q, br#"{"id": "a"}"#, Priority::Normal).await,
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(b.queue_size(q).await.expect("size"), 3);

    let d = b
        .queue_reserve(q, Duration::ZERO, MIN)
        .await
        .expect("reserve")
        .expect("a");
    let p = b.resend_probe("tcomplete-1");
    for _ in 0..2 {
        assert!(
            p.queue_complete(q, &d.receipt, b"1")
                .await
                .expect("complete")
        );
    }
    let p = b.resend_probe("tcancel-1");
    for _ in 0..2 {
        assert_eq!(
            p.task_cancel(q, "b").await.expect("cancel"),
            CancelOutcome::Cancelled
        );
    }
    let d = b
        .queue_reserve(q, Duration::ZERO, MIN)
        .await
        .expect("reserve")
        .expect("c");
    assert_eq!(
        b.task_cancel(q, "c").await.expect("cancel"),
        CancelOutcome::CancelRequested
    );
    let p = b.resend_probe("tnack-1");
    for _ in 0..2 {
        assert!(matches!(
            p.queue_nack(q, &d.receipt, br#"{"id": "c"}"#, Duration::ZERO)
                .await,
            Err(Error::Cancelled { .. })
        ));
    }
    let p = b.resend_probe("tpurge-1");
    for _ in 0..2 {
        assert_eq!(p.queue_purge(q).await.expect("purge"), 1, "d");
    }
    let events = b
        .task_events(q, None, 100, Duration::ZERO)
        .await
        .expect("events");
    let ends: Vec<(String, TaskState)> = events
        .events
        .iter()
        .map(|e| (e.task_id.clone(), e.state))
        .collect();
    assert_eq!(
        ends,
        [
            ("a".to_owned(), TaskState::Completed),
            ("b".to_owned(), TaskState::Cancelled),
            ("c".to_owned(), TaskState::Cancelled),
            ("d".to_owned(), TaskState::Cancelled),
        ]
    );
    let stats = b.queue_stats(q).await.expect("stats");
    assert_eq!((stats.completed, stats.cancelled), (1, 3));
}

#[tokio::test]
async fn resent_calls_apply_once() {
    every_call_applies_once(backend(&redis_url(), KeyLayout::Seed).await, false).await;
    every_flow_call_applies_once(backend(&redis_url(), KeyLayout::Seed).await).await;
    every_task_call_applies_once(backend(&redis_url(), KeyLayout::Seed).await).await;
}

/// The op record lives in the queue's slot (cluster layout, checked on a standalone server: the
/// cluster suite runs the same scripts through `fleet_backend_suite!`).
#[tokio::test]
async fn resent_calls_apply_once_cluster_layout() {
    let b = backend(&redis_url(), KeyLayout::Cluster).await;
    let op = b.keys().queue_op("q", "t");
    assert!(op.starts_with(&format!("{}fleet:queue:{{q:q}}", b.keys().prefix())));
    every_call_applies_once(b, true).await;
    every_flow_call_applies_once(backend(&redis_url(), KeyLayout::Cluster).await).await;
    every_task_call_applies_once(backend(&redis_url(), KeyLayout::Cluster).await).await;
}

/// A proxy in front of Redis that, each time `cut` is bumped, drops every connection at its
/// next reply from the server: the command ran, its reply never arrives, and fred re-sends it on
/// a new connection.
fn lossy_proxy(upstream: String, cut: Arc<AtomicU64>) -> String {
    reply_losing_proxy(&upstream, move || -> LoseReply {
        let generation = cut.load(Ordering::SeqCst);
        let cut = cut.clone();
        Box::new(move |_| cut.load(Ordering::SeqCst) != generation)
    })
    .expect("proxy")
}

const PUSHERS: usize = 32;
const PER_PUSHER: usize = 60;

/// Replies are lost (connections cut after the command ran) while pushes and acks run: no task is
/// enqueued twice, and no ack of a live reservation answers `false` (before op tokens, a re-sent
/// push was applied twice and a re-sent ack answered `false`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_replies_during_pushes_and_acks_apply_each_once() {
    let server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let cut = Arc::new(AtomicU64::new(0));
    let upstream = url.trim_start_matches("redis://").to_string();
    let proxy = lossy_proxy(upstream, cut.clone());
    let mut config =
        RedisFleetConfig::new(&proxy).with_prefix(format!("{}:", unique_prefix("lossy")));
    config.command_timeout = Duration::from_secs(5);
    let b = Arc::new(
        RedisFleetBackend::with_config(config)
            .await
            .expect("connect"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let cutter = {
        let (cut, stop) = (cut.clone(), stop.clone());
        tokio::spawn(async move {
            // Dense cuts while the pushes run, sparser ones while acks run, then no faults.
            for i in 0..70 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let pause = if i < 30 { 10 } else { 50 };
                tokio::time::sleep(Duration::from_millis(pause)).await;
                cut.fetch_add(1, Ordering::SeqCst);
            }
        })
    };

    // Each pusher retries a failed push with the same body until one answers Ok: a body may then
    // be in the queue once per *call that ran*, never more (a failed call may or may not have run).
    // The bodies carry task ids, so a retry after a failed call that did run is refused with
    // `AlreadyExists` (the id is live): that answer says the task is in, and the pusher stops.
    let calls_ok = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let calls_failed = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let mut pushers = Vec::new();
    for w in 0..PUSHERS {
        let (b, ok, failed) = (b.clone(), calls_ok.clone(), calls_failed.clone());
        pushers.push(tokio::spawn(async move {
            for i in 0..PER_PUSHER {
                let id = format!("t-{w}-{i}");
                let body = format!(r#"{{"id": "{id}"}}"#);
                loop {
                    match b.queue_push("q", body.as_bytes(), Priority::Normal).await {
                        Ok(()) => {
                            *ok.lock().expect("lock").entry(id.clone()).or_default() += 1;
                            break;
                        }
                        Err(Error::AlreadyExists { .. })
                            if failed.lock().expect("lock").contains_key(&id) =>
                        {
                            *ok.lock().expect("lock").entry(id.clone()).or_default() += 1;
                            break;
                        }
                        Err(_) => {
                            *failed.lock().expect("lock").entry(id.clone()).or_default() += 1;
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                }
            }
        }));
    }
    for p in pushers {
        p.await.expect("pusher");
    }

    // Reserve and ack everything, connections still being killed.
    let mut delivered = HashMap::<String, usize>::new();
    let mut false_acks = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        // A reserve that failed may still have reserved (its reply lost for good): that task
        // lapses after 2 s and comes back through the sweep. Nothing is swept while an ack runs.
        let d = match b
            .queue_reserve("q", Duration::ZERO, Duration::from_secs(2))
            .await
        {
            Ok(Some(d)) => d,
            Ok(None) => {
                let held = redis_cmd(&url, &["KEYS", "*processing"]).unwrap_or_default();
                if held.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                let _ = b.queue_sweep_expired("q").await;
                continue;
            }
            Err(_) => continue,
        };
        *delivered.entry(d.task_id.clone().expect("id")).or_default() += 1;
        // Retry the ack until it answers; nothing sweeps meanwhile, so `false` would mean a
        // re-sent ack that ran twice.
        loop {
            match b.queue_ack("q", &d.receipt).await {
                Ok(true) => break,
                Ok(false) => {
                    false_acks += 1;
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    cutter.await.expect("cutter");
    let cuts = cut.load(Ordering::SeqCst);
    let ok = calls_ok.lock().expect("lock").clone();
    let failed = calls_failed.lock().expect("lock").clone();
    eprintln!(
        "{cuts} cuts; {} pushes failed and were retried; {} deliveries",
        failed.values().sum::<usize>(),
        delivered.values().sum::<usize>()
    );
    assert_eq!(ok.len(), PUSHERS * PER_PUSHER);
    for (id, n) in &delivered {
        let max = ok.get(id).copied().unwrap_or(0) + failed.get(id).copied().unwrap_or(0);
        assert!(*n <= max, "{id} delivered {n} times from {max} push calls");
        if !failed.contains_key(id) {
            assert_eq!(*n, 1, "{id} was pushed by one call that answered Ok");
        }
    }
    assert_eq!(
        delivered.len(),
        PUSHERS * PER_PUSHER,
        "every task delivered"
    );
    assert_eq!(false_acks, 0, "an ack of a live reservation answered false");
    assert_eq!(b.queue_size("q").await.expect("size"), 0);
    drop(server);
}
