//! `switchyard serve`: the reference HTTP + SSE gateway (routes in ADR 0080, statuses in ADR 0081).

// `ApiError` is built only on the error path of one request; boxing it buys nothing.
#![allow(clippy::result_large_err)]

mod admit;
pub mod auth;
mod dead_letters;
mod edge;
mod error;
mod input;
mod metrics;
pub mod openapi;
mod queues;
mod ready;
mod runs;
mod schedules;
mod server;
mod stream;
#[cfg(test)]
mod tests;
pub mod tickets;
mod worker;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use clap::Args;
use serde_json::json;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::{MemoryLimits, StreamBridge};
use switchyard_kit::core::{Error, Result};
use switchyard_kit::{Config, Port};
use tokio::sync::{RwLock, watch};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::backends;
use metrics::Metrics;
pub use queues::{body_json, parse_priority_text, stats_json, worker_records};
use tracing::Instrument as _;

/// Options of `switchyard serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:8080, or `listen` / SWITCHYARD_LISTEN).
    #[arg(long)]
    pub listen: Option<String>,
    /// Seconds between SSE heartbeat comments.
    #[arg(long, default_value_t = 15)]
    pub heartbeat_secs: u64,
    /// Events the stream bridge keeps per run for `Last-Event-ID` replay.
    #[arg(long, default_value_t = switchyard_core::stream::DEFAULT_QUEUE_MAXSIZE)]
    pub stream_retention: usize,
    /// Seconds after which an open run no longer holds its session (agentdeck's default 1 h; at
    /// most ten years).
    #[arg(long, default_value_t = 3600)]
    pub stale_after_secs: u64,
    /// Seconds a finished run's stream stays replayable before the bridge releases it (deer-flow's
    /// 60 s); later readers read the run from the event store.
    #[arg(long, env = "SWITCHYARD_STREAM_GRACE_SECS", default_value_t = 60)]
    pub stream_grace_secs: u64,
    /// Memory stream bridge only: bytes of events one run retains (its newest event is always
    /// kept).
    #[arg(long, env = "SWITCHYARD_STREAM_RUN_BYTES", default_value_t = MemoryLimits::default().max_run_bytes)]
    pub stream_run_bytes: usize,
    /// Memory stream bridge only: bytes of events all runs retain; past it the oldest runs are
    /// evicted.
    #[arg(long, env = "SWITCHYARD_STREAM_TOTAL_BYTES", default_value_t = MemoryLimits::default().max_total_bytes)]
    pub stream_total_bytes: usize,
    /// Milliseconds `/readyz` waits for every backend to answer.
    #[arg(long, env = "SWITCHYARD_READY_TIMEOUT_MS", default_value_t = 2000)]
    pub ready_timeout_ms: u64,
    /// A queue whose counts `/metrics` always reports, in addition to the queues this gateway
    /// submits to (repeatable; also `watch_queues` in the config, SWITCHYARD_WATCH_QUEUES).
    #[arg(long = "watch-queue", value_name = "NAME")]
    pub watch_queues: Vec<String>,
    /// The token file: every `/v1` route then needs `Authorization: Bearer <secret>` (also
    /// `auth_file` in the config, SWITCHYARD_AUTH_FILE). Re-read on SIGHUP.
    #[arg(long = "auth", value_name = "FILE")]
    pub auth_file: Option<std::path::PathBuf>,
    /// Without `--auth`, allow a non-loopback `--listen` anyway: anyone who reaches the port
    /// reads and writes everything.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Serve `/metrics` without a token (with `--auth`; otherwise it needs the `metrics` right).
    #[arg(long)]
    pub metrics_public: bool,
    /// PEM certificate chain: serve HTTPS (with `--tls-key`).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of `--tls-cert`.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Do not run the recurring-schedule scheduler in this gateway (run it elsewhere, or run
    /// several: each tick is enqueued once whatever the number of schedulers).
    #[arg(long)]
    pub no_scheduler: bool,
    /// Do not run the queue maintainer in this gateway (ADR 0352). Without one anywhere, a
    /// reservation whose worker died is never returned and delayed tasks wait for a reserve.
    #[arg(long)]
    pub no_maintainer: bool,
    /// Milliseconds between queue-maintenance rounds: a lapsed reservation is reservable again
    /// within its visibility plus about this long.
    #[arg(long, env = "SWITCHYARD_MAINTAIN_EVERY_MS", default_value_t = 1000)]
    pub maintain_every_ms: u64,
    /// Seconds after its last heartbeat that a registered worker is evicted by the maintainer
    /// (0: never).
    #[arg(long, env = "SWITCHYARD_WORKER_IDLE_TTL_SECS", default_value_t = 300)]
    pub worker_idle_ttl_secs: u64,
    /// With `--redis`: refuse to start when the server may lose acknowledged writes (eviction
    /// on, or no AOF), instead of only warning.
    #[arg(long)]
    pub require_durable: bool,
}

/// What every handler shares, behind one `Arc`: axum clones the state for every request (each
/// route's handler and the middleware that take it), and a clone is then one reference count
/// instead of one per backend, channel and setting.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

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
pub struct Shared {
    pub store: Arc<dyn EventStore>,
    pub bridge: Arc<dyn StreamBridge>,
    pub fleet: Arc<dyn FleetBackend>,
    pub metrics: Arc<Metrics>,
    pub heartbeat: Duration,
    pub stale_after: Duration,
    /// How long a finished run's stream stays replayable (ADR 0192).
    pub stream_grace: Duration,
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

/// Every documented route: registered with the router and described in `/openapi.json` by the
/// same `routes!` line (ADR 0305). A route added any other way is missing from the document, and
/// the `openapi` tests fail.
pub fn api_routes() -> OpenApiRouter<AppState> {
    #[allow(deprecated)] // the replay alias stays registered until its removal (ADR 0307)
    let replay = routes!(dead_letters::replay);
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(ready::readyz))
        .routes(routes!(render_metrics))
        .routes(routes!(openapi::document))
        .routes(routes!(runs::start, runs::list))
        .routes(routes!(runs::read))
        .routes(routes!(runs::append))
        .routes(routes!(runs::resume))
        .routes(routes!(stream::stream))
        .routes(routes!(queues::list))
        .routes(routes!(queues::stats))
        .routes(routes!(queues::submit, queues::peek))
        .routes(routes!(queues::pause))
        .routes(routes!(queues::resume))
        .routes(routes!(queues::set_rate_limit, queues::clear_rate_limit))
        .routes(routes!(dead_letters::dead_letters))
        .routes(routes!(dead_letters::requeue))
        .routes(replay)
        .routes(routes!(worker::reserve))
        .routes(routes!(worker::ack))
        .routes(routes!(worker::nack))
        .routes(routes!(worker::fail))
        .routes(routes!(worker::extend))
        .routes(routes!(worker::progress))
        .routes(routes!(worker::in_flight))
        .routes(routes!(schedules::list))
        .routes(routes!(schedules::put, schedules::get, schedules::delete))
        .routes(routes!(queues::workers))
        .routes(routes!(workers::register, workers::deregister))
        .routes(routes!(workers::heartbeat))
        .routes(routes!(tickets::issue))
}

/// The router, for `serve` and tests.
pub fn router(state: AppState) -> Router {
    let metrics = state.metrics.clone();
    let (api, doc) = api_routes().split_for_parts();
    let doc = openapi::Document(Arc::from(doc.to_json().unwrap_or_default().as_str()));
    api.merge(crate::console::routes())
        .fallback(error::no_route)
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
async fn healthz(State(state): State<AppState>) -> Response {
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
        (status = "4XX", description = "Refused", body = openapi::ErrorBody),
    )
)]
async fn render_metrics(State(state): State<AppState>) -> Response {
    let text = state.metrics.render(state.fleet.as_ref()).await;
    (
        [(axum::http::header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        text,
    )
        .into_response()
}

fn kind(config: &Config, port: Port) -> String {
    config
        .url_for(port)
        .map(|u| u.kind().to_string())
        .unwrap_or_default()
}

/// Everything around the router that `serve` decides from its options and the config.
#[derive(Debug)]
pub struct Security {
    pub auth: Option<Arc<auth::Auth>>,
    pub limits: switchyard_kit::Limits,
    /// The listener is on a loopback address: refuse other `Host`s (DNS rebinding).
    pub loopback: bool,
    pub cors_origins: Vec<String>,
}

/// The router with admission (tokens, content type, body limit, scopes, stream cap) on every
/// route and the outer layers (request id, clean errors, panics, Host, CORS, timeout) around it.
pub fn app(state: AppState, security: &Security) -> Result<Router> {
    let limits = &security.limits;
    let admit = Arc::new(admit::Admit {
        tickets: state.tickets.clone(),
        auth: security.auth.clone(),
        max_body_bytes: limits.max_body_bytes,
        streams: Arc::new(tokio::sync::Semaphore::new(limits.max_streams)),
        max_streams: limits.max_streams,
        streams_per_token: admit::PerToken::new(limits.max_streams_per_token),
    });
    state.tickets.limit_per_token(limits.max_tickets_per_token);
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
    let routes = router(state)
        .route_layer(axum::middleware::from_fn_with_state(admit, admit::admit))
        .layer(axum::extract::DefaultBodyLimit::max(limits.max_body_bytes));
    Ok(edge::wrap(routes, &edge))
}

/// Protected mode (ADR 0180): without a token file, only loopback listeners, unless the operator
/// says `--insecure-no-auth`.
fn check_protected_mode(
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

/// Opens the backends, serves until SIGTERM or Ctrl-C, then shuts down gracefully: stop
/// accepting, end SSE streams (without an end frame, so clients reconnect elsewhere), finish
/// in-flight requests and writes, close the bridge.
pub async fn serve(mut config: Config, args: ServeArgs) -> Result<()> {
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    let addr = config.listen_addr()?;
    if args.heartbeat_secs == 0 {
        return Err(Error::config("--heartbeat-secs", "must be at least 1"));
    }
    if args.watch_queues.iter().any(String::is_empty) {
        return Err(Error::config("--watch-queue", "must not be empty"));
    }
    if args.stale_after_secs > input::MAX_DURATION_SECS {
        return Err(Error::config(
            "--stale-after-secs",
            format!(
                "must be at most {} (ten years), got {}",
                input::MAX_DURATION_SECS,
                args.stale_after_secs
            ),
        ));
    }
    if args.stream_grace_secs > input::MAX_DURATION_SECS {
        return Err(Error::config(
            "--stream-grace-secs",
            format!("must be at most {}", input::MAX_DURATION_SECS),
        ));
    }
    if args.ready_timeout_ms == 0 || args.ready_timeout_ms > 60_000 {
        return Err(Error::config(
            "--ready-timeout-ms",
            "must be between 1 and 60000",
        ));
    }
    if args.maintain_every_ms < 10 || args.maintain_every_ms > 3_600_000 {
        return Err(Error::config(
            "--maintain-every-ms",
            "must be between 10 and 3600000",
        ));
    }
    if args.worker_idle_ttl_secs > input::MAX_DURATION_SECS {
        return Err(Error::config(
            "--worker-idle-ttl-secs",
            format!("must be at most {}", input::MAX_DURATION_SECS),
        ));
    }
    let auth_file = args.auth_file.or(config.auth_file.clone());
    check_protected_mode(addr, auth_file.is_some(), args.insecure_no_auth)?;
    let auth = match auth_file {
        Some(path) => Some(Arc::new(auth::Auth::load(path, args.metrics_public)?)),
        None => None,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(server::tls_acceptor(cert, key)?),
        _ => None,
    };
    let mut watched = config.watch_queues.clone();
    watched.extend(args.watch_queues);
    // Bound before any backend opens: a start that fails on a port in use leaves nothing behind
    // (no SQLite file created, no connection made).
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::config("listen", format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::config("listen", format!("no local address: {e}")))?;
    check_redis_durability(&config, args.require_durable).await?;
    let store = backends::event_store(&config, None).await?;
    let limits = MemoryLimits {
        max_run_bytes: args.stream_run_bytes,
        max_total_bytes: args.stream_total_bytes,
    };
    let (bridge, memory_bridge) =
        backends::serve_stream_bridge(&config, args.stream_retention, limits).await?;
    let fleet = backends::fleet(&config, None).await?;
    // Each tick is enqueued once however many gateways run a scheduler (ADR 0308).
    let scheduler = (!args.no_scheduler).then(|| {
        switchyard_kit::fleet::typed::Scheduler::spawn(
            fleet.clone(),
            switchyard_kit::fleet::typed::SchedulerOptions::default(),
        )
    });
    let worker_idle_ttl =
        (args.worker_idle_ttl_secs > 0).then(|| Duration::from_secs(args.worker_idle_ttl_secs));
    // Returns lapsed reservations and moves due delayed tasks on every queue, so HTTP and seed
    // workers lose nothing (ADR 0352); safe with any number of gateways.
    let maintainer = switchyard_kit::fleet::typed::Maintainer::new(
        fleet.clone(),
        switchyard_kit::fleet::typed::MaintainerOptions::default()
            .period(Duration::from_millis(args.maintain_every_ms))
            .worker_idle_ttl(worker_idle_ttl),
    );
    for queue in &watched {
        maintainer.note_queue(queue);
    }
    let (tx, rx) = watch::channel(false);
    let state = AppState::new(Shared {
        store,
        bridge: bridge.clone(),
        fleet,
        metrics: Arc::new(Metrics::new(
            watched,
            memory_bridge,
            metrics::Adapters {
                event_store: kind(&config, Port::EventStore),
                stream_bridge: kind(&config, Port::StreamBridge),
                fleet: kind(&config, Port::Fleet),
            },
            auth.as_ref().map(|a| a.counters()),
        )),
        heartbeat: Duration::from_secs(args.heartbeat_secs),
        stale_after: Duration::from_secs(args.stale_after_secs),
        stream_grace: Duration::from_secs(args.stream_grace_secs),
        ready_timeout: Duration::from_millis(args.ready_timeout_ms),
        shutdown: rx.clone(),
        writes: Arc::new(RwLock::new(())),
        backends: Arc::new(state_backends(&config)),
        tickets: Arc::default(),
        long_poll_cap: long_poll_cap(config.limits.request_secs),
        worker_idle_ttl,
    });
    let writes = state.writes.clone();
    let maintenance = (!args.no_maintainer).then(|| {
        state.metrics.set_maintainer(maintainer.clone());
        maintainer.start()
    });
    let security = Security {
        auth: auth.clone(),
        limits: config.limits.clone(),
        loopback: addr.ip().is_loopback(),
        cors_origins: config.cors_origins.clone(),
    };
    let backends_json = state.backends.clone();
    let app = app(state, &security)?;
    // Installed with or without a token file: SIGHUP must never end the gateway.
    auth::reload_on_sighup(auth.clone());
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Tests and scripts read this line to learn the port when listening on :0.
    println!("switchyard listening on {scheme}://{local}");
    tracing::info!(
        %local, backends = %backends_json, auth = auth.is_some(), tls = tls.is_some(),
        scheduler = !args.no_scheduler, maintainer = !args.no_maintainer, "gateway started"
    );

    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested: draining");
        let _ = tx.send(true);
    });
    server::run(listener, app, &security.limits, tls, rx).await;
    // Writes whose client went away still run in their own task; wait for them.
    let _all_writes_done = writes.write().await;
    if let Some(scheduler) = scheduler {
        scheduler.shutdown().await;
    }
    if let Some(maintenance) = maintenance {
        maintenance.shutdown().await;
    }
    if let Err(e) = bridge.close().await {
        tracing::warn!(error = %e, "closing the stream bridge failed");
    }
    tracing::info!("gateway stopped");
    Ok(())
}

/// With `--redis`, reads the server's settings (ADR 0023): an evicting or non-persistent Redis
/// loses acknowledged events and tasks. Warns, or refuses with `--require-durable`. A server
/// that cannot be reached is left to the backends' own open, which says so.
async fn check_redis_durability(config: &Config, require_durable: bool) -> Result<()> {
    let Ok(url) = config.url_for(Port::EventStore) else {
        return Ok(());
    };
    if url.kind() != "redis" {
        return Ok(());
    }
    let report = match switchyard_kit::check_server(url.url()).await {
        Ok(report) => report,
        Err(e) => {
            tracing::warn!(error = %e, "could not check the Redis server's settings");
            return Ok(());
        }
    };
    if report.issues.is_empty() {
        return Ok(());
    }
    let issues: Vec<String> = report.issues.iter().map(ToString::to_string).collect();
    let issues = issues.join("; ");
    if require_durable {
        return Err(Error::config(
            "redis",
            format!(
                "the Redis server may lose acknowledged writes: {issues}. Set `maxmemory-policy \
                 noeviction` and `appendonly yes` (docs/operations.md), or drop --require-durable"
            ),
        ));
    }
    tracing::warn!(
        issues = %issues,
        "the Redis server may lose acknowledged writes; set maxmemory-policy noeviction and \
         appendonly yes (docs/operations.md), or pass --require-durable to refuse such a server"
    );
    Ok(())
}

/// A long poll ends a second before the whole-request deadline (at least half a second long).
pub fn long_poll_cap(request_secs: u64) -> Duration {
    Duration::from_secs(request_secs.saturating_sub(1)).max(Duration::from_millis(500))
}

fn state_backends(config: &Config) -> serde_json::Value {
    json!({
        "event_store": kind(config, Port::EventStore),
        "stream_bridge": kind(config, Port::StreamBridge),
        "fleet": kind(config, Port::Fleet),
    })
}

async fn wait_for_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
