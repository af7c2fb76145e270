//! Dead-letter routes: list each letter with its `ref` (its exact bytes), and requeue the oldest
//! or the chosen ones (ADR 0307); `…/replay` is the deprecated old name of `…/requeue`.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_kit::core::Priority;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::{Fields, MAX_REPLAY, object};
use super::queues::{PageQuery, body_json, page, parse_priority};
use super::runs::{path_id, query};

/// The name of a dead letter: its exact bytes, base64url without padding (ADR 0307).
pub fn letter_ref(body: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(body)
}

/// A dead letter as listed: the decoded body with its `ref` added (`{"raw": …, "ref"}` when the
/// body is not a JSON object).
fn letter_json(body: &[u8]) -> Value {
    let mut view = match body_json(body) {
        Value::Object(map) => map,
        _ => {
            let mut map = serde_json::Map::new();
            map.insert(
                "raw".into(),
                Value::String(String::from_utf8_lossy(body).into_owned()),
            );
            map
        }
    };
    view.insert("ref".into(), Value::String(letter_ref(body)));
    Value::Object(view)
}

/// `GET /v1/queues/{queue}/dead-letters`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetterList {
    pub queue: String,
    /// Dead letters in all.
    pub total: u64,
    /// Oldest first: each the decoded body plus `ref`, its exact bytes in base64url without
    /// padding, which names it to `dead-letters/requeue`.
    pub dead_letters: Vec<Value>,
}

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
    let limit = page(query(q)?.limit, 20)?;
    let bodies = state.fleet.dlq_peek(&name, limit).await?;
    let total = state.fleet.dlq_length(&name).await?;
    Ok(ok_typed(
        StatusCode::OK,
        DeadLetterList {
            queue: name,
            total,
            dead_letters: bodies.iter().map(|b| letter_json(b)).collect(),
        },
    ))
}

/// `POST /v1/queues/{queue}/dead-letters/requeue`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct RequeueBody {
    /// Requeue the oldest `limit` dead letters (default: all). Not with `refs`.
    limit: Option<u64>,
    /// Requeue exactly these letters, by the `ref` the listing gave (at most 1000). Not with
    /// `limit`.
    refs: Option<Vec<String>>,
    /// The tier they go to: `high`, `normal` (default), `low`, or the seed's integer.
    #[schema(value_type = Option<Object>)]
    priority: Option<Value>,
}

/// What a requeue moved.
#[derive(Debug, Serialize, ToSchema)]
pub struct Requeued {
    pub queue: String,
    /// Dead letters moved back to the queue, with a fresh attempt count.
    pub requeued: u64,
    /// The refs given that named no dead letter (already requeued, cleared, or never there).
    pub missing: Vec<String>,
}

/// `…/dead-letters/replay`, deprecated.
#[derive(Debug, Serialize, ToSchema)]
pub struct Replayed {
    pub queue: String,
    pub replayed: u64,
    pub requeued: u64,
    pub missing: Vec<String>,
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
    body: Bytes,
) -> Result<Response, ApiError> {
    let (queue, requeued, missing) = requeue_inner(state, path, body).await?;
    Ok(ok_typed(
        StatusCode::OK,
        Requeued {
            queue,
            requeued,
            missing,
        },
    ))
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
    body: Bytes,
) -> Result<Response, ApiError> {
    let (queue, requeued, missing) = requeue_inner(state, path, body).await?;
    let link = format!(
        "</v1/queues/{}/dead-letters/requeue>; rel=\"successor-version\"",
        switchyard_core::keys::quote(&queue)
    );
    let mut response = ok_typed(
        StatusCode::OK,
        Replayed {
            queue,
            replayed: requeued,
            requeued,
            missing,
        },
    );
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
    body: Bytes,
) -> Result<(String, u64, Vec<String>), ApiError> {
    let name = path_id(path, "queue")?;
    let mut f = Fields::new(object(&body, true)?, &["limit", "refs", "priority"])?;
    let limit = f.u64_at_most("limit", MAX_REPLAY)?;
    let refs = match f.take("refs") {
        None => None,
        Some(Value::Array(items)) => {
            if items.len() > switchyard_kit::core::fleet::MAX_BATCH {
                return Err(ApiError::invalid(
                    "refs",
                    "`refs` holds more than 1000 refs; requeue in several calls",
                ));
            }
            let mut refs = Vec::with_capacity(items.len());
            let mut bodies = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                let field = format!("refs[{i}]");
                let Value::String(r) = item else {
                    return Err(ApiError::invalid(
                        field.clone(),
                        format!("`{field}` must be a string"),
                    ));
                };
                let body = URL_SAFE_NO_PAD.decode(r.as_bytes()).map_err(|_| {
                    ApiError::invalid(
                        field.clone(),
                        format!("`{field}` is not a ref from the dead-letter listing (base64url without padding)"),
                    )
                })?;
                refs.push(r);
                bodies.push(body);
            }
            Some((refs, bodies))
        }
        Some(_) => return Err(ApiError::invalid("refs", "`refs` must be a list of refs")),
    };
    if limit.is_some() && refs.is_some() {
        return Err(ApiError::invalid(
            "refs",
            "give `limit` or `refs`, not both",
        ));
    }
    let priority = match f.take("priority") {
        Some(v) => parse_priority("priority", &v)?,
        None => Priority::Normal,
    };
    let fleet = state.fleet.clone();
    state
        .write(async move {
            if let Some((refs, bodies)) = refs {
                if bodies.is_empty() {
                    return Ok((name, 0, Vec::new()));
                }
                let moved = fleet.dlq_requeue_chosen(&name, &bodies, priority).await?;
                let requeued = moved.iter().filter(|m| **m).count() as u64;
                let missing = refs
                    .into_iter()
                    .zip(moved.iter().chain(std::iter::repeat(&false)))
                    .filter(|(_, m)| !**m)
                    .map(|(r, _)| r)
                    .collect();
                return Ok((name, requeued, missing));
            }
            let n = match limit {
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
                None => {
                    let total = fleet.dlq_length(&name).await?;
                    usize::try_from(total).unwrap_or(usize::MAX)
                }
            };
            let requeued = if n == 0 {
                0
            } else {
                fleet.dlq_requeue(&name, n, priority).await?
            };
            Ok((name, requeued, Vec::new()))
        })
        .await
}
