//! Recurring schedules (ADR 0308): `GET /v1/schedules`, `PUT/GET/DELETE /v1/schedules/{name}`.
//! The body is the typed layer's schedule document; the backend stores it (guarantee
//! `schedule.stored`) and the scheduler of any gateway or process fires it.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::object;
use super::openapi::ErrorBody;
use super::runs::path_id;
use switchyard_fleet::ScheduleSpec;

/// A schedule document as stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct Schedule {
    /// The schedule's name.
    pub name: String,
    /// Its document: `cron`, `timezone`, `queue`, `payload`, `priority`, `catch_up`, `enabled`,
    /// `created_at`.
    pub spec: Value,
}

/// `GET /v1/schedules`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    /// Every schedule, by name.
    pub schedules: Vec<Schedule>,
}

/// `DELETE /v1/schedules/{name}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    pub name: String,
    /// A schedule of that name existed.
    pub deleted: bool,
}

/// Reads a stored document for display (the bytes are JSON written by this layer).
fn spec_view(doc: &[u8]) -> Value {
    super::queues::body_json(doc)
}

/// Validates a client's document (`ScheduleSpec::validate`, 422 naming the field) and returns the
/// bytes to store. Without `created_at` the schedule is created now: ticks before the request do
/// not fire.
fn validate(body: &Bytes) -> Result<(Vec<u8>, Value), ApiError> {
    let mut map = object(body, false)?;
    if !map.contains_key("created_at") {
        map.insert(
            "created_at".into(),
            Value::from(super::queues::unix_now().floor() as i64),
        );
    }
    let raw =
        serde_json::to_vec(&Value::Object(map)).map_err(|e| ApiError::internal(e.to_string()))?;
    let spec = ScheduleSpec::from_json(&raw)?;
    let doc = spec.to_json();
    Ok((doc.clone(), spec_view(&doc)))
}

/// Every schedule, sorted by name.
#[utoipa::path(
    get,
    path = "/v1/schedules",
    tag = "schedules",
    responses(
        (status = 200, description = "Schedules", body = ScheduleList),
        crate::openapi::Failures,
    )
)]
pub async fn list(State(state): State<AppState>) -> Result<Response, ApiError> {
    let all = state.fleet.schedule_list().await?;
    let schedules = all
        .into_iter()
        .map(|(name, doc)| Schedule {
            spec: spec_view(&doc),
            name,
        })
        .collect();
    Ok(ok_typed(StatusCode::OK, ScheduleList { schedules }))
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
    let (doc, view) = validate(&body)?;
    let fleet = state.fleet.clone();
    state
        .write(async move {
            fleet.schedule_put(&name, &doc).await?;
            Ok(ok_typed(StatusCode::OK, Schedule { name, spec: view }))
        })
        .await
}

/// One schedule.
#[utoipa::path(
    get,
    path = "/v1/schedules/{name}",
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
    let doc = state.fleet.schedule_get(&name).await?;
    match doc {
        Some(doc) => Ok(ok_typed(
            StatusCode::OK,
            Schedule {
                spec: spec_view(&doc),
                name,
            },
        )),
        None => Err(ApiError::not_found(
            "unknown_schedule",
            "no schedule has this name; GET /v1/schedules lists them",
        )),
    }
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
    let fleet = state.fleet.clone();
    state
        .write(async move {
            let deleted = fleet.schedule_delete(&name).await?;
            Ok(ok_typed(StatusCode::OK, Deleted { name, deleted }))
        })
        .await
}
