//! The HTTP worker API (ADR 0306): reserve tasks, then ack, nack, fail, extend or report progress
//! on each reservation by its receipt; list what is in flight.
//!
//! An HTTP worker holds the receipt and the payload it was handed, not the body the backend
//! stored, so nack and fail go through the port's `queue_release` and `queue_delivered`
//! (guarantee `queue.release`) instead of sending a body back: a worker can never rewrite a task.
//!
//! The gateway keeps a task's attempts as the library consumer does (ADR 0352): a reservation
//! carries `max_attempts`; a task delivered past it (its earlier reservations lapsed: the
//! workers died or ran past their visibility) is dead-lettered instead of handed out, and a
//! nack of the last attempt dead-letters, both with `last_error`. A task whose `ttl_seconds`
//! passed is dropped unrun.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_fleet::{Envelope, LastError};
use switchyard_kit::core::{Delivery, Receipt};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::{Fields, check_id, object};
use super::openapi::{ErrorBody, Ok as OkBody};
use super::queues::priority_name;
use super::runs::query;

/// The most tasks one reservation request takes.
pub const MAX_RESERVE: u64 = 100;
/// The longest visibility a worker may ask for: 12 hours. A longer job extends its reservation.
pub const MAX_VISIBILITY_SECS: f64 = 43_200.0;
/// The visibility of a reservation that names none.
pub const DEFAULT_VISIBILITY_SECS: f64 = 30.0;
/// The longest long-poll: a request holds a connection and a task of the gateway meanwhile.
pub const MAX_WAIT_SECS: f64 = 30.0;
/// The longest delay of a nack (ten years, as every other client duration).
const MAX_DELAY_SECS: f64 = super::input::MAX_DURATION_SECS as f64;
/// The longest failure reason kept in the envelope.
const MAX_REASON_BYTES: usize = 4096;
/// The most reservations one in-flight listing returns.
const MAX_IN_FLIGHT_PAGE: usize = 1000;

/// The attempts of a task whose envelope names none (and of a body that is not an envelope):
/// the library consumer's default, so a task is tried as often whoever works it.
fn default_max_attempts() -> u32 {
    switchyard_fleet::ConsumerConfig::default().max_attempts
}

/// `POST /v1/queues/{queue}/reservations`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)] // the schema of the body; the handler reads it field by field
pub struct ReserveBody {
    /// How many tasks at most (1..=100, default 1).
    #[schema(minimum = 1, maximum = 100)]
    max: Option<u64>,
    /// Seconds each reservation lasts unless extended (default 30, at most 43200).
    #[schema(exclusive_minimum = 0, maximum = 43200)]
    visibility_seconds: Option<f64>,
    /// Seconds to wait while nothing is due (default 0, at most 30): a long poll.
    #[schema(minimum = 0, maximum = 30)]
    wait_seconds: Option<f64>,
}

/// The failure a previous attempt recorded (ADR 0250).
#[derive(Debug, Serialize, ToSchema)]
pub struct LastErrorJson {
    pub message: String,
    pub attempt: u32,
    /// Unix seconds.
    pub at: f64,
}

/// One reserved task.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReservedTask {
    /// The envelope's task id (null when the body is not an envelope).
    pub id: Option<String>,
    /// Pass it back to ack, nack, fail, extend or report progress; it names this delivery only.
    pub receipt: String,
    /// The task's payload (the whole body when it is not an envelope).
    pub payload: Value,
    /// This delivery's attempt number, counted by the backend (1 on the first).
    pub attempt: u32,
    /// The attempts the task is given: a nack of attempt `max_attempts` dead-letters it, and
    /// so does a delivery past it (the earlier reservations lapsed). The envelope's own, else
    /// 3, the library consumer's default.
    pub max_attempts: u32,
    /// The tier the task came from.
    #[schema(value_type = String)]
    pub priority: &'static str,
    /// Unix seconds (backend clock) when the reservation lapses unless extended.
    pub visible_until: f64,
    /// Why the previous attempt failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastErrorJson>,
    /// Set when the body is not a task envelope: why. Fail such a task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<String>,
}

/// The reservations handed out (empty when nothing was due).
#[derive(Debug, Serialize, ToSchema)]
pub struct Reservations {
    pub tasks: Vec<ReservedTask>,
}

/// `…/nack`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct NackBody {
    /// Seconds before the task is reservable again (default 0).
    #[schema(minimum = 0)]
    delay_seconds: Option<f64>,
    /// Why this attempt failed; kept in the task's `last_error` (at most 4096 bytes).
    reason: Option<String>,
}

/// What a nack did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Nacked {
    pub ok: bool,
    /// True when this was the task's last attempt: it went to the dead letters, not back to
    /// the queue.
    pub dead_lettered: bool,
    /// The attempt that was nacked.
    pub attempt: u32,
    pub max_attempts: u32,
}

/// `…/fail`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct FailBody {
    /// Why the task failed; kept in the dead letter's `last_error` (at most 4096 bytes).
    reason: Option<String>,
}

/// `…/extend`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct ExtendBody {
    /// The reservation lasts this many seconds from now (at most 43200).
    #[schema(exclusive_minimum = 0, maximum = 43200)]
    visibility_seconds: f64,
}

/// One reservation as an observer sees it: no receipt.
#[derive(Debug, Serialize, ToSchema)]
pub struct InFlightTask {
    pub id: Option<String>,
    pub attempt: u32,
    #[schema(value_type = String)]
    pub priority: &'static str,
    pub visible_until: f64,
    /// The last progress document its worker reported on this delivery, or null.
    pub progress: Value,
    /// The task's payload (the whole body when it is not an envelope).
    pub payload: Value,
}

/// `GET /v1/queues/{queue}/in-flight`.
#[derive(Debug, Serialize, ToSchema)]
pub struct InFlightList {
    pub in_flight: Vec<InFlightTask>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InFlightQuery {
    /// At most this many (default 100, at most 1000).
    limit: Option<usize>,
}

/// The queue and receipt of a reservation route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
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

/// The 409 of a receipt that is not the current delivery's.
fn not_current() -> ApiError {
    ApiError::conflict(
        "receipt_not_current",
        "this reservation is no longer yours: its visibility lapsed (the task went back to the \
         queue for another worker) or it was already acked, nacked or failed. Stop working on \
         it; reserve again, and extend long jobs before their visibility lapses",
    )
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::ZERO)
}

/// The payload, id and last error of a delivered body, or why it is not an envelope.
fn decode(body: &[u8]) -> (Value, Option<LastErrorJson>, Option<String>) {
    match Envelope::parse(body) {
        Ok(env) => (
            env.payload().clone(),
            env.last_error().map(|e| LastErrorJson {
                message: e.message,
                attempt: e.attempt,
                at: e.at,
            }),
            None,
        ),
        Err(e) => (super::queues::body_json(body), None, Some(e.to_string())),
    }
}

fn reserved(d: Delivery, max_attempts: u32) -> ReservedTask {
    let (payload, last_error, malformed) = decode(&d.body);
    ReservedTask {
        id: d.task_id,
        receipt: d.receipt.as_str().to_string(),
        payload,
        attempt: d.attempt,
        max_attempts,
        priority: priority_name(d.priority),
        visible_until: d.visible_until,
        last_error,
        malformed,
    }
}

/// What the gateway does with a delivery before a worker sees it.
enum Screened {
    /// Hand it out with this many attempts.
    Hand(Delivery, u32),
    /// Its `ttl_seconds` passed: ack it unrun.
    Expired(Delivery),
    /// Delivered past its maximum: dead-letter this body.
    Exhausted(Delivery, Vec<u8>),
}

fn screen(d: Delivery, now: f64) -> Screened {
    let Ok(mut env) = Envelope::parse(&d.body) else {
        let max = default_max_attempts();
        return if d.attempt > max {
            let body = d.body.clone();
            Screened::Exhausted(d, body)
        } else {
            Screened::Hand(d, max)
        };
    };
    let max = env
        .max_attempts()
        .unwrap_or_else(default_max_attempts)
        .max(1);
    if env.expired_at(now) {
        return Screened::Expired(d);
    }
    if d.attempt <= max {
        return Screened::Hand(d, max);
    }
    let lapsed = d.attempt - 1;
    env.set_attempt(lapsed);
    env.set_max_attempts(max);
    env.set_last_error(&LastError {
        message: format!(
            "no worker finished the task in {lapsed} attempt(s) (max_attempts {max}): each \
             reservation lapsed without an ack, nack or fail (its worker died, or ran past its \
             visibility without extending it)"
        ),
        attempt: lapsed,
        at: now,
    });
    let body = env.to_bytes();
    Screened::Exhausted(d, body)
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
    body: Bytes,
) -> Result<Response, ApiError> {
    let name = super::runs::path_id(path, "queue")?;
    let mut f = Fields::new(
        object(&body, true)?,
        &["max", "visibility_seconds", "wait_seconds"],
    )?;
    let max = match f.u64_at_most("max", MAX_RESERVE)? {
        Some(0) => return Err(ApiError::invalid("max", "`max` must be at least 1")),
        Some(n) => usize::try_from(n).unwrap_or(1),
        None => 1,
    };
    let visibility = f
        .seconds_at_most("visibility_seconds", MAX_VISIBILITY_SECS)?
        .unwrap_or(DEFAULT_VISIBILITY_SECS);
    if visibility <= 0.0 {
        return Err(ApiError::invalid(
            "visibility_seconds",
            "`visibility_seconds` must be more than 0",
        ));
    }
    let wait = secs(
        f.seconds_at_most("wait_seconds", MAX_WAIT_SECS)?
            .unwrap_or(0.0),
    )
    .min(state.long_poll_cap);
    let visibility = secs(visibility);
    // Not detached from the request: a worker that hangs up mid-poll must not leave tasks
    // reserved for nobody. A shutdown ends the poll at once with what is there (nothing).
    let mut shutdown = state.shutdown.clone();
    state.metrics.track_queue(&name);
    let work = reserve_screened(&state, &name, max, wait, visibility);
    let closing = async move {
        if shutdown.wait_for(|closing| *closing).await.is_err() {
            // No one can signal a shutdown any more: only the poll's own end counts.
            std::future::pending::<()>().await;
        }
    };
    let tasks = tokio::select! {
        out = work => out?,
        () = closing => Vec::new(),
        // The token was revoked (SIGHUP) while the poll waited: 401, and nothing reserved.
        refused = super::admit::until_revoked(revocation) => return Err(refused),
    };
    Ok(ok_typed(StatusCode::OK, Reservations { tasks }))
}

/// Reserves until something can be handed out or the wait is over: deliveries past their
/// attempts are dead-lettered and expired ones acked on the way, as the library consumer does,
/// so a worker never sees them.
async fn reserve_screened(
    state: &AppState,
    name: &str,
    max: usize,
    wait: Duration,
    visibility: Duration,
) -> switchyard_kit::core::Result<Vec<ReservedTask>> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        // One task is the port's single reserve: adapters batch concurrent single reserves
        // (the Redis fleet's lanes, the SQL group commits), which a one-task batch call skips.
        let deliveries: Vec<Delivery> = if max == 1 {
            let one = state.fleet.queue_reserve(name, left, visibility);
            let one = one.await?;
            one.into_iter().collect()
        } else {
            let many = state.fleet.queue_reserve_many(name, max, left, visibility);
            many.await?
        };
        let got = !deliveries.is_empty();
        let now = unix_now();
        let mut tasks = Vec::with_capacity(deliveries.len());
        for d in deliveries {
            match screen(d, now) {
                Screened::Hand(d, max) => tasks.push(reserved(d, max)),
                Screened::Expired(d) => {
                    let ack = state.fleet.queue_ack(name, &d.receipt);
                    ack.await?;
                    tracing::info!(queue = name, task_id = ?d.task_id, "dropped a task past its ttl_seconds unrun");
                }
                Screened::Exhausted(d, body) => {
                    let fail = state.fleet.queue_fail(name, &d.receipt, &body);
                    fail.await?;
                    tracing::warn!(
                        queue = name, task_id = ?d.task_id, attempt = d.attempt,
                        "dead-lettered a task delivered past its max_attempts (its reservations lapsed)"
                    );
                }
            }
        }
        if !tasks.is_empty() || !got || left.is_zero() {
            return Ok(tasks);
        }
    }
}

/// The delivery a receipt names, or the 409 of a receipt that is no longer current.
async fn current_delivery(
    fleet: &dyn switchyard_kit::core::FleetBackend,
    name: &str,
    receipt: &Receipt,
) -> Result<Delivery, ApiError> {
    let delivered = fleet.queue_delivered(name, receipt).await?;
    delivered.ok_or_else(not_current)
}

async fn end(
    done: impl std::future::Future<Output = switchyard_kit::core::Result<bool>>,
) -> Result<Response, ApiError> {
    if done.await? {
        Ok(ok_typed(StatusCode::OK, OkBody { ok: true }))
    } else {
        Err(not_current())
    }
}

/// Ends the delivery successfully.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/reservations/{receipt}/ack",
    tag = "worker",
    params(ReceiptPath),
    responses(
        (status = 200, description = "Acked", body = OkBody),
        (status = 409, description = "`receipt_not_current`: the worker lost the task", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn ack(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    Fields::new(object(&body, true)?, &[])?;
    let fleet = state.fleet.clone();
    state
        .write(async move { end(fleet.queue_ack(&name, &receipt)).await })
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
        (status = 409, description = "`receipt_not_current`: the worker lost the task", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn nack(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    let mut f = Fields::new(object(&body, true)?, &["delay_seconds", "reason"])?;
    let delay = secs(
        f.seconds_at_most("delay_seconds", MAX_DELAY_SECS)?
            .unwrap_or(0.0),
    );
    let reason = f.string("reason")?;
    if reason.as_ref().is_some_and(|r| r.len() > MAX_REASON_BYTES) {
        return Err(ApiError::invalid(
            "reason",
            format!("`reason` is longer than {MAX_REASON_BYTES} bytes"),
        ));
    }
    let fleet = state.fleet.clone();
    state
        .write(async move {
            let delivery = current_delivery(fleet.as_ref(), &name, &receipt).await?;
            let attempt = delivery.attempt;
            let envelope = Envelope::parse(&delivery.body).ok();
            let max = envelope
                .as_ref()
                .and_then(Envelope::max_attempts)
                .unwrap_or_else(default_max_attempts)
                .max(1);
            let last = attempt >= max;
            // The gateway, not the worker, rewrites the stored body: only `last_error` (and,
            // at the end, the attempt bookkeeping) changes, as the consumer writes them.
            let body = envelope.map(|mut env| {
                let message = reason.clone().unwrap_or_else(|| {
                    if last {
                        format!("nacked at its last attempt ({attempt} of {max})")
                    } else {
                        format!("nacked at attempt {attempt} of {max}")
                    }
                });
                env.set_last_error(&LastError {
                    message,
                    attempt,
                    at: unix_now(),
                });
                if last {
                    env.set_attempt(attempt);
                    env.set_max_attempts(max);
                }
                env.to_bytes()
            });
            let done = match (last, body) {
                (true, Some(body)) => {
                    let fail = fleet.queue_fail(&name, &receipt, &body);
                    fail.await?
                }
                (true, None) => {
                    let fail = fleet.queue_fail(&name, &receipt, &delivery.body);
                    fail.await?
                }
                (false, Some(body)) if reason.is_some() => {
                    let nack = fleet.queue_nack(&name, &receipt, &body, delay);
                    nack.await?
                }
                (false, _) => {
                    let release = fleet.queue_release(&name, &receipt, delay);
                    release.await?
                }
            };
            if !done {
                return Err(not_current());
            }
            Ok(ok_typed(
                StatusCode::OK,
                Nacked {
                    ok: true,
                    dead_lettered: last,
                    attempt,
                    max_attempts: max,
                },
            ))
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
        (status = 409, description = "`receipt_not_current`: the worker lost the task", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn fail(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    let mut f = Fields::new(object(&body, true)?, &["reason"])?;
    let reason = f
        .string("reason")?
        .unwrap_or_else(|| "failed by the worker (no reason given)".to_string());
    if reason.len() > MAX_REASON_BYTES {
        return Err(ApiError::invalid(
            "reason",
            format!("`reason` is longer than {MAX_REASON_BYTES} bytes"),
        ));
    }
    let fleet = state.fleet.clone();
    state
        .write(async move {
            let delivery = current_delivery(fleet.as_ref(), &name, &receipt).await?;
            // The reason goes into the envelope as the consumer writes it (ADR 0250); a body
            // that is not an envelope is dead-lettered as it is.
            let body = match Envelope::parse(&delivery.body) {
                Ok(mut env) => {
                    env.set_last_error(&LastError {
                        message: reason,
                        attempt: delivery.attempt,
                        at: unix_now(),
                    });
                    env.to_bytes()
                }
                Err(_) => delivery.body,
            };
            if fleet.queue_fail(&name, &receipt, &body).await? {
                Ok(ok_typed(StatusCode::OK, OkBody { ok: true }))
            } else {
                Err(not_current())
            }
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
        (status = 409, description = "`receipt_not_current`: the worker lost the task", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn extend(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    let mut f = Fields::new(object(&body, false)?, &["visibility_seconds"])?;
    let Some(visibility) = f.seconds_at_most("visibility_seconds", MAX_VISIBILITY_SECS)? else {
        return Err(ApiError::invalid(
            "visibility_seconds",
            "`visibility_seconds` is required",
        ));
    };
    if visibility <= 0.0 {
        return Err(ApiError::invalid(
            "visibility_seconds",
            "`visibility_seconds` must be more than 0",
        ));
    }
    let fleet = state.fleet.clone();
    state
        .write(async move { end(fleet.queue_extend(&name, &receipt, secs(visibility))).await })
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
        (status = 409, description = "`receipt_not_current`: the worker lost the task", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn progress(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (name, receipt) = receipt_path(path)?;
    let doc: Value = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("the body is not valid JSON: {e}"),
        )
        .with_field("body")
    })?;
    // Stored compact, so the limit is on what is kept, not on the client's whitespace.
    let doc = serde_json::to_vec(&doc).map_err(|e| ApiError::internal(e.to_string()))?;
    if doc.len() > switchyard_kit::core::fleet::MAX_PROGRESS_BYTES {
        return Err(ApiError::invalid(
            "body",
            "the progress document is larger than 64 KiB; report a small status, not results",
        ));
    }
    let fleet = state.fleet.clone();
    state
        .write(async move { end(fleet.queue_progress(&name, &receipt, &doc)).await })
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
    let limit = query(q)?.limit.unwrap_or(100);
    if limit > MAX_IN_FLIGHT_PAGE {
        return Err(ApiError::invalid(
            "limit",
            format!("`limit` must be at most {MAX_IN_FLIGHT_PAGE}"),
        ));
    }
    let list = state.fleet.queue_in_flight(&name, limit).await?;
    let in_flight = list
        .into_iter()
        .map(|r| {
            let (payload, _, _) = decode(&r.body);
            InFlightTask {
                id: r.task_id,
                attempt: r.attempt,
                priority: priority_name(r.priority),
                visible_until: r.visible_until,
                progress: r
                    .progress
                    .map(|p| super::queues::body_json(&p))
                    .unwrap_or(Value::Null),
                payload,
            }
        })
        .collect();
    Ok(ok_typed(StatusCode::OK, InFlightList { in_flight }))
}

/// The gateway's clock in unix seconds, for `last_error.at` (the consumer uses its own clock
/// too) and a worker's heartbeat (so a worker's clock cannot make it look alive or dead).
pub(super) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
