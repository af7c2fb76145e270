//! Guarantees `dlq.fifo_atomic` and `dlq.requeue_chosen`: the dead-letter queue, and replaying the
//! letters an operator chose.

use std::time::Duration;

use switchyard_core::Error;
use switchyard_core::fleet::{MAX_BATCH, Priority};

use crate::fleet::Backend;
use crate::fleet::common::LONG;
use crate::harness::unique_id;

/// Guarantee `dlq.fifo_atomic`: the dead-letter queue is FIFO; `n = 0` reads nothing; pop and clear
/// are atomic; `dlq_requeue` moves bodies back to a tier with a fresh attempt count.
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

/// Guarantee `dlq.requeue_chosen`: `dlq_requeue_chosen` moves, per body given, the oldest dead
/// letter with exactly those bytes (a body given twice moves two) to the end of the tier with a
/// fresh attempt count, in one step, answering `false` for a body no letter was left for; the
/// others keep their order.
pub async fn dlq_requeue_chosen(b: Backend) {
    let q = unique_id("q:{chosen}");
    assert_eq!(
        b.dlq_requeue_chosen(&q, &[b"a".to_vec()], Priority::Normal)
            .await
            .expect("requeue"),
        vec![false],
        "an unknown queue has no letters"
    );
    assert!(matches!(
        b.dlq_requeue_chosen(&q, &vec![b"a".to_vec(); MAX_BATCH + 1], Priority::Normal)
            .await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.dlq_requeue_chosen("", &[], Priority::Normal).await,
        Err(Error::InvalidInput { .. })
    ));

    // A task that failed on its second delivery, then letters put there directly.
    let failed = br#"{"id": "a"}"#.to_vec();
    b.queue_push(&q, &failed, Priority::Low)
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
    for body in [&b"b"[..], &failed, b"c", b"d", b"\x00\xff"] {
        b.queue_dead(&q, body).await.expect("dead");
    }
    b.queue_push(&q, b"waiting", Priority::High)
        .await
        .expect("push");

    assert_eq!(
        b.dlq_requeue_chosen(&q, &[], Priority::High)
            .await
            .expect("requeue"),
        Vec::<bool>::new(),
        "an empty choice moves nothing"
    );
    let chosen = vec![
        failed.clone(),
        b"c".to_vec(),
        failed.clone(),
        failed.clone(),
        b"\x00\xff".to_vec(),
        b"absent".to_vec(),
    ];
    assert_eq!(
        b.dlq_requeue_chosen(&q, &chosen, Priority::High)
            .await
            .expect("requeue"),
        vec![true, true, true, false, true, false],
        "one letter per entry; a body given a third time finds none left"
    );
    assert_eq!(
        b.dlq_peek(&q, 10).await.expect("peek"),
        vec![b"b".to_vec(), b"d".to_vec()],
        "the letters not chosen keep their order"
    );
    let mut got = Vec::new();
    while let Some(d) = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
    {
        assert_eq!((d.priority, d.attempt), (Priority::High, 1), "{d:?}");
        got.push(d.body);
    }
    assert_eq!(
        got,
        vec![
            b"waiting".to_vec(),
            failed.clone(),
            b"c".to_vec(),
            failed,
            b"\x00\xff".to_vec()
        ],
        "at the tier's end, in the order chosen"
    );
}
