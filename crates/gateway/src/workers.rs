//! The worker registry over HTTP (ADR 0352): an HTTP worker registers, heartbeats with the
//! tasks it holds, and deregisters, so the console and `switchyard workers ls` show it beside
//! the library's and the seed's workers.
//!
//! The records are the fleet registry's (`worker_register`, `worker_set_state`,
//! `worker_set_stats`), so the registry's rule for idle workers applies to HTTP workers too:
//! the queue maintainer evicts a worker whose last heartbeat is older than the idle TTL
//! (`serve --worker-idle-ttl-secs`), and a heartbeat after that answers 404 `not_registered`
//! (register again).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchyard_kit::core::fleet::WorkerState;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::{Fields, check_id, object};
use super::openapi::ErrorBody;
use super::worker::unix_now;

/// The most task ids one heartbeat may report.
pub const MAX_HELD_TASKS: usize = 1000;
/// The largest hardware or stats document a worker may store (compact JSON).
const MAX_DOC_BYTES: usize = 64 * 1024;
/// The longest state name or error a worker may report.
const MAX_STATE_BYTES: usize = 64;
const MAX_ERROR_BYTES: usize = 4096;
/// The key of the stats document under which a heartbeat keeps the tasks the worker holds.
const HELD_KEY: &str = "held_tasks";

/// The automation type and id of a worker route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct WorkerPath {
    /// The worker's automation type (its queue, for a token's queue scope).
    automation_type: String,
    /// The worker's id.
    worker_id: String,
}

/// `PUT /v1/workers/{automation_type}/{worker_id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct RegisterBody {
    /// What the worker runs on (any JSON object, at most 64 KiB).
    #[schema(value_type = Option<Object>)]
    hardware: Option<Value>,
}

/// `POST …/heartbeat`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct HeartbeatBody {
    /// The worker's state (default `RUNNING`; at most 64 bytes).
    state: Option<String>,
    /// The worker's last error, or null to clear it (at most 4096 bytes).
    last_error: Option<String>,
    /// The ids of the tasks the worker holds now (at most 1000).
    tasks: Option<Vec<String>>,
    /// The config generation the worker has applied.
    applied_gen: Option<u64>,
    /// A stats document (any JSON object, at most 64 KiB); the held tasks are kept in it as
    /// `held_tasks`.
    #[schema(value_type = Option<Object>)]
    stats: Option<Value>,
}

/// A registered worker, as a heartbeat or a registration answers it.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerAnswer {
    pub automation_type: String,
    pub worker_id: String,
    /// The desired config (apply it when `config_gen` is newer than what you applied).
    #[schema(value_type = Object)]
    pub config: Value,
    pub config_gen: u64,
    /// Heartbeat at least this often (seconds) to stay registered.
    pub heartbeat_seconds: u64,
    /// A worker silent for longer than this is evicted (seconds; null: never).
    pub idle_ttl_seconds: Option<u64>,
}

/// `DELETE /v1/workers/{automation_type}/{worker_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deregistered {
    /// False when the worker was not registered.
    pub removed: bool,
}

fn worker_path(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, String), ApiError> {
    let Path((automation_type, worker_id)) =
        path.map_err(|e| ApiError::bad_request("path", e.body_text()))?;
    check_id("automation_type", &automation_type)?;
    check_id("worker_id", &worker_id)?;
    Ok((automation_type, worker_id))
}

/// A JSON object of at most 64 KiB, compact.
fn document(field: &str, value: Option<Value>) -> Result<Option<Map<String, Value>>, ApiError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let Value::Object(map) = value else {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` must be a JSON object"),
        ));
    };
    let size = serde_json::to_vec(&map).map(|v| v.len()).unwrap_or(0);
    if size > MAX_DOC_BYTES {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` is larger than 64 KiB"),
        ));
    }
    Ok(Some(map))
}

fn bounded(field: &str, value: Option<String>, max: usize) -> Result<Option<String>, ApiError> {
    match value {
        Some(v) if v.len() > max => Err(ApiError::invalid(
            field,
            format!("`{field}` is longer than {max} bytes"),
        )),
        Some(v) if v.chars().any(char::is_control) => Err(ApiError::invalid(
            field,
            format!("`{field}` must not contain control characters"),
        )),
        other => Ok(other),
    }
}

/// Seconds between heartbeats that keep a worker well inside the idle TTL.
fn heartbeat_seconds(idle_ttl: Option<std::time::Duration>) -> u64 {
    idle_ttl.map_or(15, |ttl| (ttl.as_secs() / 4).clamp(1, 15))
}

async fn answer(
    state: &AppState,
    automation_type: String,
    worker_id: String,
) -> Result<Response, ApiError> {
    let fleet = state.fleet.clone();
    let config = fleet
        .worker_get_config(&automation_type, &worker_id)
        .await?;
    let (config, config_gen) = config;
    Ok(ok_typed(
        StatusCode::OK,
        WorkerAnswer {
            automation_type,
            worker_id,
            config,
            config_gen,
            heartbeat_seconds: heartbeat_seconds(state.worker_idle_ttl),
            idle_ttl_seconds: state.worker_idle_ttl.map(|t| t.as_secs()),
        },
    ))
}

fn not_registered() -> ApiError {
    ApiError::not_found(
        "not_registered",
        "the worker is not registered (it was deregistered, or evicted after its heartbeats \
         stopped for longer than the idle TTL): register it again with PUT",
    )
}

/// Registers the worker (or updates its hardware) and marks it seen now, `IDLE`.
#[utoipa::path(
    put,
    path = "/v1/workers/{automation_type}/{worker_id}",
    tag = "workers",
    params(WorkerPath),
    request_body(content = Option<RegisterBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "Registered; the desired config", body = WorkerAnswer),
        crate::openapi::Failures,
    )
)]
pub async fn register(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (automation_type, worker_id) = worker_path(path)?;
    let mut f = Fields::new(object(&body, true)?, &["hardware"])?;
    let hardware = Value::Object(document("hardware", f.take("hardware"))?.unwrap_or_default());
    let st = state.clone();
    state
        .write(async move {
            let fleet = st.fleet.clone();
            fleet
                .worker_register(&automation_type, &worker_id, &hardware)
                .await?;
            // Seen from the registration on, so the idle rule counts from now, not from 1970.
            let seen = WorkerState {
                state: "IDLE",
                last_error: None,
                last_seen: unix_now(),
                applied_gen: None,
            };
            fleet
                .worker_set_state(&automation_type, &worker_id, seen)
                .await?;
            answer(&st, automation_type, worker_id).await
        })
        .await
}

/// Reports the worker alive, with its state and the tasks it holds; answers its desired config.
#[utoipa::path(
    post,
    path = "/v1/workers/{automation_type}/{worker_id}/heartbeat",
    tag = "workers",
    params(WorkerPath),
    request_body(content = Option<HeartbeatBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "Seen; the desired config", body = WorkerAnswer),
        (status = 404, description = "`not_registered`: register again", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn heartbeat(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (automation_type, worker_id) = worker_path(path)?;
    let mut f = Fields::new(
        object(&body, true)?,
        &["state", "last_error", "tasks", "applied_gen", "stats"],
    )?;
    let worker_state = bounded("state", f.string("state")?, MAX_STATE_BYTES)?
        .unwrap_or_else(|| "RUNNING".to_string());
    if worker_state.is_empty() {
        return Err(ApiError::invalid("state", "`state` must not be empty"));
    }
    let last_error = bounded("last_error", f.string("last_error")?, MAX_ERROR_BYTES)?;
    let applied_gen = f.u64("applied_gen")?;
    let tasks = match f.take("tasks") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            if items.len() > MAX_HELD_TASKS {
                return Err(ApiError::invalid(
                    "tasks",
                    format!("`tasks` lists more than {MAX_HELD_TASKS} ids"),
                ));
            }
            let mut ids = Vec::with_capacity(items.len());
            for item in items {
                let Value::String(id) = item else {
                    return Err(ApiError::invalid(
                        "tasks",
                        "`tasks` must be a list of task ids",
                    ));
                };
                check_id("tasks", &id)?;
                ids.push(Value::String(id));
            }
            Some(ids)
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "tasks",
                "`tasks` must be a list of task ids",
            ));
        }
    };
    let stats = document("stats", f.take("stats"))?;
    let st = state.clone();
    state
        .write(async move {
            let fleet = st.fleet.clone();
            let seen = WorkerState {
                state: &worker_state,
                last_error: last_error.as_deref(),
                last_seen: unix_now(),
                applied_gen,
            };
            let known = fleet
                .worker_set_state(&automation_type, &worker_id, seen)
                .await?;
            if !known {
                return Err(not_registered());
            }
            if stats.is_some() || tasks.is_some() {
                let mut doc = stats.unwrap_or_default();
                if let Some(tasks) = tasks {
                    doc.insert(HELD_KEY.into(), Value::Array(tasks));
                }
                let doc = Value::Object(doc);
                fleet
                    .worker_set_stats(&automation_type, &worker_id, &doc)
                    .await?;
            }
            answer(&st, automation_type, worker_id).await
        })
        .await
}

/// Removes the worker from the registry (a worker stopping on purpose).
#[utoipa::path(
    delete,
    path = "/v1/workers/{automation_type}/{worker_id}",
    tag = "workers",
    params(WorkerPath),
    responses(
        (status = 200, description = "Removed (or was not registered)", body = Deregistered),
        crate::openapi::Failures,
    )
)]
pub async fn deregister(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let (automation_type, worker_id) = worker_path(path)?;
    let st = state.clone();
    state
        .write(async move {
            let fleet = st.fleet.clone();
            let removed = fleet.worker_remove(&automation_type, &worker_id).await?;
            Ok(ok_typed(StatusCode::OK, Deregistered { removed }))
        })
        .await
}
