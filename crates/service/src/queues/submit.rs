//! Submit: a payload in the seed's task envelope, now or later, at most once per idempotency key.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::fleet::{RunAt, Submit};
use switchyard_core::{IdempotencyKey, SubmitOutcome};
use switchyard_fleet::{PushOptions, Queue};
use utoipa::ToSchema;

use super::{
    MAX_DURATION_SECS, PriorityInput, Queues, at_most, check_body_id, seconds_at_most, tier_of,
    unix_now,
};
use crate::{Error, Result};

/// The most delivery attempts a task may be given.
pub const MAX_ATTEMPTS: u64 = 1_000;

/// How long a submit's idempotency key is remembered: a day, as `Queue::submit_once` and the
/// seed do.
const IDEMPOTENCY_TTL: std::time::Duration = std::time::Duration::from_secs(86_400);

/// A task to submit (`POST /v1/queues/{queue}/tasks`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBody {
    /// The task's payload (any JSON but null).
    pub payload: Value,
    /// The task id (default: a fresh `uuid4().hex`).
    pub id: Option<String>,
    /// `high`, `normal` (default), `low`, or the seed's integer.
    pub priority: Option<PriorityInput>,
    /// Seconds after which a consumer drops the task unrun.
    pub ttl_seconds: Option<u64>,
    /// Deliveries before the task is dead-lettered (at most 1000).
    #[schema(maximum = 1000)]
    pub max_attempts: Option<u64>,
    /// A second submit with this key within a day enqueues nothing (200 with the first id).
    pub idempotency_key: Option<String>,
    /// Reservable only after this many seconds (not with `run_at`).
    #[schema(minimum = 0)]
    pub delay_seconds: Option<f64>,
    /// Reservable only from this instant: unix seconds or an RFC 3339 string (not with
    /// `delay_seconds`). A past instant is now.
    pub run_at: Option<Instant>,
}

/// An instant as a client gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Instant {
    /// Unix seconds.
    Unix(f64),
    /// An RFC 3339 string such as `2026-12-24T18:00:00Z`.
    Text(String),
}

/// A submitted task.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Submitted {
    pub queue: String,
    /// The task id (the first task's on a duplicate).
    pub id: String,
    /// The idempotency key was already used: nothing was enqueued.
    pub duplicate: bool,
}

/// `run_at` as unix seconds, at most ten years away.
fn parse_run_at(value: &Instant) -> Result<f64> {
    let at = match value {
        Instant::Unix(n) => Some(*n),
        Instant::Text(s) => chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.timestamp_micros() as f64 / 1e6),
    };
    let Some(at) = at.filter(|a| a.is_finite() && *a >= 0.0) else {
        return Err(Error::invalid(
            "run_at",
            "`run_at` must be unix seconds (a number) or an RFC 3339 string such as \
             \"2026-12-24T18:00:00Z\"",
        ));
    };
    if at - unix_now() > MAX_DURATION_SECS as f64 {
        return Err(Error::invalid(
            "run_at",
            "`run_at` is more than ten years away",
        ));
    }
    Ok(at)
}

/// When a submit becomes reservable, from `delay_seconds` or `run_at` (never both).
fn run_at_of(body: &SubmitBody) -> Result<RunAt> {
    let delay = seconds_at_most(
        "delay_seconds",
        body.delay_seconds,
        MAX_DURATION_SECS as f64,
    )?;
    match (delay, &body.run_at) {
        (Some(_), Some(_)) => Err(Error::invalid(
            "run_at",
            "give `delay_seconds` or `run_at`, not both",
        )),
        (Some(d), None) => Ok(RunAt::After(super::secs(d))),
        (None, Some(at)) => Ok(RunAt::At(parse_run_at(at)?)),
        (None, None) => Ok(RunAt::Now),
    }
}

impl Queues {
    /// Enqueues `body.payload` on `queue` in the seed's envelope, now or later; with an
    /// `idempotency_key` a second submit within a day enqueues nothing and answers the first
    /// task's id with `duplicate` (guarantee `queue.submit_once`).
    pub async fn submit(&self, queue: &str, body: SubmitBody) -> Result<Submitted> {
        if body.payload.is_null() {
            return Err(Error::invalid("payload", "`payload` is required"));
        }
        if let Some(id) = &body.id {
            check_body_id("id", id)?;
        }
        let priority = tier_of(body.priority.as_ref())?;
        let ttl_seconds = at_most("ttl_seconds", body.ttl_seconds, MAX_DURATION_SECS)?;
        let max_attempts = at_most("max_attempts", body.max_attempts, MAX_ATTEMPTS)?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        if let Some(key) = &body.idempotency_key {
            check_body_id("idempotency_key", key)?;
        }
        let run_at = run_at_of(&body)?;
        let opts = PushOptions {
            id: body.id.clone(),
            priority,
            ttl_seconds,
            max_attempts,
            // `timeout_seconds` and `retry` of the HTTP submit are step D's (ADR 0380); the
            // typed layer's new fields are left unset here until then.
            ..PushOptions::default()
        };
        let envelope =
            Queue::<Value>::new(self.fleet.clone(), queue).envelope(&body.payload, &opts)?;
        let id = envelope.id();
        let ns = format!("idem:{queue}");
        let mut submit = Submit::new().priority(priority).run_at(run_at);
        if let Some(key) = &body.idempotency_key {
            // The key's value is the task id, so a duplicate answers with the first id.
            submit = submit.idem(IdempotencyKey {
                ns: &ns,
                key,
                value: id.as_bytes(),
                ttl: Some(IDEMPOTENCY_TTL),
            });
        }
        let outcome = self
            .fleet
            .queue_submit(queue, &envelope.to_bytes(), &submit)
            .await?;
        let (id, duplicate) = match outcome {
            SubmitOutcome::Enqueued => (id, false),
            SubmitOutcome::Duplicate(first) => (String::from_utf8_lossy(&first).into_owned(), true),
        };
        Ok(Submitted {
            queue: queue.to_string(),
            id,
            duplicate,
        })
    }
}
