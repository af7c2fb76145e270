//! Control of a task (ADR 0380, section 9): read a task's record (and long-poll for its end),
//! cancel one, many or every waiting task, follow the queue's end events as SSE, and read or
//! set the queue's retention. The rules are the queue service's (`switchyard_service::queues::
//! tasks`); the ack with a result is the worker API's ack route (`worker.rs`).
//!
//! A task's id is in the path after `/tasks/`, so the static `POST /v1/queues/{queue}/tasks/cancel`
//! wins over an id spelled `cancel`: such a task is read with its id percent-encoded (`%63ancel`).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use switchyard_core::fleet::TaskEvents;
use switchyard_core::stream::sse;
use switchyard_service::queues::tasks::{EVENTS_PER_READ, check_cursor, check_task_id};
use switchyard_service::queues::{
    CancelAnswer, CancelBody, Cancelled, EventsPage, RetentionBody, RetentionJson, TaskEventJson,
    TaskJson, TaskQuery,
};
use utoipa::IntoParams;

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::{JsonBody, check_id};
use super::runs::{path_id, query};

/// The queue and id of a task route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // the schema of the path; the handlers read it as a tuple
pub struct TaskPath {
    /// The queue.
    queue: String,
    /// The task's id (its envelope's `"id"`), percent-encoded.
    id: String,
}

fn task_path(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, String), ApiError> {
    let Path((queue, id)) = path.map_err(|e| ApiError::bad_request("path", e.body_text()))?;
    check_id("queue", &queue)?;
    check_task_id("id", &id)?;
    Ok((queue, id))
}

/// The record of task `id`: its state, attempts, times, progress, last error and result. With
/// `wait_seconds`, waits (a long poll, within the gateway's request deadline) for the task to
/// end and answers the record then, or as it is when the wait runs out.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/tasks/{id}",
    operation_id = "get_task",
    tag = "tasks",
    params(TaskPath, TaskQuery),
    responses(
        (status = 200, description = "The task's record", body = TaskJson),
        (status = 404, description = "`no_task`: no record has this id (never submitted with it, or removed by retention)", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn get(
    State(state): State<AppState>,
    revocation: Option<axum::Extension<super::admit::Revocation>>,
    path: Result<Path<(String, String)>, PathRejection>,
    q: Result<Query<TaskQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let (name, id) = task_path(path)?;
    let wait = query(q)?.wait()?.min(state.long_poll_cap);
    if wait.is_zero() {
        return Ok(ok_typed(
            StatusCode::OK,
            state.queues.task(&name, &id).await?,
        ));
    }
    let mut shutdown = state.shutdown.clone();
    let closing = async move {
        if shutdown.wait_for(|closing| *closing).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let record = tokio::select! {
        out = state.queues.task_wait(&name, &id, wait) => out?,
        // A shutdown answers the record as it is now.
        () = closing => state.queues.task(&name, &id).await?,
        refused = super::admit::until_revoked(revocation) => return Err(refused),
    };
    Ok(ok_typed(StatusCode::OK, record))
}

/// Cancels task `id`: a scheduled or waiting task is removed and never runs (`cancelled`); a
/// running one is marked, and its worker's next extend, progress, ack, nack or fail answers 409
/// `cancelled` (`cancel_requested`); an ended one is left as it is (`finished`).
#[utoipa::path(
    delete,
    path = "/v1/queues/{queue}/tasks/{id}",
    tag = "tasks",
    params(TaskPath),
    responses(
        (status = 200, description = "What the cancel did", body = Cancelled),
        (status = 404, description = "`no_task`: no record has this id", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let (name, id) = task_path(path)?;
    let st = state.clone();
    state
        .write(async move {
            let answer = st.queues.cancel(&name, &id).await?;
            st.metrics.track_queue(&name);
            Ok(ok_typed(StatusCode::OK, answer))
        })
        .await
}

/// Cancels up to 1000 tasks by id in one atomic step (`ids`, answered per id in order), or every
/// scheduled and waiting task of the queue (`"all_waiting": true`, answered with how many were
/// removed; running tasks are not touched).
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/tasks/cancel",
    tag = "tasks",
    params(("queue" = String, Path, description = "The queue")),
    request_body(content = CancelBody, content_type = "application/json"),
    responses(
        (status = 200, description = "`results` for `ids`, `purged` for `all_waiting`", body = CancelAnswer),
        crate::openapi::Failures,
    )
)]
pub async fn cancel_many(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<CancelBody>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let st = state.clone();
    state
        .write(async move {
            let answer = st.queues.cancel_many(&name, body).await?;
            st.metrics.track_queue(&name);
            Ok(ok_typed(StatusCode::OK, answer))
        })
        .await
}

/// `?after=` of the events stream.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Resume after this cursor (an event's `id:`); `Last-Event-ID` wins when both are sent.
    /// Neither: only the ends that happen after the stream opens.
    after: Option<String>,
}

/// The frames of one read of the log: a `gap` frame first when the cursor was trimmed away or
/// malformed, then one frame per end (`event:` its state, `id:` its cursor).
fn frames(read: &TaskEvents, requested: &str) -> String {
    let mut out = String::new();
    if read.gap {
        out.push_str(&sse::event_frame(
            "gap",
            &json!({
                "requested": requested,
                "recovery": "events after `requested` were trimmed (or it is not a cursor of \
                             this log): the stream goes on from the oldest kept; read the tasks \
                             you wait for with GET /v1/queues/{queue}/tasks/{id}",
            }),
            None,
        ));
    }
    for e in &read.events {
        let data = serde_json::to_value(TaskEventJson::new(e)).unwrap_or_default();
        out.push_str(&sse::event_frame(e.state.as_str(), &data, Some(&e.cursor)));
    }
    out
}

/// Where the next read resumes.
fn next_cursor(read: &TaskEvents, before: String) -> String {
    if !read.cursor.is_empty() {
        read.cursor.clone()
    } else {
        read.events.last().map_or(before, |e| e.cursor.clone())
    }
}

/// The queue's end events as Server-Sent Events: `event: completed | failed | dead | cancelled`
/// with `id:` the event's cursor and `data:` the event as JSON (small results inline), `event:
/// gap` when the cursor was trimmed, and heartbeat comments while nothing ends. Resume with
/// `Last-Event-ID` (or `?after=`); without either, only ends after the stream opens are sent.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/events",
    tag = "tasks",
    params(("queue" = String, Path, description = "The queue"), EventsQuery),
    responses(
        (status = 200, description = "Server-Sent Events: one frame per task end", content_type = "text/event-stream"),
        crate::openapi::Failures,
    )
)]
pub async fn events(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<EventsQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let q = query(q)?;
    let cursor = match switchyard_kit::sse::last_event_id(&headers) {
        Some(c) => {
            check_cursor("last-event-id", &c)?;
            c
        }
        None => match q.after {
            Some(c) => {
                check_cursor("after", &c)?;
                c
            }
            None => "$".to_string(),
        },
    };
    if *state.shutdown.borrow() {
        return Err(ApiError::from(switchyard_kit::core::Error::Closed {
            what: "gateway",
        }));
    }
    // The first read is made before the answer starts, so a refusal (a backend without task
    // records, a bad queue) is a status, not a stream that ends at once. `$` becomes the log's
    // position now, so nothing that ends from here on is missed.
    let first = state
        .queues
        .events(&name, Some(&cursor), EVENTS_PER_READ, Duration::ZERO)
        .await?;
    let opening = frames(&first, &cursor);
    let cursor = next_cursor(&first, cursor);
    state.metrics.track_queue(&name);
    let queues = state.queues.clone();
    let heartbeat = state.heartbeat;
    let follow = futures::stream::unfold(Some(cursor), move |at| {
        let queues = queues.clone();
        let name = name.clone();
        async move {
            let at = at?;
            match queues
                .events(&name, Some(&at), EVENTS_PER_READ, heartbeat)
                .await
            {
                Ok(read) if read.events.is_empty() && !read.gap => {
                    let next = next_cursor(&read, at);
                    Some((sse::HEARTBEAT_FRAME.to_string(), Some(next)))
                }
                Ok(read) => {
                    let text = frames(&read, &at);
                    Some((text, Some(next_cursor(&read, at))))
                }
                Err(error) => {
                    // The stream cannot go on; the client reconnects with its last id.
                    tracing::warn!(queue = %name, %error, "reading the end-event log failed");
                    None
                }
            }
        }
    });
    let opening = futures::stream::iter((!opening.is_empty()).then_some(opening));
    let guard = state.metrics.sse_guard();
    let mut stop = state.shutdown.clone();
    let stopped = async move {
        if stop.wait_for(|closing| *closing).await.is_err() {
            // No one can signal a shutdown any more: only the client ends the stream.
            std::future::pending::<()>().await;
        }
    };
    let body = opening
        .chain(follow)
        .take_until(Box::pin(stopped))
        .map(move |text| {
            // The guard lives as long as the body: dropped on end, shutdown or disconnect.
            let _ = &guard;
            Ok::<Bytes, std::convert::Infallible>(Bytes::from(text))
        });
    let mut response = Response::new(Body::from_stream(body));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// The most events one page of the log answers (the port's own bound on a read).
pub const MAX_EVENTS_PAGE: usize = 1000;

/// `?after=&limit=` of a page of the end-event log.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsPageQuery {
    /// Read after this cursor (an event's `cursor`, or the `cursor` of the previous page).
    /// Absent: from the oldest event the queue keeps.
    after: Option<String>,
    /// At most this many events, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// The queue's end events as one bounded JSON page, read without waiting: for a client that
/// lists recent ends (the console's finished tasks, ADR 0384) rather than following them, which
/// the SSE route (`GET …/events`) does. Page forward with `after` = the answer's `cursor`.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/events/page",
    tag = "tasks",
    params(("queue" = String, Path, description = "The queue"), EventsPageQuery),
    responses(
        (status = 200, description = "The events after the cursor", body = EventsPage),
        crate::openapi::Failures,
    )
)]
pub async fn events_page(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<EventsPageQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let q = query(q)?;
    let limit = q.limit.unwrap_or(EVENTS_PER_READ);
    if !(1..=MAX_EVENTS_PAGE).contains(&limit) {
        return Err(switchyard_service::Error::invalid(
            "limit",
            format!("`limit` must be between 1 and {MAX_EVENTS_PAGE}"),
        )
        .into());
    }
    if let Some(c) = &q.after {
        check_cursor("after", c)?;
    }
    let read = state
        .queues
        .events(&name, q.after.as_deref(), limit, Duration::ZERO)
        .await?;
    let cursor = next_cursor(&read, q.after.unwrap_or_default());
    Ok(ok_typed(
        StatusCode::OK,
        EventsPage {
            queue: name,
            events: read.events.iter().map(TaskEventJson::new).collect(),
            gap: read.gap,
            cursor,
        },
    ))
}

/// What the queue keeps of finished tasks (`completed`; `failed` covers failed and cancelled;
/// dead ones live as long as their dead letter) and of its end-event log; the defaults when none
/// was set.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/retention",
    tag = "tasks",
    params(("queue" = String, Path, description = "The queue")),
    responses(
        (status = 200, description = "The queue's retention", body = RetentionJson),
        crate::openapi::Failures,
    )
)]
pub async fn retention(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    Ok(ok_typed(
        StatusCode::OK,
        state.queues.retention(&name).await?,
    ))
}

/// Sets what the queue keeps: the kinds the body names replace the queue's, the others stay.
/// Counts 0 to 1000000 (the events at least 100), ages 0 to 2592000 seconds (30 days).
#[utoipa::path(
    put,
    path = "/v1/queues/{queue}/retention",
    tag = "tasks",
    params(("queue" = String, Path, description = "The queue")),
    request_body(content = RetentionBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The retention now in force", body = RetentionJson),
        crate::openapi::Failures,
    )
)]
pub async fn set_retention(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<RetentionBody>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    // Refused before the write starts, so a bad body holds no shutdown guard.
    body.check()?;
    let st = state.clone();
    state
        .write(async move {
            let answer = st.queues.set_retention(&name, &body).await?;
            st.metrics.track_queue(&name);
            Ok(ok_typed(StatusCode::OK, answer))
        })
        .await
}
