//! Guarantees `task.retention`, `task.events` and `task.end_counts`: what a queue keeps of its
//! ended tasks, its end-event log, and its end counts.

use std::time::Duration;

use switchyard_core::Error;
use switchyard_core::fleet::{Keep, Priority, Retention, TaskEvent, TaskState};

use super::common::{LAPSE, LONG, body, failed_body, push, reserve, state};
use crate::fleet::Backend;
use crate::harness::unique_id;

/// Pushes `ids`, reserves them all and acks them in one batch.
async fn complete_all(b: &Backend, q: &str, ids: &[String]) {
    for chunk in ids.chunks(100) {
        let bodies: Vec<Vec<u8>> = chunk.iter().map(|id| body(id)).collect();
        b.queue_push_many(q, &bodies, Priority::Normal)
            .await
            .expect("push_many");
        let got = b
            .queue_reserve_many(q, chunk.len(), Duration::ZERO, LONG)
            .await
            .expect("reserve_many");
        assert_eq!(got.len(), chunk.len());
        let receipts: Vec<_> = got.into_iter().map(|d| d.receipt).collect();
        let acked = b.queue_ack_many(q, &receipts).await.expect("ack_many");
        assert!(acked.iter().all(|a| *a));
    }
}

async fn complete(b: &Backend, q: &str, id: &str) {
    complete_all(b, q, &[id.to_owned()]).await;
}

/// Guarantee `task.retention`: finished records are trimmed by count and age, by the ending
/// step and by `queue_maintain`; a count of 0 keeps none; dead records stay with their letter; a
/// removed record's id is free again.
pub async fn task_retention(b: Backend) {
    let q = unique_id("q:{task-retention}");
    assert_eq!(
        b.queue_retention(&q).await.expect("retention"),
        Retention::default()
    );
    let hour = Duration::from_secs(3600);
    let r = Retention {
        completed: Keep::new(2, hour),
        failed: Keep::new(0, hour),
        events: Keep::new(100, hour),
    };
    b.queue_set_retention(&q, r).await.expect("set");
    assert_eq!(b.queue_retention(&q).await.expect("retention"), r);
    let mut bad = r;
    bad.events.count = 10;
    assert!(matches!(
        b.queue_set_retention(&q, bad).await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(
        b.queue_retention(&q).await.expect("retention"),
        r,
        "unchanged"
    );

    // By count, oldest first, in the ending steps.
    for id in ["c1", "c2", "c3", "c4"] {
        complete(&b, &q, id).await;
    }
    assert_eq!(state(&b, &q, "c1").await, None);
    assert_eq!(state(&b, &q, "c2").await, None);
    assert_eq!(state(&b, &q, "c3").await, Some(TaskState::Completed));
    assert_eq!(state(&b, &q, "c4").await, Some(TaskState::Completed));
    // The id is free again.
    push(&b, &q, "c1").await;
    assert_eq!(state(&b, &q, "c1").await, Some(TaskState::Waiting));

    // Count 0: a cancelled record goes at once; a dead one stays while its letter does.
    push(&b, &q, "x").await;
    assert_eq!(
        b.task_cancel(&q, "x").await.expect("cancel"),
        switchyard_core::fleet::CancelOutcome::Cancelled
    );
    assert_eq!(state(&b, &q, "x").await, None);
    let d = reserve(&b, &q, LONG).await;
    assert_eq!(d.task_id.as_deref(), Some("c1"));
    assert!(
        b.queue_fail(&q, &d.receipt, &failed_body("c1", 1, "no"))
            .await
            .expect("fail")
    );
    b.queue_maintain(&q).await.expect("maintain");
    assert_eq!(state(&b, &q, "c1").await, Some(TaskState::Dead));
    // Popping the letter ends it `failed`, which keeps none.
    assert_eq!(b.dlq_pop(&q, 1).await.expect("pop").len(), 1);
    b.queue_maintain(&q).await.expect("maintain");
    assert_eq!(state(&b, &q, "c1").await, None);

    // By age, in queue_maintain.
    let q2 = unique_id("q:{task-retention-age}");
    let short = Retention {
        completed: Keep::new(1000, Duration::from_millis(200)),
        failed: Keep::new(1000, Duration::from_millis(200)),
        events: Keep::new(100, hour),
    };
    b.queue_set_retention(&q2, short).await.expect("set");
    complete(&b, &q2, "old").await;
    push(&b, &q2, "gone").await;
    b.task_cancel(&q2, "gone").await.expect("cancel");
    push(&b, &q2, "live").await;
    tokio::time::sleep(LAPSE).await;
    assert!(b.queue_maintain(&q2).await.expect("maintain") >= 2);
    assert_eq!(state(&b, &q2, "old").await, None);
    assert_eq!(state(&b, &q2, "gone").await, None);
    assert_eq!(state(&b, &q2, "live").await, Some(TaskState::Waiting));
    assert_eq!(b.queue_maintain(&q2).await.expect("maintain"), 0);
}

fn summary(events: &[TaskEvent]) -> Vec<(String, TaskState)> {
    events
        .iter()
        .map(|e| (e.task_id.clone(), e.state))
        .collect()
}

/// Guarantee `task.events`: one event per end in the order of the ends, resumable from any
/// cursor, a gap for a cursor trimmed away or malformed, small results inline, and a blocking
/// read that wakes on a new end.
pub async fn task_events(b: Backend) {
    let q = unique_id("q:{task-events}");
    let start = b
        .task_events(&q, Some("$"), 100, Duration::ZERO)
        .await
        .expect("events");
    assert!(start.events.is_empty() && !start.gap);
    let empty = b
        .task_events(&q, None, 100, Duration::ZERO)
        .await
        .expect("events");
    assert!(empty.events.is_empty() && !empty.gap);
    assert!(matches!(
        b.task_events(&q, None, 0, Duration::ZERO).await,
        Err(Error::InvalidInput { .. })
    ));

    // a: completed with a small result; b: dead; c: cancelled; d: a large result.
    for id in ["a", "b", "c", "d"] {
        push(&b, &q, id).await;
    }
    let da = reserve(&b, &q, LONG).await;
    let cursor_before_a = b
        .task_get(&q, "a")
        .await
        .expect("get")
        .expect("a")
        .events_cursor;
    assert!(
        b.queue_complete(&q, &da.receipt, b"ok")
            .await
            .expect("complete")
    );
    let db = reserve(&b, &q, LONG).await;
    assert!(
        b.queue_fail(&q, &db.receipt, &failed_body("b", 1, "bad input"))
            .await
            .expect("fail")
    );
    b.task_cancel(&q, "c").await.expect("cancel");
    let dd = reserve(&b, &q, LONG).await;
    assert_eq!(dd.task_id.as_deref(), Some("d"));
    let large = vec![b'z'; 2000];
    assert!(
        b.queue_complete(&q, &dd.receipt, &large)
            .await
            .expect("complete")
    );
    // An id-less end adds nothing.
    b.queue_push(&q, b"plain", Priority::Normal)
        .await
        .expect("push");
    let dp = reserve(&b, &q, LONG).await;
    assert!(b.queue_ack(&q, &dp.receipt).await.expect("ack"));

    let all = b
        .task_events(&q, Some(&start.cursor), 100, Duration::ZERO)
        .await
        .expect("events");
    assert!(!all.gap);
    assert_eq!(
        summary(&all.events),
        vec![
            ("a".into(), TaskState::Completed),
            ("b".into(), TaskState::Dead),
            ("c".into(), TaskState::Cancelled),
            ("d".into(), TaskState::Completed),
        ]
    );
    let [a, bb, c, d] = &all.events[..] else {
        unreachable!()
    };
    assert_eq!(a.result.as_deref(), Some(&b"ok"[..]));
    assert_eq!((a.attempt, a.result_size), (1, 2));
    assert_eq!(bb.error.as_deref(), Some("bad input"));
    assert_eq!((c.attempt, c.result.as_deref()), (0, None));
    assert_eq!((d.result.as_deref(), d.result_size), (None, 2000));
    assert!(a.at > 1.0e9 && a.at <= d.at);
    assert_eq!(all.cursor, d.cursor);
    let distinct: std::collections::HashSet<_> = all.events.iter().map(|e| &e.cursor).collect();
    assert_eq!(distinct.len(), 4, "cursors are distinct");

    // From the oldest kept, from any cursor, from a record's cursor.
    let oldest = b
        .task_events(&q, None, 100, Duration::ZERO)
        .await
        .expect("events");
    assert_eq!(summary(&oldest.events), summary(&all.events));
    let rest = b
        .task_events(&q, Some(&bb.cursor), 100, Duration::ZERO)
        .await
        .expect("events");
    assert_eq!(summary(&rest.events), summary(&all.events[2..]));
    let two = b
        .task_events(&q, Some(&start.cursor), 2, Duration::ZERO)
        .await
        .expect("events");
    assert_eq!(summary(&two.events), summary(&all.events[..2]));
    assert_eq!(two.cursor, bb.cursor);
    let since_a = b
        .task_events(&q, Some(&cursor_before_a), 1, Duration::ZERO)
        .await
        .expect("events");
    assert_eq!(summary(&since_a.events), summary(&all.events[..1]));
    let none = b
        .task_events(&q, Some(&d.cursor), 100, Duration::ZERO)
        .await
        .expect("events");
    assert!(none.events.is_empty() && !none.gap);
    assert_eq!(none.cursor, d.cursor);

    // A malformed cursor reads from the oldest kept, with a gap.
    let bad = b
        .task_events(&q, Some("not a cursor"), 100, Duration::ZERO)
        .await
        .expect("events");
    assert!(bad.gap);
    assert_eq!(summary(&bad.events), summary(&all.events));

    // A blocking read wakes on a new end.
    push(&b, &q, "late").await;
    let waiter = {
        let (b, q, from) = (b.clone(), q.clone(), d.cursor.clone());
        tokio::spawn(async move {
            b.task_events(&q, Some(&from), 10, Duration::from_secs(10))
                .await
                .expect("events")
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let dl = reserve(&b, &q, LONG).await;
    assert!(b.queue_ack(&q, &dl.receipt).await.expect("ack"));
    let woke = waiter.await.expect("waiter");
    assert_eq!(
        summary(&woke.events),
        vec![("late".into(), TaskState::Completed)]
    );
    // "$" waits only for what ends after the call.
    let quiet = b
        .task_events(&q, Some("$"), 10, Duration::from_millis(100))
        .await
        .expect("events");
    assert!(quiet.events.is_empty());

    // A cursor trimmed away: a gap, and the oldest kept.
    let t = unique_id("q:{task-events-trim}");
    let hour = Duration::from_secs(3600);
    b.queue_set_retention(
        &t,
        switchyard_core::fleet::Retention {
            completed: Keep::new(0, hour),
            failed: Keep::new(0, hour),
            events: Keep::new(100, hour),
        },
    )
    .await
    .expect("set");
    let first = b
        .task_events(&t, Some("$"), 1, Duration::ZERO)
        .await
        .expect("events")
        .cursor;
    complete(&b, &t, "e0").await;
    let e0 = b
        .task_events(&t, Some(&first), 1, Duration::ZERO)
        .await
        .expect("events")
        .events;
    let ids: Vec<String> = (1..=300).map(|i| format!("e{i}")).collect();
    complete_all(&b, &t, &ids).await;
    b.queue_maintain(&t).await.expect("maintain");
    let kept = b
        .task_events(&t, None, 1000, Duration::ZERO)
        .await
        .expect("events");
    assert!(
        kept.events.len() >= 100 && kept.events.len() < 301,
        "{} kept",
        kept.events.len()
    );
    assert_eq!(kept.events.last().map(|e| e.task_id.as_str()), Some("e300"));
    let stale = b
        .task_events(&t, Some(&e0[0].cursor), 1000, Duration::ZERO)
        .await
        .expect("events");
    assert!(stale.gap, "e0's cursor was trimmed away");
    assert_eq!(summary(&stale.events), summary(&kept.events));
}

/// Guarantee `task.end_counts`: the end counts of `queue_stats` agree with the events.
pub async fn task_end_counts(b: Backend) {
    let q = unique_id("q:{task-end-counts}");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(
        (s.completed, s.failed, s.dead_lettered, s.cancelled),
        (0, 0, 0, 0)
    );
    for id in ["ok1", "ok2", "dead", "popped", "gone", "stop"] {
        push(&b, &q, id).await;
    }
    b.task_cancel(&q, "gone").await.expect("cancel");
    for _ in 0..5 {
        let d = reserve(&b, &q, LONG).await;
        let id = d.task_id.clone().expect("id");
        match id.as_str() {
            "ok1" | "ok2" => assert!(b.queue_ack(&q, &d.receipt).await.expect("ack")),
            "dead" | "popped" => assert!(
                b.queue_fail(&q, &d.receipt, &body(&id))
                    .await
                    .expect("fail")
            ),
            "stop" => {
                b.task_cancel(&q, "stop").await.expect("cancel");
                assert!(b.queue_ack(&q, &d.receipt).await.is_err());
            }
            other => panic!("unexpected {other}"),
        }
    }
    // The oldest letter is "dead"; pop it: failed.
    assert_eq!(b.dlq_pop(&q, 1).await.expect("pop"), vec![body("dead")]);
    // Id-less ends count nothing.
    b.queue_push(&q, b"plain", Priority::Normal)
        .await
        .expect("push");
    let d = reserve(&b, &q, LONG).await;
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));

    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(
        (s.completed, s.failed, s.dead_lettered, s.cancelled),
        (2, 1, 2, 2),
        "{s:?}"
    );
    assert_eq!(s.total(), 1, "one letter left: {s:?}");
    let events = b
        .task_events(&q, None, 100, Duration::ZERO)
        .await
        .expect("events")
        .events;
    let count = |state: TaskState| events.iter().filter(|e| e.state == state).count() as u64;
    assert_eq!(count(TaskState::Completed), s.completed);
    assert_eq!(count(TaskState::Failed), s.failed);
    assert_eq!(count(TaskState::Dead), s.dead_lettered);
    assert_eq!(count(TaskState::Cancelled), s.cancelled);
}
