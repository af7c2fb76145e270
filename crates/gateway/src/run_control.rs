//! Run control routes (ADR 0396): cancel a run, and follow the signals its worker must act on.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use switchyard_service::runs::{CancelRun, CancelRunAnswer, SessionLine, is_signal};

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::{JsonBody, run_context};
use super::runs::{RunQuery, path_id, query};

/// `POST /v1/runs/{run_id}/cancel`: records the cancel as the run's `control.requested` (its
/// worker learns it at once on the run's stream and signals), cancels the queue task named as
/// carrying it, and ends the run `cancelled` when the grace period runs out unless its worker
/// ended it first.
#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/cancel",
    operation_id = "cancel_run",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace")),
    request_body(content = Option<CancelRun>, content_type = "application/json", description = "Optional: an empty body cancels with the default grace period (30 s)"),
    responses(
        (status = 202, description = "`requested`: the worker was told; the run ends `cancelled` when it confirms, or at `ends_by`", body = CancelRunAnswer),
        (status = 200, description = "`ended` (a grace of 0), `left_line` (it was waiting for its session and will not start) or `finished` (it had ended; nothing changed)", body = CancelRunAnswer),
        (status = 404, description = "`unknown_run`: no such run in this log", body = crate::openapi::ErrorBody),
        (status = 422, description = "`invalid_input`: `grace_secs` above 3600, or a bad task reference (`field` names it)", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
    JsonBody(request): JsonBody<CancelRun, true>,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    let runs = state.runs.clone();
    let answer = state
        .write(async move { Ok(runs.cancel(&ctx, request).await?) })
        .await?;
    let status = match answer.outcome {
        switchyard_service::runs::CancelDone::Requested => StatusCode::ACCEPTED,
        _ => StatusCode::OK,
    };
    Ok(ok_typed(status, &answer))
}

/// `GET /v1/runs/{run_id}/signals`: what the run's worker must act on, as Server-Sent Events:
/// every `control.*` event (a cancel, pause or steer request) and the run's end, live, with
/// `Last-Event-ID` resuming as on the run's stream. A worker follows it instead of the whole
/// stream, or polling the log.
#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}/signals",
    operation_id = "run_signals",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace"), ("ticket" = Option<String>, Query, description = "A stream ticket instead of `Authorization`")),
    responses(
        (status = 200, description = "Server-Sent Events: the run's control events and its end", content_type = "text/event-stream"),
        (status = 404, description = "`unknown_run`: no such run in this log; `no_stream`: the run finished and its stream was released", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn signals(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    super::stream::follow(state, path, q, headers, is_signal).await
}

/// The namespace of a session's line.
#[derive(Debug, Deserialize)]
pub struct LineQuery {
    pub namespace: Option<String>,
}

/// `GET /v1/sessions/{session}/line`: the runs waiting for a session, the next to start first
/// (ADR 0394).
#[utoipa::path(
    get,
    path = "/v1/sessions/{session}/line",
    operation_id = "session_line",
    tag = "runs",
    params(("session" = String, Path, description = "The session"), ("namespace" = Option<String>, Query, description = "The session's namespace")),
    responses(
        (status = 200, description = "The waiting runs with their places (an empty list when none waits)", body = SessionLine),
        crate::openapi::Failures,
    )
)]
pub async fn line(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<LineQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let session = path_id(path, "session")?;
    let q = query(q)?;
    let ctx = run_context("line", Some(&session), q.namespace.as_deref())?;
    let line = state.runs.line(&ctx).await?;
    Ok(ok_typed(StatusCode::OK, &line))
}
