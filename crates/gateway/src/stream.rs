//! `GET /v1/runs/{run_id}/stream`: a run's live events as Server-Sent Events.
//!
//! Two cases are the gateway's own rather than the bridge's (ADR 0356): a `Last-Event-ID` that
//! is not an event id gets the gap frame, and a run the store knows whose stream holds nothing
//! yet is followed like an open stream.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use switchyard_core::stream::{StreamGap, StreamItem, parse_stream_id, sse};

use super::AppState;
use super::error::ApiError;
use super::input::run_context;
use super::runs::{RunQuery, path_id, query};

/// How long the look at a stream's retained window waits once nothing more comes: replayed
/// events arrive without waiting, so the first quiet moment means the window has been read.
const WINDOW_QUIET: Duration = Duration::from_millis(50);

/// The most events that look reads. A live run that publishes faster than [`WINDOW_QUIET`] never
/// goes quiet; its newest event seen by then stands for the window's end.
const WINDOW_MAX_EVENTS: usize = 10_000;

/// The longest the look at the window may take in all (a slow backend).
const WINDOW_DEADLINE: Duration = Duration::from_secs(2);

/// Whether `cursor` is an event id as every frame's `id:` line carries it, `<ms>-<seq>` (digits,
/// each fitting 64 bits). deer-flow's Redis bridge also reads a bare `<ms>`, but no frame ever
/// carries one, so a client that sends it did not get it from a stream.
fn is_event_id(cursor: &str) -> bool {
    cursor.contains('-') && matches!(parse_stream_id(cursor), Ok(Some(_)))
}

/// The oldest and newest ids `stream_id` retains, read as a cursor-less subscriber reads them;
/// `None` when it retains no event.
async fn retained_window(
    state: &AppState,
    stream_id: &str,
) -> Result<Option<(String, String)>, ApiError> {
    let mut items = state.bridge.subscribe(stream_id, None, WINDOW_QUIET);
    let mut window: Option<(String, String)> = None;
    let read = async {
        let mut seen = 0;
        while let Some(item) = items.next().await {
            match item? {
                StreamItem::Event(e) => {
                    match &mut window {
                        Some((_, latest)) => *latest = e.id,
                        None => window = Some((e.id.clone(), e.id)),
                    }
                    seen += 1;
                    if seen >= WINDOW_MAX_EVENTS {
                        break;
                    }
                }
                // Outrun before the first event: the gap itself names the window.
                StreamItem::Gap(gap) => {
                    window = Some((gap.earliest, gap.latest));
                    break;
                }
                StreamItem::Heartbeat | StreamItem::End => break,
            }
        }
        Ok::<(), switchyard_kit::core::Error>(())
    };
    match tokio::time::timeout(WINDOW_DEADLINE, read).await {
        Ok(read) => read?,
        // What was read by then is a window the stream held; the rest is newer still.
        Err(_) => tracing::debug!(stream_id, "reading the retained window took too long"),
    }
    Ok(window)
}

/// One gap frame and the end of the body, as the bridge answers an evicted cursor.
fn gap_response(run_id: &str, gap: &StreamGap) -> Response {
    let frame = sse::gap_frame(run_id, gap);
    let mut response = Response::new(Body::from(Bytes::from(frame)));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// `GET /v1/runs/{run_id}/stream?session=&namespace=`: SSE with `Last-Event-ID` replay, the
/// run addressed as on the other run routes. On shutdown the stream ends without an end frame, so
/// the client reconnects (to another gateway) with its last id. A `Last-Event-ID` that is not an
/// event id gets one gap frame; an open run with nothing published yet is waited for.
#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}/stream",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace"), ("ticket" = Option<String>, Query, description = "A stream ticket instead of `Authorization`")),
    responses(
        (status = 200, description = "Server-Sent Events: one frame per stored event", content_type = "text/event-stream"),
        (status = 404, description = "`unknown_run`: no such run in this log; `no_stream`: the run finished and its stream was released, read the run instead", body = crate::openapi::ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn stream(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    follow(state, path, q, headers, |_| true).await
}

/// A run's stream as SSE with only the events whose kind `keep` accepts (the stream route keeps
/// all, the signals route its control events and end): the run addressed as on the other run
/// routes, a cursor that is not an event id answered with the gap frame, and the body ended on
/// shutdown.
pub(crate) async fn follow(
    state: AppState,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
    headers: HeaderMap,
    keep: fn(&str) -> bool,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    if *state.shutdown.borrow() {
        return Err(ApiError::from(switchyard_kit::core::Error::Closed {
            what: "gateway",
        }));
    }
    // Something to follow: the stream exists, or the run is open and its first publish may be a
    // moment away (another process writes it, or a memory bridge restarted under it); the
    // subscriber then waits for it with heartbeats, as deer-flow's does. A finished run whose
    // stream was released is 404 `no_stream` (read it from the store), an unknown run 404.
    let stream_id = state.runs.stream(&ctx).await?;
    let mut headers = headers;
    if let Some(cursor) = switchyard_kit::sse::last_event_id(&headers)
        && !is_event_id(&cursor)
    {
        // A cursor that is not an event id cannot be placed in the stream, so the client's
        // position is unknown: it gets the gap frame an evicted cursor gets, naming the window,
        // and reloads the run from the store (ADR 0356). With nothing retained there is nothing
        // to have missed, and it follows the stream from its start.
        if let Some((earliest, latest)) = retained_window(&state, &stream_id).await? {
            let gap = StreamGap {
                requested: Some(cursor),
                earliest,
                latest,
            };
            return Ok(gap_response(&run_id, &gap));
        }
        headers.remove("last-event-id");
    }
    let response = switchyard_kit::sse::sse_response_where(
        state.bridge.clone(),
        &stream_id,
        &run_id,
        &headers,
        state.heartbeat,
        keep,
    );
    Ok(until_shutdown(&state, response))
}

/// An SSE response as the gateway serves it: counted among the open streams while its body
/// lives, and ended (without an end frame, so the client reconnects elsewhere with its last id)
/// when the gateway shuts down.
fn until_shutdown(state: &AppState, response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let guard = state.metrics.sse_guard();
    let mut stop = state.shutdown.clone();
    let stopped = async move {
        let _ = stop.wait_for(|closing| *closing).await;
    };
    let frames = body
        .into_data_stream()
        .take_until(Box::pin(stopped))
        .map(move |frame| {
            // The guard lives as long as the body: dropped on end, shutdown or disconnect.
            let _ = &guard;
            frame
        });
    Response::from_parts(parts, Body::from_stream(frames)).into_response()
}
