//! The worker registry over HTTP (ADR 0352): an HTTP worker registers, heartbeats with the
//! tasks it holds, and deregisters, so the console and `switchyard workers ls` show it beside
//! the library's and the seed's workers. The rules are the queue service's (ADR 0372); the
//! gateway adds its idle TTL (`serve --worker-idle-ttl-secs`), which tells a worker how often
//! to heartbeat, and after which a heartbeat answers 404 `not_registered` (register again).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use switchyard_service::queues::{Deregistered, HeartbeatBody, RegisterBody, WorkerAnswer};
use utoipa::IntoParams;

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::{JsonBody, check_id};
use super::openapi::ErrorBody;

/// The automation type and id of a worker route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // the schema of the path; the handlers read it as a tuple
pub struct WorkerPath {
    /// The worker's automation type (its queue, for a token's queue scope).
    automation_type: String,
    /// The worker's id.
    worker_id: String,
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
    JsonBody(body): JsonBody<RegisterBody, true>,
) -> Result<Response, ApiError> {
    let (automation_type, worker_id) = worker_path(path)?;
    let queues = state.queues.clone();
    let idle_ttl = state.worker_idle_ttl;
    state
        .write(async move {
            let answer = queues
                .register(&automation_type, &worker_id, body, idle_ttl)
                .await?;
            Ok(ok_typed(StatusCode::OK, answer))
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
    JsonBody(body): JsonBody<HeartbeatBody, true>,
) -> Result<Response, ApiError> {
    let (automation_type, worker_id) = worker_path(path)?;
    // A held task's id the gateway could not route is a 400, as it has always been; the
    // service refuses it too (422) for callers that reach it directly.
    for id in body.tasks.iter().flatten() {
        check_id("tasks", id)?;
    }
    let queues = state.queues.clone();
    let idle_ttl = state.worker_idle_ttl;
    state
        .write(async move {
            let answer = queues
                .heartbeat(&automation_type, &worker_id, body, idle_ttl)
                .await?;
            Ok(ok_typed(StatusCode::OK, answer))
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
    let queues = state.queues.clone();
    state
        .write(async move {
            let removed = queues.deregister(&automation_type, &worker_id).await?;
            Ok(ok_typed(StatusCode::OK, removed))
        })
        .await
}
