//! Task records on PostgreSQL beyond the shared task suite (ADR 0380, section 7): the group
//! commit keeps each call's own answer when ids collide or cancels land, the flow row that holds
//! a queue's log and counts survives a resume, finished records are no queue's tasks, an end
//! wakes an event reader of another backend, and the cost of records on the hot path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_conformance::harness::{postgres_url, unique_id, unique_schema};
use switchyard_core::Error;
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{CancelOutcome, Priority, TaskState, Tasks};
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};
use switchyard_postgres_support::Schema;

async fn open_in(schema: &str) -> Arc<PostgresFleetBackend> {
    let options = PostgresFleetOptions {
        pool: PostgresFleetOptions::default()
            .pool
            .schema(Schema::new(schema).expect("schema"))
            .max_connections(16),
        ..PostgresFleetOptions::default()
    };
    Arc::new(
        PostgresFleetBackend::open_with(&postgres_url(), options)
            .await
            .expect("open"),
    )
}

async fn open() -> Arc<PostgresFleetBackend> {
    open_in(&unique_schema("tasks")).await
}

fn body(id: &str) -> Vec<u8> {
    format!(r#"{{"id": "{id}", "kind": "t"}}"#).into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pushes_of_one_id_store_it_once() {
    let b = open().await;
    let q = unique_id("q");
    // Many land in one batch together: exactly one of each id is stored, the others are told.
    let mut calls = Vec::new();
    for i in 0..60 {
        let (b, q) = (b.clone(), q.clone());
        calls.push(tokio::spawn(async move {
            b.queue_push(&q, &body(&format!("t{}", i % 20)), Priority::Normal)
                .await
        }));
    }
    let (mut ok, mut taken) = (0, 0);
    for c in calls {
        match c.await.expect("join") {
            Ok(()) => ok += 1,
            Err(Error::AlreadyExists { what: "task", .. }) => taken += 1,
            Err(e) => panic!("push: {e:?}"),
        }
    }
    assert_eq!((ok, taken), (20, 40));
    assert_eq!(b.queue_size(&q).await.expect("size"), 20);
    // Bodies without ids in the same batches are never refused.
    for _ in 0..3 {
        b.queue_push(&q, b"plain", Priority::Normal)
            .await
            .expect("plain push");
    }
    assert_eq!(b.queue_size(&q).await.expect("size"), 23);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_ack_of_a_cancelled_delivery_answers_cancelled_and_others_ack() {
    let b = open().await;
    let q = unique_id("q");
    for i in 0..10 {
        b.queue_push(&q, &body(&format!("a{i}")), Priority::Normal)
            .await
            .expect("push");
    }
    b.queue_push(&q, b"no id", Priority::Normal)
        .await
        .expect("push");
    let mut held = Vec::new();
    while let Some(d) = b
        .queue_reserve(&q, Duration::ZERO, Duration::from_secs(60))
        .await
        .expect("reserve")
    {
        held.push(d);
    }
    assert_eq!(held.len(), 11);
    assert_eq!(
        b.task_cancel(&q, "a3").await.expect("cancel"),
        CancelOutcome::CancelRequested
    );
    let mut calls = Vec::new();
    for d in &held {
        let (b, q, r, id) = (b.clone(), q.clone(), d.receipt.clone(), d.task_id.clone());
        calls.push(tokio::spawn(async move { (id, b.queue_ack(&q, &r).await) }));
    }
    for c in calls {
        let (id, answer) = c.await.expect("join");
        match id.as_deref() {
            Some("a3") => assert!(
                matches!(answer, Err(Error::Cancelled { ref id, .. }) if id == "a3"),
                "{answer:?}"
            ),
            _ => assert!(answer.expect("ack"), "{id:?}"),
        }
    }
    let stats = b.queue_stats(&q).await.expect("stats");
    assert_eq!((stats.completed, stats.cancelled), (9, 1));
    assert_eq!(stats.total(), 0);
    let info = b.task_get(&q, "a3").await.expect("get").expect("record");
    assert_eq!(info.state, TaskState::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_records_are_no_queues_tasks_and_the_flow_row_outlives_a_resume() {
    let b = open().await;
    let q = unique_id("q");
    b.queue_push(&q, &body("x"), Priority::Normal)
        .await
        .expect("push");
    let d = b
        .queue_reserve(&q, Duration::ZERO, Duration::from_secs(60))
        .await
        .expect("reserve")
        .expect("task");
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    assert!(
        !b.queue_names().await.expect("names").contains(&q),
        "a queue holding only a finished record is not listed"
    );
    // Pause, limit and resume: the row that also holds the log position and counts stays.
    assert!(b.queue_pause(&q).await.expect("pause"));
    assert!(b.queue_resume(&q).await.expect("resume"));
    b.queue_set_rate_limit(&q, None).await.expect("no limit");
    let stats = b.queue_stats(&q).await.expect("stats");
    assert_eq!(stats.completed, 1);
    assert!(!stats.paused);
    let info = b.task_get(&q, "x").await.expect("get").expect("record");
    assert_eq!(info.events_cursor, "1");
    let read = b
        .task_events(&q, Some("0"), 10, Duration::ZERO)
        .await
        .expect("events");
    assert_eq!(read.events.len(), 1);
    assert!(!read.gap);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_wakes_an_event_reader_of_another_backend() {
    let schema = unique_schema("tasks");
    let (reader, writer) = (open_in(&schema).await, open_in(&schema).await);
    let q = unique_id("q");
    writer
        .queue_push(&q, &body("w"), Priority::Normal)
        .await
        .expect("push");
    let d = writer
        .queue_reserve(&q, Duration::ZERO, Duration::from_secs(60))
        .await
        .expect("reserve")
        .expect("task");
    let waiting = {
        let (reader, q) = (reader.clone(), q.clone());
        tokio::spawn(async move {
            let t0 = Instant::now();
            let read = reader
                .task_events(&q, Some("$"), 10, Duration::from_secs(20))
                .await
                .expect("events");
            (read, t0.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let acked = Instant::now();
    assert!(
        writer
            .queue_complete(&q, &d.receipt, b"{\"ok\":1}")
            .await
            .expect("complete")
    );
    let (read, _) = waiting.await.expect("join");
    let woke = acked.elapsed();
    assert_eq!(read.events.len(), 1);
    assert_eq!(read.events[0].result.as_deref(), Some(&b"{\"ok\":1}"[..]));
    // A notification, not the 250 ms re-check of the front.
    assert!(woke < Duration::from_millis(200), "{woke:?}");
}
