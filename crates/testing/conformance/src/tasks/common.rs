//! Helpers the task cases share.

use std::time::Duration;

use switchyard_core::fleet::{Delivery, Priority, TaskInfo, TaskState};

use crate::fleet::Backend;

/// A visibility that never lapses within a case.
pub(super) const LONG: Duration = Duration::from_secs(30);
/// A visibility cases wait out.
pub(super) const SHORT: Duration = Duration::from_millis(300);
/// How long a case sleeps to see a [`SHORT`] one lapse.
pub(super) const LAPSE: Duration = Duration::from_millis(500);

/// An envelope with this id.
pub(super) fn body(id: &str) -> Vec<u8> {
    format!(r#"{{"id": "{id}", "payload": {{"n": 1}}}}"#).into_bytes()
}

/// An envelope with this id, `max_attempts` and a `last_error` (as a consumer writes it).
pub(super) fn failed_body(id: &str, max: u32, error: &str) -> Vec<u8> {
    format!(
        r#"{{"id": "{id}", "payload": {{"n": 1}}, "max_attempts": {max}, "last_error": {{"message": "{error}", "attempt": 1}}}}"#
    )
    .into_bytes()
}

pub(super) async fn push(b: &Backend, q: &str, id: &str) {
    b.queue_push(q, &body(id), Priority::Normal)
        .await
        .unwrap_or_else(|e| panic!("push {id}: {e}"));
}

pub(super) async fn reserve(b: &Backend, q: &str, visibility: Duration) -> Delivery {
    b.queue_reserve(q, Duration::ZERO, visibility)
        .await
        .expect("reserve")
        .expect("a task is ready")
}

pub(super) async fn get(b: &Backend, q: &str, id: &str) -> TaskInfo {
    b.task_get(q, id)
        .await
        .expect("task_get")
        .unwrap_or_else(|| panic!("task {id} has a record"))
}

pub(super) async fn state(b: &Backend, q: &str, id: &str) -> Option<TaskState> {
    b.task_get(q, id).await.expect("task_get").map(|t| t.state)
}
