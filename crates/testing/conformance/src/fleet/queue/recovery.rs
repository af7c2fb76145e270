//! Guarantee `queue.fail_atomic` to 14: what happens to a task that fails, lapses or is not a task
//! at all (fail to the dead letters, sweep of lapsed reservations, arbitrary bodies).

use std::collections::HashSet;
use std::time::Duration;

use switchyard_core::fleet::Priority;

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, LONG, SHORT, sleep};
use crate::harness::unique_id;

/// Guarantee `queue.fail_atomic`: `queue_fail` removes the reservation and dead-letters the body in
/// one step; the sweeper cannot resurrect it.
pub async fn queue_fail_atomic(b: Backend) {
    let q = unique_id("q");
    b.queue_push(&q, br#"{"id": "bad"}"#, Priority::High)
        .await
        .expect("push");
    let d = b
        .queue_reserve(&q, Duration::ZERO, SHORT)
        .await
        .expect("reserve")
        .expect("task");
    assert!(
        b.queue_fail(&q, &d.receipt, br#"{"id": "bad", "attempt": 3}"#)
            .await
            .expect("fail")
    );
    assert!(
        !b.queue_fail(&q, &d.receipt, b"again")
            .await
            .expect("fail twice")
    );
    sleep(LAPSE).await;
    assert_eq!(
        b.queue_sweep_expired(&q).await.expect("sweep"),
        0,
        "no reservation left"
    );
    assert!(
        b.queue_reserve(&q, Duration::ZERO, LONG)
            .await
            .expect("reserve")
            .is_none()
    );
    assert_eq!(
        b.dlq_peek(&q, 10).await.expect("peek"),
        vec![br#"{"id": "bad", "attempt": 3}"#.to_vec()]
    );
}

/// Guarantee `queue.sweep`: concurrent sweepers return each lapsed reservation to its tier once,
/// and the lapsed holder's ack then changes nothing; `queue_extend` pushes the deadline out.
pub async fn queue_sweep(b: Backend) {
    let q = unique_id("q");
    b.queue_push(&q, b"kept", Priority::Normal)
        .await
        .expect("push");
    let kept = b
        .queue_reserve(&q, Duration::ZERO, SHORT)
        .await
        .expect("reserve")
        .expect("task");
    assert!(
        b.queue_extend(&q, &kept.receipt, LONG)
            .await
            .expect("extend")
    );
    b.queue_push(&q, b"lost", Priority::Low)
        .await
        .expect("push");
    let lost = b
        .queue_reserve(&q, Duration::ZERO, SHORT)
        .await
        .expect("reserve")
        .expect("task");
    sleep(LAPSE).await;
    let mut sweeps = Vec::new();
    for _ in 0..4 {
        let (b, q) = (b.clone(), q.clone());
        sweeps.push(tokio::spawn(async move {
            b.queue_sweep_expired(&q).await.expect("sweep")
        }));
    }
    let mut total = 0;
    for s in sweeps {
        total += s.await.expect("join");
    }
    assert_eq!(total, 1, "one lapsed reservation, requeued once");
    assert_eq!(b.queue_size(&q).await.expect("size"), 1);
    assert!(!b.queue_ack(&q, &lost.receipt).await.expect("ack of swept"));
    let again = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(again.body, b"lost");
    assert_eq!(again.priority, Priority::Low, "sweep keeps the tier");
    assert!(
        b.queue_ack(&q, &kept.receipt)
            .await
            .expect("extended delivery still current")
    );
    assert!(b.queue_ack(&q, &again.receipt).await.expect("ack"));
}

/// Guarantee `queue.bad_bodies`: any bytes (not JSON, no id, identical copies) are delivered with a
/// receipt and acked or dead-lettered once; identical bodies never collapse. (Identical copies
/// have no id: an id is unique while its task is live or dead, guarantee `task.unique_id`.)
pub async fn queue_bad_bodies(b: Backend) {
    let q = unique_id("q");
    let bodies: Vec<&[u8]> = vec![
        b"not json",
        br#"{"no": "id"}"#,
        b"[1, 2]",
        br#"{"id": ""}"#,
        br#"{"same": "no id"}"#,
        br#"{"same": "no id"}"#,
        b"",
    ];
    for body in &bodies {
        b.queue_push(&q, body, Priority::Normal)
            .await
            .expect("push");
    }
    let mut got = Vec::new();
    while let Some(d) = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
    {
        got.push(d);
    }
    assert_eq!(got.len(), bodies.len());
    let receipts: HashSet<_> = got.iter().map(|d| d.receipt.clone()).collect();
    assert_eq!(receipts.len(), bodies.len(), "distinct receipts");
    for (d, want) in got.iter().zip(&bodies) {
        assert_eq!(d.body, *want);
        assert_eq!(d.attempt, 1);
    }
    assert_eq!(got[0].task_id, None);
    assert_eq!(got[1].task_id, None);
    assert_eq!(got[3].task_id, None);
    assert_eq!(got[4].task_id, None);
    assert!(
        b.queue_fail(&q, &got[0].receipt, &got[0].body)
            .await
            .expect("fail")
    );
    for d in &got[1..] {
        assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    }
    assert_eq!(b.dlq_length(&q).await.expect("dlq"), 1);
    assert_eq!(b.queue_sweep_expired(&q).await.expect("sweep"), 0);
    assert!(
        b.queue_reserve(&q, Duration::ZERO, LONG)
            .await
            .expect("reserve")
            .is_none()
    );
}
