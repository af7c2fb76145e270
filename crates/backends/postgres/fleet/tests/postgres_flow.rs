//! The queue features of ADR 0280 on PostgreSQL (ADR 0295), where several backends (gateways)
//! share one schema: pause and the rate limit's bucket hold across them, a waiting reserve of one
//! is woken by another's resume or delayed submit, and the one-task `fleet_reserve` of an older
//! release honours pause too.

use std::sync::Arc;
use std::time::Duration;

use switchyard_conformance::harness::{postgres_url, unique_id, unique_schema};
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{Priority, RateLimit, RunAt, Submit};
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};
use switchyard_postgres_support::Schema;

const VIS: Duration = Duration::from_secs(60);

/// Two backends on one fresh schema, as two gateway processes would be.
async fn pair() -> (Arc<PostgresFleetBackend>, Arc<PostgresFleetBackend>) {
    let schema = unique_schema("flow");
    let open = || async {
        let options = PostgresFleetOptions {
            pool: PostgresFleetOptions::default()
                .pool
                .schema(Schema::new(schema.clone()).expect("schema"))
                .max_connections(16),
            ..PostgresFleetOptions::default()
        };
        Arc::new(
            PostgresFleetBackend::open_with(&postgres_url(), options)
                .await
                .expect("open"),
        )
    };
    let a = open().await;
    let b = open().await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reserves_of_two_backends_spend_each_token_once() {
    let (a, b) = pair().await;
    let q = unique_id("q");
    let bodies: Vec<Vec<u8>> = (0..40).map(|i| format!("t{i}").into_bytes()).collect();
    a.queue_push_many(&q, &bodies, Priority::Normal)
        .await
        .expect("push");
    a.queue_set_rate_limit(
        &q,
        Some(RateLimit::new(7, Duration::from_secs(3600)).expect("limit")),
    )
    .await
    .expect("limit");
    let mut calls = Vec::new();
    for i in 0..30 {
        let backend = if i % 2 == 0 { a.clone() } else { b.clone() };
        let q = q.clone();
        calls.push(tokio::spawn(async move {
            if i % 3 == 0 {
                backend
                    .queue_reserve_many(&q, 3, Duration::ZERO, VIS)
                    .await
                    .expect("reserve many")
                    .len()
            } else {
                usize::from(
                    backend
                        .queue_reserve(&q, Duration::ZERO, VIS)
                        .await
                        .expect("reserve")
                        .is_some(),
                )
            }
        }));
    }
    let mut reserved = 0;
    for c in calls {
        reserved += c.await.expect("join");
    }
    assert_eq!(
        reserved, 7,
        "one token per reservation, across both backends"
    );
    let stats = b.queue_stats(&q).await.expect("stats");
    assert_eq!(stats.in_flight, 7);
    assert_eq!(stats.normal, 33);
    assert!(stats.throttled_ms > 0, "{stats:?}");
    // Removing the limit frees the rest at once.
    b.queue_set_rate_limit(&q, None).await.expect("unlimit");
    let rest = a
        .queue_reserve_many(&q, 1000, Duration::ZERO, VIS)
        .await
        .expect("reserve");
    assert_eq!(rest.len(), 33);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_reserve_wakes_on_another_backends_resume_and_next_token() {
    let (a, b) = pair().await;
    let q = unique_id("q");
    assert!(a.queue_pause(&q).await.expect("pause"));
    assert!(!b.queue_pause(&q).await.expect("pause again"));
    b.queue_push(&q, b"x", Priority::High)
        .await
        .expect("push while paused");
    assert_eq!(
        a.queue_reserve(&q, Duration::ZERO, VIS)
            .await
            .expect("reserve"),
        None
    );
    assert!(a.queue_stats(&q).await.expect("stats").paused);
    let waiter = {
        let a = a.clone();
        let q = q.clone();
        tokio::spawn(async move { a.queue_reserve(&q, Duration::from_secs(30), VIS).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(b.queue_resume(&q).await.expect("resume"));
    assert!(!b.queue_resume(&q).await.expect("resume again"));
    let got = waiter
        .await
        .expect("join")
        .expect("reserve")
        .expect("woken by resume");
    assert_eq!(got.body, b"x");
    assert!(!a.queue_stats(&q).await.expect("stats").paused);

    // One token per 400 ms: the second reserve waits for the next token and gets it.
    b.queue_push_many(&q, &[b"1".to_vec(), b"2".to_vec()], Priority::Normal)
        .await
        .expect("push");
    b.queue_set_rate_limit(
        &q,
        Some(RateLimit::new(1, Duration::from_millis(400)).expect("limit")),
    )
    .await
    .expect("limit");
    let first = a
        .queue_reserve(&q, Duration::ZERO, VIS)
        .await
        .expect("reserve");
    assert_eq!(first.map(|d| d.body), Some(b"1".to_vec()));
    assert_eq!(
        a.queue_reserve(&q, Duration::ZERO, VIS)
            .await
            .expect("reserve"),
        None,
        "no token left"
    );
    let stats = a.queue_stats(&q).await.expect("stats");
    assert!(
        stats.throttled_ms > 0 && stats.throttled_ms <= 400,
        "{stats:?}"
    );
    assert_eq!(
        stats.rate_limit,
        Some(RateLimit::new(1, Duration::from_millis(400)).expect("limit"))
    );
    let second = a
        .queue_reserve(&q, Duration::from_secs(30), VIS)
        .await
        .expect("reserve");
    assert_eq!(second.map(|d| d.body), Some(b"2".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_submit_of_one_backend_reaches_a_reserve_waiting_on_another() {
    let (a, b) = pair().await;
    let q = unique_id("q");
    let waiter = {
        let a = a.clone();
        let q = q.clone();
        tokio::spawn(async move { a.queue_reserve(&q, Duration::from_secs(30), VIS).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let submit = Submit::new().run_at(RunAt::After(Duration::from_millis(300)));
    b.queue_submit(&q, b"later", &submit).await.expect("submit");
    let got = waiter
        .await
        .expect("join")
        .expect("reserve")
        .expect("due task");
    assert_eq!(got.body, b"later");
    assert_eq!(got.attempt, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_release_delivered_and_chosen_dead_letters() {
    let (a, b) = pair().await;
    let q = unique_id("q");
    a.queue_push(&q, br#"{"id":"t1"}"#, Priority::Low)
        .await
        .expect("push");
    let d = a
        .queue_reserve(&q, Duration::ZERO, VIS)
        .await
        .expect("reserve")
        .expect("task");
    assert!(
        b.queue_progress(&q, &d.receipt, b"50%")
            .await
            .expect("progress")
    );
    let seen = b.queue_in_flight(&q, 10).await.expect("in flight");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].progress.as_deref(), Some(&b"50%"[..]));
    assert_eq!(seen[0].task_id.as_deref(), Some("t1"));
    let delivered = b.queue_delivered(&q, &d.receipt).await.expect("delivered");
    assert_eq!(delivered.as_ref(), Some(&d));
    assert!(
        b.queue_release(&q, &d.receipt, Duration::ZERO)
            .await
            .expect("release")
    );
    assert!(
        !a.queue_release(&q, &d.receipt, Duration::ZERO)
            .await
            .expect("again")
    );
    assert_eq!(
        b.queue_delivered(&q, &d.receipt).await.expect("delivered"),
        None
    );
    let again = a
        .queue_reserve(&q, Duration::ZERO, VIS)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!((again.attempt, again.priority), (2, Priority::Low));
    assert_eq!(
        a.queue_in_flight(&q, 10).await.expect("in flight")[0].progress,
        None
    );
    assert!(
        a.queue_fail(&q, &again.receipt, b"dead")
            .await
            .expect("fail")
    );

    for body in [b"x".to_vec(), b"y".to_vec(), b"x".to_vec()] {
        a.queue_dead(&q, &body).await.expect("dead");
    }
    let answers = b
        .dlq_requeue_chosen(
            &q,
            &[b"x".to_vec(), b"x".to_vec(), b"x".to_vec(), b"z".to_vec()],
            Priority::High,
        )
        .await
        .expect("requeue");
    assert_eq!(answers, vec![true, true, false, false]);
    assert_eq!(
        a.dlq_peek(&q, 10).await.expect("peek"),
        vec![b"dead".to_vec(), b"y".to_vec()]
    );
    assert_eq!(
        a.queue_peek(&q, 10).await.expect("peek"),
        vec![b"x".to_vec(), b"x".to_vec()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_schedules_and_the_old_reserve_function() {
    let (a, b) = pair().await;
    let q = unique_id("q");
    let bodies: Vec<Vec<u8>> = (0..5).map(|i| vec![i]).collect();
    a.queue_push_many(&q, &bodies, Priority::Normal)
        .await
        .expect("push");
    a.queue_push(&q, b"h", Priority::High).await.expect("push");
    let got = b
        .queue_reserve_many(&q, 4, Duration::ZERO, VIS)
        .await
        .expect("reserve");
    let got_bodies: Vec<Vec<u8>> = got.iter().map(|d| d.body.clone()).collect();
    assert_eq!(got_bodies, vec![b"h".to_vec(), vec![0], vec![1], vec![2]]);
    let mut receipts: Vec<_> = got.iter().map(|d| d.receipt.clone()).collect();
    receipts.push(got[0].receipt.clone());
    let answers = a.queue_ack_many(&q, &receipts).await.expect("ack");
    assert_eq!(answers, vec![true, true, true, true, false]);
    let err = a
        .queue_reserve_many(&q, 0, Duration::ZERO, VIS)
        .await
        .expect_err("max 0");
    assert!(
        matches!(err, switchyard_core::Error::InvalidInput { .. }),
        "{err:?}"
    );

    let name = format!("{}:é|{{x}}", unique_id("s"));
    a.schedule_put(&name, b"doc1").await.expect("put");
    b.schedule_put(&name, b"doc2").await.expect("put");
    assert_eq!(
        a.schedule_get(&name).await.expect("get"),
        Some(b"doc2".to_vec())
    );
    assert_eq!(
        b.schedule_list().await.expect("list").get(&name),
        Some(&b"doc2".to_vec())
    );
    assert!(a.schedule_delete(&name).await.expect("delete"));
    assert!(!a.schedule_delete(&name).await.expect("delete"));

    // A backend of an older release reserves through `fleet_reserve`; it honours the pause.
    a.queue_pause(&q).await.expect("pause");
    let pool = sqlx::PgPool::connect(&postgres_url()).await.expect("pool");
    let schema = a.schema().as_str().to_string();
    let old: Option<(i16, Vec<u8>, i32, f64)> = sqlx::query_as(&format!(
        "SELECT * FROM \"{schema}\".fleet_reserve($1, 'r', 30)"
    ))
    .bind(&q)
    .fetch_optional(&pool)
    .await
    .expect("old reserve");
    assert_eq!(old, None);
    a.queue_resume(&q).await.expect("resume");
    let old: Option<(i16, Vec<u8>, i32, f64)> = sqlx::query_as(&format!(
        "SELECT * FROM \"{schema}\".fleet_reserve($1, 'r', 30)"
    ))
    .bind(&q)
    .fetch_optional(&pool)
    .await
    .expect("old reserve");
    assert_eq!(old.map(|r| r.1), Some(vec![3]));
}

/// A reservation commits without waiting for the WAL flush (ADR 0393): read from
/// `synchronous_commit` inside the reserve's own transaction, for the one-task reserve of an older
/// release too. A push, and the session's own setting, stay durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_commits_without_waiting_for_the_flush() {
    let (a, _b) = pair().await;
    let q = unique_id("nosync");
    a.queue_push_many(&q, &[vec![1], vec![2]], Priority::Normal)
        .await
        .expect("push");
    let pool = sqlx::PgPool::connect(&postgres_url()).await.expect("pool");
    let schema = a.schema().as_str().to_string();
    for call in [
        "fleet_reserve_many($1, ARRAY['r1'], 30)",
        "fleet_reserve($1, 'r2', 30)",
    ] {
        let mut tx = pool.begin().await.expect("begin");
        let got: Vec<sqlx::postgres::PgRow> =
            sqlx::query(&format!("SELECT * FROM \"{schema}\".{call}"))
                .bind(&q)
                .fetch_all(&mut *tx)
                .await
                .expect("reserve");
        assert_eq!(got.len(), 1, "{call}");
        assert_eq!(setting(&mut tx).await, "off", "{call}");
        tx.commit().await.expect("commit");
    }
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query(&format!(
        "INSERT INTO \"{schema}\".fleet_tasks (name, tier, body) VALUES ($1, 1, '\\x03')"
    ))
    .bind(&q)
    .execute(&mut *tx)
    .await
    .expect("insert");
    assert_eq!(
        setting(&mut tx).await,
        "on",
        "a write of its own is durable"
    );
    tx.commit().await.expect("commit");
    let mut conn = pool.acquire().await.expect("conn");
    assert_eq!(
        setting(&mut conn).await,
        "on",
        "a session's setting is untouched"
    );
}

/// The connection's `synchronous_commit`, in its transaction if one is open.
async fn setting(conn: &mut sqlx::PgConnection) -> String {
    sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(conn)
        .await
        .expect("show")
}
