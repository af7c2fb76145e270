//! Helpers every area of the fleet suite shares.

use std::time::Duration;

use serde_json::Value;
use switchyard_core::fleet::Tags;

/// A hold, visibility or TTL that cases wait out.
pub(super) const SHORT: Duration = Duration::from_millis(300);
/// How long a case sleeps to see a [`SHORT`] one lapse.
pub(super) const LAPSE: Duration = Duration::from_millis(500);
/// A hold or visibility that never lapses within a case.
pub(super) const LONG: Duration = Duration::from_secs(30);

/// Tags from a JSON object (anything else is no tags).
pub(super) fn tags(v: Value) -> Tags {
    match v {
        Value::Object(m) => m,
        _ => Tags::new(),
    }
}

pub(super) async fn sleep(d: Duration) {
    tokio::time::sleep(d).await;
}

/// The backend's clock, in unix seconds, as the visibility deadline of a probe delivery shows it
/// (cases cannot read a store's clock otherwise). Leaves `queue` as it found it.
pub(super) async fn store_now(b: &crate::fleet::Backend, queue: &str) -> f64 {
    use switchyard_core::fleet::Priority;
    b.queue_push(queue, b"clock probe", Priority::High)
        .await
        .expect("push probe");
    let d = b
        .queue_reserve(queue, Duration::ZERO, LONG)
        .await
        .expect("reserve probe")
        .expect("the probe");
    assert_eq!(d.body, b"clock probe", "the probe comes first");
    assert!(b.queue_ack(queue, &d.receipt).await.expect("ack probe"));
    d.visible_until - LONG.as_secs_f64()
}
