//! Guarantee `counter.atomic`: atomic counters.

use std::collections::BTreeSet;

use crate::fleet::Backend;
use crate::harness::unique_id;

/// Guarantee `counter.atomic`: `counter_incr` is atomic and returns the new value; a missing
/// counter reads 0.
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
