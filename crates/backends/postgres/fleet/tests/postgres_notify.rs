//! Notifications between backends: a push on one wakes a reserve waiting on another (with the
//! fallback re-check set far beyond the test's patience, so only a NOTIFY can wake it), also after
//! the listening connection was terminated; events cross backends of one schema and never reach
//! another schema; `open` takes the schema a URL names.

use std::time::Duration;

use futures::StreamExt;
use switchyard_conformance::harness::{postgres_query, postgres_url, unique_id, unique_schema};
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};
use switchyard_postgres_support::Schema;

/// Far longer than any wait below: a reserve that returns was woken by a notification.
const NO_FALLBACK: Duration = Duration::from_secs(600);
const PATIENCE: Duration = Duration::from_secs(30);

async fn open(schema: &str) -> PostgresFleetBackend {
    let options = PostgresFleetOptions {
        pool: PostgresFleetOptions::default()
            .pool
            .schema(Schema::new(schema).expect("schema")),
        fallback: NO_FALLBACK,
        ..PostgresFleetOptions::default()
    };
    PostgresFleetBackend::open_with(&postgres_url(), options)
        .await
        .expect("open")
}

async fn reserve_while(waiter: &PostgresFleetBackend, q: &str, act: impl AsyncFnOnce()) -> bool {
    let reserve = {
        let (w, q) = (waiter.clone(), q.to_string());
        tokio::spawn(async move {
            w.queue_reserve(&q, PATIENCE, Duration::from_secs(60))
                .await
                .expect("reserve")
        })
    };
    // Let the reserve find the queue empty and go to sleep first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    act().await;
    let got = tokio::time::timeout(PATIENCE + Duration::from_secs(5), reserve)
        .await
        .expect("the reserve returns")
        .expect("join");
    got.is_some_and(|d| d.body == b"wake")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_on_another_backend_wakes_a_waiting_reserve() {
    let schema = unique_schema("notify");
    let (a, b) = (open(&schema).await, open(&schema).await);
    let q = unique_id("q");
    let woken = reserve_while(&a, &q, async || {
        b.queue_push(&q, b"wake", Priority::Normal)
            .await
            .expect("push");
    })
    .await;
    assert!(
        woken,
        "the push's NOTIFY woke the reserve on the other backend"
    );
}

/// The notifications sent on `channel` until `quiet` passes without one.
async fn heard(listener: &mut sqlx::postgres::PgListener, quiet: Duration) -> Vec<String> {
    let mut payloads = Vec::new();
    while let Ok(got) = tokio::time::timeout(quiet, listener.recv()).await {
        payloads.push(got.expect("listening").payload().to_string());
    }
    payloads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_wake_their_own_backend_directly_and_others_with_one_notify_per_batch() {
    let schema = unique_schema("ownwake");
    let (a, b) = (open(&schema).await, open(&schema).await);
    let q = unique_id("q");
    let mut listener = sqlx::postgres::PgListener::connect(&postgres_url())
        .await
        .expect("listener");
    listener.listen(a.notify_channel()).await.expect("listen");
    let quiet = Duration::from_millis(500);

    let woken = reserve_while(&a, &q, async || {
        a.queue_push(&q, b"wake", Priority::Normal)
            .await
            .expect("push");
    })
    .await;
    assert!(woken, "a push woke the reserve waiting on its own backend");
    assert_eq!(
        heard(&mut listener, quiet).await,
        Vec::<String>::new(),
        "without a notification: only another backend's lease asks for one"
    );

    let woken = reserve_while(&b, &q, async || {
        a.queue_push(&q, b"wake", Priority::Normal)
            .await
            .expect("push");
    })
    .await;
    assert!(woken, "a push woke the reserve waiting on another backend");
    let one = heard(&mut listener, quiet).await;
    assert_eq!(one.len(), 1, "one notification for one push: {one:?}");
    assert!(one[0].starts_with("q:"), "it wakes one reserver: {one:?}");

    // b's lease still holds: concurrent pushes that share a batch share one notification.
    let pushes = (0..16).map(|_| a.queue_push(&q, b"later", Priority::Normal));
    for pushed in futures::future::join_all(pushes).await {
        pushed.expect("push");
    }
    let some = heard(&mut listener, quiet).await;
    assert!(
        !some.is_empty() && some.len() < 16,
        "16 concurrent pushes notify at least once and fewer times than pushes: {some:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_listener_listens_again_and_wakes_reservers() {
    let schema = unique_schema("relisten");
    let (a, b) = (open(&schema).await, open(&schema).await);
    let q = unique_id("q");
    let channel = a.notify_channel().to_string();
    let woken = reserve_while(&a, &q, async || {
        // Both backends listen on the channel; terminate their listening connections, then push
        // at once (the NOTIFY may well be sent while nobody listens).
        let killed = postgres_query(
            &postgres_url(),
            &format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE query LIKE 'LISTEN%{channel}%' AND pid <> pg_backend_pid()"
            ),
        )
        .expect("terminate");
        assert_eq!(killed.len(), 2, "both listening connections terminated");
        b.queue_push(&q, b"wake", Priority::Normal)
            .await
            .expect("push");
    })
    .await;
    assert!(woken, "the reserve looked again once its listener was back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_cross_backends_of_a_schema_and_stay_in_it() {
    let schema = unique_schema("events");
    let (a, b) = (open(&schema).await, open(&schema).await);
    let elsewhere = open(&unique_schema("events")).await;
    let topic = unique_id("topic");
    let mut here = a.event_subscribe(&topic).await.expect("subscribe");
    let mut there = elsewhere.event_subscribe(&topic).await.expect("subscribe");
    elsewhere
        .event_publish(&topic, b"other schema")
        .await
        .expect("publish");
    let big = vec![0xa5u8; switchyard_fleet_postgres::MAX_EVENT_BODY];
    b.event_publish(&topic, &big).await.expect("publish");
    let got = tokio::time::timeout(Duration::from_secs(10), here.next())
        .await
        .expect("within 10 s")
        .expect("open");
    assert_eq!(
        got, big,
        "the largest body crosses intact, and nothing of the other schema"
    );
    let got = tokio::time::timeout(Duration::from_secs(10), there.next())
        .await
        .expect("within 10 s")
        .expect("open");
    assert_eq!(got, b"other schema");
    assert!(
        b.event_publish(
            &topic,
            &vec![0u8; switchyard_fleet_postgres::MAX_EVENT_BODY + 1]
        )
        .await
        .is_err(),
        "a body too big for a notification is refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_names_the_schema() {
    let schema = unique_schema("url");
    let fleet = PostgresFleetBackend::open(&format!("{}?schema={schema}", postgres_url()))
        .await
        .expect("open");
    assert_eq!(fleet.schema().as_str(), schema);
    fleet.counter_incr("c", 2).await.expect("incr");
    let rows = postgres_query(
        &postgres_url(),
        &format!("SELECT value FROM {schema}.fleet_counters WHERE name = 'c'"),
    )
    .expect("query");
    assert_eq!(rows, vec![vec![Some("2".to_string())]]);
}
