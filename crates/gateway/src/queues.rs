//! Queue routes: submit (in the seed's task envelope, now or later), stats, peek, pause, resume,
//! rate limits, and the worker listing. The rules are the queue service's (ADR 0372); a handler
//! reads the request, calls it and answers what it returns. The worker API (reservations) is in
//! `worker.rs`, dead letters in `dead_letters.rs`, schedules in `schedules.rs`.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use switchyard_service::queues::{
    PageQuery, PauseState, QueueList, QueueStatsJson, RateLimitBody, SubmitBody, Submitted,
    WaitingTasks, WorkerList,
};
use utoipa::IntoParams;

use super::AppState;
use super::admit::Scope;
use super::error::{ApiError, ok_typed};
use super::input::{JsonBody, check_id};
use super::runs::{path_id, query};

/// A body that must be empty or `{}` (pause, resume, ack).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoFields {}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WorkersQuery {
    /// Only workers of this automation type (a token scoped to some queues must name one).
    automation_type: Option<String>,
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
    JsonBody(body): JsonBody<SubmitBody>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let st = state.clone();
    state
        .write(async move {
            let submitted = st.queues.submit(&name, body).await?;
            st.metrics.track_queue(&name);
            let status = if submitted.duplicate {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok(ok_typed(status, submitted))
        })
        .await
}

/// The queues that hold tasks (guarantee `queue.names` of the fleet port), with the queues this
/// gateway watches, each once and sorted; a token sees the queues of its scope only.
#[utoipa::path(
    get,
    path = "/v1/queues",
    operation_id = "list_queues",
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
    let mut names = state.queues.names(state.metrics.known_queues()).await?;
    if let Some(axum::Extension(scope)) = scope {
        names.queues.retain(|q| scope.queue_allowed(q));
    }
    Ok(ok_typed(StatusCode::OK, names))
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
    Ok(ok_typed(StatusCode::OK, state.queues.stats(&name).await?))
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
    _: JsonBody<NoFields, true>,
) -> Result<Response, ApiError> {
    set_paused(state, path, true).await
}

/// Resumes reservations on the queue and wakes waiting reservers.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/resume",
    operation_id = "resume_queue",
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
    _: JsonBody<NoFields, true>,
) -> Result<Response, ApiError> {
    set_paused(state, path, false).await
}

async fn set_paused(
    state: AppState,
    path: Result<Path<String>, PathRejection>,
    paused: bool,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let st = state.clone();
    state
        .write(async move {
            let answer = st.queues.set_paused(&name, paused).await?;
            st.metrics.track_queue(&name);
            Ok(ok_typed(StatusCode::OK, answer))
        })
        .await
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
    JsonBody(body): JsonBody<RateLimitBody>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    // Refused before the write starts, so a bad limit holds no shutdown guard.
    body.limit()?;
    change_rate_limit(state, name, Some(body)).await
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
    limit: Option<RateLimitBody>,
) -> Result<Response, ApiError> {
    let st = state.clone();
    state
        .write(async move {
            let stats = st.queues.set_rate_limit(&name, limit.as_ref()).await?;
            st.metrics.track_queue(&name);
            Ok(ok_typed(StatusCode::OK, stats))
        })
        .await
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
    let limit = query(q)?.limit;
    Ok(ok_typed(
        StatusCode::OK,
        state.queues.peek(&name, limit).await?,
    ))
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
    // A query parameter that cannot be an id is a request the gateway cannot read (400).
    if let Some(t) = &q.automation_type {
        check_id("automation_type", t)?;
    }
    let list = state.queues.workers(q.automation_type.as_deref()).await?;
    Ok(ok_typed(StatusCode::OK, list))
}
