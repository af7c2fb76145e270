//! Guarantee `queue.stats`: one consistent snapshot of every count of a queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use switchyard_core::Error;
use switchyard_core::fleet::Priority;

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, LONG, SHORT, sleep};
use crate::harness::unique_id;

/// Expected counts of [`queue_stats`], field by field (`QueueStats` is non-exhaustive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    high: u64,
    normal: u64,
    low: u64,
    in_flight: u64,
    overdue: u64,
    scheduled: u64,
    due: u64,
    dead: u64,
}

async fn counts(b: &Backend, q: &str) -> Counts {
    let s = b.queue_stats(q).await.expect("stats");
    Counts {
        high: s.high,
        normal: s.normal,
        low: s.low,
        in_flight: s.in_flight,
        overdue: s.overdue,
        scheduled: s.scheduled,
        due: s.due,
        dead: s.dead,
    }
}

/// Guarantee `queue.stats`: every count of a queue comes from one consistent snapshot that never
/// sees a task twice or not at all while others move it; reading changes nothing; an unknown queue
/// is all zeros.
pub async fn queue_stats(b: Backend) {
    let q = unique_id("q:{stats}");
    let zero = Counts {
        high: 0,
        normal: 0,
        low: 0,
        in_flight: 0,
        overdue: 0,
        scheduled: 0,
        due: 0,
        dead: 0,
    };
    assert_eq!(counts(&b, &q).await, zero, "an unknown queue is all zeros");
    assert!(matches!(
        b.queue_stats("").await,
        Err(Error::InvalidInput { .. })
    ));

    for (body, p) in [
        ("h1", Priority::High),
        ("h2", Priority::High),
        ("h3", Priority::High),
        ("h4", Priority::High),
        ("n1", Priority::Normal),
        ("n2", Priority::Normal),
        ("n3", Priority::Normal),
        ("l1", Priority::Low),
        ("l2", Priority::Low),
    ] {
        b.queue_push(&q, body.as_bytes(), p).await.expect("push");
    }
    let reserve = |visibility: Duration| {
        let (b, q) = (b.clone(), q.clone());
        async move {
            b.queue_reserve(&q, Duration::ZERO, visibility)
                .await
                .expect("reserve")
                .expect("task")
        }
    };
    // Long timers only, so nothing can lapse before the first snapshot.
    let held = reserve(LONG).await;
    assert_eq!(held.body, b"h1");
    let later = reserve(LONG).await;
    assert!(
        b.queue_nack(&q, &later.receipt, b"h2", LONG)
            .await
            .expect("nack")
    );
    let failed = reserve(LONG).await;
    assert!(
        b.queue_fail(&q, &failed.receipt, b"h3")
            .await
            .expect("fail")
    );
    let first = Counts {
        high: 1,
        normal: 3,
        low: 2,
        in_flight: 1,
        overdue: 0,
        scheduled: 1,
        due: 0,
        dead: 1,
    };
    assert_eq!(counts(&b, &q).await, first);
    assert_eq!(
        b.queue_stats(&q).await.expect("stats").total(),
        9,
        "every task counted once"
    );

    // A reservation that lapses and a delayed nack that falls due.
    let lapsing = reserve(SHORT).await;
    assert_eq!(lapsing.body, b"h4");
    let retried = reserve(LONG).await;
    assert_eq!(retried.body, b"n1");
    assert!(
        b.queue_nack(&q, &retried.receipt, b"n1", SHORT)
            .await
            .expect("nack")
    );
    sleep(LAPSE).await;
    let lapsed = Counts {
        high: 0,
        normal: 2,
        low: 2,
        in_flight: 2,
        overdue: 1,
        scheduled: 2,
        due: 1,
        dead: 1,
    };
    assert_eq!(counts(&b, &q).await, lapsed);
    assert_eq!(counts(&b, &q).await, lapsed, "reading changed nothing");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(s.waiting(), b.queue_size(&q).await.expect("size"));
    assert_eq!(s.dead, b.dlq_length(&q).await.expect("dlq length"));
    assert_eq!(s.total(), 9);

    // The sweep returns the overdue one; a reserve moves the due one and takes the swept one.
    assert_eq!(b.queue_sweep_expired(&q).await.expect("sweep"), 1);
    let again = reserve(LONG).await;
    assert_eq!(again.body, b"h4");
    assert_eq!(
        counts(&b, &q).await,
        Counts {
            high: 0,
            normal: 3,
            low: 2,
            in_flight: 2,
            overdue: 0,
            scheduled: 1,
            due: 0,
            dead: 1,
        }
    );
    assert!(b.queue_ack(&q, &held.receipt).await.expect("ack"));
    assert!(b.queue_ack(&q, &again.receipt).await.expect("ack"));
    b.queue_dead(&q, b"direct").await.expect("dead");
    assert_eq!(
        counts(&b, &q).await,
        Counts {
            normal: 3,
            low: 2,
            scheduled: 1,
            dead: 2,
            ..zero
        }
    );

    // A snapshot never sees a task twice or not at all while movers reserve, nack and requeue.
    let q2 = unique_id("q");
    const TASKS: u64 = 20;
    for i in 0..TASKS {
        let p = Priority::ORDER[i as usize % 3];
        b.queue_push(&q2, format!("t{i}").as_bytes(), p)
            .await
            .expect("push");
    }
    // Snapshots go on until the movers have made MOVES moves, however fast either side runs.
    const MOVES: u64 = 300;
    let stop = Arc::new(AtomicBool::new(false));
    let moves = Arc::new(AtomicU64::new(0));
    let mut movers = Vec::new();
    for m in 0..2u32 {
        let (b, q2, stop, moves) = (b.clone(), q2.clone(), stop.clone(), moves.clone());
        movers.push(tokio::spawn(async move {
            let mut i = m;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                tokio::task::yield_now().await;
                let Some(d) = b
                    .queue_reserve(&q2, Duration::ZERO, LONG)
                    .await
                    .expect("reserve")
                else {
                    continue;
                };
                match i % 3 {
                    0 => {
                        b.queue_fail(&q2, &d.receipt, &d.body).await.expect("fail");
                        b.dlq_requeue(&q2, 1, d.priority).await.expect("requeue");
                    }
                    1 => {
                        b.queue_nack(&q2, &d.receipt, &d.body, Duration::from_millis(5))
                            .await
                            .expect("nack");
                    }
                    _ => {
                        b.queue_nack(&q2, &d.receipt, &d.body, Duration::ZERO)
                            .await
                            .expect("nack");
                    }
                }
                moves.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // A mover that stopped (a failed call) ends the loop; joining it below reports why.
    while moves.load(Ordering::Relaxed) < MOVES && !movers.iter().any(|m| m.is_finished()) {
        let s = b.queue_stats(&q2).await.expect("stats");
        assert_eq!(s.total(), TASKS, "a torn snapshot: {s:?}");
        assert!(s.overdue <= s.in_flight && s.due <= s.scheduled, "{s:?}");
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::Relaxed);
    for m in movers {
        m.await.expect("mover");
    }
    assert_eq!(b.queue_stats(&q2).await.expect("stats").total(), TASKS);
}
