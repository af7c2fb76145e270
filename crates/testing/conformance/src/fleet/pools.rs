//! Guarantee `pool.claim_order` to 4: pools of tagged items that workers claim for a while.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;
use switchyard_core::fleet::Tags;

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, LONG, SHORT, sleep, tags};
use crate::harness::unique_id;

/// Guarantee `pool.claim_order`: a claim takes the live matching item that expires latest,
/// never-expiring items last, and the claimed item carries `in_use_until`.
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

/// Guarantee `pool.claim_exclusive`: concurrent claimers never win the same item; a claim lapses
/// after its hold; `pool_release` frees only the claim its token names.
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

/// Guarantee `pool.expiry`: expired items are invisible to list, size and claims; `pool_size`
/// counts live items through many puts; `pool_remove` deletes the item and its claim.
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
