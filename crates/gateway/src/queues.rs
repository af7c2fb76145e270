//! Queue and worker routes: submit (in the seed's task envelope, now or later), stats, peek,
//! pause, resume, rate limits, dead letters and their requeue, workers. The worker API
//! (reservations) is in `worker.rs`, schedules in `schedules.rs`.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_fleet::{PushOptions, Queue};
use switchyard_kit::core::fleet::{RateLimit, RunAt, Submit};
use switchyard_kit::core::{IdempotencyKey, Priority, QueueStats, SubmitOutcome};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::admit::Scope;
use super::error::{ApiError, ok_typed};
use super::input::{Fields, MAX_ATTEMPTS, MAX_DURATION_SECS, object};
use super::runs::{path_id, query};

/// The most bodies one peek or dead-letter listing returns.
pub const MAX_PAGE: usize = 1000;

/// How long a submit's idempotency key is remembered: a day, as `Queue::submit_once` and the
/// seed do.
const IDEMPOTENCY_TTL: std::time::Duration = std::time::Duration::from_secs(86_400);

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// At most this many (at most 1000).
    pub(super) limit: Option<usize>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WorkersQuery {
    /// Only workers of this automation type (a token scoped to some queues must name one).
    automation_type: Option<String>,
}

/// The tier's name in JSON.
pub fn priority_name(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

/// `high`, `normal`, `low`, or the seed's integer (positive high, zero normal, negative low).
pub fn parse_priority(field: &str, value: &Value) -> Result<Priority, ApiError> {
    match value {
        Value::String(s) => match s.as_str() {
            "high" => Ok(Priority::High),
            "normal" => Ok(Priority::Normal),
            "low" => Ok(Priority::Low),
            other => Err(ApiError::invalid(
                field,
                format!("`{field}` {other:?} is not high, normal or low"),
            )),
        },
        Value::Number(n) if n.is_i64() => Ok(Priority::from_int(n.as_i64().unwrap_or(0))),
        _ => Err(ApiError::invalid(
            field,
            format!("`{field}` must be \"high\", \"normal\", \"low\" or an integer"),
        )),
    }
}

/// `high`, `normal` or `low` from the command line.
pub fn parse_priority_text(text: &str) -> switchyard_kit::core::Result<Priority> {
    parse_priority("priority", &Value::String(text.to_string())).map_err(|_| {
        switchyard_kit::core::Error::invalid(
            "--priority",
            format!("{text:?} is not high, normal or low"),
        )
    })
}

/// A stored body as JSON: the envelope when it parses, else `{"raw": "<lossy text>"}`.
pub fn body_json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|_| json!({ "raw": String::from_utf8_lossy(body) }))
}

pub(super) fn page(limit: Option<usize>, default: usize) -> Result<usize, ApiError> {
    match limit.unwrap_or(default) {
        n if n > MAX_PAGE => Err(ApiError::invalid(
            "limit",
            format!("`limit` must be at most {MAX_PAGE}"),
        )),
        n => Ok(n),
    }
}

/// `POST /v1/queues/{queue}/tasks`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)] // the schema of the body; the handler reads it field by field
pub struct SubmitBody {
    /// The task's payload (any JSON).
    payload: Value,
    /// The task id (default: a fresh `uuid4().hex`).
    id: Option<String>,
    /// `high`, `normal` (default), `low`, or the seed's integer.
    #[schema(value_type = Option<Object>)]
    priority: Option<Value>,
    /// Seconds after which a consumer drops the task unrun.
    ttl_seconds: Option<u64>,
    /// Deliveries before the task is dead-lettered.
    max_attempts: Option<u64>,
    /// A second submit with this key within a day enqueues nothing (200 with the first id).
    idempotency_key: Option<String>,
    /// Reservable only after this many seconds (not with `run_at`).
    #[schema(minimum = 0)]
    delay_seconds: Option<f64>,
    /// Reservable only from this instant: unix seconds or an RFC 3339 string (not with
    /// `delay_seconds`). A past instant is now.
    #[schema(value_type = Option<Object>)]
    run_at: Option<Value>,
}

/// A submitted task.
#[derive(Debug, Serialize, ToSchema)]
pub struct Submitted {
    pub queue: String,
    /// The task id (the first task's on a duplicate).
    pub id: String,
    /// The idempotency key was already used: nothing was enqueued.
    pub duplicate: bool,
}

/// `run_at` as unix seconds: a number, or an RFC 3339 string.
fn parse_run_at(value: &Value) -> Result<f64, ApiError> {
    let at = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.timestamp_micros() as f64 / 1e6),
        _ => None,
    };
    let Some(at) = at.filter(|a| a.is_finite() && *a >= 0.0) else {
        return Err(ApiError::invalid(
            "run_at",
            "`run_at` must be unix seconds (a number) or an RFC 3339 string such as \
             \"2026-12-24T18:00:00Z\"",
        ));
    };
    let now = unix_now();
    if at - now > MAX_DURATION_SECS as f64 {
        return Err(ApiError::invalid(
            "run_at",
            "`run_at` is more than ten years away",
        ));
    }
    Ok(at)
}

/// When a submit becomes reservable, from `delay_seconds` or `run_at` (never both).
fn run_at_of(f: &mut Fields) -> Result<RunAt, ApiError> {
    let delay = f.seconds_at_most("delay_seconds", MAX_DURATION_SECS as f64)?;
    let at = f.take("run_at");
    match (delay, at) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "run_at",
            "give `delay_seconds` or `run_at`, not both",
        )),
        (Some(d), None) => Ok(RunAt::After(
            std::time::Duration::try_from_secs_f64(d).unwrap_or_default(),
        )),
        (None, Some(at)) => Ok(RunAt::At(parse_run_at(&at)?)),
        (None, None) => Ok(RunAt::Now),
    }
}

/// Enqueues `payload` in the seed's envelope, now or later (`delay_seconds`, `run_at`); with
/// `idempotency_key` a duplicate enqueues nothing and returns the first task's id (200).
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/tasks",
    tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    request_body(content = SubmitBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Enqueued (or scheduled)", body = Submitted),
        (status = 200, description = "A duplicate of an earlier submit: nothing enqueued", body = Submitted),
        crate::openapi::Failures,
    )
)]
pub async fn submit(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let mut f = Fields::new(
        object(&body, false)?,
        &[
            "payload",
            "id",
            "priority",
            "ttl_seconds",
            "max_attempts",
            "idempotency_key",
            "delay_seconds",
            "run_at",
        ],
    )?;
    let Some(payload) = f.take("payload") else {
        return Err(ApiError::invalid("payload", "`payload` is required"));
    };
    let id = f.id("id")?;
    let priority = match f.take("priority") {
        Some(v) => parse_priority("priority", &v)?,
        None => Priority::Normal,
    };
    let ttl_seconds = f.u64_at_most("ttl_seconds", MAX_DURATION_SECS)?;
    let max_attempts = match f.u64_at_most("max_attempts", MAX_ATTEMPTS)? {
        Some(n) => Some(
            u32::try_from(n)
                .map_err(|_| ApiError::invalid("max_attempts", "`max_attempts` is too large"))?,
        ),
        None => None,
    };
    let key = f.id("idempotency_key")?;
    let run_at = run_at_of(&mut f)?;
    let opts = PushOptions {
        id,
        priority,
        ttl_seconds,
        max_attempts,
    };
    let queue: Queue<Value> = Queue::new(state.fleet.clone(), name.clone());
    let envelope = queue.envelope(&payload, &opts)?;
    let fleet = state.fleet.clone();
    let metrics = state.metrics.clone();
    state
        .write(async move {
            let id = envelope.id();
            let ns = format!("idem:{name}");
            let mut submit = Submit::new().priority(priority).run_at(run_at);
            if let Some(key) = &key {
                // The key's value is the task id, so a duplicate answers with the first id.
                submit = submit.idem(IdempotencyKey {
                    ns: &ns,
                    key,
                    value: id.as_bytes(),
                    ttl: Some(IDEMPOTENCY_TTL),
                });
            }
            let outcome = fleet
                .queue_submit(&name, &envelope.to_bytes(), &submit)
                .await?;
            let (id, duplicate) = match outcome {
                SubmitOutcome::Enqueued => (id, false),
                SubmitOutcome::Duplicate(first) => {
                    (String::from_utf8_lossy(&first).into_owned(), true)
                }
            };
            metrics.track_queue(&name);
            let status = if duplicate {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok(ok_typed(
                status,
                Submitted {
                    queue: name,
                    id,
                    duplicate,
                },
            ))
        })
        .await
}

/// The gateway's clock in unix seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `GET /v1/queues`.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueList {
    pub queues: Vec<String>,
}

/// The queues that hold tasks (guarantee `queue.names` of the fleet port), with the queues this
/// gateway watches, each once and sorted; a token sees the queues of its scope only.
#[utoipa::path(
    get,
    path = "/v1/queues",
    tag = "queues",
    responses(
        (status = 200, description = "Queue names", body = QueueList),
        crate::openapi::Failures,
    )
)]
pub async fn list(
    State(state): State<AppState>,
    scope: Option<axum::Extension<Scope>>,
) -> Result<Response, ApiError> {
    let mut names: std::collections::BTreeSet<String> =
        state.fleet.queue_names().await?.into_iter().collect();
    names.extend(state.metrics.known_queues());
    names.retain(|q| addressable(q));
    if let Some(axum::Extension(scope)) = scope {
        names.retain(|q| scope.queue_allowed(q));
    }
    Ok(ok_typed(
        StatusCode::OK,
        QueueList {
            queues: names.into_iter().collect(),
        },
    ))
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
    let Err(e) = switchyard_kit::core::keys::check_id("queue", queue) else {
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
             GET /v1/queues (drain it with the fleet library, or fix its writer)"
        );
    }
    false
}

/// Tasks waiting per tier.
#[derive(Debug, Serialize, ToSchema)]
pub struct Tiers {
    pub high: u64,
    pub normal: u64,
    pub low: u64,
}

/// A rate limit: at most `max` reservations per `per_seconds`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RateLimitJson {
    pub max: u32,
    pub per_seconds: f64,
}

/// Every count of a queue, from one consistent snapshot.
#[derive(Debug, Serialize, ToSchema)]
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
}

/// One queue's counts as JSON, shared by the stats route and `switchyard queue stats --json`.
/// `dead_letters` repeats `dead` under the name the route has always used.
pub fn stats_json(queue: &str, s: &QueueStats) -> Value {
    serde_json::to_value(stats_body(queue, s)).unwrap_or(Value::Null)
}

fn stats_body(queue: &str, s: &QueueStats) -> QueueStatsJson {
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
    }
}

async fn read_stats(state: &AppState, name: &str) -> Result<Response, ApiError> {
    let stats = state.fleet.queue_stats(name).await?;
    Ok(ok_typed(StatusCode::OK, stats_body(name, &stats)))
}

/// Every count of the queue, from one consistent snapshot.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}",
    tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    responses(
        (status = 200, description = "The queue's counts", body = QueueStatsJson),
        crate::openapi::Failures,
    )
)]
pub async fn stats(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    read_stats(&state, &name).await
}

/// The outcome of a pause or resume.
#[derive(Debug, Serialize, ToSchema)]
pub struct PauseState {
    pub queue: String,
    /// The queue is paused now.
    pub paused: bool,
    /// This call changed the state.
    pub changed: bool,
}

/// Stops reservations on the queue (submits, acks and everything else still work); the state is
/// kept by the backend, for every gateway and consumer.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/pause",
    tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    responses(
        (status = 200, description = "Paused", body = PauseState),
        crate::openapi::Failures,
    )
)]
pub async fn pause(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    set_paused(state, path, body, true).await
}

/// Resumes reservations on the queue and wakes waiting reservers.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/resume",
    tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    responses(
        (status = 200, description = "Running", body = PauseState),
        crate::openapi::Failures,
    )
)]
pub async fn resume(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    set_paused(state, path, body, false).await
}

async fn set_paused(
    state: AppState,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
    paused: bool,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    Fields::new(object(&body, true)?, &[])?;
    let fleet = state.fleet.clone();
    let metrics = state.metrics.clone();
    state
        .write(async move {
            let changed = if paused {
                fleet.queue_pause(&name).await?
            } else {
                fleet.queue_resume(&name).await?
            };
            metrics.track_queue(&name);
            Ok(ok_typed(
                StatusCode::OK,
                PauseState {
                    queue: name,
                    paused,
                    changed,
                },
            ))
        })
        .await
}

/// `PUT /v1/queues/{queue}/rate-limit`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct RateLimitBody {
    /// Reservations per `per_seconds` (and the burst a rested queue allows), at least 1.
    #[schema(minimum = 1, maximum = 4294967295u64)]
    max: u64,
    /// The refill interval in seconds: at least 0.001, at most 86400.
    #[schema(minimum = 0.001, maximum = 86400)]
    per_seconds: f64,
}

/// Sets the queue's rate limit, kept by the backend for every consumer of every process; it
/// starts with a full bucket. Answers the queue's stats.
#[utoipa::path(
    put,
    path = "/v1/queues/{queue}/rate-limit",
    tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    request_body(content = RateLimitBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The queue's stats with the new limit", body = QueueStatsJson),
        crate::openapi::Failures,
    )
)]
pub async fn set_rate_limit(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let mut f = Fields::new(object(&body, false)?, &["max", "per_seconds"])?;
    let Some(max) = f.u64_at_most("max", u64::from(u32::MAX))? else {
        return Err(ApiError::invalid("max", "`max` is required"));
    };
    let Some(per) = f.seconds_at_most("per_seconds", 86_400.0)? else {
        return Err(ApiError::invalid(
            "per_seconds",
            "`per_seconds` is required",
        ));
    };
    let limit = RateLimit::new(
        u32::try_from(max).unwrap_or(u32::MAX),
        std::time::Duration::try_from_secs_f64(per).unwrap_or_default(),
    )
    .map_err(|e| match e {
        switchyard_kit::core::Error::InvalidInput { field, reason } => {
            let field = field
                .replace("rate_limit.per", "per_seconds")
                .replace("rate_limit.", "");
            ApiError::invalid(field.clone(), format!("`{field}` {reason}"))
        }
        other => other.into(),
    })?;
    change_rate_limit(state, name, Some(limit)).await
}

/// Removes the queue's rate limit. Answers the queue's stats.
#[utoipa::path(
    delete,
    path = "/v1/queues/{queue}/rate-limit",
    tag = "queues",
    params(("queue" = String, Path, description = "The queue")),
    responses(
        (status = 200, description = "The queue's stats without a limit", body = QueueStatsJson),
        crate::openapi::Failures,
    )
)]
pub async fn clear_rate_limit(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    change_rate_limit(state, name, None).await
}

async fn change_rate_limit(
    state: AppState,
    name: String,
    limit: Option<RateLimit>,
) -> Result<Response, ApiError> {
    let st = state.clone();
    state
        .write(async move {
            st.fleet.queue_set_rate_limit(&name, limit).await?;
            st.metrics.track_queue(&name);
            read_stats(&st, &name).await
        })
        .await
}

/// `GET /v1/queues/{queue}/tasks`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WaitingTasks {
    pub queue: String,
    /// The stored bodies, decoded (`{"raw": …}` when not JSON).
    pub tasks: Vec<Value>,
}

/// The next waiting tasks in serve order.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/tasks",
    tag = "queues",
    params(("queue" = String, Path, description = "The queue"), PageQuery),
    responses(
        (status = 200, description = "Waiting tasks", body = WaitingTasks),
        crate::openapi::Failures,
    )
)]
pub async fn peek(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let limit = page(query(q)?.limit, 10)?;
    let bodies = state.fleet.queue_peek(&name, limit).await?;
    Ok(ok_typed(
        StatusCode::OK,
        WaitingTasks {
            queue: name,
            tasks: bodies.iter().map(|b| body_json(b)).collect(),
        },
    ))
}

/// `GET /v1/workers`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerList {
    /// Registered workers (`automation_type`, `worker_id`, `state`, `last_seen`, …).
    pub workers: Vec<Value>,
}

/// Registered workers.
#[utoipa::path(
    get,
    path = "/v1/workers",
    tag = "queues",
    params(WorkersQuery),
    responses(
        (status = 200, description = "Workers", body = WorkerList),
        crate::openapi::Failures,
    )
)]
pub async fn workers(
    State(state): State<AppState>,
    q: Result<Query<WorkersQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    if let Some(t) = &q.automation_type {
        super::input::check_id("automation_type", t)?;
    }
    let list = worker_records(state.fleet.as_ref(), q.automation_type.as_deref()).await?;
    Ok(ok_typed(StatusCode::OK, WorkerList { workers: list }))
}

/// Every registered worker (of one type) as JSON, shared with `switchyard workers ls`.
pub async fn worker_records(
    fleet: &dyn switchyard_kit::core::FleetBackend,
    automation_type: Option<&str>,
) -> switchyard_kit::core::Result<Vec<Value>> {
    let mut out = Vec::new();
    for (at, wid) in fleet.worker_list(automation_type).await? {
        let Some(r) = fleet.worker_get(&at, &wid).await? else {
            continue;
        };
        out.push(json!({
            "automation_type": at,
            "worker_id": wid,
            "state": r.state,
            "last_seen": r.last_seen,
            "last_error": r.last_error,
            "config_gen": r.config_gen,
            "applied_gen": r.applied_gen,
            "config": r.config,
            "hardware": r.hardware,
            "stats": r.stats,
        }));
    }
    Ok(out)
}
