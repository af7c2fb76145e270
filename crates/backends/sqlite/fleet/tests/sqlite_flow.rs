//! The queue features of ADR 0280 on SQLite, where the file's own state matters: pause and rate
//! limits judged by the reserving statement and shared by every backend on the file, waiting
//! reserves woken at the right time, and dead letters the seed wrote chosen by their bytes.
//! (The port's guarantees themselves are pinned by the conformance suite.)

use std::time::Duration;

use sqlx::ConnectOptions;

use switchyard_conformance::harness::TempSqlite;
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{Priority, RateLimit, Receipt, RunAt, Submit, SubmitOutcome};
use switchyard_fleet_sqlite::SqliteFleetBackend;

const VIS: Duration = Duration::from_secs(60);
const LONG: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_pause_set_by_one_backend_holds_for_another_on_the_file() {
    let file = TempSqlite::new();
    let a = SqliteFleetBackend::open(file.path()).await.expect("open");
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    a.queue_push("q", b"t1", Priority::Normal)
        .await
        .expect("push");
    assert!(a.queue_pause("q").await.expect("pause"));
    assert!(!b.queue_pause("q").await.expect("pause again"));
    assert!(b.queue_stats("q").await.expect("stats").paused);
    assert!(
        b.queue_reserve("q", Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .is_none()
    );
    assert!(
        b.queue_reserve_many("q", 10, Duration::ZERO, VIS)
            .await
            .expect("reserve many")
            .is_empty()
    );
    // A reserve of `b` waiting on the pause sees `a`'s resume (by polling: another backend).
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.queue_reserve("q", LONG, VIS).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(a.queue_resume("q").await.expect("resume"));
    assert!(!a.queue_resume("q").await.expect("resume again"));
    let got = waiter
        .await
        .expect("join")
        .expect("reserve")
        .expect("a task");
    assert_eq!(got.body, b"t1");
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_rate_limit_is_one_bucket_for_every_backend_on_the_file() {
    let file = TempSqlite::new();
    let a = SqliteFleetBackend::open(file.path()).await.expect("open");
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    let bodies: Vec<Vec<u8>> = (0..6).map(|i| format!("t{i}").into_bytes()).collect();
    a.queue_push_many("q", &bodies, Priority::Normal)
        .await
        .expect("push many");
    // Three per 10 minutes: the burst is 3, and no refill lands within the test.
    let limit = RateLimit::new(3, Duration::from_secs(600)).expect("limit");
    a.queue_set_rate_limit("q", Some(limit))
        .await
        .expect("limit");
    let first = a
        .queue_reserve_many("q", 2, Duration::ZERO, VIS)
        .await
        .expect("reserve many");
    assert_eq!(first.len(), 2);
    let second = b
        .queue_reserve_many("q", 10, Duration::ZERO, VIS)
        .await
        .expect("reserve many");
    assert_eq!(second.len(), 1, "one token left across both backends");
    assert!(
        a.queue_reserve("q", Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .is_none()
    );
    let stats = b.queue_stats("q").await.expect("stats");
    assert_eq!(stats.rate_limit, Some(limit));
    assert!(
        stats.throttled_ms > 0 && stats.throttled_ms <= 200_000,
        "{}",
        stats.throttled_ms
    );
    assert_eq!(stats.normal, 3);
    // Removing the limit frees the rest at once.
    b.queue_set_rate_limit("q", None).await.expect("unlimit");
    let stats = a.queue_stats("q").await.expect("stats");
    assert_eq!((stats.rate_limit, stats.throttled_ms), (None, 0));
    let rest = a
        .queue_reserve_many("q", 10, Duration::ZERO, VIS)
        .await
        .expect("reserve many");
    assert_eq!(rest.len(), 3);
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_waiting_reserve_gets_the_next_token_within_its_timeout() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    for i in 0..3 {
        b.queue_push("q", format!("t{i}").as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    // One token per 300 ms.
    let limit = RateLimit::new(1, Duration::from_millis(300)).expect("limit");
    b.queue_set_rate_limit("q", Some(limit))
        .await
        .expect("limit");
    let mut got = Vec::new();
    for _ in 0..3 {
        let d = b
            .queue_reserve("q", LONG, VIS)
            .await
            .expect("reserve")
            .expect("a token comes within the timeout");
        got.push(d.body);
    }
    assert_eq!(got, [b"t0".to_vec(), b"t1".to_vec(), b"t2".to_vec()]);
    b.close().await;
}

#[tokio::test]
async fn a_waiting_reserve_takes_a_delayed_task_once_due() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    let submit = Submit::new().run_at(RunAt::After(Duration::from_millis(300)));
    assert_eq!(
        b.queue_submit("q", b"later", &submit)
            .await
            .expect("submit"),
        SubmitOutcome::Enqueued
    );
    let stats = b.queue_stats("q").await.expect("stats");
    assert_eq!((stats.scheduled, stats.normal), (1, 0));
    assert!(
        b.queue_reserve("q", Duration::ZERO, VIS)
            .await
            .expect("reserve")
            .is_none()
    );
    let got = b
        .queue_reserve("q", LONG, VIS)
        .await
        .expect("reserve")
        .expect("due within the timeout");
    assert_eq!(got.body, b"later");
    // An instant in the past enqueues at once, into the tier.
    let past = Submit::new()
        .run_at(RunAt::At(1.0))
        .priority(Priority::High);
    b.queue_submit("q", b"now", &past).await.expect("submit");
    assert_eq!(b.queue_stats("q").await.expect("stats").high, 1);
    b.close().await;
}

#[tokio::test]
async fn dead_letters_the_seed_wrote_are_chosen_by_their_bytes() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    b.queue_dead("q", b"x").await.expect("dead");
    b.queue_dead("q", b"y").await.expect("dead");
    b.queue_dead("q", b"x").await.expect("dead");
    // A seed row without a body reads as empty bytes and is chosen as such.
    {
        let mut c = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(file.path())
            .connect()
            .await
            .expect("open raw");
        sqlx::query("INSERT INTO queue_dead (name, body) VALUES ('q', NULL)")
            .execute(&mut c)
            .await
            .expect("insert");
    }
    let moved = b
        .dlq_requeue_chosen(
            "q",
            &[
                b"x".to_vec(),
                b"z".to_vec(),
                Vec::new(),
                b"x".to_vec(),
                b"x".to_vec(),
            ],
            Priority::Low,
        )
        .await
        .expect("requeue chosen");
    assert_eq!(moved, [true, false, true, true, false]);
    assert_eq!(b.dlq_peek("q", 10).await.expect("peek"), [b"y".to_vec()]);
    assert_eq!(
        b.queue_peek("q", 10).await.expect("peek"),
        [b"x".to_vec(), Vec::new(), b"x".to_vec()]
    );
    b.close().await;
}

#[tokio::test]
async fn progress_lives_and_dies_with_its_delivery() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    b.queue_push("q", br#"{"id":"t1"}"#, Priority::High)
        .await
        .expect("push");
    let d = b
        .queue_reserve("q", Duration::ZERO, VIS)
        .await
        .expect("reserve")
        .expect("task");
    assert!(
        b.queue_progress("q", &d.receipt, b"50%")
            .await
            .expect("progress")
    );
    let gone = Receipt::new("0".repeat(32));
    assert!(!b.queue_progress("q", &gone, b"?").await.expect("progress"));
    let seen = b.queue_in_flight("q", 10).await.expect("in flight");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].progress.as_deref(), Some(&b"50%"[..]));
    assert_eq!(seen[0].task_id.as_deref(), Some("t1"));
    let now = b.queue_delivered("q", &d.receipt).await.expect("delivered");
    assert_eq!(now.as_ref().map(|n| n.attempt), Some(1));
    assert!(
        b.queue_release("q", &d.receipt, Duration::ZERO)
            .await
            .expect("release")
    );
    assert!(
        !b.queue_release("q", &d.receipt, Duration::ZERO)
            .await
            .expect("release")
    );
    assert!(
        b.queue_in_flight("q", 10)
            .await
            .expect("in flight")
            .is_empty()
    );
    let again = b
        .queue_reserve("q", Duration::ZERO, VIS)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!((again.attempt, again.priority), (2, Priority::High));
    let seen = b.queue_in_flight("q", 10).await.expect("in flight");
    assert_eq!(seen[0].progress, None, "progress went with the delivery");
    b.close().await;
}

#[tokio::test]
async fn batches_answer_per_task_in_serve_order() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    let low: Vec<Vec<u8>> = (0..3).map(|i| format!("l{i}").into_bytes()).collect();
    let high: Vec<Vec<u8>> = (0..2).map(|i| format!("h{i}").into_bytes()).collect();
    b.queue_push_many("q", &low, Priority::Low)
        .await
        .expect("push");
    b.queue_push_many("q", &high, Priority::High)
        .await
        .expect("push");
    b.queue_push_many("q", &[], Priority::High)
        .await
        .expect("push none");
    let got = b
        .queue_reserve_many("q", 4, Duration::ZERO, VIS)
        .await
        .expect("reserve");
    let bodies: Vec<&[u8]> = got.iter().map(|d| d.body.as_slice()).collect();
    assert_eq!(bodies, [&b"h0"[..], b"h1", b"l0", b"l1"]);
    let mut receipts: Vec<Receipt> = got.iter().map(|d| d.receipt.clone()).collect();
    receipts.push(got[0].receipt.clone());
    receipts.push(Receipt::new("f".repeat(32)));
    let acked = b.queue_ack_many("q", &receipts).await.expect("ack");
    assert_eq!(acked, [true, true, true, true, false, false]);
    let too_many = vec![Vec::new(); 1001];
    assert!(matches!(
        b.queue_push_many("q", &too_many, Priority::Low).await,
        Err(switchyard_core::Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.queue_reserve_many("q", 0, Duration::ZERO, VIS).await,
        Err(switchyard_core::Error::InvalidInput { .. })
    ));
    b.close().await;
}

#[tokio::test]
async fn schedules_round_trip() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    b.schedule_put("b", b"doc-b").await.expect("put");
    b.schedule_put("a'; DROP TABLE x; --", b"doc-a")
        .await
        .expect("put");
    b.schedule_put("b", b"doc-b2").await.expect("put");
    assert_eq!(
        b.schedule_get("b").await.expect("get"),
        Some(b"doc-b2".to_vec())
    );
    let all = b.schedule_list().await.expect("list");
    assert_eq!(
        all.keys().map(String::as_str).collect::<Vec<_>>(),
        ["a'; DROP TABLE x; --", "b"]
    );
    assert!(b.schedule_delete("b").await.expect("delete"));
    assert!(!b.schedule_delete("b").await.expect("delete"));
    assert_eq!(b.schedule_get("b").await.expect("get"), None);
    b.close().await;
}
