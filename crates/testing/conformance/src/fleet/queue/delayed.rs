//! Guarantee `queue.delayed`: submitting a task now or later.

use std::time::{Duration, Instant};

use switchyard_core::Error;
use switchyard_core::fleet::{IdempotencyKey, Priority, RunAt, Submit, SubmitOutcome};

use crate::fleet::Backend;
use crate::fleet::common::{LONG, sleep, store_now};
use crate::harness::unique_id;

/// How long the delayed tasks of this case wait.
const DELAY: Duration = Duration::from_millis(400);

async fn reserve_now(b: &Backend, q: &str) -> Option<switchyard_core::fleet::Delivery> {
    b.queue_reserve(q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
}

/// Guarantee `queue.delayed`: `queue_submit` with a delay or a future instant schedules the task
/// (counted in `scheduled`, and in `due` once due), not reservable before its time, then at the end
/// of its tier, also for a reserve already waiting; `RunAt::Now`, a zero delay and a past instant
/// enqueue at once; a non-finite instant (or an absurd delay) is `InvalidInput`; with an
/// idempotency key a duplicate submits nothing; identical delayed bodies stay distinct tasks.
pub async fn queue_delayed(b: Backend) {
    let q = unique_id("q:{delayed}");
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(
            matches!(
                b.queue_submit(&q, b"bad", &Submit::new().run_at(RunAt::At(bad)))
                    .await,
                Err(Error::InvalidInput { .. })
            ),
            "run_at {bad} is not an instant"
        );
    }
    assert!(matches!(
        b.queue_submit(
            &q,
            b"bad",
            &Submit::new().run_at(RunAt::After(Duration::MAX))
        )
        .await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.queue_submit("", b"x", &Submit::new()).await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(
        b.queue_stats(&q).await.expect("stats").total(),
        0,
        "refused submits stored nothing"
    );

    // At once: now, a zero delay, an instant in the past.
    for (body, run_at) in [
        (&b"now"[..], RunAt::Now),
        (b"zero", RunAt::After(Duration::ZERO)),
        (b"past", RunAt::At(1.0)),
    ] {
        let out = b
            .queue_submit(&q, body, &Submit::new().run_at(run_at))
            .await
            .expect("submit");
        assert_eq!(out, SubmitOutcome::Enqueued);
    }
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.normal, s.scheduled), (3, 0), "{s:?}");
    assert_eq!(
        b.queue_peek(&q, 10).await.expect("peek"),
        vec![b"now".to_vec(), b"zero".to_vec(), b"past".to_vec()]
    );
    for want in [&b"now"[..], b"zero", b"past"] {
        let d = reserve_now(&b, &q).await.expect("ready at once");
        assert_eq!(d.body, want);
        assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    }

    // Later: two identical bodies after a delay, one at an instant of the backend's clock.
    let now = store_now(&b, &q).await;
    let start = Instant::now();
    for _ in 0..2 {
        b.queue_submit(&q, b"same", &Submit::new().run_at(RunAt::After(DELAY)))
            .await
            .expect("submit");
    }
    b.queue_submit(
        &q,
        b"high",
        &Submit::new()
            .priority(Priority::High)
            .run_at(RunAt::At(now + DELAY.as_secs_f64())),
    )
    .await
    .expect("submit");
    let s = b.queue_stats(&q).await.expect("stats");
    let early = reserve_now(&b, &q).await;
    // Only what was read well before the delay can have passed proves "not before".
    if start.elapsed() < DELAY.mul_f64(0.75) {
        assert_eq!((s.scheduled, s.due, s.waiting()), (3, 0, 0), "{s:?}");
        assert!(early.is_none(), "reserved before its time: {early:?}");
    }
    assert_eq!(s.scheduled, 3, "{s:?}");
    assert_eq!(s.total(), 3, "{s:?}");
    sleep(DELAY + Duration::from_millis(200)).await;
    if early.is_none() {
        let s = b.queue_stats(&q).await.expect("stats");
        assert_eq!((s.scheduled, s.due, s.waiting()), (3, 3, 0), "{s:?}");
    }
    let mut got = Vec::new();
    let mut receipts = Vec::new();
    while let Some(d) = reserve_now(&b, &q).await {
        assert_eq!(d.attempt, 1);
        got.push((d.body.clone(), d.priority));
        receipts.push(d.receipt);
    }
    if let Some(d) = early {
        got.insert(0, (d.body, d.priority));
        receipts.push(d.receipt);
    }
    assert_eq!(
        got,
        vec![
            (b"high".to_vec(), Priority::High),
            (b"same".to_vec(), Priority::Normal),
            (b"same".to_vec(), Priority::Normal),
        ],
        "identical delayed bodies stay two tasks, each in its tier"
    );
    for r in &receipts {
        assert!(b.queue_ack(&q, r).await.expect("ack"));
    }

    // A reserve already waiting gets a delayed task once it is due, not sooner.
    let start = Instant::now();
    b.queue_submit(&q, b"awaited", &Submit::new().run_at(RunAt::After(DELAY)))
        .await
        .expect("submit");
    let d = b
        .queue_reserve(&q, Duration::from_secs(10), LONG)
        .await
        .expect("reserve")
        .expect("the delayed task, once due");
    assert_eq!(d.body, b"awaited");
    assert!(
        start.elapsed() >= DELAY - Duration::from_millis(50),
        "delivered {:?} after the submit, before its delay",
        start.elapsed()
    );
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));

    // Idempotent and delayed: the key is set at once; a duplicate submits nothing.
    let ns = format!("idem:{q}");
    let idem = IdempotencyKey {
        ns: &ns,
        key: "k",
        value: b"id-1",
        ttl: Some(LONG),
    };
    let first = b
        .queue_submit(
            &q,
            b"once",
            &Submit::new()
                .priority(Priority::Low)
                .run_at(RunAt::After(DELAY))
                .idem(idem.clone()),
        )
        .await
        .expect("submit");
    assert_eq!(first, SubmitOutcome::Enqueued);
    assert_eq!(
        b.kv_get(&ns, "k").await.expect("kv"),
        Some(b"id-1".to_vec()),
        "the key is set when the task is submitted, not when it falls due"
    );
    let dup = b
        .queue_submit(
            &q,
            b"twice",
            &Submit::new().idem(IdempotencyKey {
                value: b"id-2",
                ..idem.clone()
            }),
        )
        .await
        .expect("submit");
    assert_eq!(dup, SubmitOutcome::Duplicate(b"id-1".to_vec()));
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.scheduled, s.waiting()), (1, 0), "{s:?}");
    let d = b
        .queue_reserve(&q, Duration::from_secs(10), LONG)
        .await
        .expect("reserve")
        .expect("the delayed task");
    assert_eq!(
        (d.body.as_slice(), d.priority),
        (&b"once"[..], Priority::Low)
    );
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    assert_eq!(b.queue_stats(&q).await.expect("stats").total(), 0);
}
