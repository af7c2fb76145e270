//! Guarantee 16: the dead-letter queue.

use std::time::Duration;

use switchyard_core::fleet::Priority;

use crate::fleet::Backend;
use crate::fleet::common::LONG;
use crate::harness::unique_id;

/// Guarantee 16: the dead-letter queue is FIFO; `n = 0` reads nothing; pop and clear are atomic;
/// `dlq_requeue` moves bodies back to a tier with a fresh attempt count.
pub async fn dlq(b: Backend) {
    let q = unique_id("q");
    for body in [&b"a"[..], b"b", b"c", b"d"] {
        b.queue_dead(&q, body).await.expect("dead");
    }
    assert_eq!(b.dlq_length(&q).await.expect("len"), 4);
    assert_eq!(
        b.dlq_peek(&q, 0).await.expect("peek"),
        Vec::<Vec<u8>>::new()
    );
    assert_eq!(
        b.dlq_peek(&q, 2).await.expect("peek"),
        vec![b"a".to_vec(), b"b".to_vec()]
    );
    assert_eq!(b.dlq_pop(&q, 0).await.expect("pop"), Vec::<Vec<u8>>::new());
    assert_eq!(b.dlq_pop(&q, 1).await.expect("pop"), vec![b"a".to_vec()]);
    assert_eq!(
        b.dlq_requeue(&q, 1, Priority::High).await.expect("requeue"),
        1
    );
    assert_eq!(b.dlq_length(&q).await.expect("len"), 2);
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("requeued");
    assert_eq!(d.body, b"b");
    assert_eq!(d.priority, Priority::High);
    assert_eq!(d.attempt, 1);
    assert_eq!(b.dlq_clear(&q).await.expect("clear"), 2);
    assert_eq!(b.dlq_length(&q).await.expect("len"), 0);
    assert_eq!(b.dlq_clear(&q).await.expect("clear"), 0);
    assert_eq!(b.dlq_pop(&q, 5).await.expect("pop"), Vec::<Vec<u8>>::new());

    // A task failed after several deliveries and replayed starts counting again.
    b.queue_push(&q, br#"{"id": "r"}"#, Priority::Normal)
        .await
        .expect("push");
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert!(
        b.queue_nack(&q, &d.receipt, &d.body, Duration::ZERO)
            .await
            .expect("nack")
    );
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 2);
    assert!(b.queue_fail(&q, &d.receipt, &d.body).await.expect("fail"));
    assert_eq!(
        b.dlq_requeue(&q, 10, Priority::Normal)
            .await
            .expect("requeue"),
        1
    );
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 1, "replay starts a fresh count");
}
