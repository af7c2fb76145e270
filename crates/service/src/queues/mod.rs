//! Queues: submit, the worker calls, dead letters, stats, pause, rate limits, schedules, workers.
//!
//! Each area is a file of its own, all of them methods of [`Queues`]: [`submit`] (the seed's
//! task envelope, delays, idempotency keys), [`control`] (names, stats, peek, pause, rate
//! limits), [`tasks`] (a task's record by id, cancel, results, end events, retention), [`worker`] (reserve and what a worker does with a reservation), [`dead_letters`],
//! [`schedules`] and [`workers`] (the registry). Requests are checked here, so every door
//! refuses the same input with the same field named.

// `Error` is built only on the path of a refusal, once per call; boxing it buys nothing.
#![allow(clippy::result_large_err)]

pub mod acks;
pub mod control;
pub mod dead_letters;
pub mod schedules;
pub mod submit;
pub mod tasks;
pub mod worker;
pub mod workers;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_core::Priority;
use switchyard_core::fleet::FleetBackend;
use utoipa::ToSchema;

use crate::{Error, Result};

pub use acks::{AckItem, AckManyBody, AckOutcome, AckedMany, MAX_ACKS};
pub use control::{
    PageQuery, PauseState, QueueList, QueueStatsJson, RateLimitBody, RateLimitJson, Tiers,
    WaitingTasks,
};
pub use dead_letters::{DeadLetterList, Replayed, RequeueBody, Requeued, letter_ref};
pub use schedules::{Deleted, Schedule, ScheduleList};
pub use submit::{RetryBody, SubmitBody, Submitted};
pub use tasks::{
    AckBody, CancelAnswer, CancelBody, CancelResult, Cancelled, EventsPage, KeepJson,
    RetentionBody, RetentionJson, TaskEventJson, TaskJson, TaskQuery,
};
pub use worker::{
    ExtendBody, FailBody, InFlightList, InFlightTask, LastErrorJson, NackBody, Nacked,
    Reservations, ReserveBody, ReserveOptions, ReservedTask,
};
pub use workers::{
    Deregistered, HeartbeatBody, RegisterBody, WorkerAnswer, WorkerList, WorkerRecord,
};

/// The longest duration a client may ask for (`ttl_seconds`, `delay_seconds`, a nack's delay,
/// how far away `run_at` is): ten years. Larger values mean nothing useful and only risk
/// overflowing a backend's clock arithmetic.
pub const MAX_DURATION_SECS: u64 = 10 * 365 * 24 * 3600;

/// The most bodies one peek or dead-letter listing returns.
pub const MAX_PAGE: usize = 1000;

/// The queue rules over a fleet backend (cheap to clone).
#[derive(Debug, Clone)]
pub struct Queues {
    fleet: Arc<dyn FleetBackend>,
}

impl Queues {
    /// The rules over `fleet`.
    pub fn new(fleet: Arc<dyn FleetBackend>) -> Self {
        Queues { fleet }
    }

    /// The fleet backend the rules use.
    pub fn fleet(&self) -> &Arc<dyn FleetBackend> {
        &self.fleet
    }
}

/// A task's tier as a client gives it: `high`, `normal`, `low`, or the seed's integer
/// (positive high, zero normal, negative low).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum PriorityInput {
    /// `high`, `normal` or `low`.
    Name(String),
    /// The seed's integer.
    Level(i64),
}

impl PriorityInput {
    /// The tier, or a 422 naming `field` for a name that is not one.
    pub fn tier(&self, field: &str) -> Result<Priority> {
        match self {
            PriorityInput::Name(name) => match name.as_str() {
                "high" => Ok(Priority::High),
                "normal" => Ok(Priority::Normal),
                "low" => Ok(Priority::Low),
                other => Err(Error::invalid(
                    field,
                    format!("`{field}` {other:?} is not high, normal or low"),
                )),
            },
            PriorityInput::Level(n) => Ok(Priority::from_int(*n)),
        }
    }
}

/// The tier of an optional `priority` field (normal when absent).
fn tier_of(priority: Option<&PriorityInput>) -> Result<Priority> {
    priority.map_or(Ok(Priority::Normal), |p| p.tier("priority"))
}

/// `high`, `normal` or `low` from a command line (`--priority`).
pub fn parse_priority_text(text: &str) -> Result<Priority> {
    PriorityInput::Name(text.to_string())
        .tier("--priority")
        .map_err(|_| Error::invalid("--priority", format!("{text:?} is not high, normal or low")))
}

/// The tier's name in JSON.
pub fn priority_name(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

/// A stored body as JSON: the envelope when it parses, else `{"raw": "<lossy text>"}`.
pub fn body_json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|_| json!({ "raw": String::from_utf8_lossy(body) }))
}

/// The service's clock in unix seconds: `last_error.at`, a heartbeat's `last_seen` (so a
/// worker's clock cannot make it look alive or dead), a schedule's default `created_at`.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Checks an id the body names (`id`, `idempotency_key`, a held task): a 422 naming `field`.
fn check_body_id(field: &str, id: &str) -> Result<()> {
    switchyard_core::keys::check_id(field, id).map_err(|_| {
        Error::invalid(
            field,
            format!(
                "`{field}` must be 1..={} bytes without control characters",
                switchyard_core::keys::MAX_ID_BYTES
            ),
        )
    })
}

/// A number of seconds `0 ≤ value ≤ max` (422 naming `field` otherwise).
fn seconds_at_most(field: &str, value: Option<f64>, max: f64) -> Result<Option<f64>> {
    match value {
        Some(n) if !(n.is_finite() && (0.0..=max).contains(&n)) => Err(Error::invalid(
            field,
            format!("`{field}` must be a number of seconds between 0 and {max}"),
        )),
        other => Ok(other),
    }
}

/// A client-provided count of at most `max` (422 naming `field` otherwise).
fn at_most(field: &str, value: Option<u64>, max: u64) -> Result<Option<u64>> {
    match value {
        Some(n) if n > max => Err(Error::invalid(
            field,
            format!("`{field}` must be at most {max}, got {n}"),
        )),
        other => Ok(other),
    }
}

/// A duration from seconds already checked finite and in range.
fn secs(s: f64) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(s).unwrap_or(std::time::Duration::ZERO)
}

/// A page size: `default` when absent, at most [`MAX_PAGE`].
fn page(limit: Option<usize>, default: usize) -> Result<usize> {
    match limit.unwrap_or(default) {
        n if n > MAX_PAGE => Err(Error::invalid(
            "limit",
            format!("`limit` must be at most {MAX_PAGE}"),
        )),
        n => Ok(n),
    }
}

#[cfg(test)]
pub(crate) mod tests;
