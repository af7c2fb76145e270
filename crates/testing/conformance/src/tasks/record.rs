//! Guarantees `task.lookup`, `task.unique_id` and `task.results`: the record of a task, its id,
//! and what its end keeps.

use std::time::Duration;

use switchyard_core::Error;
use switchyard_core::fleet::{
    CancelOutcome, IdempotencyKey, Keep, Priority, Retention, RunAt, Submit, SubmitOutcome,
    TaskState,
};

use super::common::{LONG, body, failed_body, get, push, reserve, state};
use crate::fleet::Backend;
use crate::harness::unique_id;

/// Guarantee `task.lookup`: every state a record can be in is read back with its fields; an
/// unknown id is `None`; the record's cursor is the end-event log's position.
pub async fn task_lookup(b: Backend) {
    let q = unique_id("q:{task-lookup}");
    assert_eq!(b.task_get(&q, "nope").await.expect("get"), None);
    assert!(matches!(
        b.task_get(&q, "").await,
        Err(Error::InvalidInput { .. })
    ));

    b.queue_push(&q, &body("a"), Priority::High)
        .await
        .expect("push");
    let a = get(&b, &q, "a").await;
    assert_eq!(a.id, "a");
    assert_eq!(a.state, TaskState::Waiting);
    assert_eq!(a.priority, Priority::High);
    assert_eq!(a.attempt, 0);
    assert!(a.submitted_at > 1.0e9, "unix seconds: {}", a.submitted_at);
    assert_eq!((a.started_at, a.finished_at), (None, None));
    assert!(!a.cancel_requested && !a.foreign);
    assert!(!a.events_cursor.is_empty(), "a cursor even on an empty log");

    b.queue_submit(
        &q,
        &body("s"),
        &Submit::new().run_at(RunAt::After(Duration::from_secs(60))),
    )
    .await
    .expect("submit later");
    assert_eq!(state(&b, &q, "s").await, Some(TaskState::Scheduled));

    // Running: attempt, start, visibility and progress.
    let d = reserve(&b, &q, LONG).await;
    assert_eq!(d.task_id.as_deref(), Some("a"));
    b.queue_progress(&q, &d.receipt, br#"{"pct": 40}"#)
        .await
        .expect("progress");
    let a = get(&b, &q, "a").await;
    assert_eq!(a.state, TaskState::Running);
    assert_eq!(a.attempt, 1);
    let started = a.started_at.expect("started");
    assert!(started >= a.submitted_at);
    let until = a.visible_until.expect("running: visible until");
    assert!(
        (until - d.visible_until).abs() < 0.01,
        "{until} vs {}",
        d.visible_until
    );
    assert_eq!(a.progress.as_deref(), Some(&br#"{"pct": 40}"#[..]));

    // Nacked with a new body: waiting again, its max_attempts and last error taken from it.
    assert!(
        b.queue_nack(&q, &d.receipt, &failed_body("a", 5, "boom"), Duration::ZERO)
            .await
            .expect("nack")
    );
    let a = get(&b, &q, "a").await;
    assert_eq!(a.state, TaskState::Waiting);
    assert_eq!(a.attempt, 1, "a nack keeps the delivery count");
    assert_eq!(a.max_attempts, Some(5));
    assert_eq!(a.last_error.as_deref(), Some("boom"));
    assert_eq!(a.visible_until, None);

    // Completed.
    let d = reserve(&b, &q, LONG).await;
    assert_eq!(d.attempt, 2);
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    let a = get(&b, &q, "a").await;
    assert_eq!(a.state, TaskState::Completed);
    assert_eq!(a.attempt, 2);
    let finished = a.finished_at.expect("finished");
    assert!(finished >= a.started_at.expect("started"));
    assert_eq!(a.last_error.as_deref(), Some("boom"), "kept after the end");

    // Dead, then requeued from the dead letters (waiting, attempts reset), then dead again and
    // popped: failed.
    push(&b, &q, "f").await;
    let d = reserve(&b, &q, LONG).await;
    assert_eq!(d.task_id.as_deref(), Some("f"));
    assert!(
        b.queue_fail(&q, &d.receipt, &failed_body("f", 1, "bad"))
            .await
            .expect("fail")
    );
    let f = get(&b, &q, "f").await;
    assert_eq!(f.state, TaskState::Dead);
    assert_eq!(f.last_error.as_deref(), Some("bad"));
    assert!(f.finished_at.is_some());
    assert_eq!(
        b.dlq_requeue(&q, 10, Priority::Normal)
            .await
            .expect("requeue"),
        1
    );
    let f = get(&b, &q, "f").await;
    assert_eq!(f.state, TaskState::Waiting);
    assert_eq!(f.attempt, 0, "a dead-letter requeue resets the attempts");
    let d = reserve(&b, &q, LONG).await;
    assert!(
        b.queue_fail(&q, &d.receipt, &body("f"))
            .await
            .expect("fail")
    );
    assert_eq!(b.dlq_pop(&q, 10).await.expect("pop").len(), 1);
    assert_eq!(state(&b, &q, "f").await, Some(TaskState::Failed));

    // Dead-lettered without a delivery (queue_dead).
    b.queue_dead(&q, &body("x")).await.expect("dead");
    assert_eq!(state(&b, &q, "x").await, Some(TaskState::Dead));

    // Bodies without an id have no record and flow as before.
    b.queue_push(&q, b"not json", Priority::Normal)
        .await
        .expect("push");
    b.queue_push(&q, br#"{"no": "id"}"#, Priority::Normal)
        .await
        .expect("push");
    assert_eq!(state(&b, &q, "s").await, Some(TaskState::Scheduled));
}

/// Guarantee `task.unique_id`: the id of a live or dead-lettered task refuses a submit, push or
/// batch and writes nothing; an idempotency key's duplicate is answered first; an integer id is
/// its decimal string; the id of a completed, failed or cancelled task is free again, and its
/// new task's record keeps nothing of the old one, not even its place in retention.
pub async fn task_unique_id(b: Backend) {
    let q = unique_id("q:{task-unique}");
    push(&b, &q, "u").await;
    let taken = |r: switchyard_core::Result<()>| match r {
        Err(Error::AlreadyExists { what: "task", id }) => assert_eq!(id, "u"),
        other => panic!("a taken id is AlreadyExists, got {other:?}"),
    };
    taken(b.queue_push(&q, &body("u"), Priority::High).await);
    taken(
        b.queue_submit(
            &q,
            &body("u"),
            &Submit::new().run_at(RunAt::After(Duration::from_secs(60))),
        )
        .await
        .map(drop),
    );
    taken(
        b.queue_push_many(&q, &[body("v"), body("u")], Priority::Normal)
            .await,
    );
    assert!(matches!(
        b.queue_push_many(&q, &[body("w"), body("w")], Priority::Normal)
            .await,
        Err(Error::AlreadyExists { .. })
    ));
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(
        (s.high, s.normal, s.scheduled),
        (0, 1, 0),
        "nothing written"
    );
    assert_eq!(b.task_get(&q, "v").await.expect("get"), None);
    assert_eq!(b.task_get(&q, "w").await.expect("get"), None);

    // Integer ids are their decimal strings.
    b.queue_push(&q, br#"{"id": 42}"#, Priority::Normal)
        .await
        .expect("push");
    assert_eq!(state(&b, &q, "42").await, Some(TaskState::Waiting));
    assert!(matches!(
        b.queue_push(&q, br#"{"id": "42"}"#, Priority::Normal).await,
        Err(Error::AlreadyExists { .. })
    ));

    // An idempotency key is checked first.
    let ns = unique_id("idem");
    let idem = IdempotencyKey {
        ns: &ns,
        key: "k1",
        value: b"i1",
        ttl: None,
    };
    let once = b
        .queue_submit_once(&q, &body("i1"), Priority::Normal, idem.clone())
        .await
        .expect("submit once");
    assert_eq!(once, SubmitOutcome::Enqueued);
    let again = b
        .queue_submit_once(&q, &body("i1"), Priority::Normal, idem)
        .await
        .expect("submit once again");
    assert_eq!(again, SubmitOutcome::Duplicate(b"i1".to_vec()));
    // A new key with a taken id writes nothing, not even the key.
    let fresh = IdempotencyKey {
        ns: &ns,
        key: "k2",
        value: b"x",
        ttl: None,
    };
    assert!(matches!(
        b.queue_submit_once(&q, &body("u"), Priority::Normal, fresh.clone())
            .await,
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(
        b.kv_get(&ns, "k2").await.expect("kv"),
        None,
        "a refused submit sets no idempotency key"
    );

    // Moving a task never collides with itself; once it completed, its id is free: a push
    // starts a new task under it, with a fresh record.
    let q2 = unique_id("q:{task-unique-reuse}");
    let keep_one = Keep::new(1, Duration::from_secs(3600));
    b.queue_set_retention(
        &q2,
        Retention {
            completed: keep_one,
            failed: keep_one,
            ..Retention::default()
        },
    )
    .await
    .expect("retention");
    push(&b, &q2, "m").await;
    let d = reserve(&b, &q2, LONG).await;
    assert!(
        b.queue_nack(
            &q2,
            &d.receipt,
            &failed_body("m", 4, "once"),
            Duration::ZERO
        )
        .await
        .expect("nack")
    );
    let d = reserve(&b, &q2, LONG).await;
    assert!(
        b.queue_complete(&q2, &d.receipt, b"first")
            .await
            .expect("complete")
    );
    assert_eq!(state(&b, &q2, "m").await, Some(TaskState::Completed));
    push(&b, &q2, "m").await;
    let m = get(&b, &q2, "m").await;
    assert_eq!(m.state, TaskState::Waiting);
    assert_eq!(m.attempt, 0, "a new task under the id");
    assert_eq!(m.max_attempts, None);
    assert_eq!((m.started_at, m.finished_at), (None, None));
    assert_eq!(m.last_error, None, "nothing of the finished task stays");
    assert_eq!(m.result, None);
    assert_eq!(m.progress, None);
    // The finished task's place in retention went with it: another task completing past the
    // count of 1 removes nothing of the new one.
    b.queue_push(&q2, &body("n"), Priority::High)
        .await
        .expect("push n");
    let d = reserve(&b, &q2, LONG).await;
    assert_eq!(d.task_id.as_deref(), Some("n"));
    assert!(b.queue_ack(&q2, &d.receipt).await.expect("ack n"));
    assert_eq!(state(&b, &q2, "m").await, Some(TaskState::Waiting));
    let d = reserve(&b, &q2, LONG).await;
    assert_eq!((d.task_id.as_deref(), d.attempt), (Some("m"), 1));
    assert!(b.queue_ack(&q2, &d.receipt).await.expect("ack m"));

    // A cancelled task's id is free too, for a submit as for a push.
    b.queue_submit(
        &q2,
        &body("c"),
        &Submit::new().run_at(RunAt::After(Duration::from_secs(60))),
    )
    .await
    .expect("submit later");
    assert_eq!(
        b.task_cancel(&q2, "c").await.expect("cancel"),
        CancelOutcome::Cancelled
    );
    b.queue_submit(
        &q2,
        &body("c"),
        &Submit::new().run_at(RunAt::After(Duration::from_secs(60))),
    )
    .await
    .expect("a delayed submit of a cancelled task's id");
    assert_eq!(state(&b, &q2, "c").await, Some(TaskState::Scheduled));

    // A dead letter holds its id until it leaves the dead-letter queue: popped, the task ended
    // `failed` and the id is free (a replay pops the letter and submits its body again).
    let q3 = unique_id("q:{task-unique-dead}");
    push(&b, &q3, "d").await;
    let d = reserve(&b, &q3, LONG).await;
    assert!(
        b.queue_fail(&q3, &d.receipt, &failed_body("d", 1, "bad"))
            .await
            .expect("fail")
    );
    assert!(matches!(
        b.queue_push(&q3, &body("d"), Priority::Normal).await,
        Err(Error::AlreadyExists { .. })
    ));
    let letters = b.dlq_pop(&q3, 10).await.expect("pop");
    assert_eq!(letters.len(), 1);
    assert_eq!(state(&b, &q3, "d").await, Some(TaskState::Failed));
    b.queue_push(&q3, &letters[0], Priority::Normal)
        .await
        .expect("the popped letter submitted again");
    let d = get(&b, &q3, "d").await;
    assert_eq!((d.state, d.attempt), (TaskState::Waiting, 0));
    assert_eq!(d.max_attempts, Some(1), "taken from the body submitted");
    assert_eq!(
        d.last_error.as_deref(),
        Some("bad"),
        "taken from the body submitted"
    );

    // Another queue's ids are its own.
    let other = unique_id("q:{task-unique-other}");
    push(&b, &other, "u").await;
}

/// Guarantee `task.results`: the result is stored with the end; progress and the last error stay;
/// times are ordered; a result over the limit is refused and changes nothing.
pub async fn task_results(b: Backend) {
    let q = unique_id("q:{task-results}");
    push(&b, &q, "r").await;
    let d = reserve(&b, &q, LONG).await;
    assert!(
        b.queue_nack(
            &q,
            &d.receipt,
            &failed_body("r", 3, "first try"),
            Duration::ZERO
        )
        .await
        .expect("nack")
    );
    let d = reserve(&b, &q, LONG).await;
    b.queue_progress(&q, &d.receipt, br#"{"step": 2}"#)
        .await
        .expect("progress");

    let limit = b.max_result_bytes();
    assert!(limit >= 1024, "at least 1 KiB: {limit}");
    let too_big = vec![b'x'; limit + 1];
    assert!(matches!(
        b.queue_complete(&q, &d.receipt, &too_big).await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(
        state(&b, &q, "r").await,
        Some(TaskState::Running),
        "nothing changed"
    );

    let result: Vec<u8> = (0..3000u32).map(|i| b'a' + (i % 26) as u8).collect();
    assert!(
        b.queue_complete(&q, &d.receipt, &result)
            .await
            .expect("complete")
    );
    let r = get(&b, &q, "r").await;
    assert_eq!(r.state, TaskState::Completed);
    assert_eq!(r.result.as_deref(), Some(&result[..]));
    assert_eq!(r.progress.as_deref(), Some(&br#"{"step": 2}"#[..]));
    assert_eq!(r.last_error.as_deref(), Some("first try"));
    let (started, finished) = (
        r.started_at.expect("started"),
        r.finished_at.expect("finished"),
    );
    assert!(r.submitted_at <= started && started <= finished);

    // A stale receipt stores nothing.
    assert!(
        !b.queue_complete(&q, &d.receipt, b"again")
            .await
            .expect("complete")
    );
    assert_eq!(get(&b, &q, "r").await.result.as_deref(), Some(&result[..]));

    // An empty result is a result; a plain ack stores none.
    push(&b, &q, "e").await;
    push(&b, &q, "n").await;
    let d = reserve(&b, &q, LONG).await;
    assert!(
        b.queue_complete(&q, &d.receipt, b"")
            .await
            .expect("complete")
    );
    let d = reserve(&b, &q, LONG).await;
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    assert_eq!(get(&b, &q, "e").await.result.as_deref(), Some(&b""[..]));
    assert_eq!(get(&b, &q, "n").await.result, None);

    // An id-less delivery completes like an ack.
    b.queue_push(&q, b"plain", Priority::Normal)
        .await
        .expect("push");
    let d = reserve(&b, &q, LONG).await;
    assert!(
        b.queue_complete(&q, &d.receipt, b"r")
            .await
            .expect("complete")
    );
    assert_eq!(b.queue_stats(&q).await.expect("stats").total(), 0);
}
