//! Conformance suite of [`FleetBackend`]: one case per numbered guarantee of the trait.
//!
//! Cases wait for real expiry (holds and visibilities of a few hundred milliseconds) but never
//! assert how long anything took.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_core::Error;
use switchyard_core::fleet::{
    ConfigWrite, FleetBackend, IdempotencyKey, Priority, SubmitOutcome, Tags, WorkerState,
};

use crate::harness::unique_id;

/// The backend under test, shared by the tasks of a case.
pub type Backend = Arc<dyn FleetBackend>;

const SHORT: Duration = Duration::from_millis(300);
const LAPSE: Duration = Duration::from_millis(500);
const LONG: Duration = Duration::from_secs(30);

fn tags(v: Value) -> Tags {
    match v {
        Value::Object(m) => m,
        _ => Tags::new(),
    }
}

async fn sleep(d: Duration) {
    tokio::time::sleep(d).await;
}

/// 1. KV set, set-if-absent, TTL, get and delete.
pub async fn kv(b: Backend) {
    let ns = unique_id("ns");
    b.kv_set(&ns, "a", b"1", None).await.expect("set");
    assert_eq!(b.kv_get(&ns, "a").await.expect("get"), Some(b"1".to_vec()));
    assert!(!b.kv_set_nx(&ns, "a", b"2", None).await.expect("nx"));
    assert_eq!(b.kv_get(&ns, "a").await.expect("get"), Some(b"1".to_vec()));
    assert_eq!(b.kv_get(&ns, "missing").await.expect("get"), None);

    b.kv_set(&ns, "t", b"x", Some(SHORT))
        .await
        .expect("set ttl");
    b.kv_set(&ns, "cleared", b"x", Some(SHORT))
        .await
        .expect("set ttl");
    b.kv_set(&ns, "cleared", b"y", None)
        .await
        .expect("set clears ttl");
    b.kv_set_nx(&ns, "n", b"x", Some(SHORT))
        .await
        .expect("nx ttl");
    sleep(LAPSE).await;
    assert_eq!(b.kv_get(&ns, "t").await.expect("get"), None, "expired");
    assert_eq!(
        b.kv_get(&ns, "cleared").await.expect("get"),
        Some(b"y".to_vec())
    );
    assert!(
        b.kv_set_nx(&ns, "n", b"z", None)
            .await
            .expect("nx after expiry")
    );
    assert_eq!(b.kv_get(&ns, "n").await.expect("get"), Some(b"z".to_vec()));

    assert!(b.kv_del(&ns, "a").await.expect("del"));
    assert!(!b.kv_del(&ns, "a").await.expect("del again"));
    assert_eq!(b.kv_get(&ns, "a").await.expect("get"), None);
}

/// 2. Claims take the latest-expiring matching item first, never-expiring items last.
pub async fn pool_claim_order(b: Backend) {
    let p = unique_id("pool");
    let eu = tags(json!({"region": "eu", "tier": 1}));
    b.pool_put(&p, "a", b"A", &eu, Some(Duration::from_secs(100)))
        .await
        .expect("put");
    b.pool_put(&p, "b", b"B", &eu, Some(Duration::from_secs(200)))
        .await
        .expect("put");
    b.pool_put(&p, "c", b"C", &eu, None).await.expect("put");
    b.pool_put(
        &p,
        "d",
        b"D",
        &tags(json!({"region": "us", "tier": 1})),
        Some(Duration::from_secs(300)),
    )
    .await
    .expect("put");
    let want = tags(json!({"region": "eu"}));
    let mut got = Vec::new();
    while let Some(c) = b.pool_claim_any(&p, &want, LONG).await.expect("claim") {
        assert!(c.item.in_use_until.is_some(), "claim carries in_use_until");
        assert_eq!(c.item.tags.get("region"), Some(&json!("eu")));
        got.push((c.item.id, c.item.payload));
    }
    assert_eq!(
        got,
        vec![
            ("b".to_string(), b"B".to_vec()),
            ("a".to_string(), b"A".to_vec()),
            ("c".to_string(), b"C".to_vec())
        ]
    );
    let any = b
        .pool_claim_any(&p, &Tags::new(), LONG)
        .await
        .expect("claim any");
    assert_eq!(any.map(|c| c.item.id), Some("d".to_string()));
    let none = b
        .pool_claim_any(&p, &Tags::new(), LONG)
        .await
        .expect("claim");
    assert!(none.is_none(), "everything is claimed");
}

/// 3. Concurrent claimers never share an item; claims lapse; release needs the claim's token.
pub async fn pool_claim_exclusive(b: Backend) {
    let p = unique_id("pool");
    for i in 0..5 {
        b.pool_put(&p, &format!("i{i}"), b"x", &Tags::new(), None)
            .await
            .expect("put");
    }
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (b, p) = (b.clone(), p.clone());
        tasks.push(tokio::spawn(async move {
            b.pool_claim_any(&p, &Tags::new(), LONG)
                .await
                .expect("claim")
        }));
    }
    let mut won = Vec::new();
    for t in tasks {
        if let Some(c) = t.await.expect("join") {
            won.push(c);
        }
    }
    let ids: HashSet<_> = won.iter().map(|c| c.item.id.clone()).collect();
    assert_eq!(won.len(), 5, "every item claimed once");
    assert_eq!(ids.len(), 5, "no item claimed twice");

    let first = &won[0];
    assert!(
        !b.pool_release(&p, &first.item.id, "not-the-token")
            .await
            .expect("release")
    );
    assert!(
        b.pool_release(&p, &first.item.id, &first.token)
            .await
            .expect("release")
    );
    assert!(
        !b.pool_release(&p, &first.item.id, &first.token)
            .await
            .expect("release twice")
    );

    let p2 = unique_id("pool");
    b.pool_put(&p2, "only", b"x", &Tags::new(), None)
        .await
        .expect("put");
    let c1 = b
        .pool_claim_any(&p2, &Tags::new(), SHORT)
        .await
        .expect("claim")
        .expect("free");
    assert!(
        b.pool_claim_any(&p2, &Tags::new(), SHORT)
            .await
            .expect("claim")
            .is_none()
    );
    let listed = b.pool_list(&p2).await.expect("list");
    assert!(listed[0].in_use_until.is_some(), "list shows the claim");
    sleep(LAPSE).await;
    let c2 = b
        .pool_claim_any(&p2, &Tags::new(), LONG)
        .await
        .expect("claim")
        .expect("lapsed");
    assert_eq!(c2.item.id, "only");
    assert!(
        !b.pool_release(&p2, "only", &c1.token)
            .await
            .expect("release"),
        "a lapsed claim's token must not free the new claim"
    );
    assert!(
        b.pool_claim_any(&p2, &Tags::new(), LONG)
            .await
            .expect("claim")
            .is_none()
    );
}

/// 4. Expired items are invisible; size counts live items; remove deletes item and claim.
pub async fn pool_expiry(b: Backend) {
    let p = unique_id("pool");
    b.pool_put(&p, "short", b"s", &Tags::new(), Some(SHORT))
        .await
        .expect("put");
    b.pool_put(&p, "long", b"l", &tags(json!({"k": "v"})), None)
        .await
        .expect("put");
    assert_eq!(b.pool_size(&p).await.expect("size"), 2);
    sleep(LAPSE).await;
    let items = b.pool_list(&p).await.expect("list");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].id, "long");
    assert_eq!(items[0].payload, b"l");
    assert_eq!(items[0].tags, tags(json!({"k": "v"})));
    assert_eq!(items[0].expires_at, None);
    assert_eq!(items[0].in_use_until, None);
    assert_eq!(b.pool_size(&p).await.expect("size"), 1);
    // Many puts stay correct (the seed pruned the whole pool on each).
    for i in 0..50 {
        b.pool_put(&p, &format!("n{i}"), b"n", &Tags::new(), Some(LONG))
            .await
            .expect("put");
    }
    assert_eq!(b.pool_size(&p).await.expect("size"), 51);
    let c = b
        .pool_claim_any(&p, &tags(json!({"k": "v"})), LONG)
        .await
        .expect("claim");
    assert_eq!(c.map(|c| c.item.id), Some("long".to_string()));
    assert!(b.pool_remove(&p, "long").await.expect("remove"));
    assert!(!b.pool_remove(&p, "long").await.expect("remove again"));
    b.pool_put(&p, "long", b"again", &tags(json!({"k": "v"})), None)
        .await
        .expect("put");
    let c = b
        .pool_claim_any(&p, &tags(json!({"k": "v"})), LONG)
        .await
        .expect("claim");
    assert_eq!(
        c.map(|c| c.item.payload),
        Some(b"again".to_vec()),
        "removal freed the claim"
    );
    assert_eq!(
        b.pool_list(&unique_id("nopool")).await.expect("list"),
        vec![]
    );
}

/// 5. Token locks: one holder, wait, lapse, token-checked release and extend, rising fences.
pub async fn lock(b: Backend) {
    let l = unique_id("lock");
    let g1 = b
        .lock_acquire(&l, SHORT, Duration::ZERO)
        .await
        .expect("acquire")
        .expect("free");
    assert_eq!(g1.token.len(), 32);
    assert!(
        b.lock_acquire(&l, LONG, Duration::ZERO)
            .await
            .expect("acquire")
            .is_none()
    );
    // The holder's hold lapses while we wait.
    let g2 = b
        .lock_acquire(&l, LONG, Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("lapsed lock acquired while waiting");
    assert!(g2.fence > g1.fence, "fences rise");
    assert!(
        !b.lock_release(&l, &g1.token).await.expect("release"),
        "stale token"
    );
    assert!(
        !b.lock_extend(&l, &g1.token, LONG).await.expect("extend"),
        "stale token"
    );
    assert!(b.lock_extend(&l, &g2.token, LONG).await.expect("extend"));
    assert!(b.lock_release(&l, &g2.token).await.expect("release"));
    assert!(!b.lock_release(&l, &g2.token).await.expect("release twice"));
    let g3 = b
        .lock_acquire(&l, SHORT, Duration::ZERO)
        .await
        .expect("acquire")
        .expect("free");
    assert!(g3.fence > g2.fence);
    assert!(b.lock_extend(&l, &g3.token, LONG).await.expect("extend"));
    sleep(LAPSE).await;
    assert!(
        b.lock_acquire(&l, LONG, Duration::ZERO)
            .await
            .expect("acquire")
            .is_none(),
        "extended lock still held"
    );
}

/// 6. Counters are atomic and read 0 when missing.
pub async fn counter(b: Backend) {
    let c = unique_id("ctr");
    assert_eq!(b.counter_get(&c).await.expect("get"), 0);
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (b, c) = (b.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            b.counter_incr(&c, 2).await.expect("incr")
        }));
    }
    let mut seen = BTreeSet::new();
    for t in tasks {
        seen.insert(t.await.expect("join"));
    }
    assert_eq!(seen.len(), 50, "every increment saw its own total");
    assert_eq!(b.counter_get(&c).await.expect("get"), 100);
    assert_eq!(b.counter_incr(&c, -101).await.expect("incr"), -1);
    b.counter_set(&c, 7).await.expect("set");
    assert_eq!(b.counter_get(&c).await.expect("get"), 7);
    assert!(b.counter_del(&c).await.expect("del"));
    assert!(!b.counter_del(&c).await.expect("del again"));
    assert_eq!(b.counter_get(&c).await.expect("get"), 0);
}

/// 7. High, then normal, then low; FIFO within a tier.
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

/// 8. Each pushed task goes to exactly one reserver; `timeout = 0` takes a ready task; a blocked
///    reserve wakes on a push.
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

/// 9. A late ack, nack, extend or fail from a timed-out holder changes nothing.
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

/// 10. Attempts are counted at delivery and survive nack and timeouts.
pub async fn queue_attempts(b: Backend) {
    let q = unique_id("q");
    let body = br#"{"id": "t-2"}"#;
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
    b.queue_push(&q, body, Priority::Normal)
        .await
        .expect("push again");
    let d = b
        .queue_reserve(&q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.attempt, 1, "ack forgets the count");
    assert!(b.queue_fail(&q, &d.receipt, body).await.expect("fail"));
}

/// 11. Nack requeues the caller's body into the original tier, only while the reservation exists;
///     delayed identical bodies stay distinct.
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
    let same = br#"{"id": "same"}"#;
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

/// 12. Fail removes the reservation and dead-letters in one step; nothing resurrects it.
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

/// 13. Sweep returns each lapsed reservation once, to its tier; extend keeps it reserved.
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

/// 14. Any bytes are delivered with a receipt once; identical bodies never collapse.
pub async fn queue_bad_bodies(b: Backend) {
    let q = unique_id("q");
    let bodies: Vec<&[u8]> = vec![
        b"not json",
        br#"{"no": "id"}"#,
        b"[1, 2]",
        br#"{"id": ""}"#,
        br#"{"id": "same"}"#,
        br#"{"id": "same"}"#,
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
    assert_eq!(got[4].task_id.as_deref(), Some("same"));
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

/// 15. Idempotent submit sets the key and pushes atomically; duplicates push nothing.
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

/// 16. Dead-letter queue: FIFO, `n = 0` reads nothing, atomic pop/clear, requeue resets attempts.
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

/// 17. Sorted streams: score order, TTL and length trims, dedupe, `n = 0`, emit notification.
pub async fn stream(b: Backend) {
    use futures::StreamExt;
    let s = unique_id("s");
    let mut emits = b
        .event_subscribe(&format!("{s}.emit"))
        .await
        .expect("subscribe");
    b.stream_push(&s, b"e3", 3.0, 0, None).await.expect("push");
    b.stream_push(&s, b"e1", 1.0, 0, None).await.expect("push");
    b.stream_push(&s, b"e2", 2.5, 0, None).await.expect("push");
    assert_eq!(
        b.stream_peek(&s, 10).await.expect("peek"),
        vec![b"e1".to_vec(), b"e2".to_vec(), b"e3".to_vec()]
    );
    assert_eq!(
        b.stream_peek(&s, 0).await.expect("peek"),
        Vec::<Vec<u8>>::new()
    );
    b.stream_push(&s, b"e1", 4.0, 0, None)
        .await
        .expect("push identical");
    assert_eq!(
        b.stream_length(&s).await.expect("len"),
        3,
        "identical envelope stored once"
    );
    assert_eq!(
        b.stream_peek(&s, 1).await.expect("peek"),
        vec![b"e2".to_vec()]
    );
    b.stream_push(&s, b"e5", 5.0, 3, None)
        .await
        .expect("push capped");
    assert_eq!(
        b.stream_peek(&s, 10).await.expect("peek"),
        vec![b"e3".to_vec(), b"e1".to_vec(), b"e5".to_vec()]
    );
    b.stream_push(&s, b"e9", 9.0, 0, Some(Duration::from_secs(5)))
        .await
        .expect("push ttl");
    assert_eq!(
        b.stream_peek(&s, 10).await.expect("peek"),
        vec![b"e1".to_vec(), b"e5".to_vec(), b"e9".to_vec()],
        "entries scored before 9 - 5 are dropped"
    );
    assert_eq!(
        b.stream_pop(&s, 0).await.expect("pop"),
        Vec::<Vec<u8>>::new()
    );
    assert_eq!(
        b.stream_pop(&s, 2).await.expect("pop"),
        vec![b"e1".to_vec(), b"e5".to_vec()]
    );
    b.stream_trim(&s, 0, Some(Duration::from_secs(60)))
        .await
        .expect("trim");
    assert_eq!(
        b.stream_length(&s).await.expect("len"),
        0,
        "score 9 is long before now - 60 s"
    );

    let mut got = Vec::new();
    for _ in 0..6 {
        let m = tokio::time::timeout(Duration::from_secs(5), emits.next())
            .await
            .expect("emit within 5 s")
            .expect("stream open");
        got.push(String::from_utf8(m).expect("utf8"));
    }
    assert_eq!(
        got,
        ["3.0", "1.0", "2.5", "4.0", "5.0", "9.0"],
        "push publishes its score"
    );
}

/// 18. A subscriber gets its topic's messages published after it subscribed, in order.
pub async fn events(b: Backend) {
    use futures::StreamExt;
    let t = unique_id("topic");
    let other = unique_id("topic");
    b.event_publish(&t, b"before").await.expect("publish");
    let mut sub = b.event_subscribe(&t).await.expect("subscribe");
    b.event_publish(&other, b"elsewhere")
        .await
        .expect("publish");
    for m in ["m1", "m2", "m3"] {
        b.event_publish(&t, m.as_bytes()).await.expect("publish");
    }
    let mut got = Vec::new();
    for _ in 0..3 {
        let m = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .expect("message within 5 s")
            .expect("open");
        got.push(m);
    }
    assert_eq!(got, vec![b"m1".to_vec(), b"m2".to_vec(), b"m3".to_vec()]);
}

/// 19. Worker registry: seeding, CAS config writes, register required, monotonic generations.
pub async fn worker_registry(b: Backend) {
    let at = unique_id("at");
    let w = "w1";
    assert_eq!(
        b.worker_get_config(&at, w).await.expect("config"),
        (json!({}), 0)
    );
    assert_eq!(
        b.worker_set_config(&at, w, &json!({"slots": 1}), None)
            .await
            .expect("set"),
        ConfigWrite::NotRegistered
    );
    let st = WorkerState {
        state: "RUNNING",
        last_error: None,
        last_seen: 5.0,
        applied_gen: None,
    };
    assert!(!b.worker_set_state(&at, w, st.clone()).await.expect("state"));
    assert!(
        !b.worker_set_stats(&at, w, &json!({"a": 1}))
            .await
            .expect("stats")
    );
    assert!(b.worker_get(&at, w).await.expect("get").is_none());
    assert!(
        b.worker_list(Some(&at)).await.expect("list").is_empty(),
        "nothing was created"
    );

    b.worker_register(&at, w, &json!({"cpu": 4}))
        .await
        .expect("register");
    let r = b
        .worker_get(&at, w)
        .await
        .expect("get")
        .expect("registered");
    assert_eq!(
        (r.config.clone(), r.config_gen, r.state.as_str()),
        (json!({}), 0, "IDLE")
    );
    assert_eq!(
        (r.last_seen, r.last_error.clone(), r.stats.clone()),
        (0.0, None, json!({}))
    );
    assert_eq!(r.hardware, json!({"cpu": 4}));

    let cfg = json!({"slots": 3, "enabled": true});
    assert_eq!(
        b.worker_set_config(&at, w, &cfg, None).await.expect("set"),
        ConfigWrite::Applied { generation: 1 }
    );
    assert_eq!(
        b.worker_set_config(&at, w, &json!({"slots": 9}), Some(0))
            .await
            .expect("cas"),
        ConfigWrite::GenMismatch { current: 1 }
    );
    assert_eq!(
        b.worker_get_config(&at, w).await.expect("config"),
        (cfg.clone(), 1)
    );
    let cfg2 = json!({"slots": 4});
    assert_eq!(
        b.worker_set_config(&at, w, &cfg2, Some(1))
            .await
            .expect("cas"),
        ConfigWrite::Applied { generation: 2 }
    );
    b.worker_register(&at, w, &json!({"cpu": 8}))
        .await
        .expect("re-register");
    let st = WorkerState {
        state: "RUNNING",
        last_error: Some("boom"),
        last_seen: 12.5,
        applied_gen: Some(2),
    };
    assert!(b.worker_set_state(&at, w, st).await.expect("state"));
    assert!(
        b.worker_set_stats(&at, w, &json!({"done": 7}))
            .await
            .expect("stats")
    );
    let r = b
        .worker_get(&at, w)
        .await
        .expect("get")
        .expect("registered");
    assert_eq!(r.hardware, json!({"cpu": 8}));
    assert_eq!(
        (r.config.clone(), r.config_gen),
        (cfg2, 2),
        "register keeps config and gen"
    );
    assert_eq!(
        (r.state.as_str(), r.last_seen, r.last_error.as_deref()),
        ("RUNNING", 12.5, Some("boom"))
    );
    assert_eq!(
        (r.applied_gen, r.stats.clone()),
        (Some(2), json!({"done": 7}))
    );

    b.worker_register(&at, "w2", &json!({}))
        .await
        .expect("register");
    assert_eq!(
        b.worker_list(Some(&at)).await.expect("list"),
        vec![
            (at.clone(), "w1".to_string()),
            (at.clone(), "w2".to_string())
        ]
    );
    let all = b.worker_list(None).await.expect("list all");
    assert!(all.contains(&(at.clone(), "w1".to_string())));

    assert!(
        b.worker_stats_push(&at, w, 1.0, &json!({"f": 1}), 10)
            .await
            .expect("push")
    );
    assert!(b.worker_remove(&at, w).await.expect("remove"));
    assert!(!b.worker_remove(&at, w).await.expect("remove twice"));
    assert!(b.worker_get(&at, w).await.expect("get").is_none());
    assert_eq!(
        b.worker_list(Some(&at)).await.expect("list"),
        vec![(at.clone(), "w2".to_string())]
    );

    b.worker_register(&at, w, &json!({}))
        .await
        .expect("register again");
    let (config, generation) = b.worker_get_config(&at, w).await.expect("config");
    assert_eq!(config, json!({}));
    assert!(
        generation > 2,
        "a re-registered worker's generation is above any it saw ({generation})"
    );
    assert!(
        b.worker_stats_history(&at, w, 0.0, 10)
            .await
            .expect("history")
            .is_empty(),
        "remove deleted the stats history"
    );
    let r = b
        .worker_get(&at, w)
        .await
        .expect("get")
        .expect("registered");
    assert_eq!((r.state.as_str(), r.stats), ("IDLE", json!({})));
}

/// 20. Stats history keeps the newest frames and filters by `since` and `limit`.
pub async fn worker_stats(b: Backend) {
    let at = unique_id("at");
    b.worker_register(&at, "w", &json!({}))
        .await
        .expect("register");
    for ts in 1..=10 {
        assert!(
            b.worker_stats_push(&at, "w", ts as f64, &json!({"n": ts}), 5)
                .await
                .expect("push")
        );
    }
    let all = b
        .worker_stats_history(&at, "w", 0.0, 240)
        .await
        .expect("history");
    assert_eq!(all, (6..=10).map(|n| json!({"n": n})).collect::<Vec<_>>());
    let since = b
        .worker_stats_history(&at, "w", 8.0, 240)
        .await
        .expect("history");
    assert_eq!(since, (8..=10).map(|n| json!({"n": n})).collect::<Vec<_>>());
    let limited = b
        .worker_stats_history(&at, "w", 0.0, 2)
        .await
        .expect("history");
    assert_eq!(limited, vec![json!({"n": 6}), json!({"n": 7})]);
    assert!(
        !b.worker_stats_push(&at, "nobody", 1.0, &json!({}), 5)
            .await
            .expect("push")
    );
}

/// 21. One catalog document per automation type.
pub async fn catalog(b: Backend) {
    let a = unique_id("at");
    let c = unique_id("at");
    b.catalog_set(&a, br#"{"v": 1}"#).await.expect("set");
    b.catalog_set(&c, br#"{"v": 2}"#).await.expect("set");
    b.catalog_set(&a, br#"{"v": 3}"#).await.expect("overwrite");
    assert_eq!(
        b.catalog_get(&a).await.expect("get"),
        Some(br#"{"v": 3}"#.to_vec())
    );
    assert_eq!(b.catalog_get(&unique_id("none")).await.expect("get"), None);
    let all = b.catalog_all().await.expect("all");
    assert_eq!(all.get(&a), Some(&br#"{"v": 3}"#.to_vec()));
    assert_eq!(all.get(&c), Some(&br#"{"v": 2}"#.to_vec()));
}

/// 22. Hostile names never share state; empty names and zero holds are invalid input.
pub async fn hostile_names(b: Backend) {
    let base = unique_id("h");
    let a = format!("{base}:a");
    let ab = format!("{a}:b");
    b.kv_set(&ab, "c", b"1", None).await.expect("set");
    b.kv_set(&a, "b:c", b"2", None).await.expect("set");
    assert_eq!(b.kv_get(&ab, "c").await.expect("get"), Some(b"1".to_vec()));
    assert_eq!(b.kv_get(&a, "b:c").await.expect("get"), Some(b"2".to_vec()));

    for name in [
        format!("{base}:q"),
        format!("{base}:q:high"),
        format!("{base}{{x}}%41 é|"),
    ] {
        b.queue_push(&name, name.as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    for name in [
        format!("{base}:q"),
        format!("{base}:q:high"),
        format!("{base}{{x}}%41 é|"),
    ] {
        assert_eq!(
            b.queue_peek(&name, 10).await.expect("peek"),
            vec![name.as_bytes().to_vec()]
        );
    }

    let at = format!("{base}|x");
    b.worker_register(&at, "y", &json!({}))
        .await
        .expect("register");
    b.worker_register(&base, "x|y", &json!({}))
        .await
        .expect("register");
    assert_eq!(
        b.worker_list(Some(&at)).await.expect("list"),
        vec![(at.clone(), "y".to_string())]
    );
    assert_eq!(
        b.worker_list(Some(&base)).await.expect("list"),
        vec![(base.clone(), "x|y".to_string())]
    );
    let all = b.worker_list(None).await.expect("list");
    assert!(all.contains(&(at.clone(), "y".to_string())));
    assert!(all.contains(&(base.clone(), "x|y".to_string())));

    let p = format!("{base}:pool");
    b.pool_put(&p, "id:with:colons", b"x", &Tags::new(), None)
        .await
        .expect("put");
    let c = b
        .pool_claim_any(&p, &Tags::new(), LONG)
        .await
        .expect("claim")
        .expect("item");
    assert_eq!(c.item.id, "id:with:colons");

    assert!(matches!(
        b.queue_push("", b"x", Priority::Normal).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.queue_reserve(&base, Duration::ZERO, Duration::ZERO).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.lock_acquire(&base, Duration::ZERO, Duration::ZERO).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.pool_claim_any(&p, &Tags::new(), Duration::ZERO).await,
        Err(Error::InvalidInput { .. })
    ));
}

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

/// 23. Every count of a queue from one consistent snapshot; reading changes nothing.
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

/// Stamps one `#[tokio::test]` per guarantee of [`FleetBackend`]. `$factory` is an async
/// closure or function returning an `Arc<dyn FleetBackend>` (a fresh or shared backend; every case
/// uses its own random names).
#[macro_export]
macro_rules! fleet_backend_suite {
    ($factory:expr) => {
        $crate::fleet_backend_suite!(@cases $factory;
            kv, pool_claim_order, pool_claim_exclusive, pool_expiry, lock, counter,
            queue_priority_fifo, queue_reserve_atomic, queue_receipts, queue_attempts, queue_nack,
            queue_fail_atomic, queue_sweep, queue_bad_bodies, queue_submit_once, dlq, stream,
            events, worker_registry, worker_stats, catalog, hostile_names, queue_stats);
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[$crate::__tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let backend: $crate::fleet::Backend = ($factory)().await;
                $crate::fleet::$case(backend).await;
            }
        )*
    };
}
