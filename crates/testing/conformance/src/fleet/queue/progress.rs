//! Guarantees `queue.progress` and `queue.release`: what a worker reports on its delivery, and
//! ending a delivery without holding its body.

use std::time::{Duration, Instant};

use switchyard_core::Error;
use switchyard_core::fleet::{Delivery, InFlight, MAX_PROGRESS_BYTES, Priority, Receipt};

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, LONG, SHORT, sleep};
use crate::harness::unique_id;

async fn reserve(b: &Backend, q: &str, visibility: Duration) -> Delivery {
    b.queue_reserve(q, Duration::ZERO, visibility)
        .await
        .expect("reserve")
        .expect("a task")
}

/// Bodies and progress of `queue_in_flight`, in the order listed.
async fn listed(b: &Backend, q: &str) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    b.queue_in_flight(q, 100)
        .await
        .expect("in flight")
        .into_iter()
        .map(|f| (f.body, f.progress))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.01
}

/// Guarantee `queue.progress`: progress is stored on the current delivery only, replacing the last;
/// it goes when the delivery ends (ack, nack, release, fail, sweep); `queue_in_flight` lists every
/// reservation soonest deadline first, lapsed but unswept ones included, each with its last
/// progress; a document over 64 KiB is `InvalidInput`.
pub async fn queue_progress(b: Backend) {
    let q = unique_id("q:{progress}");
    assert!(
        b.queue_in_flight(&q, 10)
            .await
            .expect("in flight")
            .is_empty()
    );
    b.queue_push(&q, br#"{"id": "a"}"#, Priority::Low)
        .await
        .expect("push");
    b.queue_push(&q, br#"{"id": "b"}"#, Priority::Low)
        .await
        .expect("push");
    let a = reserve(&b, &q, LONG).await;
    let lapsing = reserve(&b, &q, SHORT).await;

    let all = b.queue_in_flight(&q, 10).await.expect("in flight");
    assert_eq!(all.len(), 2);
    let first: &InFlight = &all[0];
    assert_eq!(
        (first.task_id.as_deref(), first.attempt, first.priority),
        (Some("b"), 1, Priority::Low),
        "soonest deadline first: {all:?}"
    );
    assert!(close(first.visible_until, lapsing.visible_until), "{all:?}");
    assert_eq!(
        (all[1].body.as_slice(), &all[1].progress),
        (&a.body[..], &None)
    );
    assert!(close(all[1].visible_until, a.visible_until), "{all:?}");
    assert_eq!(b.queue_in_flight(&q, 1).await.expect("in flight").len(), 1);
    assert!(
        b.queue_in_flight(&q, 0)
            .await
            .expect("in flight")
            .is_empty()
    );

    // Stored on the current delivery, replacing the last; bounded.
    assert!(
        b.queue_progress(&q, &a.receipt, b"10%")
            .await
            .expect("progress")
    );
    assert!(
        b.queue_progress(&q, &a.receipt, b"20%")
            .await
            .expect("progress")
    );
    assert!(
        b.queue_progress(&q, &lapsing.receipt, b"\x00\xffraw")
            .await
            .expect("progress")
    );
    assert!(
        !b.queue_progress(&q, &Receipt::new("not-a-receipt"), b"x")
            .await
            .expect("progress")
    );
    assert!(matches!(
        b.queue_progress(&q, &a.receipt, &vec![b'x'; MAX_PROGRESS_BYTES + 1])
            .await,
        Err(Error::InvalidInput { .. })
    ));
    let largest = vec![b'y'; MAX_PROGRESS_BYTES];
    assert!(
        b.queue_progress(&q, &a.receipt, &largest)
            .await
            .expect("progress")
    );
    assert_eq!(
        listed(&b, &q).await,
        vec![
            (lapsing.body.clone(), Some(b"\x00\xffraw".to_vec())),
            (a.body.clone(), Some(largest)),
        ]
    );
    assert!(
        b.queue_progress(&q, &a.receipt, b"30%")
            .await
            .expect("progress")
    );

    // Lapsed but unswept: still listed; swept: gone, progress and all.
    sleep(LAPSE).await;
    assert_eq!(
        listed(&b, &q).await,
        vec![
            (lapsing.body.clone(), Some(b"\x00\xffraw".to_vec())),
            (a.body.clone(), Some(b"30%".to_vec())),
        ]
    );
    assert_eq!(b.queue_sweep_expired(&q).await.expect("sweep"), 1);
    assert_eq!(
        listed(&b, &q).await,
        vec![(a.body.clone(), Some(b"30%".to_vec()))]
    );
    assert!(
        !b.queue_progress(&q, &lapsing.receipt, b"late")
            .await
            .expect("progress"),
        "a swept delivery's receipt is not current"
    );
    let again = reserve(&b, &q, LONG).await;
    assert_eq!(
        (again.body.as_slice(), again.attempt),
        (&lapsing.body[..], 2)
    );
    let entry = b.queue_in_flight(&q, 10).await.expect("in flight");
    assert!(
        entry
            .iter()
            .any(|f| f.body == again.body && f.progress.is_none()),
        "a new delivery starts without progress: {entry:?}"
    );

    // Ack, nack, release and fail each end the progress with the delivery.
    assert!(b.queue_ack(&q, &a.receipt).await.expect("ack"));
    assert!(
        !b.queue_progress(&q, &a.receipt, b"x")
            .await
            .expect("progress")
    );
    assert!(
        b.queue_progress(&q, &again.receipt, b"n")
            .await
            .expect("progress")
    );
    assert!(
        b.queue_nack(&q, &again.receipt, &again.body, Duration::ZERO)
            .await
            .expect("nack")
    );
    assert!(listed(&b, &q).await.is_empty());
    let third = reserve(&b, &q, LONG).await;
    assert_eq!(
        listed(&b, &q).await,
        vec![(third.body.clone(), None)],
        "after a nack"
    );
    assert!(
        b.queue_progress(&q, &third.receipt, b"r")
            .await
            .expect("progress")
    );
    assert!(
        b.queue_release(&q, &third.receipt, Duration::ZERO)
            .await
            .expect("release")
    );
    let fourth = reserve(&b, &q, LONG).await;
    assert_eq!(
        listed(&b, &q).await,
        vec![(fourth.body.clone(), None)],
        "after a release"
    );
    assert!(
        b.queue_progress(&q, &fourth.receipt, b"f")
            .await
            .expect("progress")
    );
    assert!(
        b.queue_fail(&q, &fourth.receipt, &fourth.body)
            .await
            .expect("fail")
    );
    assert!(listed(&b, &q).await.is_empty());
    assert_eq!(
        b.queue_stats(&q).await.expect("stats").total(),
        1,
        "the dead letter"
    );
}

/// Guarantee `queue.release`: `queue_delivered` reads the current delivery of a receipt and changes
/// nothing; `queue_release` requeues the body as delivered into its tier, now or after a delay,
/// keeping the attempt count; neither acts on a receipt that is not current. With them a worker
/// that does not hold the body can fail with a reason.
pub async fn queue_release(b: Backend) {
    let q = unique_id("q:{release}");
    let body = br#"{"id": "r1", "n": 1}"#;
    b.queue_push(&q, body, Priority::High).await.expect("push");
    b.queue_push(&q, b"other", Priority::Normal)
        .await
        .expect("push");
    let d = reserve(&b, &q, LONG).await;
    let seen = b
        .queue_delivered(&q, &d.receipt)
        .await
        .expect("delivered")
        .expect("current");
    assert_eq!(
        (
            &seen.receipt,
            &seen.body,
            &seen.task_id,
            seen.attempt,
            seen.priority
        ),
        (&d.receipt, &d.body, &d.task_id, 1, Priority::High)
    );
    assert!(close(seen.visible_until, d.visible_until), "{seen:?} {d:?}");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(
        (s.high, s.normal, s.in_flight),
        (0, 1, 1),
        "reading changed nothing: {s:?}"
    );
    let bogus = Receipt::new("not-a-receipt");
    assert_eq!(
        b.queue_delivered(&q, &bogus).await.expect("delivered"),
        None
    );
    assert!(
        !b.queue_release(&q, &bogus, Duration::ZERO)
            .await
            .expect("release")
    );

    // Released now: back into its tier, ahead of the lower one, attempt kept.
    assert!(
        b.queue_release(&q, &d.receipt, Duration::ZERO)
            .await
            .expect("release")
    );
    assert_eq!(
        b.queue_delivered(&q, &d.receipt).await.expect("delivered"),
        None
    );
    assert!(
        !b.queue_release(&q, &d.receipt, Duration::ZERO)
            .await
            .expect("release"),
        "released once"
    );
    assert!(
        !b.queue_ack(&q, &d.receipt).await.expect("ack"),
        "the receipt is spent"
    );
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.high, s.normal, s.in_flight), (1, 1, 0), "{s:?}");
    let d2 = reserve(&b, &q, LONG).await;
    assert_eq!(
        (d2.body.as_slice(), d2.attempt, d2.priority),
        (&body[..], 2, Priority::High)
    );

    // Released after a delay: scheduled, not before its time.
    let delay = Duration::from_millis(400);
    let start = Instant::now();
    assert!(
        b.queue_release(&q, &d2.receipt, delay)
            .await
            .expect("release")
    );
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.scheduled, s.in_flight, s.high), (1, 0, 0), "{s:?}");
    let other = reserve(&b, &q, LONG).await;
    assert_eq!(other.body, b"other", "the released task is not ready yet");
    let early = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve");
    if start.elapsed() < delay.mul_f64(0.75) {
        assert!(early.is_none(), "reserved before its delay: {early:?}");
    }
    let d3 = match early {
        Some(d) => d,
        None => b
            .queue_reserve(&q, Duration::from_secs(10), LONG)
            .await
            .expect("reserve")
            .expect("the released task, once due"),
    };
    assert_eq!(
        (d3.body.as_slice(), d3.attempt, d3.priority),
        (&body[..], 3, Priority::High)
    );
    assert!(b.queue_ack(&q, &other.receipt).await.expect("ack"));

    // A worker without the body fails it with a reason: read, amend its copy, fail.
    let current = b
        .queue_delivered(&q, &d3.receipt)
        .await
        .expect("delivered")
        .expect("current");
    let mut reasoned = current.body.clone();
    reasoned.truncate(reasoned.len() - 1);
    reasoned.extend_from_slice(br#", "error": "boom"}"#);
    assert!(
        b.queue_fail(&q, &current.receipt, &reasoned)
            .await
            .expect("fail")
    );
    assert_eq!(
        b.dlq_peek(&q, 10).await.expect("peek"),
        vec![reasoned.clone()]
    );
    assert!(
        !b.queue_fail(&q, &current.receipt, &reasoned)
            .await
            .expect("fail"),
        "a spent receipt fails nothing"
    );
    assert_eq!(
        b.queue_delivered(&q, &d3.receipt).await.expect("delivered"),
        None
    );
    assert_eq!(b.queue_stats(&q).await.expect("stats").total(), 1);
}
