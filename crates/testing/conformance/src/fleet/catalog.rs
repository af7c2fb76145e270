//! Guarantees `catalog.documents` and `queue.names`: the automation catalog, and the names of the
//! queues that hold tasks.

use std::time::Duration;

use switchyard_core::fleet::Priority;

use crate::fleet::Backend;
use crate::harness::unique_id;

/// Guarantee `catalog.documents`: one catalog document per automation type; `catalog_all` returns
/// them all.
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

/// Guarantee `queue.names`: `queue_names` lists every queue holding a task in any state, sorted,
/// once each, spelt as given; a queue whose last task is gone is no longer listed.
pub async fn queue_names(b: Backend) {
    let waiting = unique_id("qn-waiting:{a} %");
    let flying = unique_id("qn-flying");
    let dead = unique_id("qn-dead");
    let never = unique_id("qn-never");
    b.queue_push(&waiting, b"{}", Priority::Low)
        .await
        .expect("push");
    b.queue_push(&waiting, b"{}", Priority::High)
        .await
        .expect("push");
    b.queue_push(&flying, b"{}", Priority::Normal)
        .await
        .expect("push");
    let delivery = b
        .queue_reserve(&flying, Duration::ZERO, Duration::from_secs(60))
        .await
        .expect("reserve")
        .expect("a task");
    b.queue_dead(&dead, b"{}").await.expect("dead");
    let names = b.queue_names().await.expect("names");
    for name in [&waiting, &flying, &dead] {
        assert_eq!(
            names.iter().filter(|n| *n == name).count(),
            1,
            "{name:?} once in {names:?}"
        );
    }
    assert!(!names.contains(&never), "a queue never pushed to");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted");
    b.queue_ack(&flying, &delivery.receipt).await.expect("ack");
    let names = b.queue_names().await.expect("names");
    assert!(!names.contains(&flying), "drained: no longer listed");
    assert!(names.contains(&waiting) && names.contains(&dead));
}
