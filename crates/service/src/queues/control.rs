//! What an operator reads and steers on a queue: the queue names, one queue's counts, the next
//! waiting tasks, pause and resume, and the rate limit.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::QueueStats;
use switchyard_core::fleet::RateLimit;
use utoipa::{IntoParams, ToSchema};

use super::{Queues, body_json, page, seconds_at_most};
use crate::{Error, Result};

/// A page of a listing (`?limit=`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// At most this many (at most 1000).
    #[param(maximum = 1000)]
    pub limit: Option<usize>,
}

/// The queue names (`GET /v1/queues`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueueList {
    pub queues: Vec<String>,
}

/// Tasks waiting per tier.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Tiers {
    pub high: u64,
    pub normal: u64,
    pub low: u64,
}

/// A rate limit: at most `max` reservations per `per_seconds`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RateLimitJson {
    pub max: u32,
    pub per_seconds: f64,
}

/// Every count of a queue, from one consistent snapshot.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueueStatsJson {
    pub queue: String,
    /// Waiting in all tiers.
    pub waiting: u64,
    pub tiers: Tiers,
    /// Reserved, overdue ones included.
    pub in_flight: u64,
    /// Of `in_flight`: visibility lapsed, not yet swept.
    pub overdue: u64,
    /// Delayed (submitted for later, or nacked with a delay).
    pub scheduled: u64,
    /// Of `scheduled`: due, not yet moved.
    pub due: u64,
    pub dead: u64,
    /// `dead` under the name the route has always used.
    pub dead_letters: u64,
    /// Reservations are paused.
    pub paused: bool,
    /// The queue's rate limit, or null.
    pub rate_limit: Option<RateLimitJson>,
    /// Milliseconds until the rate limit's next token (0 when one is available or no limit).
    pub throttled_ms: u64,
    /// Tasks with an id that ended `completed` (acked), counted by the backend (ADR 0380).
    #[serde(default)]
    pub completed: u64,
    /// Tasks with an id that ended `failed` (their dead letter was popped or cleared).
    #[serde(default)]
    pub failed: u64,
    /// Tasks with an id that were dead-lettered.
    #[serde(default)]
    pub dead_lettered: u64,
    /// Tasks with an id that ended `cancelled`.
    #[serde(default)]
    pub cancelled: u64,
}

impl QueueStatsJson {
    /// The answer for `queue`'s counts `s`; `dead_letters` repeats `dead`.
    pub fn new(queue: &str, s: &QueueStats) -> Self {
        QueueStatsJson {
            queue: queue.to_string(),
            waiting: s.waiting(),
            tiers: Tiers {
                high: s.high,
                normal: s.normal,
                low: s.low,
            },
            in_flight: s.in_flight,
            overdue: s.overdue,
            scheduled: s.scheduled,
            due: s.due,
            dead: s.dead,
            dead_letters: s.dead,
            paused: s.paused,
            rate_limit: s.rate_limit.map(|l| RateLimitJson {
                max: l.max,
                per_seconds: l.per.as_secs_f64(),
            }),
            throttled_ms: s.throttled_ms,
            completed: s.completed,
            failed: s.failed,
            dead_lettered: s.dead_lettered,
            cancelled: s.cancelled,
        }
    }
}

/// The outcome of a pause or resume.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PauseState {
    pub queue: String,
    /// The queue is paused now.
    pub paused: bool,
    /// This call changed the state.
    pub changed: bool,
}

/// A rate limit to set (`PUT /v1/queues/{queue}/rate-limit`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitBody {
    /// Reservations per `per_seconds` (and the burst a rested queue allows), at least 1.
    #[schema(minimum = 1, maximum = 4294967295u64)]
    pub max: u64,
    /// The refill interval in seconds: at least 0.001, at most 86400.
    #[schema(minimum = 0.001, maximum = 86400)]
    pub per_seconds: f64,
}

impl RateLimitBody {
    /// The limit, or a 422 naming `max` or `per_seconds`.
    pub fn limit(&self) -> Result<RateLimit> {
        let max = super::at_most("max", Some(self.max), u64::from(u32::MAX))?.unwrap_or(0);
        let per = seconds_at_most("per_seconds", Some(self.per_seconds), 86_400.0)?.unwrap_or(0.0);
        RateLimit::new(u32::try_from(max).unwrap_or(u32::MAX), super::secs(per)).map_err(
            |e| match e {
                switchyard_core::Error::InvalidInput { field, reason } => {
                    // The port names the limit's own fields; the client sent the body's.
                    let field = field
                        .replace("rate_limit.per", "per_seconds")
                        .replace("rate_limit.", "");
                    Error::invalid(field.clone(), format!("`{field}` {reason}"))
                }
                other => other.into(),
            },
        )
    }
}

/// The next waiting tasks (`GET /v1/queues/{queue}/tasks`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WaitingTasks {
    pub queue: String,
    /// The stored bodies, decoded (`{"raw": …}` when not JSON).
    pub tasks: Vec<Value>,
}

impl Queues {
    /// The queues that hold tasks (guarantee `queue.names`) with `also` (queues a caller
    /// watches), each once, sorted, without the names no queue route accepts.
    pub async fn names(&self, also: impl IntoIterator<Item = String>) -> Result<QueueList> {
        let mut names: BTreeSet<String> = self.fleet.queue_names().await?.into_iter().collect();
        names.extend(also);
        names.retain(|q| addressable(q));
        Ok(QueueList {
            queues: names.into_iter().collect(),
        })
    }

    /// Every count of `queue`, from one consistent snapshot.
    pub async fn stats(&self, queue: &str) -> Result<QueueStatsJson> {
        let stats = self.fleet.queue_stats(queue).await?;
        Ok(QueueStatsJson::new(queue, &stats))
    }

    /// The next `limit` (default 10, at most 1000) waiting tasks in serve order.
    pub async fn peek(&self, queue: &str, limit: Option<usize>) -> Result<WaitingTasks> {
        let limit = page(limit, 10)?;
        let bodies = self.fleet.queue_peek(queue, limit).await?;
        Ok(WaitingTasks {
            queue: queue.to_string(),
            tasks: bodies.iter().map(|b| body_json(b)).collect(),
        })
    }

    /// Stops (`paused`) or resumes reservations on `queue`, for every consumer; the state is
    /// the backend's.
    pub async fn set_paused(&self, queue: &str, paused: bool) -> Result<PauseState> {
        let changed = if paused {
            self.fleet.queue_pause(queue).await?
        } else {
            self.fleet.queue_resume(queue).await?
        };
        Ok(PauseState {
            queue: queue.to_string(),
            paused,
            changed,
        })
    }

    /// Sets (`Some`, from a full bucket) or removes `queue`'s rate limit; answers its counts.
    pub async fn set_rate_limit(
        &self,
        queue: &str,
        limit: Option<&RateLimitBody>,
    ) -> Result<QueueStatsJson> {
        let limit = limit.map(RateLimitBody::limit).transpose()?;
        self.fleet.queue_set_rate_limit(queue, limit).await?;
        self.stats(queue).await
    }
}

/// Whether a queue name from the data is one the queue routes accept. Other writers (a Python
/// service, a schedule stored before schedules were checked) can fill a queue under a name such
/// as `"a\nb"`; listing it would only hand clients a name every queue route refuses (the console
/// would fail on it), so it is left out, with one warning per name.
fn addressable(queue: &str) -> bool {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock, PoisonError};
    /// Names already warned about; cleared when full, so a hostile writer cannot grow it.
    static WARNED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    const MAX_WARNED: usize = 256;
    let Err(e) = switchyard_core::keys::check_id("queue", queue) else {
        return true;
    };
    let mut warned = WARNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if warned.len() >= MAX_WARNED {
        warned.clear();
    }
    if warned.insert(queue.to_string()) {
        let shown: String = queue.chars().take(64).collect();
        tracing::warn!(
            queue = ?shown,
            bytes = queue.len(),
            reason = %e,
            "a queue holds tasks under a name the queue routes refuse; it is left out of \
             GET /v1/queues and `switchyard queue ls` (drain it with the fleet library, or fix \
             its writer)"
        );
    }
    false
}
