//! Run routes: start (claim), append, read, resume, list (the stream is in `stream.rs`).

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{OriginalUri, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_kit::core::event::{UnknownKinds, is_known_kind, is_valid_kind};
use switchyard_kit::core::{Error, Payload, RunStatus};
use switchyard_service::runs::{
    AppendedEvents, MAX_APPEND_EVENTS, MAX_TURN_WAIT_SECS, Queued, ResumeRun, Resumed, RunList,
    RunTurn, RunView, StartOutcome, StartRun, Started, resumed_here, started_here,
};
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::{Fields, JsonBody, check_id, object, refield, run_context};

/// `session` and `namespace` address a run's log (and its stream); `from_seq` pages a read.
#[derive(Debug, Deserialize)]
pub struct RunQuery {
    pub session: Option<String>,
    pub namespace: Option<String>,
    pub from_seq: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    namespace: Option<String>,
    status: Option<String>,
}

pub fn path_id(path: Result<Path<String>, PathRejection>, field: &str) -> Result<String, ApiError> {
    let Path(id) = path.map_err(|e| ApiError::bad_request(field, e.body_text()))?;
    check_id(field, &id)?;
    Ok(id)
}

pub fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request("query", e.body_text()))
}

/// The started run's URL under `mount`, the path the gateway is mounted at.
fn run_location(run: &Started, mount: &str) -> String {
    format!(
        "{mount}{}",
        location_of(&run.run_id, &run.session_id, &run.namespace)
    )
}

/// A run's path and query, from the gateway's root.
fn location_of(run_id: &str, session: &Option<String>, namespace: &Option<String>) -> String {
    let mut url = format!("/v1/runs/{}", encode(run_id));
    let mut sep = '?';
    if let Some(s) = session {
        url.push_str(&format!("{sep}session={}", encode(s)));
        sep = '&';
    }
    if let Some(n) = namespace {
        url.push_str(&format!("{sep}namespace={}", encode(n)));
    }
    url
}

/// Percent-encodes everything but unreserved characters (Python's `quote(s, safe="")`).
fn encode(s: &str) -> String {
    switchyard_core::keys::quote(s)
}

/// Counts the stored events the stream bridge did not take (the service logged each).
fn count_unpublished(state: &AppState, unpublished: usize) {
    for _ in 0..unpublished {
        state.metrics.publish_failed();
    }
}

/// `POST /v1/runs`: claim the session and start a run.
#[utoipa::path(
    post,
    path = "/v1/runs",
    tag = "runs",
    request_body(content = StartRun, content_type = "application/json"),
    responses(
        (status = 201, description = "Started: the stored `run.started` event, and the stale runs the claim closed", body = Started,
            headers(("location" = String, description = "The run's URL"))),
        (status = 202, description = "Queued (`multitask_strategy: enqueue` on a held session): the run waits in the session's line at `position` and starts when its turn comes; follow it with `POST /v1/runs/{run_id}/turn`", body = Queued,
            headers(("location" = String, description = "The run's URL"))),
        (status = 409, description = "`session_busy` (`held_by` names the open run) or `run_exists`", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn start(
    State(state): State<AppState>,
    OriginalUri(original): OriginalUri,
    uri: Uri,
    JsonBody(request): JsonBody<StartRun>,
) -> Result<Response, ApiError> {
    let mount = mount_prefix(&original, &uri).to_string();
    let runs = state.runs.clone();
    let outcome = state
        .write(async move { Ok(runs.start(request).await?) })
        .await?;
    let started = match outcome {
        StartOutcome::Started(started) => started,
        StartOutcome::Queued(queued) => {
            let location = location_of(&queued.run_id, &queued.session_id, &queued.namespace);
            let mut response = ok_typed(StatusCode::ACCEPTED, &queued);
            if let Ok(v) = HeaderValue::from_str(&format!("{mount}{location}")) {
                response.headers_mut().insert(header::LOCATION, v);
            }
            return Ok(response);
        }
        StartOutcome::Held(held) => {
            return Err(ApiError::conflict(
                "session_busy",
                format!(
                    "session {:?} is held by the open run {:?}",
                    held.log_key, held.held_by
                ),
            )
            .with("held_by", held.held_by));
        }
    };
    count_unpublished(&state, started.unpublished);
    let location = run_location(&started, &mount);
    let mut response = ok_typed(StatusCode::CREATED, &started);
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    Ok(response)
}

/// The path an application mounted the gateway at (`""` when it is not nested): what `nest`
/// stripped from the URI the client sent (`original`) before the gateway's router saw `uri`.
fn mount_prefix<'a>(original: &'a Uri, uri: &Uri) -> &'a str {
    original.path().strip_suffix(uri.path()).unwrap_or("")
}

/// `POST /v1/runs/{run_id}/events`: append one payload (`{"kind": …}`) or a batch
/// (`{"events": [...], "origin"?: …}`).
#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/events",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace")),
    request_body(content = AppendBody, content_type = "application/json", description = "One payload (`{\"kind\": …}`, see the `Payload` schema) or `{\"events\": [...], \"origin\"?}` with at most 1000 events"),
    responses(
        (status = 201, description = "The stored events", body = AppendedEvents),
        (status = 404, description = "`unknown_run`: no such run in this log (or it never started)", body = crate::openapi::ErrorBody),
        (status = 409, description = "`run_finished`: the run ended (`status` says how); it takes no more events", body = crate::openapi::ErrorBody),
        (status = 422, description = "`too_many_events`: more than 1000 events in one batch (send them in several requests, in order); `invalid_input`: a payload breaks the event model (`field` names it), its kind is not one of the `Payload` schema's (unless the gateway runs with `--lenient-event-kinds`, which stores it as `raw_payload`), or it is `run.started` or `run.resumed` (their own routes write them)", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn append(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    let map = object(&body, false)?;
    let (values, origin, prefix) = if map.contains_key("kind") {
        (vec![Value::Object(map)], None, None)
    } else {
        let mut f = Fields::new(map, &["events", "origin"])?;
        let origin = f.id("origin")?;
        let events = match f.take("events") {
            Some(Value::Array(events)) if events.len() > MAX_APPEND_EVENTS => {
                return Err(too_many_events(events.len()));
            }
            Some(Value::Array(events)) if !events.is_empty() => events,
            Some(Value::Array(_)) => {
                return Err(ApiError::invalid("events", "`events` must not be empty"));
            }
            Some(_) => return Err(ApiError::invalid("events", "`events` must be an array")),
            None => {
                return Err(ApiError::invalid(
                    "events",
                    "send one payload object with a `kind`, or `{\"events\": [...]}`",
                ));
            }
        };
        (events, origin, Some("events"))
    };
    let mut payloads = Vec::with_capacity(values.len());
    for (i, value) in values.iter().enumerate() {
        let at = match prefix {
            Some(p) => format!("{p}[{i}]"),
            None => String::new(),
        };
        let payload = read_payload(value, state.unknown_kinds, &at)?;
        let kind_field = if at.is_empty() {
            "kind".to_string()
        } else {
            format!("{at}.kind")
        };
        match payload.kind() {
            "run.started" => return Err(started_here(kind_field).into()),
            "run.resumed" => return Err(resumed_here(kind_field).into()),
            _ => {}
        }
        payloads.push(payload);
    }
    let runs = state.runs.clone();
    // The service appends only while the run is open, in one step with the check (ADR 0365),
    // and publishes what it stored.
    let appended = state
        .write(async move { Ok(runs.append(&ctx, payloads, origin.as_deref()).await?) })
        .await?;
    count_unpublished(&state, appended.unpublished);
    Ok(ok_typed(StatusCode::CREATED, &appended))
}

/// Reads one appended payload (at `at`, `""` for a lone payload): an unknown kind is refused
/// unless the gateway keeps them (`lenient_event_kinds`), and the refusal says where the kinds are
/// described and how to keep them.
fn read_payload(value: &Value, unknown: UnknownKinds, at: &str) -> Result<Payload, ApiError> {
    let read = Payload::from_value_with(value, unknown).and_then(|payload| {
        payload.validate()?;
        Ok(payload)
    });
    read.map_err(|e| {
        let refused_kind = unknown == UnknownKinds::Refuse
            && value
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| is_valid_kind(k) && !is_known_kind(k));
        let e = match e {
            Error::InvalidInput { field, reason } if refused_kind => Error::InvalidInput {
                field,
                reason: format!(
                    "{reason} (each kind's fields: the `Payload` schema of /openapi.json); a \
                     gateway started with --lenient-event-kinds stores unknown kinds as \
                     `raw_payload`"
                ),
            },
            other => other,
        };
        refield(e, "payload", at)
    })
}

/// The 422 of a batch over [`MAX_APPEND_EVENTS`].
fn too_many_events(got: usize) -> ApiError {
    switchyard_service::runs::too_many_events(got).into()
}

/// The body of `POST /v1/runs/{run_id}/events`, for the OpenAPI document.
// `Serialize` is derived only to carry `#[serde(untagged)]`, which the schema derive reads: a
// payload or a batch, with no tag around either.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // the schema of the body `append` reads
pub enum AppendBody {
    /// One payload.
    Payload(Payload),
    /// A batch, stored atomically in order.
    Batch(AppendBatch),
}

/// A batch of payloads.
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // the schema of the body `append` reads
pub struct AppendBatch {
    /// 1 to 1000 payloads.
    #[schema(min_items = 1, max_items = 1000)]
    events: Vec<Payload>,
    /// Who wrote them (default `gateway`).
    origin: Option<String>,
}

/// `GET /v1/runs/{run_id}`: status and events (`seq >= from_seq`).
#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace"), ("from_seq" = Option<u64>, Query, description = "Only events from this seq")),
    responses(
        (status = 200, description = "The run's status and events", body = RunView),
        (status = 404, description = "`unknown_run`: no such run in this log", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn read(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    let run = state.runs.read(&ctx, q.from_seq.unwrap_or(0)).await?;
    Ok(ok_typed(StatusCode::OK, &run))
}

/// `POST /v1/runs/{run_id}/resume`: resume a waiting or paused run; of concurrent resumes exactly
/// one gets 200, the others 409.
#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/resume",
    operation_id = "resume_run",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace")),
    request_body(content = Option<ResumeRun>, content_type = "application/json", description = "Optional: an empty body resumes without a reason or value"),
    responses(
        (status = 200, description = "Resumed: the stored `run.resumed` event", body = Resumed),
        (status = 404, description = "`unknown_run`: no such run in this log", body = crate::openapi::ErrorBody),
        (status = 409, description = "`not_resumable`: the run is neither waiting for a human nor paused, or another resume won (`status` says where it stands)", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn resume(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
    JsonBody(request): JsonBody<ResumeRun, true>,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    let runs = state.runs.clone();
    let resumed = state
        .write(async move { Ok(runs.resume(&ctx, request).await?) })
        .await?;
    count_unpublished(&state, resumed.unpublished);
    Ok(ok_typed(StatusCode::OK, &resumed))
}

/// `GET /v1/runs?namespace=&status=`: runs with their status, sorted by log and run id.
#[utoipa::path(
    get,
    path = "/v1/runs",
    operation_id = "list_runs",
    tag = "runs",
    params(("namespace" = Option<String>, Query, description = "The namespace"), ("status" = Option<String>, Query, description = "Only runs with this status")),
    responses(
        (status = 200, description = "Runs with their status", body = RunList),
        crate::openapi::Failures,
    )
)]
pub async fn list(
    State(state): State<AppState>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let ctx = run_context("list", None, q.namespace.as_deref())?;
    let status = match q.status.as_deref() {
        None | Some("") => None,
        Some(s) => Some(
            s.parse::<RunStatus>()
                .map_err(|e| ApiError::bad_request("status", e.to_string()))?,
        ),
    };
    let runs = state.runs.list(ctx.namespace(), status).await?;
    Ok(ok_typed(StatusCode::OK, &runs))
}

/// `session`, `namespace` and how long to wait for the run's turn.
#[derive(Debug, Deserialize)]
pub struct TurnQuery {
    pub session: Option<String>,
    pub namespace: Option<String>,
    pub wait_secs: Option<u64>,
}

/// `POST /v1/runs/{run_id}/turn`: where an enqueued run stands (ADR 0394). Moves the session's
/// line first when the run before ended without moving it, so this may start the run: a write,
/// hence a POST (its body is empty; the wait is a query parameter).
#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/turn",
    operation_id = "run_turn",
    tag = "runs",
    params(("run_id" = String, Path, description = "The enqueued run"), ("session" = String, Query, description = "The run's session"), ("namespace" = Option<String>, Query, description = "The run's namespace"), ("wait_secs" = Option<u64>, Query, description = "Wait up to this many seconds (at most 30, and within the gateway's request deadline) for the run to start; 0 or absent answers at once")),
    responses(
        (status = 200, description = "`pending` with `position` while it waits, else its status and its `run.started`", body = RunTurn),
        (status = 404, description = "`not_waiting`: the run neither waits in the line nor has started (it was taken out, or never enqueued)", body = crate::openapi::ErrorBody),
        (status = 422, description = "`invalid_input`: `wait_secs` above 30", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn turn(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<TurnQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    let wait = match q.wait_secs {
        Some(secs) if secs > MAX_TURN_WAIT_SECS => {
            return Err(ApiError::invalid(
                "wait_secs",
                format!("must be at most {MAX_TURN_WAIT_SECS}, got {secs}"),
            ));
        }
        secs => std::time::Duration::from_secs(secs.unwrap_or(0)).min(state.long_poll_cap),
    };
    let runs = state.runs.clone();
    // Not detached: a caller that hangs up stops waiting. A start the look makes is the
    // store's one step, so an interrupted look leaves nothing half done.
    let turn = runs.turn(&ctx, wait).await?;
    Ok(ok_typed(StatusCode::OK, &turn))
}

/// `DELETE /v1/runs/{run_id}/turn`: takes an enqueued run out of its session's line before it
/// starts (ADR 0394).
#[utoipa::path(
    delete,
    path = "/v1/runs/{run_id}/turn",
    operation_id = "leave_line",
    tag = "runs",
    params(("run_id" = String, Path, description = "The enqueued run"), ("session" = String, Query, description = "The run's session"), ("namespace" = Option<String>, Query, description = "The run's namespace")),
    responses(
        (status = 204, description = "Taken out: it will not start"),
        (status = 404, description = "`not_waiting`: the run does not wait in the line (it started, or never waited)", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn leave_line(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    let runs = state.runs.clone();
    state
        .write(async move { Ok(runs.leave_line(&ctx).await?) })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
