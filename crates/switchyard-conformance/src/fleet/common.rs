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
