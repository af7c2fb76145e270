//! Group commit of pushes, acks and reserves (ADR 0236, 0296) keeps every call's own answer:
//! concurrent acks of one receipt ack it once, one caller's pushes keep their order among
//! everyone's, and concurrent reserves each get a task of their own under their own receipt.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use switchyard_conformance::harness::{postgres_url, unique_id, unique_schema};
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};
use switchyard_postgres_support::Schema;

async fn open() -> Arc<PostgresFleetBackend> {
    let options = PostgresFleetOptions {
        pool: PostgresFleetOptions::default()
            .pool
            .schema(Schema::new(unique_schema("batch")).expect("schema"))
            .max_connections(16),
        ..PostgresFleetOptions::default()
    };
    Arc::new(
        PostgresFleetBackend::open_with(&postgres_url(), options)
            .await
            .expect("open"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acks_of_one_receipt_ack_it_once() {
    let b = open().await;
    let q = unique_id("q");
    for i in 0..50 {
        b.queue_push(&q, format!("t{i}").as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    let mut receipts = Vec::new();
    while let Some(d) = b
        .queue_reserve(&q, Duration::ZERO, Duration::from_secs(60))
        .await
        .expect("reserve")
    {
        receipts.push(d.receipt);
    }
    assert_eq!(receipts.len(), 50);
    // Every receipt acked by three calls at once: many land in one batch together.
    let mut calls = Vec::new();
    for r in receipts.iter().chain(&receipts).chain(&receipts) {
        let (b, q, r) = (b.clone(), q.clone(), r.clone());
        calls.push(tokio::spawn(async move {
            (r.clone(), b.queue_ack(&q, &r).await.expect("ack"))
        }));
    }
    let mut trues: HashMap<String, usize> = HashMap::new();
    for c in calls {
        let (r, acked) = c.await.expect("join");
        *trues.entry(r.as_str().to_string()).or_default() += usize::from(acked);
    }
    assert_eq!(trues.len(), 50);
    assert!(
        trues.values().all(|n| *n == 1),
        "each receipt acked once: {trues:?}"
    );
    assert_eq!(b.queue_stats(&q).await.expect("stats").total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pushes_keep_each_callers_order() {
    let b = open().await;
    let q = unique_id("q");
    let mut callers = Vec::new();
    for c in 0..16 {
        let (b, q) = (b.clone(), q.clone());
        callers.push(tokio::spawn(async move {
            for i in 0..20 {
                b.queue_push(&q, format!("{c}:{i}").as_bytes(), Priority::Normal)
                    .await
                    .expect("push");
            }
        }));
    }
    for c in callers {
        c.await.expect("join");
    }
    let all = b.queue_peek(&q, 1000).await.expect("peek");
    assert_eq!(all.len(), 320);
    let mut next: HashMap<String, u32> = HashMap::new();
    for body in all {
        let text = String::from_utf8(body).expect("utf8");
        let (c, i) = text.split_once(':').expect("c:i");
        let want = next.entry(c.to_string()).or_default();
        assert_eq!(i.parse::<u32>().expect("i"), *want, "caller {c} in order");
        *want += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reserves_each_get_their_own_task_and_receipt() {
    let b = open().await;
    let q = unique_id("q");
    for i in 0..50 {
        b.queue_push(&q, format!("t{i}").as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    // More reservers than tasks, all at once: many share a batch.
    let mut calls = Vec::new();
    for _ in 0..80 {
        let (b, q) = (b.clone(), q.clone());
        calls.push(tokio::spawn(async move {
            b.queue_reserve(&q, Duration::ZERO, Duration::from_secs(60))
                .await
                .expect("reserve")
        }));
    }
    let mut got = Vec::new();
    for c in calls {
        if let Some(d) = c.await.expect("join") {
            got.push(d);
        }
    }
    let bodies: std::collections::HashSet<Vec<u8>> = got.iter().map(|d| d.body.clone()).collect();
    let receipts: std::collections::HashSet<String> =
        got.iter().map(|d| d.receipt.as_str().to_string()).collect();
    assert_eq!(got.len(), 50, "every task reserved once");
    assert_eq!((bodies.len(), receipts.len()), (50, 50));
    assert!(got.iter().all(|d| d.attempt == 1));
    for d in &got {
        assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"), "{d:?}");
    }
    assert_eq!(b.queue_stats(&q).await.expect("stats").total(), 0);
}
