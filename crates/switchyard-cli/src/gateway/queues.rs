//! Queue and worker routes: submit (in the seed's task envelope), stats, peek, dead letters,
//! replay, workers.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_kit::core::{Priority, QueueStats};
use switchyard_kit::fleet::typed::{PushOptions, Queue, Submitted};

use super::AppState;
use super::admit::Scope;
use super::error::{ApiError, ok_json};
use super::input::{Fields, MAX_ATTEMPTS, MAX_DURATION_SECS, MAX_REPLAY, object};
use super::metrics::PortName;
use super::runs::{path_id, query};

/// The most bodies one peek or dead-letter listing returns.
pub const MAX_PAGE: usize = 1000;

#[derive(Debug, Deserialize)]
pub struct PageQuery {
    limit: Option<usize>,
}

#[derive(Debug, Deserialize)]
pub struct WorkersQuery {
    automation_type: Option<String>,
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

fn page(limit: Option<usize>, default: usize) -> Result<usize, ApiError> {
    match limit.unwrap_or(default) {
        n if n > MAX_PAGE => Err(ApiError::invalid(
            "limit",
            format!("`limit` must be at most {MAX_PAGE}"),
        )),
        n => Ok(n),
    }
}

/// `POST /v1/queues/{queue}/tasks`: enqueue `payload` in the seed's envelope; with
/// `idempotency_key` a duplicate enqueues nothing and returns the first task's id (200).
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
    let opts = PushOptions {
        id,
        priority,
        ttl_seconds,
        max_attempts,
    };
    let queue: Queue<Value> = Queue::new(state.fleet.clone(), name.clone());
    let metrics = state.metrics.clone();
    state
        .write(async move {
            let (id, duplicate) = match key {
                Some(key) => {
                    let submitted = metrics
                        .call(
                            PortName::Fleet,
                            "queue_submit_once",
                            queue.submit_once(&key, &payload, opts),
                        )
                        .await?;
                    match submitted {
                        Submitted::Enqueued(id) => (id, false),
                        Submitted::Duplicate(id) => (id, true),
                    }
                }
                None => {
                    let id = metrics
                        .call(
                            PortName::Fleet,
                            "queue_push",
                            queue.push_with(&payload, opts),
                        )
                        .await?;
                    (id, false)
                }
            };
            metrics.track_queue(&name);
            let status = if duplicate {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok(ok_json(
                status,
                json!({ "queue": name, "id": id, "duplicate": duplicate }),
            ))
        })
        .await
}

/// `GET /v1/queues`: the queues that hold tasks (guarantee 24 of the fleet port), with the
/// queues this gateway watches, each once and sorted; a token sees the queues of its scope only.
pub async fn list(
    State(state): State<AppState>,
    scope: Option<axum::Extension<Scope>>,
) -> Result<Response, ApiError> {
    let mut names: std::collections::BTreeSet<String> = state
        .metrics
        .call(PortName::Fleet, "queue_names", state.fleet.queue_names())
        .await?
        .into_iter()
        .collect();
    names.extend(state.metrics.known_queues());
    if let Some(axum::Extension(scope)) = scope {
        names.retain(|q| scope.queue_allowed(q));
    }
    Ok(ok_json(
        StatusCode::OK,
        json!({ "queues": names.into_iter().collect::<Vec<_>>() }),
    ))
}

/// One queue's counts as JSON, shared by the stats route and `switchyard queue stats --json`.
/// `dead_letters` repeats `dead` under the name the route has always used.
pub fn stats_json(queue: &str, s: &QueueStats) -> Value {
    json!({
        "queue": queue,
        "waiting": s.waiting(),
        "tiers": { "high": s.high, "normal": s.normal, "low": s.low },
        "in_flight": s.in_flight,
        "overdue": s.overdue,
        "scheduled": s.scheduled,
        "due": s.due,
        "dead": s.dead,
        "dead_letters": s.dead,
    })
}

/// `GET /v1/queues/{queue}`: every count of the queue, from one consistent snapshot.
pub async fn stats(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let stats = state
        .metrics
        .call(
            PortName::Fleet,
            "queue_stats",
            state.fleet.queue_stats(&name),
        )
        .await?;
    Ok(ok_json(StatusCode::OK, stats_json(&name, &stats)))
}

/// `GET /v1/queues/{queue}/tasks?limit=`: the next waiting tasks in serve order.
pub async fn peek(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let limit = page(query(q)?.limit, 10)?;
    let bodies = state
        .metrics
        .call(
            PortName::Fleet,
            "queue_peek",
            state.fleet.queue_peek(&name, limit),
        )
        .await?;
    Ok(ok_json(
        StatusCode::OK,
        json!({ "queue": name, "tasks": bodies.iter().map(|b| body_json(b)).collect::<Vec<_>>() }),
    ))
}

/// `GET /v1/queues/{queue}/dead-letters?limit=`: dead-lettered tasks, oldest first.
pub async fn dead_letters(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let limit = page(query(q)?.limit, 20)?;
    let bodies = state
        .metrics
        .call(
            PortName::Fleet,
            "dlq_peek",
            state.fleet.dlq_peek(&name, limit),
        )
        .await?;
    let total = state
        .metrics
        .call(PortName::Fleet, "dlq_length", state.fleet.dlq_length(&name))
        .await?;
    Ok(ok_json(
        StatusCode::OK,
        json!({
            "queue": name,
            "total": total,
            "dead_letters": bodies.iter().map(|b| body_json(b)).collect::<Vec<_>>(),
        }),
    ))
}

/// `POST /v1/queues/{queue}/dead-letters/replay` `{"limit"?: n, "priority"?: …}`: moves dead
/// letters back to the queue atomically, with a fresh attempt count.
pub async fn replay(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let mut f = Fields::new(object(&body, true)?, &["limit", "priority"])?;
    let limit = f.u64_at_most("limit", MAX_REPLAY)?;
    let priority = match f.take("priority") {
        Some(v) => parse_priority("priority", &v)?,
        None => Priority::Normal,
    };
    let fleet = state.fleet.clone();
    let metrics = state.metrics.clone();
    state
        .write(async move {
            let n = match limit {
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
                None => {
                    let total = metrics
                        .call(PortName::Fleet, "dlq_length", fleet.dlq_length(&name))
                        .await?;
                    usize::try_from(total).unwrap_or(usize::MAX)
                }
            };
            let replayed = if n == 0 {
                0
            } else {
                metrics
                    .call(
                        PortName::Fleet,
                        "dlq_requeue",
                        fleet.dlq_requeue(&name, n, priority),
                    )
                    .await?
            };
            Ok(ok_json(
                StatusCode::OK,
                json!({ "queue": name, "replayed": replayed }),
            ))
        })
        .await
}

/// `GET /v1/workers?automation_type=`: registered workers.
pub async fn workers(
    State(state): State<AppState>,
    q: Result<Query<WorkersQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    if let Some(t) = &q.automation_type {
        super::input::check_id("automation_type", t)?;
    }
    let list = state
        .metrics
        .call(
            PortName::Fleet,
            "worker_list",
            worker_records(state.fleet.as_ref(), q.automation_type.as_deref()),
        )
        .await?;
    Ok(ok_json(StatusCode::OK, json!({ "workers": list })))
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
