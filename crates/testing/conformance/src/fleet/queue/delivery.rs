//! Guarantee `queue.priority_fifo` to 11: how the task queue hands out tasks and takes them back
//! (priority order, exclusive reservations, receipts, attempt counts, nack).

use std::collections::HashSet;
use std::time::Duration;

use switchyard_core::fleet::Priority;

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, LONG, SHORT, sleep};
use crate::harness::unique_id;

/// Guarantee `queue.priority_fifo`: reserve serves high, then normal, then low, FIFO within a tier;
/// `queue_size` and `queue_peek` see the waiting tiers.
pub async fn queue_priority_fifo(b: Backend) {
    let q = unique_id("q");
    for (body, p) in [
        ("n1", Priority::Normal),
        ("l1", Priority::Low),
        ("h1", Priority::High),
        ("n2", Priority::Normal),
        ("h2", Priority::High),
        ("l2", Priority::Low),
    ] {
        b.queue_push(&q, body.as_bytes(), p).await.expect("push");
    }
    let order: Vec<&[u8]> = vec![b"h1", b"h2", b"n1", b"n2", b"l1", b"l2"];
    assert_eq!(b.queue_size(&q).await.expect("size"), 6);
    assert_eq!(
        b.queue_peek(&q, 4).await.expect("peek"),
        order[..4].to_vec()
    );
    assert_eq!(
        b.queue_peek(&q, 0).await.expect("peek"),
        Vec::<Vec<u8>>::new()
    );
    for want in &order {
        let d = b
            .queue_reserve(&q, Duration::ZERO, LONG)
            .await
            .expect("reserve")
            .expect("task");
        assert_eq!(d.body, *want);
        assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    }
    assert_eq!(b.queue_size(&q).await.expect("size"), 0);
}

/// Guarantee `queue.reserve_atomic`: concurrent reservers each get a task exactly once; `timeout =
/// 0` still takes a ready task (and, as `queue_reserve` says, a waiting reserve takes a task pushed
/// meanwhile).
pub async fn queue_reserve_atomic(b: Backend) {
    let q = unique_id("q");
    assert!(
        b.queue_reserve(&q, Duration::ZERO, LONG)
            .await
            .expect("reserve")
            .is_none()
    );
    for i in 0..60 {
        b.queue_push(&q, format!("t{i}").as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (b, q) = (b.clone(), q.clone());
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(d) = b
                .queue_reserve(&q, Duration::ZERO, LONG)
                .await
                .expect("reserve")
            {
                assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
                got.push(d.body);
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("join"));
    }
    let distinct: HashSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), 60, "every task delivered once");
    assert_eq!(distinct.len(), 60, "no task delivered twice");

    let waiter = {
        let (b, q) = (b.clone(), q.clone());
        tokio::spawn(async move { b.queue_reserve(&q, Duration::from_secs(10), LONG).await })
    };
    sleep(Duration::from_millis(100)).await;
    b.queue_push(&q, b"late", Priority::Low)
        .await
        .expect("push");
    let d = waiter
        .await
        .expect("join")
        .expect("reserve")
        .expect("woken by the push");
    assert_eq!(d.body, b"late");
    assert_eq!(d.priority, Priority::Low);
    let none = b
        .queue_reserve(&q, Duration::from_millis(200), LONG)
        .await
        .expect("reserve");
    assert!(none.is_none());
}

/// Guarantee `queue.receipts`: after a timeout redelivery, the first holder's late ack, nack,
/// extend or fail returns `false` and changes nothing.
pub async fn queue_receipts(b: Backend) {
    let q = unique_id("q");
    let body = br#"{"id": "t-1", "payload": {}, "attempt": 0}"#;
    b.queue_push(&q, body, Priority::Normal)
        .await
        .expect("push");
    let d1 = b
        .queue_reserve(&q, Duration::ZERO, SHORT)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d1.task_id.as_deref(), Some("t-1"));
    sleep(LAPSE).await;
    assert_eq!(b.queue_sweep_expired(&q).await.expect("sweep"), 1);
    let d2 = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("redelivered");
    assert_ne!(d1.receipt, d2.receipt);
    assert!(!b.queue_ack(&q, &d1.receipt).await.expect("late ack"));
    assert!(
        !b.queue_nack(&q, &d1.receipt, body, Duration::ZERO)
            .await
            .expect("late nack")
    );
    assert!(
        !b.queue_extend(&q, &d1.receipt, LONG)
            .await
            .expect("late extend")
    );
    assert!(
        !b.queue_fail(&q, &d1.receipt, body)
            .await
            .expect("late fail")
    );
    assert_eq!(
        b.queue_size(&q).await.expect("size"),
        0,
        "late nack requeued nothing"
    );
    assert_eq!(
        b.dlq_length(&q).await.expect("dlq"),
        0,
        "late fail dead-lettered nothing"
    );
    assert_eq!(
        b.queue_sweep_expired(&q).await.expect("sweep"),
        0,
        "d2 untouched"
    );
    assert!(b.queue_ack(&q, &d2.receipt).await.expect("ack"));
    assert!(!b.queue_ack(&q, &d2.receipt).await.expect("ack twice"));
}

/// Guarantee `queue.attempts`: `Delivery::attempt` counts deliveries; nack and a lapsed, swept
/// reservation keep the count; ack and fail forget it. Played with a task that has an id and one
/// that has none; only the latter is pushed again after its ack and its fail, since a dead
/// letter keeps its task's id (guarantee `task.unique_id`).
pub async fn queue_attempts(b: Backend) {
    attempts_of(&b, br#"{"id": "t-2"}"#, false).await;
    attempts_of(&b, br#"{"task": "t-2"}"#, true).await;
}

async fn attempts_of(b: &Backend, body: &[u8], again: bool) {
    let q = unique_id("q");
    b.queue_push(&q, body, Priority::Normal)
        .await
        .expect("push");
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 1);
    assert!(
        b.queue_nack(&q, &d.receipt, body, Duration::ZERO)
            .await
            .expect("nack")
    );
    let d = b
        .queue_reserve(&q, Duration::ZERO, SHORT)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 2, "nack keeps the count");
    // The worker "dies": the reservation lapses and is swept.
    sleep(LAPSE).await;
    assert_eq!(b.queue_sweep_expired(&q).await.expect("sweep"), 1);
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 3, "a lapsed delivery counts");
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    if !again {
        return;
    }
    b.queue_push(&q, body, Priority::Normal)
        .await
        .expect("push again");
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 1, "ack forgets the count");
    assert!(
        b.queue_nack(&q, &d.receipt, body, Duration::ZERO)
            .await
            .expect("nack")
    );
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 2);
    assert!(b.queue_fail(&q, &d.receipt, body).await.expect("fail"));
    b.queue_push(&q, body, Priority::Normal)
        .await
        .expect("push after fail");
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 1, "fail forgets the count");
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
}

/// Guarantee `queue.nack`: nack requeues the caller's body into the delivery's original tier, at
/// its end or after `delay`, only while the reservation exists, and says so; delayed identical
/// bodies stay distinct tasks.
pub async fn queue_nack(b: Backend) {
    let q = unique_id("q");
    b.queue_push(&q, b"high-v1", Priority::High)
        .await
        .expect("push");
    b.queue_push(&q, b"normal", Priority::Normal)
        .await
        .expect("push");
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.body, b"high-v1");
    assert!(
        b.queue_nack(&q, &d.receipt, b"high-v2", Duration::ZERO)
            .await
            .expect("nack")
    );
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(
        d.body, b"high-v2",
        "retry keeps its priority and the caller's body"
    );
    assert_eq!(d.priority, Priority::High);
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    assert!(
        !b.queue_nack(&q, &d.receipt, b"dup", Duration::ZERO)
            .await
            .expect("nack after ack")
    );
    assert_eq!(
        b.queue_size(&q).await.expect("size"),
        1,
        "nothing requeued after ack"
    );

    // Two identical bodies nacked with a delay must come back as two tasks.
    let q2 = unique_id("q");
    let same = br#"{"same": "no id"}"#;
    b.queue_push(&q2, same, Priority::Low).await.expect("push");
    b.queue_push(&q2, same, Priority::Low).await.expect("push");
    let a = b
        .queue_reserve(&q2, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("a");
    let c = b
        .queue_reserve(&q2, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("c");
    assert!(
        b.queue_nack(&q2, &a.receipt, same, SHORT)
            .await
            .expect("nack")
    );
    assert!(
        b.queue_nack(&q2, &c.receipt, same, SHORT)
            .await
            .expect("nack")
    );
    assert_eq!(
        b.queue_size(&q2).await.expect("size"),
        0,
        "scheduled tasks are not waiting"
    );
    assert!(
        b.queue_reserve(&q2, Duration::ZERO, LONG)
            .await
            .expect("reserve")
            .is_none()
    );
    sleep(LAPSE).await;
    let mut back = Vec::new();
    while let Some(d) = b
        .queue_reserve(&q2, Duration::ZERO, LONG)
        .await
        .expect("reserve")
    {
        assert_eq!(
            d.priority,
            Priority::Low,
            "scheduled retry keeps its priority"
        );
        back.push(d);
    }
    assert_eq!(back.len(), 2, "identical delayed bodies did not collapse");
}
