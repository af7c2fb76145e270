//! Submit: a payload in the seed's task envelope, now or later, at most once per idempotency key.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::fleet::{RunAt, Submit};
use switchyard_core::{IdempotencyKey, SubmitOutcome};
use switchyard_fleet::{Backoff, Jitter, MAX_TASK_SECONDS, PushOptions, Queue, RetryPolicy};
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
    /// Seconds one attempt may run (0 < t ≤ 86400); a consumer that passes it fails the attempt
    /// as timed out (ADR 0380). Unset: the consumer's own timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(exclusive_minimum = 0, maximum = 86400)]
    pub timeout_seconds: Option<f64>,
    /// How long a consumer waits before the next attempt after a failed one; unset fields come
    /// from the consumer's configuration (ADR 0380).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryBody>,
}

/// A task's retry policy: after failed attempt `a`, `fixed` waits `base_seconds`, `exponential`
/// `base_seconds · 2^(a−1)`, both at most `cap_seconds`; `jitter` takes a random share.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryBody {
    /// `fixed` or `exponential` (the consumer's default: exponential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// The first delay in seconds (0 to 86400; at most `cap_seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 86400)]
    pub base_seconds: Option<f64>,
    /// The longest delay in seconds (0 to 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 86400)]
    pub cap_seconds: Option<f64>,
    /// `none`, `full` (0 to the delay) or `equal` (half, plus up to the other half).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
}

impl RetryBody {
    /// The policy, or a 422 naming the `retry.*` field at fault.
    pub fn policy(&self) -> Result<RetryPolicy> {
        let max = MAX_TASK_SECONDS as f64;
        let mut p = RetryPolicy::default();
        if let Some(b) = &self.backoff {
            p.backoff = Some(match b.as_str() {
                "fixed" => Backoff::Fixed,
                "exponential" => Backoff::Exponential,
                other => {
                    return Err(Error::invalid(
                        "retry.backoff",
                        format!("`retry.backoff` {other:?} is not fixed or exponential"),
                    ));
                }
            });
        }
        if let Some(j) = &self.jitter {
            p.jitter = Some(match j.as_str() {
                "none" => Jitter::None,
                "full" => Jitter::Full,
                "equal" => Jitter::Equal,
                other => {
                    return Err(Error::invalid(
                        "retry.jitter",
                        format!("`retry.jitter` {other:?} is not none, full or equal"),
                    ));
                }
            });
        }
        p.base = seconds_at_most("retry.base_seconds", self.base_seconds, max)?.map(super::secs);
        p.cap = seconds_at_most("retry.cap_seconds", self.cap_seconds, max)?.map(super::secs);
        if let (Some(b), Some(c)) = (self.base_seconds, self.cap_seconds)
            && b > c
        {
            return Err(Error::invalid(
                "retry.base_seconds",
                "`retry.base_seconds` must be at most `retry.cap_seconds`",
            ));
        }
        p.check()?;
        Ok(p)
    }
}

/// A timeout of `0 < seconds ≤ 86400` (422 naming `timeout_seconds` otherwise).
fn timeout_of(value: Option<f64>) -> Result<Option<std::time::Duration>> {
    let value = seconds_at_most("timeout_seconds", value, MAX_TASK_SECONDS as f64)?;
    if value.is_some_and(|v| v <= 0.0) {
        return Err(Error::invalid(
            "timeout_seconds",
            "`timeout_seconds` must be more than 0",
        ));
    }
    Ok(value.map(super::secs))
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
        let timeout = timeout_of(body.timeout_seconds)?;
        let retry = body.retry.as_ref().map(RetryBody::policy).transpose()?;
        let opts = PushOptions {
            id: body.id.clone(),
            priority,
            ttl_seconds,
            max_attempts,
            timeout,
            retry,
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
