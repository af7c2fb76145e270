//! Server-Sent Events over axum (feature `axum`): a bridge subscription as an HTTP response.
//!
//! Frames are exactly [`switchyard_core::stream::sse::frame`]'s: events with their id, heartbeats
//! as comments, and the end or gap frame last. A client that disconnects drops the body, which
//! drops the subscription.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use switchyard_core::stream::{StreamBridge, StreamItem, sse};

/// The `Last-Event-ID` request header, if present. A header that is not UTF-8 is passed on as an
/// empty cursor, which the bridge treats as malformed (never as "absent").
pub fn last_event_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get("last-event-id")
        .map(|v| v.to_str().map(str::to_string).unwrap_or_default())
}

/// Streams `run_id` from the request's `Last-Event-ID` as `text/event-stream`.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use axum::{Router, extract::{Path, State}, http::HeaderMap, routing::get};
/// use switchyard_kit::core::{MemoryStreamBridge, StreamBridge};
///
/// async fn stream(
///     State(bridge): State<Arc<dyn StreamBridge>>,
///     Path(run_id): Path<String>,
///     headers: HeaderMap,
/// ) -> axum::response::Response {
///     switchyard_kit::sse::sse_response(bridge, &run_id, &headers, Duration::from_secs(15))
/// }
///
/// let bridge: Arc<dyn StreamBridge> = Arc::new(MemoryStreamBridge::new(256).unwrap());
/// let app: Router = Router::new().route("/runs/{run_id}/stream", get(stream)).with_state(bridge);
/// ```
pub fn sse_response(
    bridge: Arc<dyn StreamBridge>,
    run_id: &str,
    headers: &HeaderMap,
    heartbeat: Duration,
) -> Response {
    sse_response_for(bridge, run_id, run_id, headers, heartbeat)
}

/// As [`sse_response`] for a run published under another stream id (a run addressed by
/// namespace and session, `switchyard_core::stream::run_stream_id`): frames such as `gap` name
/// `run_id`, the subscription follows `stream_id`.
pub fn sse_response_for(
    bridge: Arc<dyn StreamBridge>,
    stream_id: &str,
    run_id: &str,
    headers: &HeaderMap,
    heartbeat: Duration,
) -> Response {
    sse_response_where(bridge, stream_id, run_id, headers, heartbeat, |_| true)
}

/// As [`sse_response_for`], sending only the events whose SSE event name `keep` accepts;
/// heartbeats, the end and a gap always go out. A skipped event still moves nothing: a client
/// that resumes with the last id it got replays from there, skipping the same events again.
pub fn sse_response_where(
    bridge: Arc<dyn StreamBridge>,
    stream_id: &str,
    run_id: &str,
    headers: &HeaderMap,
    heartbeat: Duration,
    keep: fn(&str) -> bool,
) -> Response {
    let cursor = last_event_id(headers);
    let run = run_id.to_string();
    let items = bridge.subscribe(stream_id, cursor.as_deref(), heartbeat);
    let frames = items
        .scan(false, move |done, item| {
            if *done {
                return futures::future::ready(None);
            }
            let frame = match item {
                Ok(StreamItem::Event(e)) if !keep(&e.event) => Some(Bytes::new()),
                Ok(item) => {
                    *done = item.is_terminal();
                    Some(Bytes::from(sse::frame(&run, &item)))
                }
                Err(error) => {
                    // The stream cannot go on; the client reconnects with its last id.
                    tracing::warn!(run_id = %run, %error, "stream subscription failed");
                    None
                }
            };
            futures::future::ready(frame)
        })
        .filter(|frame| futures::future::ready(!frame.is_empty()))
        .map(Ok::<Bytes, std::convert::Infallible>);
    let mut response = Response::new(Body::from_stream(frames));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx buffer responses unless told not to.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A plain-text error response, for handlers that refuse a stream before it starts.
pub fn refuse(status: StatusCode, message: &str) -> Response {
    (status, message.to_string()).into_response()
}
