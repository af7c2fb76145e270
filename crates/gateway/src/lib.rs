//! `switchyard-gateway`: switchyard's HTTP + SSE gateway as a library (ADR 0366). Runs with
//! `Last-Event-ID` replay, the queue and worker API, dead letters, schedules, the worker registry,
//! stream tickets, `/metrics`, `/openapi.json` and the console, over any event store, stream bridge
//! and fleet backend (routes in ADR 0080, statuses in ADR 0081).
//!
//! [`Gateway::builder`] takes the three ports and gives either an [`axum::Router`] to mount in an
//! application of one's own (behind its own layers, admitted by the token file or by an
//! [`auth::Authenticator`] of its own, ADR 0368), or a whole server with the edge the
//! `switchyard serve` binary uses (TLS, connection caps, header and idle timeouts, `Host` checks,
//! CORS, clean errors, graceful shutdown):
//!
//! ```no_run
//! # async fn demo() -> switchyard_kit::core::Result<()> {
//! use switchyard_gateway::Gateway;
//!
//! let store = switchyard_kit::open_event_store("sqlite://switchyard.db").await?;
//! let bridge = switchyard_kit::open_stream_bridge("memory://").await?;
//! let fleet = switchyard_kit::open_fleet_backend("sqlite://switchyard.db").await?;
//! let gateway = Gateway::builder(store, bridge, fleet).console(false).build()?;
//!
//! // Mounted in an application of one's own:
//! let app = axum::Router::new().nest("/switchyard", gateway.router());
//! # let _ = app;
//! // Or served whole, until Ctrl-C:
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await.unwrap();
//! let ctrl_c = async { let _ = tokio::signal::ctrl_c().await; };
//! gateway.serve(listener, None, ctrl_c).await?;
//! # Ok(())
//! # }
//! ```

// `ApiError` is built only on the error path of one request; boxing it buys nothing.
#![allow(clippy::result_large_err)]

mod admit;
pub mod auth;
mod builder;
mod console;
mod dead_letters;
mod edge;
mod error;
mod input;
mod metrics;
mod openapi;
mod queues;
mod ready;
mod routes;
mod run_control;
mod runs;
mod schedules;
mod server;
mod stream;
mod tasks;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_event_kinds;
mod tickets;
mod webhooks;
mod worker;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;
use switchyard_kit::core::{Error, Result};
use tokio::sync::{RwLock, watch};

pub use builder::{BackendKinds, Gateway, GatewayBuilder, StopHandle};
pub use input::MAX_DURATION_SECS;
use metrics::Metrics;
pub use server::Tls;
pub use switchyard_kit::Limits;
/// The webhook settings of [`GatewayBuilder::webhooks`].
pub use switchyard_service::webhooks::WebhookSettings;
use tracing::Instrument as _;

/// What every handler shares, behind one `Arc`: axum clones the state for every request (each
/// route's handler and the middleware that take it), and a clone is then one reference count
/// instead of one per backend, channel and setting.
#[derive(Debug, Clone)]
pub(crate) struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The backends, settings and shared state of a gateway ([`AppState`] holds one).
#[derive(Debug)]
pub(crate) struct Shared {
    pub store: Arc<dyn EventStore>,
    pub bridge: Arc<dyn StreamBridge>,
    pub fleet: Arc<dyn FleetBackend>,
    /// The run rules every door shares (ADR 0372), over `store` and `bridge`.
    pub runs: switchyard_service::runs::Runs,
    /// The queue rules every door shares (ADR 0372), over `fleet`.
    pub queues: switchyard_service::queues::Queues,
    /// Webhook subscriptions and their delivery logs (ADR 0395), over `fleet`.
    pub webhooks: switchyard_service::webhooks::Webhooks,
    pub metrics: Arc<Metrics>,
    pub heartbeat: Duration,
    /// How long `/readyz` waits for the backends.
    pub ready_timeout: Duration,
    /// Flips to true on SIGTERM / Ctrl-C.
    pub shutdown: watch::Receiver<bool>,
    /// Every write holds a read guard until it is stored and published; shutdown takes the write
    /// guard, so nothing acknowledged (or half-published) is cut off.
    pub writes: Arc<RwLock<()>>,
    pub backends: Arc<serde_json::Value>,
    /// Live stream tickets (ADR 0260).
    pub tickets: Arc<tickets::Tickets>,
    /// The longest a reservation request long-polls: under the whole-request deadline, so a
    /// poll answers (empty) instead of timing out.
    pub long_poll_cap: Duration,
    /// A registered worker silent for longer than this is evicted by the maintainer (`None`:
    /// never); HTTP workers are told to heartbeat well inside it.
    pub worker_idle_ttl: Option<Duration>,
    /// What an append does with a payload kind the event model does not know: refuse it (the
    /// default) or keep it as `raw_payload` (`lenient_event_kinds`, ADR 0373).
    pub unknown_kinds: switchyard_core::event::UnknownKinds,
}

impl Shared {
    /// Runs `work` to completion even if the client goes away, and holds shutdown until it is
    /// done: a stored event is always published.
    pub async fn write<T, F>(&self, work: F) -> std::result::Result<T, error::ApiError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = std::result::Result<T, error::ApiError>> + Send + 'static,
    {
        let guard = self.writes.clone().read_owned().await;
        // The task stays in the request's span, so its log lines carry the request id.
        let handle = tokio::spawn(
            async move {
                let out = work.await;
                drop(guard);
                out
            }
            .in_current_span(),
        );
        handle
            .await
            .map_err(|e| error::ApiError::internal(format!("request task failed: {e}")))?
    }
}

/// The run and queue services over the gateway's ports (ADR 0372).
pub(crate) fn services(
    store: &Arc<dyn EventStore>,
    bridge: &Arc<dyn StreamBridge>,
    fleet: &Arc<dyn FleetBackend>,
    stale_after: Duration,
    stream_grace: Duration,
) -> (
    switchyard_service::runs::Runs,
    switchyard_service::queues::Queues,
) {
    let runs = switchyard_service::runs::Runs::new(
        store.clone(),
        bridge.clone(),
        switchyard_service::runs::RunSettings {
            stale_after,
            stream_grace,
        },
    )
    .with_fleet(fleet.clone());
    (runs, switchyard_service::queues::Queues::new(fleet.clone()))
}

/// The route template of a request (`/v1/runs/{run_id}`), without the prefix an application
/// nested the gateway's router under: admission rules and metric labels name the gateway's own
/// routes wherever they are mounted. `None` before routing matched.
pub(crate) fn route_of<B>(request: &axum::http::Request<B>) -> Option<String> {
    let matched = request.extensions().get::<axum::extract::MatchedPath>()?;
    let matched = matched.as_str();
    let route = match request.extensions().get::<axum::extract::NestedPath>() {
        Some(prefix) => matched.strip_prefix(prefix.as_str()).unwrap_or(matched),
        None => matched,
    };
    Some(if route.is_empty() {
        "/".into()
    } else {
        route.into()
    })
}

/// The OpenAPI document of the route table.
pub(crate) fn openapi_json() -> String {
    let (_, doc) = routes::api_routes().split_for_parts();
    doc.to_json().unwrap_or_default()
}

/// The routes without admission, for the builder and tests.
pub(crate) fn router(state: AppState, console: bool) -> Router {
    let metrics = state.metrics.clone();
    let (api, doc) = routes::api_routes().split_for_parts();
    let doc = openapi::Document(Arc::from(doc.to_json().unwrap_or_default().as_str()));
    let api = if console {
        api.merge(crate::console::routes())
    } else {
        api
    };
    api.fallback(error::no_route)
        .method_not_allowed_fallback(error::wrong_method)
        .layer(axum::Extension(doc))
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            metrics::track,
        ))
        .with_state(state)
}

/// Liveness: 200 while serving, 503 once shutting down.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "ops",
    security(()),
    responses(
        (status = 200, description = "Serving", body = Object),
        (status = 503, description = "Shutting down", body = Object),
    )
)]
pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    let closing = *state.shutdown.borrow();
    let status = if closing {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let body = json!({
        "status": if closing { "shutting_down" } else { "ok" },
        "backends": *state.backends,
    });
    (status, axum::Json(body)).into_response()
}

/// Prometheus metrics in the OpenMetrics text format (ADR 0241).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "ops",
    responses(
        (status = 200, description = "OpenMetrics text", content_type = "application/openmetrics-text"),
        crate::openapi::Refusal,
    )
)]
pub(crate) async fn render_metrics(State(state): State<AppState>) -> Response {
    let text = state.metrics.render(state.fleet.as_ref()).await;
    (
        [(axum::http::header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        text,
    )
        .into_response()
}

/// Everything around the routes that the builder decides: who is admitted, the limits, and the
/// edge's `Host` and CORS rules.
#[derive(Debug, Clone)]
pub(crate) struct Security {
    /// The authenticator in force: the token file, an application's own, or none.
    pub auth: Option<admit::Authn>,
    pub limits: switchyard_kit::Limits,
    /// The listener is on a loopback address: refuse other `Host`s (DNS rebinding).
    pub loopback: bool,
    pub cors_origins: Vec<String>,
}

/// The router with admission (tokens, content type, body limit, scopes, stream cap) on every
/// route and the outer layers (request id, clean errors, panics, Host, CORS, timeout) around it.
pub(crate) fn app(state: AppState, security: &Security, console: bool) -> Result<Router> {
    let limits = &security.limits;
    let mut origins = Vec::with_capacity(security.cors_origins.len());
    for origin in &security.cors_origins {
        origins.push(
            axum::http::HeaderValue::from_str(origin)
                .map_err(|e| Error::config("cors_origins", format!("{origin:?}: {e}")))?,
        );
    }
    let edge = edge::Edge {
        loopback_only_host: security.loopback,
        cors_origins: origins,
        max_body_bytes: limits.max_body_bytes,
        request_secs: limits.request_secs,
    };
    Ok(edge::wrap(admitted(state, security, console), &edge))
}

/// The routes with admission (tokens, content type, body limit, scopes, stream caps), without
/// the outer layers: what an application mounts inside its own.
pub(crate) fn admitted(state: AppState, security: &Security, console: bool) -> Router {
    let limits = &security.limits;
    let ack_body_bytes = state
        .fleet
        .max_result_bytes()
        .saturating_add(admit::ACK_BODY_SLACK)
        .max(limits.max_body_bytes);
    let admit = Arc::new(admit::Admit {
        tickets: state.tickets.clone(),
        auth: security.auth.clone(),
        max_body_bytes: limits.max_body_bytes,
        ack_body_bytes,
        streams: Arc::new(tokio::sync::Semaphore::new(limits.max_streams)),
        max_streams: limits.max_streams,
        streams_per_token: admit::PerToken::new(limits.max_streams_per_token),
        rules: routes::Rules::new(),
    });
    state.tickets.limit_per_token(limits.max_tickets_per_token);
    router(state, console)
        .route_layer(axum::middleware::from_fn_with_state(admit, admit::admit))
        // Admission reads every write's body under its route's limit; this layer only bounds
        // what an extractor would read past it, so it takes the larger of the two.
        .layer(axum::extract::DefaultBodyLimit::max(ack_body_bytes))
}

/// Protected mode (ADR 0180): without a token file, only loopback listeners, unless the operator
/// says `--insecure-no-auth`.
pub(crate) fn check_protected_mode(
    addr: std::net::SocketAddr,
    auth: bool,
    insecure_no_auth: bool,
) -> Result<()> {
    if auth || insecure_no_auth || addr.ip().is_loopback() {
        return Ok(());
    }
    Err(Error::config(
        "listen",
        format!(
            "{addr} is not a loopback address and no token file is set: anyone who reaches it \
             could read and write every run and queue. Pass `--auth FILE` (see `switchyard token \
             new`), or `--insecure-no-auth` if a proxy in front authenticates"
        ),
    ))
}

/// A long poll ends a second before the whole-request deadline (at least half a second long).
pub(crate) fn long_poll_cap(request_secs: u64) -> Duration {
    Duration::from_secs(request_secs.saturating_sub(1)).max(Duration::from_millis(500))
}
