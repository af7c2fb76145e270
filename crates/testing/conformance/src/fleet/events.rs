//! Guarantee `events.pubsub`: publish/subscribe events.

use std::time::Duration;

use crate::fleet::Backend;
use crate::harness::unique_id;

/// Guarantee `events.pubsub`: a subscriber receives every message published to its topic after it
/// subscribed, in order, and nothing of other topics.
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
