//! `GET /readyz`: every backend answers a cheap read within a deadline (ADR 0193).

use std::future::Future;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use switchyard_kit::core::{Error, RunContext};

use super::AppState;

/// The ids the probes read: nothing is ever written under them.
const PROBE: &str = "switchyard-readyz-probe";

/// 200 `{"status": "ready"}` when the event store, the stream bridge and the fleet each answered
/// within the deadline; 503 `{"status": "not_ready", "failed": {port: reason}}` naming the others.
/// Reasons are the error's kind or "timed out", never its message (which may carry keys).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "ops",
    security(()),
    responses(
        (status = 200, description = "Every backend answered", body = Object),
        (status = 503, description = "Not ready: `failed` names the backends", body = Object),
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Response {
    if *state.shutdown.borrow() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({
                "error": "shutting_down",
                "message": "the gateway is shutting down; use another instance",
                "status": "shutting_down",
            })),
        )
            .into_response();
    }
    let deadline = state.ready_timeout;
    let ctx = RunContext::new(PROBE);
    let (store, bridge, fleet) = futures::join!(
        probe(deadline, state.store.run_status(&ctx)),
        probe(deadline, state.bridge.stream_exists(PROBE)),
        probe(deadline, state.fleet.counter_get(PROBE)),
    );
    let mut failed = Map::new();
    for (port, outcome) in [
        ("event_store", store),
        ("stream_bridge", bridge),
        ("fleet", fleet),
    ] {
        if let Err(reason) = outcome {
            tracing::warn!(port, %reason, "readiness probe failed");
            failed.insert(port.into(), Value::String(reason));
        }
    }
    if failed.is_empty() {
        return (StatusCode::OK, axum::Json(json!({"status": "ready"}))).into_response();
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(axum::http::header::RETRY_AFTER, "1")],
        axum::Json(json!({
            "error": "not_ready",
            "message": "a backend did not answer within the readiness deadline; see `failed`",
            "status": "not_ready",
            "failed": failed,
        })),
    )
        .into_response()
}

async fn probe<T>(
    deadline: Duration,
    call: impl Future<Output = switchyard_kit::core::Result<T>>,
) -> Result<(), String> {
    match tokio::time::timeout(deadline, call).await {
        Err(_) => Err(format!("timed out after {} ms", deadline.as_millis())),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "readiness probe error");
            Err(kind(&e).to_string())
        }
    }
}

fn kind(error: &Error) -> &'static str {
    match error {
        Error::Unavailable { .. } => "unavailable",
        Error::Contended { .. } => "contended",
        Error::Closed { .. } => "closed",
        Error::Corrupt { .. } => "corrupt",
        Error::Rejected { .. } => "rejected",
        Error::Config { .. } => "config",
        Error::InvalidInput { .. } => "invalid_input",
        _ => "error",
    }
}
