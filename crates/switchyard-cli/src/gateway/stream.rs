//! `GET /v1/runs/{run_id}/stream`: a run's live events as Server-Sent Events.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use switchyard_core::stream::run_stream_id;

use super::AppState;
use super::error::ApiError;
use super::input::run_context;
use super::metrics::PortName;
use super::runs::{RunQuery, path_id, query};

/// `GET /v1/runs/{run_id}/stream?session=&namespace=`: SSE with `Last-Event-ID` replay, the
/// run addressed as on the other run routes. On shutdown the stream ends without an end frame, so
/// the client reconnects (to another gateway) with its last id.
#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}/stream",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run"), ("session" = Option<String>, Query, description = "The run's session, if it has one"), ("namespace" = Option<String>, Query, description = "The run's namespace"), ("ticket" = Option<String>, Query, description = "A stream ticket instead of `Authorization`")),
    responses(
        (status = 200, description = "Server-Sent Events: one frame per stored event", content_type = "text/event-stream"),
        (status = 404, description = "`no_stream`: read the run instead", body = crate::gateway::openapi::ErrorBody),
        (status = "4XX", description = "Refused", body = crate::gateway::openapi::ErrorBody),
        (status = "5XX", description = "Backend failure", body = crate::gateway::openapi::ErrorBody),
    )
)]
pub async fn stream(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<RunQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let run_id = path_id(path, "run_id")?;
    let q = query(q)?;
    let ctx = run_context(&run_id, q.session.as_deref(), q.namespace.as_deref())?;
    let stream_id = run_stream_id(&ctx);
    if *state.shutdown.borrow() {
        return Err(ApiError::from(switchyard_kit::core::Error::Closed {
            what: "gateway",
        }));
    }
    if !state
        .metrics
        .call(
            PortName::StreamBridge,
            "stream_exists",
            state.bridge.stream_exists(&stream_id),
        )
        .await?
    {
        return Err(ApiError::not_found(
            "no_stream",
            format!(
                "run {run_id:?} has no live stream here (address it with the same ?session= and \
                 ?namespace= as its other routes); read its events with GET /v1/runs/{{run_id}}"
            ),
        ));
    }
    let response = switchyard_kit::sse::sse_response_for(
        state.bridge.clone(),
        &stream_id,
        &run_id,
        &headers,
        state.heartbeat,
    );
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
    Ok(Response::from_parts(parts, Body::from_stream(frames)).into_response())
}
