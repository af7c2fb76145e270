//! Guarantees `queue.pause` and `queue.rate_limit`: pausing a queue, and its rate limit.

use std::time::{Duration, Instant};

use switchyard_core::Error;
use switchyard_core::fleet::{Priority, RateLimit, RunAt, Submit};

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, LONG, SHORT, sleep};
use crate::harness::unique_id;

async fn reserve_now(b: &Backend, q: &str) -> Option<switchyard_core::fleet::Delivery> {
    b.queue_reserve(q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
}

/// Guarantee `queue.pause`: a paused queue hands out nothing (a waiting reserve keeps waiting until
/// a resume wakes it) and moves no due delayed task to its tier, still takes pushes and submits,
/// and still acks, nacks, extends, fails and sweeps deliveries made before; pause and resume say
/// whether they changed the state, which outlives the queue's tasks and shows in
/// `QueueStats::paused`.
pub async fn queue_pause(b: Backend) {
    let q = unique_id("q:{pause}");
    let s = b.queue_stats(&q).await.expect("stats");
    assert!(!s.paused, "an unknown queue is not paused");
    assert!(
        !b.queue_resume(&q).await.expect("resume"),
        "a running queue does not resume"
    );
    assert!(matches!(
        b.queue_pause("").await,
        Err(Error::InvalidInput { .. })
    ));

    for body in ["a", "b", "c", "d"] {
        b.queue_push(&q, body.as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    let a = reserve_now(&b, &q).await.expect("a");
    let bb = reserve_now(&b, &q).await.expect("b");
    let c = reserve_now(&b, &q).await.expect("c");
    let _lapsing = b
        .queue_reserve(&q, Duration::ZERO, SHORT)
        .await
        .expect("reserve")
        .expect("d");

    assert!(b.queue_pause(&q).await.expect("pause"), "it was running");
    assert!(
        !b.queue_pause(&q).await.expect("pause"),
        "already paused: no change"
    );
    assert!(b.queue_stats(&q).await.expect("stats").paused);

    // Taken while paused.
    b.queue_push(&q, b"e", Priority::High).await.expect("push");
    b.queue_submit(&q, b"f", &Submit::new().priority(Priority::Low))
        .await
        .expect("submit");
    b.queue_submit(&q, b"g", &Submit::new().run_at(RunAt::After(LONG)))
        .await
        .expect("delayed submit");
    b.queue_submit(&q, b"h", &Submit::new().run_at(RunAt::After(SHORT)))
        .await
        .expect("delayed submit");
    // Handed out: nothing, by either reserve.
    assert!(reserve_now(&b, &q).await.is_none(), "paused");
    assert!(
        b.queue_reserve_many(&q, 10, Duration::ZERO, LONG)
            .await
            .expect("reserve many")
            .is_empty(),
        "paused"
    );
    // Deliveries made before the pause still end every way.
    assert!(b.queue_extend(&q, &a.receipt, LONG).await.expect("extend"));
    assert!(b.queue_ack(&q, &a.receipt).await.expect("ack"));
    assert!(
        b.queue_nack(&q, &bb.receipt, &bb.body, Duration::ZERO)
            .await
            .expect("nack")
    );
    assert!(b.queue_fail(&q, &c.receipt, &c.body).await.expect("fail"));
    sleep(LAPSE).await;
    assert_eq!(
        b.queue_sweep_expired(&q).await.expect("sweep"),
        1,
        "d lapsed"
    );
    // A reserve of a paused queue moves nothing either: h fell due and stays scheduled.
    assert!(reserve_now(&b, &q).await.is_none(), "still paused");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(
        (s.high, s.normal, s.low, s.in_flight),
        (1, 2, 1, 0),
        "{s:?}"
    );
    assert_eq!((s.scheduled, s.due, s.dead), (2, 1, 1), "{s:?}");

    // A reserve waiting while paused keeps waiting; the resume wakes it.
    let waiter = {
        let (b, q) = (b.clone(), q.clone());
        tokio::spawn(async move {
            b.queue_reserve(&q, Duration::from_secs(20), LONG)
                .await
                .expect("reserve")
        })
    };
    sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "a reserve returned while the queue was paused"
    );
    assert!(b.queue_resume(&q).await.expect("resume"), "it was paused");
    assert!(!b.queue_resume(&q).await.expect("resume"), "no change");
    let got = waiter
        .await
        .expect("waiter")
        .expect("a task after the resume");
    assert_eq!(got.body, b"e", "serve order holds after a resume");
    assert!(!b.queue_stats(&q).await.expect("stats").paused);

    // The state is the queue's, not its tasks': it holds on a queue with none.
    let empty = unique_id("q:{pause}");
    assert!(b.queue_pause(&empty).await.expect("pause"));
    let s = b.queue_stats(&empty).await.expect("stats");
    assert!(s.paused && s.total() == 0, "{s:?}");
    b.queue_push(&empty, b"x", Priority::Normal)
        .await
        .expect("push");
    assert!(
        reserve_now(&b, &empty).await.is_none(),
        "paused before its first task"
    );
    assert!(b.queue_resume(&empty).await.expect("resume"));
    let x = reserve_now(&b, &empty).await.expect("x");
    assert!(b.queue_ack(&empty, &x.receipt).await.expect("ack"));
    assert!(b.queue_pause(&empty).await.expect("pause"));
    assert!(
        b.queue_stats(&empty).await.expect("stats").paused,
        "still paused once its last task is gone"
    );
    assert!(b.queue_resume(&empty).await.expect("resume"));
}

/// Guarantee `queue.rate_limit`: a rate limit lets at most `max` reservations through in a burst,
/// then `max` per `per`, across every consumer; a reserve that finds no token waits for the next
/// within its timeout; `reserve_many` takes as many tasks as whole tokens; setting a limit starts a
/// full bucket, `None` removes it, a limit `RateLimit::new` would refuse is `InvalidInput`;
/// `QueueStats` shows the limit and `throttled_ms`.
pub async fn queue_rate_limit(b: Backend) {
    assert!(RateLimit::new(0, Duration::from_secs(1)).is_err());
    assert!(RateLimit::new(1, Duration::ZERO).is_err());
    assert!(RateLimit::new(1, Duration::from_secs(86_401)).is_err());
    let q = unique_id("q:{rate}");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.rate_limit, s.throttled_ms), (None, 0), "{s:?}");
    assert!(matches!(
        b.queue_set_rate_limit("", None).await,
        Err(Error::InvalidInput { .. })
    ));
    // The fields are public, so a backend checks a limit that skipped `RateLimit::new`.
    for bad in [
        RateLimit {
            max: 0,
            per: Duration::from_secs(1),
        },
        RateLimit {
            max: 1,
            per: Duration::ZERO,
        },
    ] {
        assert!(
            matches!(
                b.queue_set_rate_limit(&q, Some(bad)).await,
                Err(Error::InvalidInput { .. })
            ),
            "{bad:?}"
        );
    }
    assert_eq!(b.queue_stats(&q).await.expect("stats").rate_limit, None);
    let bodies: Vec<Vec<u8>> = (0..20).map(|i| format!("t{i}").into_bytes()).collect();
    b.queue_push_many(&q, &bodies, Priority::Normal)
        .await
        .expect("push");

    // Two per second: a burst of two, then one token each 500 ms.
    let limit = RateLimit::new(2, Duration::from_secs(1)).expect("limit");
    b.queue_set_rate_limit(&q, Some(limit))
        .await
        .expect("set limit");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(
        (s.rate_limit, s.throttled_ms),
        (Some(limit), 0),
        "a full bucket: {s:?}"
    );
    let start = Instant::now();
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(reserve_now(&b, &q).await.expect("within the burst"));
    }
    let third = reserve_now(&b, &q).await;
    let s = b.queue_stats(&q).await.expect("stats");
    // The first token comes back 500 ms after the first reserve at the soonest.
    if start.elapsed() < Duration::from_millis(450) {
        assert!(third.is_none(), "a third reservation within the burst");
        assert!(s.throttled_ms > 0, "{s:?}");
    }
    assert!(s.throttled_ms <= 1000, "never longer than `per`: {s:?}");
    if let Some(d) = third {
        held.push(d);
    } else {
        let d = b
            .queue_reserve(&q, Duration::from_secs(10), LONG)
            .await
            .expect("reserve")
            .expect("a reserve waits for the next token");
        assert!(
            start.elapsed() >= Duration::from_millis(400),
            "a token came back {:?} after the burst began",
            start.elapsed()
        );
        held.push(d);
    }

    // A fresh bucket of three, refilled far too slowly to matter here: reserve_many takes three.
    let slow = RateLimit::new(3, Duration::from_secs(600)).expect("limit");
    b.queue_set_rate_limit(&q, Some(slow))
        .await
        .expect("set limit");
    let got = b
        .queue_reserve_many(&q, 10, Duration::ZERO, LONG)
        .await
        .expect("reserve many");
    assert_eq!(got.len(), 3, "as many as whole tokens");
    held.extend(got);
    assert!(reserve_now(&b, &q).await.is_none(), "the bucket is empty");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(s.rate_limit, Some(slow));
    assert!(
        s.throttled_ms > 0 && s.throttled_ms <= 600_000,
        "never longer than `per`: {s:?}"
    );

    // Every consumer draws on the one bucket.
    b.queue_set_rate_limit(&q, Some(slow))
        .await
        .expect("set limit");
    let mut racers = Vec::new();
    for _ in 0..8 {
        let (b, q) = (b.clone(), q.clone());
        racers.push(tokio::spawn(async move { reserve_now(&b, &q).await }));
    }
    let mut won = 0;
    for r in racers {
        if let Some(d) = r.await.expect("racer") {
            won += 1;
            held.push(d);
        }
    }
    assert_eq!(won, 3, "eight consumers share three tokens");

    // No limit: no throttle.
    b.queue_set_rate_limit(&q, None)
        .await
        .expect("remove limit");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.rate_limit, s.throttled_ms), (None, 0), "{s:?}");
    let rest = b
        .queue_reserve_many(&q, 100, Duration::ZERO, LONG)
        .await
        .expect("reserve many");
    assert_eq!(
        held.len() + rest.len(),
        bodies.len(),
        "every task handed out once"
    );
    for d in held.iter().chain(&rest) {
        assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    }
}
