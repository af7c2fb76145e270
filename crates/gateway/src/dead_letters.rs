//! Dead-letter routes: list each letter with its `ref` (its exact bytes), and requeue the oldest
//! or the chosen ones (ADR 0307); `…/replay` is the deprecated old name of `…/requeue`. The
//! rules are the queue service's (ADR 0372).

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use switchyard_service::queues::{DeadLetterList, PageQuery, Replayed, RequeueBody, Requeued};

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::JsonBody;
use super::runs::{path_id, query};

/// Dead-lettered tasks, oldest first, each with the `ref` that names it for a requeue.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/dead-letters",
    tag = "dead-letters",
    params(("queue" = String, Path, description = "The queue"), PageQuery),
    responses(
        (status = 200, description = "Dead letters", body = DeadLetterList),
        crate::openapi::Failures,
    )
)]
pub async fn dead_letters(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let name = path_id(path, "queue")?;
    let limit = query(q)?.limit;
    let list = state.queues.dead_letters(&name, limit).await?;
    Ok(ok_typed(StatusCode::OK, list))
}

/// Moves dead letters back to the queue atomically with a fresh attempt count: the oldest
/// `limit` (default all), or exactly the letters named by `refs`.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/dead-letters/requeue",
    tag = "dead-letters",
    params(("queue" = String, Path, description = "The queue")),
    request_body(content = Option<RequeueBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "Requeued", body = Requeued),
        crate::openapi::Failures,
    )
)]
pub async fn requeue(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<RequeueBody, true>,
) -> Result<Response, ApiError> {
    let requeued = requeue_inner(state, path, body).await?;
    Ok(ok_typed(StatusCode::OK, requeued))
}

/// The route's old name (ADR 0307): as `dead-letters/requeue`, answering `replayed` too, with
/// `Deprecation: true` and a `Link` to the new route.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/dead-letters/replay",
    tag = "dead-letters",
    params(("queue" = String, Path, description = "The queue")),
    request_body(content = Option<RequeueBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "Requeued", body = Replayed),
        crate::openapi::Failures,
    )
)]
#[deprecated = "use POST /v1/queues/{queue}/dead-letters/requeue"]
pub async fn replay(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<RequeueBody, true>,
) -> Result<Response, ApiError> {
    let requeued = requeue_inner(state, path, body).await?;
    let link = format!(
        "</v1/queues/{}/dead-letters/requeue>; rel=\"successor-version\"",
        switchyard_core::keys::quote(&requeued.queue)
    );
    let mut response = ok_typed(StatusCode::OK, Replayed::from(requeued));
    let headers = response.headers_mut();
    headers.insert("deprecation", axum::http::HeaderValue::from_static("true"));
    if let Ok(link) = axum::http::HeaderValue::from_str(&link) {
        headers.insert(axum::http::header::LINK, link);
    }
    Ok(response)
}

async fn requeue_inner(
    state: AppState,
    path: Result<Path<String>, PathRejection>,
    body: RequeueBody,
) -> Result<Requeued, ApiError> {
    let name = path_id(path, "queue")?;
    let queues = state.queues.clone();
    state
        .write(async move { Ok(queues.requeue(&name, body).await?) })
        .await
}
