//! `switchyard serve`: the gateway of `switchyard-gateway` over the backends of the config and
//! flags, until SIGTERM or Ctrl-C (ADR 0366).

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use switchyard_core::stream::MemoryLimits;
use switchyard_gateway::{BackendKinds, Gateway, MAX_DURATION_SECS, Tls, WebhookSettings, auth};
use switchyard_kit::core::{Error, Result};
use switchyard_kit::{Config, Port};

use crate::backends;

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
    /// Store an appended payload of a kind the event model does not know as `raw_payload`, as
    /// the seed did, instead of refusing it with 422 (also `lenient_event_kinds = true` in the
    /// config). Only for writers of kinds newer than this gateway: a typo is stored too.
    #[arg(long)]
    pub lenient_event_kinds: bool,
    /// With `--redis`: refuse to start when the server may lose acknowledged writes (eviction
    /// on, or no AOF), instead of only warning.
    #[arg(long)]
    pub require_durable: bool,
}

fn kind(config: &Config, port: Port) -> String {
    config
        .url_for(port)
        .map(|u| u.kind().to_string())
        .unwrap_or_default()
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
    if args.stale_after_secs > MAX_DURATION_SECS {
        return Err(Error::config(
            "--stale-after-secs",
            format!(
                "must be at most {} (ten years), got {}",
                MAX_DURATION_SECS, args.stale_after_secs
            ),
        ));
    }
    if args.stream_grace_secs > MAX_DURATION_SECS {
        return Err(Error::config(
            "--stream-grace-secs",
            format!("must be at most {}", MAX_DURATION_SECS),
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
    if args.worker_idle_ttl_secs > MAX_DURATION_SECS {
        return Err(Error::config(
            "--worker-idle-ttl-secs",
            format!("must be at most {}", MAX_DURATION_SECS),
        ));
    }
    let auth_file = args.auth_file.or(config.auth_file.clone());
    let auth = match auth_file {
        Some(path) => Some(Arc::new(auth::Auth::load(path, args.metrics_public)?)),
        None => None,
    };
    if auth.is_none() && !args.insecure_no_auth && !addr.ip().is_loopback() {
        // Refused before anything is opened; `Gateway::serve` would refuse it too.
        return Err(Error::config(
            "listen",
            format!(
                "{addr} is not a loopback address and no token file is set: anyone who reaches \
                 it could read and write every run and queue. Pass `--auth FILE` (see \
                 `switchyard token new`), or `--insecure-no-auth` if a proxy in front \
                 authenticates"
            ),
        ));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(Tls::from_pem_files(cert, key)?),
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
    let kinds = BackendKinds {
        event_store: kind(&config, Port::EventStore),
        stream_bridge: kind(&config, Port::StreamBridge),
        fleet: kind(&config, Port::Fleet),
    };
    let worker_idle_ttl =
        (args.worker_idle_ttl_secs > 0).then(|| Duration::from_secs(args.worker_idle_ttl_secs));
    let mut builder = Gateway::builder(store, bridge, fleet)
        .backend_kinds(kinds.clone())
        .allow_open_network(args.insecure_no_auth)
        .limits(config.limits.clone())
        .cors_origins(config.cors_origins.clone())
        .heartbeat(Duration::from_secs(args.heartbeat_secs))
        .stale_after(Duration::from_secs(args.stale_after_secs))
        .stream_grace(Duration::from_secs(args.stream_grace_secs))
        .ready_timeout(Duration::from_millis(args.ready_timeout_ms))
        .watch_queues(watched)
        // Each tick is enqueued once however many gateways run a scheduler (ADR 0308).
        .scheduler(!args.no_scheduler)
        // Returns lapsed reservations and moves due delayed tasks on every queue, so HTTP and
        // seed workers lose nothing (ADR 0352); safe with any number of gateways.
        .maintainer((!args.no_maintainer).then(|| Duration::from_millis(args.maintain_every_ms)))
        .worker_idle_ttl(worker_idle_ttl)
        .lenient_event_kinds(args.lenient_event_kinds || config.lenient_event_kinds)
        .webhooks(webhook_settings(&config.webhooks));
    if let Some(auth) = &auth {
        builder = builder.auth(auth.clone());
    }
    if let Some(memory) = memory_bridge {
        builder = builder.memory_bridge_metrics(memory);
    }
    let gateway = builder.build()?;
    // Installed with or without a token file: SIGHUP must never end the gateway.
    auth::reload_on_sighup(auth.clone());
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Tests and scripts read this line to learn the port when listening on :0.
    println!("switchyard listening on {scheme}://{local}");
    tracing::info!(
        %local,
        event_store = %kinds.event_store,
        stream_bridge = %kinds.stream_bridge,
        fleet = %kinds.fleet,
        auth = auth.is_some(),
        tls = tls.is_some(),
        scheduler = !args.no_scheduler,
        maintainer = !args.no_maintainer,
        "gateway started"
    );
    gateway.serve(listener, tls, wait_for_signal()).await
}

/// The gateway's webhook settings from `[webhooks]`: each key left out keeps the default (the
/// builder checks the ranges and names a bad key).
fn webhook_settings(c: &switchyard_kit::WebhookConfig) -> WebhookSettings {
    let d = WebhookSettings::default();
    let ms = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_millis);
    WebhookSettings {
        allow_private: c.allow_private,
        allowed_cidrs: c.allowed_cidrs.clone(),
        max_attempts: c.max_attempts.unwrap_or(d.max_attempts),
        backoff: ms(c.backoff_ms, d.backoff),
        backoff_cap: ms(c.backoff_cap_ms, d.backoff_cap),
        connect_timeout: ms(c.connect_timeout_ms, d.connect_timeout),
        timeout: ms(c.timeout_ms, d.timeout),
        max_subscriptions: c.max_subscriptions.unwrap_or(d.max_subscriptions),
        log_size: c.log_size.unwrap_or(d.log_size),
        concurrency: c.concurrency.unwrap_or(d.concurrency),
        dispatch_every: d.dispatch_every,
    }
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
