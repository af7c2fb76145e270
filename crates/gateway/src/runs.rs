//! Run routes: start (claim), append, read, resume, list (the stream is in `stream.rs`).

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{OriginalUri, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_kit::core::event::{
    ErrorCode, RunFailed, RunResumed, RunStarted, UnknownKinds, is_known_kind, is_valid_kind,
};
use switchyard_kit::core::status::{is_lifecycle, lifecycle_status};
use switchyard_kit::core::{Appended, Error, Event, Payload, RunContext, RunStatus, status_of};
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ok_json};
use super::input::{
    Fields, MAX_DURATION_SECS, MAX_SEQ, at_most, check_id, object, refield, run_context,
};
use switchyard_core::stream::run_stream_id;

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

fn event_json(event: &Event) -> Value {
    serde_json::to_value(event).unwrap_or(Value::Null)
}

/// The run's URL under `mount`, the path the gateway is mounted at.
fn run_location(ctx: &RunContext, mount: &str) -> String {
    let mut url = format!("{mount}/v1/runs/{}", encode(ctx.run_id()));
    let mut sep = '?';
    if let Some(s) = ctx.session_id() {
        url.push_str(&format!("{sep}session={}", encode(s)));
        sep = '&';
    }
    if let Some(n) = ctx.namespace() {
        url.push_str(&format!("{sep}namespace={}", encode(n)));
    }
    url
}

/// Percent-encodes everything but unreserved characters (Python's `quote(s, safe="")`).
fn encode(s: &str) -> String {
    switchyard_core::keys::quote(s)
}

/// Publishes stored events to the run's stream with the bridge's `publish_event` (event name =
/// kind, data = the event JSON, the stream ended after a terminal lifecycle event; ADR 0253).
/// The store is the source of truth: a failed publish is logged and counted, never turned into
/// an error for a write that is already durable. The stream is addressed like the run
/// (namespace, session, run id; ADR 0190), and a finished run's stream is released after the
/// configured grace period (ADR 0192).
async fn publish(state: &AppState, ctx: &RunContext, events: &[Event]) {
    let stream_id = run_stream_id(ctx);
    let run_id = ctx.run_id();
    let mut ended = false;
    for event in events {
        if let Err(e) = state.bridge.publish_event(event).await {
            state.metrics.publish_failed();
            tracing::warn!(run_id, seq = event.seq, error = %e, "publish to the stream failed");
        }
        ended |= lifecycle_status(event.kind()).is_some_and(RunStatus::is_terminal);
    }
    if !ended {
        return;
    }
    // Late subscribers still replay the end within the grace period; afterwards they read the run
    // from the store (the stream route answers 404 `no_stream`).
    let bridge = state.bridge.clone();
    let grace = state.stream_grace;
    tokio::spawn(async move {
        if let Err(e) = bridge.cleanup(&stream_id, grace).await {
            tracing::debug!(%stream_id, error = %e, "releasing a finished stream failed");
        }
    });
}

const START_FIELDS: [&str; 8] = [
    "run_id",
    "session_id",
    "namespace",
    "origin",
    "stale_after_secs",
    "invocable",
    "kind_of_invocable",
    "input",
];

/// `POST /v1/runs`: claim the session and start a run.
#[utoipa::path(
    post,
    path = "/v1/runs",
    tag = "runs",
    request_body(content = Object, content_type = "application/json", description = "`run_id`?, `session_id`?, `namespace`?, `origin`?, `stale_after_secs`?, `invocable`, `kind_of_invocable`?, `input`?"),
    responses(
        (status = 201, description = "Started: the stored `run.started` event", body = Object),
        (status = 409, description = "`session_busy` or `run_exists`", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn start(
    State(state): State<AppState>,
    OriginalUri(original): OriginalUri,
    uri: Uri,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(object(&body, false)?, &START_FIELDS)?;
    let run_id = f.id("run_id")?.unwrap_or_else(switchyard_fleet::uuid4_hex);
    let session = f.id("session_id")?;
    let namespace = f.id("namespace")?;
    let origin = f.id("origin")?;
    let stale_after = f
        .u64_at_most("stale_after_secs", MAX_DURATION_SECS)?
        .map_or(state.stale_after, std::time::Duration::from_secs);
    let mut opening = serde_json::Map::new();
    opening.insert("kind".into(), "run.started".into());
    for key in ["invocable", "kind_of_invocable", "input"] {
        if let Some(v) = f.take(key) {
            opening.insert(key.into(), v);
        }
    }
    let opening = match Payload::from_value(&Value::Object(opening)) {
        Ok(Payload::RunStarted(p)) => p,
        Ok(_) => {
            return Err(ApiError::internal(
                "run.started did not parse as run.started",
            ));
        }
        Err(e) => return Err(refield(e, "payload", "")),
    };
    Payload::RunStarted(opening.clone())
        .validate()
        .map_err(|e| refield(e, "payload", ""))?;
    let origin = origin.unwrap_or_else(|| opening.invocable.clone());
    let ctx = run_context(&run_id, session.as_deref(), namespace.as_deref())?;
    let task_state = state.clone();
    let mount = mount_prefix(&original, &uri).to_string();
    state
        .write(async move { claim(task_state, ctx, opening, origin, stale_after, mount).await })
        .await
}

/// The path an application mounted the gateway at (`""` when it is not nested): what `nest`
/// stripped from the URI the client sent (`original`) before the gateway's router saw `uri`.
fn mount_prefix<'a>(original: &'a Uri, uri: &Uri) -> &'a str {
    original.path().strip_suffix(uri.path()).unwrap_or("")
}

async fn claim(
    state: AppState,
    ctx: RunContext,
    opening: RunStarted,
    origin: String,
    stale_after: std::time::Duration,
    mount: String,
) -> Result<Response, ApiError> {
    let (claim, started) = state
        .store
        .claim_start(&ctx, opening, &origin, stale_after)
        .await?;
    if let Some(holder) = claim.held_by {
        return Err(ApiError::conflict(
            "session_busy",
            format!(
                "session {:?} is held by the open run {holder:?}",
                ctx.log_key()
            ),
        )
        .with("held_by", holder));
    }
    let Some(started) = started else {
        return Err(ApiError::internal("the claim won but returned no event"));
    };
    // As the agentdeck runtime does: close every stale run the claim stepped over.
    let mut overridden = Vec::new();
    for tail in &claim.overridden {
        let tail_ctx = ctx.for_run(tail.run_id.clone(), tail.session_id.clone());
        let failed = Payload::RunFailed(RunFailed {
            error_code: ErrorCode::CancelledHard,
            message: format!(
                "abandoned: the session was taken over by run {}",
                ctx.run_id()
            ),
            retryable: false,
        });
        match state
            .store
            .append(&tail_ctx, vec![failed], &tail.origin)
            .await
        {
            Ok(events) => publish(&state, &tail_ctx, &events).await,
            // The next claim overrides it again, as in the seed.
            Err(e) => {
                tracing::warn!(run_id = %tail.run_id, error = %e, "closing a stale run failed")
            }
        }
        overridden.push(Value::String(tail.run_id.clone()));
    }
    publish(&state, &ctx, std::slice::from_ref(&started)).await;
    let location = run_location(&ctx, &mount);
    let mut response = ok_json(
        StatusCode::CREATED,
        json!({
            "run_id": ctx.run_id(),
            "session_id": ctx.session_id(),
            "namespace": ctx.namespace(),
            "log_key": ctx.log_key(),
            "status": RunStatus::Running.as_str(),
            "event": event_json(&started),
            "overridden": overridden,
        }),
    );
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    Ok(response)
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
            "run.started" => {
                return Err(ApiError::invalid(
                    kind_field,
                    "start runs with POST /v1/runs (it claims the session)",
                ));
            }
            "run.resumed" => {
                return Err(ApiError::invalid(
                    kind_field,
                    "resume runs with POST /v1/runs/{run_id}/resume (exactly one resume wins)",
                ));
            }
            _ => {}
        }
        payloads.push(payload);
    }
    let origin = origin.unwrap_or_else(|| "gateway".to_string());
    let task_state = state.clone();
    state
        .write(async move {
            let state = task_state;
            // One atomic step: a run that is pending or finished takes nothing, and no event
            // can land after a terminal one (ADR 0365).
            let appended = state.store.append_if_open(&ctx, payloads, &origin).await?;
            let (events, status) = match appended {
                Appended::Stored { events, status } => (events, status),
                Appended::NotOpen(RunStatus::Pending) => return Err(unknown_run(&ctx)),
                Appended::NotOpen(status) => {
                    return Err(ApiError::conflict(
                        "run_finished",
                        format!(
                            "run {:?} is {status}; it takes no more events",
                            ctx.run_id()
                        ),
                    )
                    .with("status", status.as_str()));
                }
            };
            publish(&state, &ctx, &events).await;
            Ok(ok_json(
                StatusCode::CREATED,
                json!({
                    "run_id": ctx.run_id(),
                    "status": status.as_str(),
                    "events": events.iter().map(event_json).collect::<Vec<_>>(),
                }),
            ))
        })
        .await
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

/// The most events one append request may carry. A batch is one atomic write and one answer
/// holding every stored event, so without a bound only the body size would limit how long one
/// request holds the run's log and how large its answer grows.
pub const MAX_APPEND_EVENTS: usize = 1_000;

/// The 422 of a batch over [`MAX_APPEND_EVENTS`].
fn too_many_events(got: usize) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "too_many_events",
        format!(
            "a batch holds at most {MAX_APPEND_EVENTS} events, got {got}; send them in several \
             requests, in order (each is stored atomically)"
        ),
    )
    .with_field("events")
    .with("max_events", MAX_APPEND_EVENTS)
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

/// The answer of `POST /v1/runs/{run_id}/events`, for the OpenAPI document.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // the schema of the body `append` writes
pub struct AppendedEvents {
    /// The run.
    run_id: String,
    /// The run's status after the append (`running`, `completed`, …).
    status: String,
    /// The stored events, in order.
    events: Vec<Event>,
}

pub(super) fn unknown_run(ctx: &RunContext) -> ApiError {
    ApiError::not_found(
        "unknown_run",
        format!(
            "no run {:?} in log {:?}{}",
            ctx.run_id(),
            ctx.log_key(),
            if ctx.session_id().is_none() {
                " (pass ?session= for a run that has a session)"
            } else {
                ""
            }
        ),
    )
}

/// `GET /v1/runs/{run_id}`: status and events (`seq >= from_seq`).
#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace"), ("from_seq" = Option<u64>, Query, description = "Only events from this seq")),
    responses(
        (status = 200, description = "The run's status and events", body = Object),
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
    let from_seq = at_most("from_seq", q.from_seq.unwrap_or(0), MAX_SEQ)?;
    let events = state.store.read_run(&ctx, from_seq).await?;
    let status = if from_seq == 0 {
        status_of(&events)
    } else {
        state.store.run_status(&ctx).await?
    };
    if status == RunStatus::Pending && events.iter().all(|e| !is_lifecycle(e.kind())) {
        return Err(unknown_run(&ctx));
    }
    Ok(ok_json(
        StatusCode::OK,
        json!({
            "run_id": ctx.run_id(),
            "session_id": ctx.session_id(),
            "namespace": ctx.namespace(),
            "log_key": ctx.log_key(),
            "status": status.as_str(),
            "events": events.iter().map(event_json).collect::<Vec<_>>(),
        }),
    ))
}

/// `POST /v1/runs/{run_id}/resume`: resume a waiting or paused run; of concurrent resumes exactly
/// one gets 200, the others 409.
#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/resume",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace")),
    request_body(content = Option<Object>, content_type = "application/json"),
    responses(
        (status = 200, description = "Resumed: the stored `run.resumed` event", body = Object),
        (status = 409, description = "`not_resumable`", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn resume(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    let mut f = Fields::new(object(&body, true)?, &["reason", "value", "origin"])?;
    let origin = f.id("origin")?.unwrap_or_else(|| "gateway".into());
    let mut resumed = serde_json::Map::new();
    resumed.insert("kind".into(), "run.resumed".into());
    for key in ["reason", "value"] {
        if let Some(v) = f.take(key) {
            resumed.insert(key.into(), v);
        }
    }
    let resumed: RunResumed = match Payload::from_value(&Value::Object(resumed)) {
        Ok(Payload::RunResumed(p)) => p,
        Ok(_) => {
            return Err(ApiError::internal(
                "run.resumed did not parse as run.resumed",
            ));
        }
        Err(e) => return Err(refield(e, "payload", "")),
    };
    Payload::RunResumed(resumed.clone())
        .validate()
        .map_err(|e| refield(e, "payload", ""))?;
    let task_state = state.clone();
    state
        .write(async move {
            let state = task_state;
            let got = state.store.claim_resume(&ctx, resumed, &origin).await?;
            match got {
                Some(event) => {
                    publish(&state, &ctx, std::slice::from_ref(&event)).await;
                    Ok(ok_json(
                        StatusCode::OK,
                        json!({
                            "run_id": ctx.run_id(),
                            "status": RunStatus::Running.as_str(),
                            "event": event_json(&event),
                        }),
                    ))
                }
                None => {
                    let status = state.store.run_status(&ctx).await?;
                    if status == RunStatus::Pending {
                        return Err(unknown_run(&ctx));
                    }
                    Err(ApiError::conflict(
                        "not_resumable",
                        format!(
                            "run {:?} is {status}; only waiting_human or paused runs resume",
                            ctx.run_id()
                        ),
                    )
                    .with("status", status.as_str()))
                }
            }
        })
        .await
}

/// `GET /v1/runs?namespace=&status=`: runs with their status, sorted by log and run id.
#[utoipa::path(
    get,
    path = "/v1/runs",
    tag = "runs",
    params(("namespace" = Option<String>, Query, description = "The namespace"), ("status" = Option<String>, Query, description = "Only runs with this status")),
    responses(
        (status = 200, description = "Runs with their status", body = Object),
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
    let mut runs = state.store.list_runs(&ctx, status).await?;
    runs.sort_by(|a, b| (&a.log_key, &a.run_id).cmp(&(&b.log_key, &b.run_id)));
    Ok(ok_json(
        StatusCode::OK,
        json!({
            "namespace": ctx.namespace(),
            "runs": runs.iter().map(|r| json!({
                "run_id": r.run_id,
                "log_key": r.log_key,
                "session_id": (r.log_key != r.run_id).then_some(&r.log_key),
                "status": r.status.as_str(),
            })).collect::<Vec<_>>(),
        }),
    ))
}
