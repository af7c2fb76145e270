//! Guarantee `queue.submit_once`: idempotent submission.

use switchyard_core::fleet::{IdempotencyKey, Priority, SubmitOutcome};

use crate::fleet::Backend;
use crate::fleet::common::LONG;
use crate::harness::unique_id;

/// Guarantee `queue.submit_once`: `queue_submit_once` sets the idempotency key and pushes in one
/// step; a duplicate pushes nothing and returns the stored value.
pub async fn queue_submit_once(b: Backend) {
    let q = unique_id("q");
    let ns = format!("idem:{q}");
    let idem = |key: &'static str, value: &'static [u8]| IdempotencyKey {
        ns: "",
        key,
        value,
        ttl: Some(LONG),
    };
    let first = b
        .queue_submit_once(
            &q,
            b"task-a",
            Priority::Normal,
            IdempotencyKey {
                ns: &ns,
                ..idem("k1", b"id-a")
            },
        )
        .await
        .expect("submit");
    assert_eq!(first, SubmitOutcome::Enqueued);
    let dup = b
        .queue_submit_once(
            &q,
            b"task-b",
            Priority::Normal,
            IdempotencyKey {
                ns: &ns,
                ..idem("k1", b"id-b")
            },
        )
        .await
        .expect("submit");
    assert_eq!(dup, SubmitOutcome::Duplicate(b"id-a".to_vec()));
    assert_eq!(
        b.queue_peek(&q, 10).await.expect("peek"),
        vec![b"task-a".to_vec()]
    );
    assert_eq!(
        b.kv_get(&ns, "k1").await.expect("kv"),
        Some(b"id-a".to_vec())
    );

    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (b, q, ns) = (b.clone(), q.clone(), ns.clone());
        tasks.push(tokio::spawn(async move {
            b.queue_submit_once(
                &q,
                b"task-c",
                Priority::High,
                IdempotencyKey {
                    ns: &ns,
                    key: "k2",
                    value: b"id-c",
                    ttl: None,
                },
            )
            .await
            .expect("submit")
        }));
    }
    let mut enqueued = 0;
    for t in tasks {
        if t.await.expect("join") == SubmitOutcome::Enqueued {
            enqueued += 1;
        }
    }
    assert_eq!(enqueued, 1);
    assert_eq!(b.queue_size(&q).await.expect("size"), 2);
}
