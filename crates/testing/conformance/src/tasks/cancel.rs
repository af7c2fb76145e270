//! Guarantees `task.cancel_waiting`, `task.cancel_running`, `task.cancel_race` and
//! `task.cancel_bulk`: cancelling a task wherever it is.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_core::Error;
use switchyard_core::fleet::{CancelOutcome, Priority, RunAt, Submit, TaskState};

use super::common::{LAPSE, LONG, SHORT, body, get, push, reserve, state};
use crate::fleet::Backend;
use crate::harness::unique_id;

fn is_cancelled<T: std::fmt::Debug>(r: switchyard_core::Result<T>, what: &str) {
    match r {
        Err(Error::Cancelled { what: "task", .. }) => {}
        other => panic!("{what} of a cancelled delivery is Error::Cancelled, got {other:?}"),
    }
}

/// Guarantee `task.cancel_waiting`: a scheduled or waiting task is removed and ended in one step
/// and never delivered; ended and unknown tasks are answered as such.
pub async fn task_cancel_waiting(b: Backend) {
    let q = unique_id("q:{task-cancel-waiting}");
    push(&b, &q, "w1").await;
    b.queue_push(&q, &body("h1"), Priority::High)
        .await
        .expect("push");
    push(&b, &q, "w2").await;
    b.queue_submit(
        &q,
        &body("s1"),
        &Submit::new().run_at(RunAt::After(Duration::from_secs(60))),
    )
    .await
    .expect("submit");
    b.queue_submit(&q, &body("s2"), &Submit::new().run_at(RunAt::After(SHORT)))
        .await
        .expect("submit");

    for id in ["w1", "h1", "s1", "s2"] {
        assert_eq!(
            b.task_cancel(&q, id).await.expect("cancel"),
            CancelOutcome::Cancelled,
            "{id}"
        );
        let t = get(&b, &q, id).await;
        assert_eq!(t.state, TaskState::Cancelled, "{id}");
        assert!(t.finished_at.is_some(), "{id}");
    }
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.high, s.normal, s.scheduled), (0, 1, 0));
    assert_eq!(b.queue_peek(&q, 10).await.expect("peek"), vec![body("w2")]);

    // s2 falls due: nothing is promoted, only w2 is ever reserved.
    tokio::time::sleep(LAPSE).await;
    assert_eq!(b.queue_promote_due(&q).await.expect("promote"), 0);
    let d = reserve(&b, &q, LONG).await;
    assert_eq!(d.task_id.as_deref(), Some("w2"));
    assert!(
        b.queue_reserve(&q, Duration::from_millis(100), LONG)
            .await
            .expect("reserve")
            .is_none()
    );
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));

    assert_eq!(
        b.task_cancel(&q, "w1").await.expect("cancel"),
        CancelOutcome::Finished(TaskState::Cancelled)
    );
    assert_eq!(
        b.task_cancel(&q, "w2").await.expect("cancel"),
        CancelOutcome::Finished(TaskState::Completed)
    );
    assert_eq!(state(&b, &q, "w2").await, Some(TaskState::Completed));
    assert_eq!(
        b.task_cancel(&q, "nope").await.expect("cancel"),
        CancelOutcome::Unknown
    );
    // A task waiting again after a nack is cancelled like any waiting one.
    push(&b, &q, "n1").await;
    let d = reserve(&b, &q, LONG).await;
    assert!(
        b.queue_nack(&q, &d.receipt, &body("n1"), Duration::from_secs(60))
            .await
            .expect("nack")
    );
    assert_eq!(state(&b, &q, "n1").await, Some(TaskState::Scheduled));
    assert_eq!(
        b.task_cancel(&q, "n1").await.expect("cancel"),
        CancelOutcome::Cancelled
    );
    assert_eq!(b.queue_stats(&q).await.expect("stats").total(), 0);
}

/// Guarantee `task.cancel_running`: a running task is marked; its holder's extend and progress
/// are refused; its ack, nack, release, fail, ack_many and sweep end it `cancelled`.
pub async fn task_cancel_running(b: Backend) {
    let q = unique_id("q:{task-cancel-running}");
    let ids = ["r1", "r2", "r3", "r4", "r5"];
    for id in ids {
        push(&b, &q, id).await;
    }
    let mut held = HashMap::new();
    for _ in ids {
        let d = reserve(&b, &q, LONG).await;
        held.insert(d.task_id.clone().expect("id"), d);
    }
    push(&b, &q, "r6").await;
    let lapsing = reserve(&b, &q, SHORT).await;

    for id in ids.iter().chain(&["r6"]) {
        assert_eq!(
            b.task_cancel(&q, id).await.expect("cancel"),
            CancelOutcome::CancelRequested,
            "{id}"
        );
    }
    let r1 = get(&b, &q, "r1").await;
    assert_eq!(r1.state, TaskState::Running);
    assert!(r1.cancel_requested);
    assert_eq!(
        b.task_cancel(&q, "r1").await.expect("cancel again"),
        CancelOutcome::CancelRequested
    );

    let r = |id: &str| held[id].receipt.clone();
    is_cancelled(b.queue_extend(&q, &r("r1"), LONG).await, "extend");
    is_cancelled(b.queue_progress(&q, &r("r1"), b"{}").await, "progress");
    assert_eq!(
        get(&b, &q, "r1").await.progress,
        None,
        "progress wrote nothing"
    );
    is_cancelled(b.queue_ack(&q, &r("r1")).await, "ack");
    is_cancelled(
        b.queue_nack(&q, &r("r2"), &body("r2"), Duration::ZERO)
            .await,
        "nack",
    );
    is_cancelled(
        b.queue_release(&q, &r("r3"), Duration::ZERO).await,
        "release",
    );
    is_cancelled(b.queue_fail(&q, &r("r4"), &body("r4")).await, "fail");
    assert_eq!(
        b.queue_ack_many(&q, &[r("r5")]).await.expect("ack_many"),
        vec![false]
    );
    tokio::time::sleep(LAPSE).await;
    b.queue_sweep_expired(&q).await.expect("sweep");
    let _ = lapsing;

    for id in ids.iter().chain(&["r6"]) {
        let t = get(&b, &q, id).await;
        assert_eq!(t.state, TaskState::Cancelled, "{id}");
        assert!(t.finished_at.is_some(), "{id}");
        assert_eq!(t.result, None, "{id}");
    }
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(s.total(), 0, "no requeue, no dead letter: {s:?}");
    assert_eq!(b.dlq_length(&q).await.expect("dlq"), 0);
    // Once ended, the old receipt is simply not current.
    assert!(!b.queue_ack(&q, &r("r1")).await.expect("late ack"));
    assert_eq!(
        b.task_cancel(&q, "r1").await.expect("cancel"),
        CancelOutcome::Finished(TaskState::Cancelled)
    );
}

/// Guarantee `task.cancel_race`: cancels concurrent with reserves and acks either prevent the
/// delivery or reach the holder; no task completes after its cancel answered.
pub async fn task_cancel_race(b: Backend) {
    const ROUNDS: usize = 40;
    const TASKS: usize = 8;
    for round in 0..ROUNDS {
        let q = unique_id("q:{task-cancel-race}");
        let ids: Vec<String> = (0..TASKS).map(|i| format!("t{round}-{i}")).collect();
        let bodies: Vec<Vec<u8>> = ids.iter().map(|id| body(id)).collect();
        b.queue_push_many(&q, &bodies, Priority::Normal)
            .await
            .expect("push_many");
        // What each holder saw: id → ack answer ("ok", "stale", "cancelled").
        let acks: Arc<Mutex<HashMap<String, &'static str>>> = Arc::default();
        let mut workers = Vec::new();
        for _ in 0..2 {
            let (b, q, acks) = (b.clone(), q.clone(), acks.clone());
            workers.push(tokio::spawn(async move {
                loop {
                    let got = b
                        .queue_reserve_many(&q, 3, Duration::ZERO, LONG)
                        .await
                        .expect("reserve_many");
                    if got.is_empty() {
                        return;
                    }
                    tokio::task::yield_now().await;
                    for d in got {
                        let id = d.task_id.clone().expect("id");
                        let seen = match b.queue_ack(&q, &d.receipt).await {
                            Ok(true) => "ok",
                            Ok(false) => "stale",
                            Err(Error::Cancelled { .. }) => "cancelled",
                            Err(e) => panic!("ack: {e}"),
                        };
                        assert!(
                            acks.lock().expect("acks").insert(id, seen).is_none(),
                            "delivered twice"
                        );
                    }
                }
            }));
        }
        let canceller = {
            let (b, q, ids) = (b.clone(), q.clone(), ids.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                for id in ids.iter().rev() {
                    out.push((id.clone(), b.task_cancel(&q, id).await.expect("cancel")));
                }
                out
            })
        };
        for w in workers {
            w.await.expect("worker");
        }
        let outcomes = canceller.await.expect("canceller");
        let acks = acks.lock().expect("acks").clone();
        for (id, outcome) in outcomes {
            let end = state(&b, &q, &id).await.expect("a record");
            match outcome {
                CancelOutcome::Cancelled => {
                    assert!(!acks.contains_key(&id), "{id}: delivered after Cancelled");
                    assert_eq!(end, TaskState::Cancelled, "{id}");
                }
                CancelOutcome::CancelRequested => {
                    assert_eq!(acks.get(&id).copied(), Some("cancelled"), "{id}");
                    assert_eq!(end, TaskState::Cancelled, "{id}");
                }
                CancelOutcome::Finished(s) => {
                    assert_eq!(s, TaskState::Completed, "{id}");
                    assert_eq!(acks.get(&id).copied(), Some("ok"), "{id}");
                    assert_eq!(end, TaskState::Completed, "{id}");
                }
                CancelOutcome::Unknown => panic!("{id}: a submitted task is known"),
            }
        }
        assert_eq!(b.queue_stats(&q).await.expect("stats").total(), 0);
    }
}

/// Guarantee `task.cancel_bulk`: one step answers per id in order; a purge cancels every
/// scheduled and waiting task.
pub async fn task_cancel_bulk(b: Backend) {
    let q = unique_id("q:{task-cancel-bulk}");
    for id in ["a", "b", "c", "run", "done"] {
        push(&b, &q, id).await;
    }
    let mut run = None;
    for _ in 0..5 {
        let d = reserve(&b, &q, LONG).await;
        match d.task_id.as_deref() {
            Some("run") => run = Some(d),
            Some("done") => assert!(b.queue_ack(&q, &d.receipt).await.expect("ack")),
            _ => assert!(
                b.queue_release(&q, &d.receipt, Duration::ZERO)
                    .await
                    .expect("release")
            ),
        }
    }
    let run = run.expect("run reserved");
    let ids: Vec<String> = ["a", "run", "done", "nope", "a", "b"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        b.task_cancel_many(&q, &ids).await.expect("cancel_many"),
        vec![
            CancelOutcome::Cancelled,
            CancelOutcome::CancelRequested,
            CancelOutcome::Finished(TaskState::Completed),
            CancelOutcome::Unknown,
            CancelOutcome::Cancelled,
            CancelOutcome::Cancelled,
        ]
    );
    assert_eq!(b.task_cancel_many(&q, &[]).await.expect("none"), vec![]);
    let too_many: Vec<String> = (0..1001).map(|i| i.to_string()).collect();
    assert!(matches!(
        b.task_cancel_many(&q, &too_many).await,
        Err(Error::InvalidInput { .. })
    ));
    is_cancelled(b.queue_ack(&q, &run.receipt).await, "ack");

    // Purge: recorded and id-less, waiting and scheduled, every tier; running tasks stay.
    let p = unique_id("q:{task-purge}");
    push(&b, &p, "keep").await;
    let held = reserve(&b, &p, LONG).await;
    for id in ["p1", "p2"] {
        push(&b, &p, id).await;
    }
    b.queue_push(&p, &body("p3"), Priority::Low)
        .await
        .expect("push");
    b.queue_submit(
        &p,
        &body("p4"),
        &Submit::new().run_at(RunAt::After(Duration::from_secs(60))),
    )
    .await
    .expect("submit");
    b.queue_push(&p, b"no id", Priority::High)
        .await
        .expect("push");
    b.queue_push(&p, b"no id", Priority::Normal)
        .await
        .expect("push");
    assert_eq!(b.queue_purge(&p).await.expect("purge"), 6);
    let s = b.queue_stats(&p).await.expect("stats");
    assert_eq!(
        (s.high, s.normal, s.low, s.scheduled, s.in_flight),
        (0, 0, 0, 0, 1)
    );
    for id in ["p1", "p2", "p3", "p4"] {
        assert_eq!(state(&b, &p, id).await, Some(TaskState::Cancelled), "{id}");
    }
    assert_eq!(state(&b, &p, "keep").await, Some(TaskState::Running));
    assert!(b.queue_ack(&p, &held.receipt).await.expect("ack"));
    assert_eq!(b.queue_purge(&p).await.expect("purge"), 0);
    let seen: HashSet<_> = b
        .queue_peek(&p, 10)
        .await
        .expect("peek")
        .into_iter()
        .collect();
    assert!(seen.is_empty());
}
