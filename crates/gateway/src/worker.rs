//! The HTTP worker API (ADR 0306): reserve tasks, then ack, nack, fail, extend or report progress
//! on each reservation by its receipt; list what is in flight. The rules (attempts, expiry, the
//! stored body a nack or fail writes) are the queue service's (ADR 0372); here are the long
//! poll's limits (the gateway's request deadline, shutdown, a revoked token) and the routes.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use switchyard_kit::core::Receipt;
use switchyard_service::queues::worker::InFlightQuery;
use switchyard_service::queues::{
    AckBody, AckManyBody, AckOutcome, AckedMany, ExtendBody, FailBody, InFlightList, NackBody,
    Nacked, Reservations, ReserveBody,
};
use utoipa::IntoParams;

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::{JsonBody, check_id};
use super::openapi::{ErrorBody, Ok as OkBody};
use super::runs::query;

/// The queue and receipt of a reservation route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // the schema of the path; the handlers read it as a tuple
pub struct ReceiptPath {
    /// The queue.
    queue: String,
    /// The receipt of the reservation, percent-encoded.
    receipt: String,
}

fn receipt_path(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, Receipt), ApiError> {
    let Path((queue, receipt)) = path.map_err(|e| ApiError::bad_request("path", e.body_text()))?;
    check_id("queue", &queue)?;
    check_id("receipt", &receipt)?;
    Ok((queue, Receipt::new(receipt)))
}

/// Reserves up to `max` due tasks, waiting up to `wait_seconds` (a long poll) while none is.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/reservations",
    tag = "worker",
    params(("queue" = String, Path, description = "The queue")),
    request_body(content = Option<ReserveBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "The reservations (an empty list when nothing was due)", body = Reservations),
        crate::openapi::Failures,
    )
)]
pub async fn reserve(
    State(state): State<AppState>,
    revocation: Option<axum::Extension<super::admit::Revocation>>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<ReserveBody, true>,
) -> Result<Response, ApiError> {
    let name = super::runs::path_id(path, "queue")?;
    let mut opts = body.options()?;
    // The poll ends inside the gateway's request deadline, so it answers (empty) instead of
    // timing out.
    opts.wait = opts.wait.min(state.long_poll_cap);
    // Not detached from the request: a worker that hangs up mid-poll must not leave tasks
    // reserved for nobody. A shutdown ends the poll at once with what is there (nothing).
    let mut shutdown = state.shutdown.clone();
    state.metrics.track_queue(&name);
    let work = state.queues.reserve(&name, opts);
    let closing = async move {
        if shutdown.wait_for(|closing| *closing).await.is_err() {
            // No one can signal a shutdown any more: only the poll's own end counts.
            std::future::pending::<()>().await;
        }
    };
    let reservations = tokio::select! {
        out = work => out?,
        () = closing => Reservations::default(),
        // The token was revoked (SIGHUP) while the poll waited: 401, and nothing reserved.
        refused = super::admit::until_revoked(revocation) => return Err(refused),
    };
    Ok(ok_typed(StatusCode::OK, reservations))
}

/// Ends the delivery successfully, storing `result` (any JSON, at most the backend's
/// `max_result_bytes` written compact, 1 MiB by default) with the end: `GET …/tasks/{id}` and
/// the queue's end events read it back.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/reservations/{receipt}/ack",
    tag = "worker",
    params(ReceiptPath),
    request_body(content = Option<AckBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "Acked", body = OkBody),
        (status = 409, description = "`receipt_not_current`: the worker lost the task; `cancelled`: the task was cancelled while this worker held it (it ended `cancelled`, nothing stored: stop, do not retry)", body = ErrorBody),
        (status = 413, description = "`result_too_large`: the result is larger than `limit` bytes; nothing changed", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn ack(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    JsonBody(body): JsonBody<AckBody, true>,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    let queues = state.queues.clone();
    state
        .write(async move {
            queues
                .ack_with(&name, &receipt, body.result.as_ref())
                .await?;
            Ok(ok_typed(StatusCode::OK, OkBody { ok: true }))
        })
        .await
}

/// Ends many deliveries successfully in one request: each ack is what the ack route does for its
/// receipt (with its `result`), and each is answered on its own, in the order sent, so one lost
/// reservation does not fail the others.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/reservations/ack",
    tag = "worker",
    params(("queue" = String, Path, description = "The queue")),
    request_body(content = AckManyBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Each ack's outcome, in the order sent: `ok`, or the status, `error` and `message` the ack route would have answered (`receipt_not_current`, `cancelled`, `result_too_large`, `unavailable`)", body = AckedMany),
        (status = 422, description = "`invalid_input`: no acks, more than 1000 (`field` `acks`), or a malformed receipt (`field` names it); nothing was acked", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn ack_many(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<AckManyBody>,
) -> Result<Response, ApiError> {
    let name = super::runs::path_id(path, "queue")?;
    // The service refuses an empty or oversized batch (422 naming `acks`); the receipts' form is
    // the gateway's rule, as it is for the ack route's path.
    for (i, ack) in body.acks.iter().enumerate() {
        check_id(&format!("acks[{i}].receipt"), &ack.receipt)?;
    }
    let queues = state.queues.clone();
    state
        .write(async move {
            let answers = queues.ack_many(&name, body.acks).await?;
            let results = answers
                .into_iter()
                .map(|(receipt, out)| match out {
                    Ok(()) => AckOutcome {
                        receipt,
                        ok: true,
                        status: None,
                        error: None,
                        message: None,
                    },
                    Err(e) => {
                        let (status, code, message) = ApiError::from(e).into_item();
                        AckOutcome {
                            receipt,
                            ok: false,
                            status: Some(status.as_u16()),
                            error: Some(code.to_string()),
                            message: Some(message),
                        }
                    }
                })
                .collect();
            Ok(ok_typed(StatusCode::OK, AckedMany { results }))
        })
        .await
}

/// Ends the delivery and puts the task back (same tier, same attempt count), now or after
/// `delay_seconds`, with `reason` kept in its `last_error`; a nack of the last attempt
/// dead-letters it instead.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/reservations/{receipt}/nack",
    tag = "worker",
    params(ReceiptPath),
    request_body(content = Option<NackBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "Requeued, or dead-lettered at the last attempt", body = Nacked),
        (status = 409, description = "`receipt_not_current`: the worker lost the task; `cancelled`: the task was cancelled while this worker held it (stop, do not retry)", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn nack(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    JsonBody(body): JsonBody<NackBody, true>,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    let queues = state.queues.clone();
    state
        .write(async move {
            let nacked = queues.nack(&name, &receipt, body).await?;
            Ok(ok_typed(StatusCode::OK, nacked))
        })
        .await
}

/// Ends the delivery and dead-letters the task, with `reason` kept in its `last_error`.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/reservations/{receipt}/fail",
    tag = "worker",
    params(ReceiptPath),
    request_body(content = Option<FailBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "Dead-lettered", body = OkBody),
        (status = 409, description = "`receipt_not_current`: the worker lost the task; `cancelled`: the task was cancelled while this worker held it (stop, do not retry)", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn fail(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    JsonBody(body): JsonBody<FailBody, true>,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    let queues = state.queues.clone();
    state
        .write(async move {
            queues.fail(&name, &receipt, body).await?;
            Ok(ok_typed(StatusCode::OK, OkBody { ok: true }))
        })
        .await
}

/// Sets the reservation's deadline to now + `visibility_seconds`.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/reservations/{receipt}/extend",
    tag = "worker",
    params(ReceiptPath),
    request_body(content = ExtendBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Extended", body = OkBody),
        (status = 409, description = "`receipt_not_current`: the worker lost the task; `cancelled`: the task was cancelled while this worker held it (stop, do not retry)", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn extend(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    JsonBody(body): JsonBody<ExtendBody>,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    let queues = state.queues.clone();
    state
        .write(async move {
            queues.extend(&name, &receipt, body).await?;
            Ok(ok_typed(StatusCode::OK, OkBody { ok: true }))
        })
        .await
}

/// Stores a progress document (any JSON, at most 64 KiB) on the current delivery; observers read
/// it from the in-flight listing.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/reservations/{receipt}/progress",
    tag = "worker",
    params(ReceiptPath),
    request_body(content = Value, content_type = "application/json", description = "Any JSON document, at most 64 KiB"),
    responses(
        (status = 200, description = "Stored", body = OkBody),
        (status = 409, description = "`receipt_not_current`: the worker lost the task; `cancelled`: the task was cancelled while this worker held it (stop, do not retry)", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn progress(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    // Any JSON document, not only an object: `JsonBody` does not fit.
    let doc: Value = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("the body is not valid JSON: {e}"),
        )
        .with_field("body")
    })?;
    let queues = state.queues.clone();
    state
        .write(async move {
            queues.progress(&name, &receipt, &doc).await?;
            Ok(ok_typed(StatusCode::OK, OkBody { ok: true }))
        })
        .await
}

/// The queue's reservations, soonest deadline first, with their progress and without their
/// receipts.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/in-flight",
    tag = "worker",
    params(("queue" = String, Path, description = "The queue"), InFlightQuery),
    responses(
        (status = 200, description = "The reservations", body = InFlightList),
        crate::openapi::Failures,
    )
)]
pub async fn in_flight(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<InFlightQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let name = super::runs::path_id(path, "queue")?;
    let limit = query(q)?.limit;
    let list = state.queues.in_flight(&name, limit).await?;
    Ok(ok_typed(StatusCode::OK, list))
}
