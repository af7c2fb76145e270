//! Recurring schedules (ADR 0308): `GET /v1/schedules`, `PUT/GET/DELETE /v1/schedules/{name}`.
//! The body is the typed layer's schedule document; the queue service checks and stores it
//! (ADR 0372) and the scheduler of any gateway or process fires it.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use switchyard_service::queues::{Deleted, Schedule, ScheduleList};

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::object;
use super::openapi::ErrorBody;
use super::runs::path_id;

/// Every schedule, sorted by name.
#[utoipa::path(
    get,
    path = "/v1/schedules",
    operation_id = "list_schedules",
    tag = "schedules",
    responses(
        (status = 200, description = "Schedules", body = ScheduleList),
        crate::openapi::Failures,
    )
)]
pub async fn list(State(state): State<AppState>) -> Result<Response, ApiError> {
    Ok(ok_typed(StatusCode::OK, state.queues.schedules().await?))
}

/// Creates or replaces a schedule.
#[utoipa::path(
    put,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    request_body(content = Object, content_type = "application/json", description = "The schedule: `cron` (with seconds, e.g. `0 */5 * * * *`), `timezone`? (IANA, default UTC), `queue`, `payload`?, `priority`? (integer), `catch_up`? (`latest` or `skip`), `enabled`?, `created_at`? (unix seconds, default now)"),
    responses(
        (status = 200, description = "Stored", body = Schedule),
        crate::openapi::Failures,
    )
)]
pub async fn put(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let name = path_id(path, "name")?;
    // The document is the schedule layer's own (it names an unknown field `schedule`), so the
    // body is read as an object and handed over whole.
    let doc = object(&body, false)?;
    let queues = state.queues.clone();
    state
        .write(async move {
            let stored = queues.put_schedule(&name, doc).await?;
            Ok(ok_typed(StatusCode::OK, stored))
        })
        .await
}

/// One schedule.
#[utoipa::path(
    get,
    path = "/v1/schedules/{name}",
    operation_id = "get_schedule",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 200, description = "The schedule", body = Schedule),
        (status = 404, description = "`unknown_schedule`", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn get(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "name")?;
    Ok(ok_typed(
        StatusCode::OK,
        state.queues.schedule(&name).await?,
    ))
}

/// Deletes a schedule; ticks already enqueued stay in their queue.
#[utoipa::path(
    delete,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 200, description = "Deleted (or there was none)", body = Deleted),
        crate::openapi::Failures,
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "name")?;
    let queues = state.queues.clone();
    state
        .write(async move {
            Ok(ok_typed(
                StatusCode::OK,
                queues.delete_schedule(&name).await?,
            ))
        })
        .await
}
