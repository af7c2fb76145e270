//! [`Gateway`] and its builder: the gateway over three ports, as a router to mount or a server
//! to run (ADR 0366).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use serde_json::json;
use switchyard_core::event::UnknownKinds;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::observe::{Observed, Observer};
use switchyard_core::store::EventStore;
use switchyard_core::stream::{MemoryStreamBridge, StreamBridge};
use switchyard_fleet::{
    Maintainer, MaintainerHandle, MaintainerOptions, Scheduler, SchedulerHandle, SchedulerOptions,
};
use switchyard_kit::Limits;
use switchyard_kit::core::{Error, Result};
use switchyard_service::webhooks::{WebhookSettings, WebhookWorker, Webhooks};
use tokio::net::TcpListener;
use tokio::sync::{RwLock, watch};

use crate::admit::Authn;
use crate::auth::{Auth, Authenticator};
use crate::input::MAX_DURATION_SECS;
use crate::metrics::Metrics;
use crate::server::Tls;
use crate::{AppState, Security, Shared};

/// The adapter behind each port, as `/healthz` reports them and `/metrics` labels backend
/// calls (`sqlite`, `redis`, `postgres`, `memory`, or a name of one's own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendKinds {
    /// The event store's adapter.
    pub event_store: String,
    /// The stream bridge's adapter.
    pub stream_bridge: String,
    /// The fleet backend's adapter.
    pub fleet: String,
}

/// Settings of a [`Gateway`]; see [`Gateway::builder`]. Every setting has the default of
/// `switchyard serve`.
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct GatewayBuilder {
    store: Arc<dyn EventStore>,
    bridge: Arc<dyn StreamBridge>,
    fleet: Arc<dyn FleetBackend>,
    memory_bridge: Option<MemoryStreamBridge>,
    kinds: BackendKinds,
    auth: Option<Authn>,
    metrics_public: bool,
    allow_open_network: bool,
    limits: Limits,
    cors_origins: Vec<String>,
    console: bool,
    heartbeat: Duration,
    stale_after: Duration,
    stream_grace: Duration,
    ready_timeout: Duration,
    watch_queues: Vec<String>,
    scheduler: bool,
    maintainer: Option<Duration>,
    worker_idle_ttl: Option<Duration>,
    webhooks: WebhookSettings,
    webhook_worker: bool,
    lenient_event_kinds: bool,
}

impl GatewayBuilder {
    /// Requires a token of `auth`'s token file on every `/v1` route (see `switchyard token
    /// new`), and takes the file's `metrics_public`. Without it or an
    /// [`authenticator`](Self::authenticator) every route is open: [`Gateway::serve`] then
    /// refuses a non-loopback listener unless [`allow_open_network`](Self::allow_open_network)
    /// says a proxy in front authenticates. A reload of the file ([`Auth::reload`]) cuts the
    /// streams and long polls of the tokens it revoked.
    pub fn auth(mut self, auth: Arc<Auth>) -> Self {
        self.metrics_public = auth.metrics_public;
        self.auth = Some(Authn::new(auth, false));
        self
    }

    /// Admits requests by an application's own [`Authenticator`] instead of a token file (ADR
    /// 0368): every `/v1` route then needs the principal it answers with, with the route's right
    /// and scope, and it counts as configured auth for [`Gateway::serve`]'s protected mode. The
    /// last of `auth` and `authenticator` called is the one in force.
    pub fn authenticator(mut self, authenticator: Arc<dyn Authenticator>) -> Self {
        self.auth = Some(Authn::new(authenticator, false));
        self
    }

    /// Serves `/metrics` without credentials when an authenticator is set (default off: it
    /// needs the `metrics` right). [`auth`](Self::auth) sets it from the token file's setting.
    pub fn metrics_public(mut self, public: bool) -> Self {
        self.metrics_public = public;
        self
    }

    /// Lets [`Gateway::serve`] listen on a non-loopback address without a token file (`switchyard
    /// serve --insecure-no-auth`): anyone who reaches the port reads and writes everything.
    pub fn allow_open_network(mut self, allow: bool) -> Self {
        self.allow_open_network = allow;
        self
    }

    /// The limits on what clients control: body bytes, streams, connections, timeouts.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Browser origins allowed cross-origin calls when served by [`Gateway::serve`] (empty, the
    /// default: CORS off). A mounting application keeps its own CORS layer.
    pub fn cors_origins(mut self, origins: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.cors_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// Serves the console at `/` and `/console/…` (default on).
    pub fn console(mut self, on: bool) -> Self {
        self.console = on;
        self
    }

    /// Time between SSE heartbeat comments (default 15 s; at least 1 s).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// How long after its last event an open run stops holding its session (default 1 h).
    pub fn stale_after(mut self, after: Duration) -> Self {
        self.stale_after = after;
        self
    }

    /// How long a finished run's stream stays replayable from the bridge (default 60 s).
    pub fn stream_grace(mut self, grace: Duration) -> Self {
        self.stream_grace = grace;
        self
    }

    /// How long `/readyz` waits for every backend (default 2 s; at most 60 s).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Queues whose counts `/metrics` always reports and the maintainer always visits.
    pub fn watch_queues(mut self, queues: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.watch_queues.extend(queues.into_iter().map(Into::into));
        self
    }

    /// Runs the recurring-schedule scheduler (default on; each tick is enqueued once however
    /// many gateways run one, ADR 0308).
    pub fn scheduler(mut self, on: bool) -> Self {
        self.scheduler = on;
        self
    }

    /// Runs the queue maintainer every `period` (default every second), or not at all with
    /// `None`: it returns lapsed reservations and moves due delayed tasks (ADR 0352). Without
    /// one anywhere, a task whose worker died is never delivered again.
    pub fn maintainer(mut self, period: Option<Duration>) -> Self {
        self.maintainer = period;
        self
    }

    /// Evicts registered workers silent for longer than `ttl` (default 300 s; `None`: never).
    pub fn worker_idle_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.worker_idle_ttl = ttl;
        self
    }

    /// Stores an appended payload of a kind the event model does not know as `{kind,
    /// raw_payload}` with 201, as the seed did (`switchyard serve --lenient-event-kinds`). Off
    /// by default: such an append is refused with 422 `invalid_input` on its `kind`, since a
    /// typo (`tool.call`) stored as `raw_payload` is silently lost to every reader (ADR 0373).
    pub fn lenient_event_kinds(mut self, lenient: bool) -> Self {
        self.lenient_event_kinds = lenient;
        self
    }

    /// How webhooks are delivered (ADR 0395): allowed targets, attempts, backoff, timeouts,
    /// bounds. The default refuses private and loopback targets.
    pub fn webhooks(mut self, settings: WebhookSettings) -> Self {
        self.webhooks = settings;
        self
    }

    /// Runs the webhook dispatcher and delivery consumer in this gateway (default on). Off, the
    /// routes still manage subscriptions and run ends are still enqueued; another gateway (or
    /// process) delivers them.
    pub fn webhook_worker(mut self, on: bool) -> Self {
        self.webhook_worker = on;
        self
    }

    /// Names the adapters for `/healthz` and the `/metrics` labels.
    pub fn backend_kinds(mut self, kinds: BackendKinds) -> Self {
        self.kinds = kinds;
        self
    }

    /// The memory stream bridge behind the bridge port, whose retained bytes `/metrics` then
    /// reports.
    pub fn memory_bridge_metrics(mut self, bridge: MemoryStreamBridge) -> Self {
        self.memory_bridge = Some(bridge);
        self
    }

    /// Checks the settings and starts the scheduler, the maintainer and the webhook worker (so it must be called
    /// inside a Tokio runtime). A setting out of range is [`Error::Config`] naming it.
    pub fn build(self) -> Result<Gateway> {
        if self.heartbeat < Duration::from_secs(1) {
            return Err(Error::config("heartbeat", "must be at least 1 s"));
        }
        let max = Duration::from_secs(MAX_DURATION_SECS);
        for (name, value) in [
            ("stale_after", Some(self.stale_after)),
            ("stream_grace", Some(self.stream_grace)),
            ("worker_idle_ttl", self.worker_idle_ttl),
        ] {
            if value.is_some_and(|v| v > max) {
                return Err(Error::config(
                    name,
                    format!("must be at most {MAX_DURATION_SECS} s (ten years)"),
                ));
            }
        }
        if self.ready_timeout.is_zero() || self.ready_timeout > Duration::from_secs(60) {
            return Err(Error::config(
                "ready_timeout",
                "must be between 1 ms and 60 s",
            ));
        }
        if let Some(period) = self.maintainer
            && (period < Duration::from_millis(10) || period > Duration::from_secs(3600))
        {
            return Err(Error::config(
                "maintainer",
                "the period must be between 10 ms and 1 h",
            ));
        }
        if self.watch_queues.iter().any(String::is_empty) {
            return Err(Error::config(
                "watch_queues",
                "a queue name must not be empty",
            ));
        }
        for origin in &self.cors_origins {
            axum::http::HeaderValue::from_str(origin)
                .map_err(|e| Error::config("cors_origins", format!("{origin:?}: {e}")))?;
        }
        let (stop, stopped) = watch::channel(false);
        let backends = json!({
            "event_store": self.kinds.event_store,
            "stream_bridge": self.kinds.stream_bridge,
            "fleet": self.kinds.fleet,
        });
        let metrics = Arc::new(Metrics::new(
            self.watch_queues.clone(),
            self.memory_bridge,
            self.auth.as_ref().map(|a| a.counts.clone()),
        ));
        // Every backend call is traced and counted by one wrapper per port (ADR 0374), so the
        // handlers, the service layer, the scheduler and the maintainer call the ports plainly.
        let observer: Arc<dyn Observer> = metrics.clone();
        let store: Arc<dyn EventStore> =
            Observed::new(self.store, self.kinds.event_store, observer.clone()).into_arc();
        let bridge: Arc<dyn StreamBridge> =
            Observed::new(self.bridge, self.kinds.stream_bridge, observer.clone()).into_arc();
        let fleet: Arc<dyn FleetBackend> =
            Observed::new(self.fleet, self.kinds.fleet, observer).into_arc();
        let webhooks = Webhooks::new(fleet.clone(), self.webhooks)?;
        let (runs, queues) =
            crate::services(&store, &bridge, &fleet, self.stale_after, self.stream_grace);
        let runs = runs.with_webhooks(webhooks.clone());
        let webhook_worker = self.webhook_worker.then(|| webhooks.start());
        let state = AppState::new(Shared {
            store,
            bridge,
            fleet: fleet.clone(),
            runs,
            queues,
            webhooks,
            metrics,
            heartbeat: self.heartbeat,
            ready_timeout: self.ready_timeout,
            shutdown: stopped,
            writes: Arc::new(RwLock::new(())),
            backends: Arc::new(backends),
            tickets: Arc::default(),
            long_poll_cap: crate::long_poll_cap(self.limits.request_secs),
            worker_idle_ttl: self.worker_idle_ttl,
            unknown_kinds: if self.lenient_event_kinds {
                UnknownKinds::Keep
            } else {
                UnknownKinds::Refuse
            },
        });
        let scheduler = self
            .scheduler
            .then(|| Scheduler::spawn(fleet.clone(), SchedulerOptions::default()));
        let grace_keeper = state.runs.spawn_grace_keeper();
        let maintenance = self.maintainer.map(|period| {
            let mut options = MaintainerOptions::default()
                .period(period)
                .worker_idle_ttl(self.worker_idle_ttl);
            for queue in &self.watch_queues {
                options = options.queue(queue.clone());
            }
            let maintainer = Maintainer::new(fleet.clone(), options);
            state.metrics.set_maintainer(maintainer.clone());
            maintainer.start()
        });
        Ok(Gateway {
            state,
            security: Security {
                auth: self.auth.map(|auth| Authn {
                    metrics_public: self.metrics_public,
                    ..auth
                }),
                limits: self.limits,
                loopback: false,
                cors_origins: self.cors_origins,
            },
            allow_open_network: self.allow_open_network,
            console: self.console,
            stop,
            scheduler,
            maintenance,
            grace_keeper,
            webhook_worker,
        })
    }
}

/// Starts a gateway's shutdown from anywhere; see [`Gateway::stop_handle`].
#[derive(Debug, Clone)]
pub struct StopHandle(watch::Sender<bool>);

impl StopHandle {
    /// Ends open SSE streams (without an end frame: clients reconnect elsewhere) and turns
    /// `/healthz` to 503. Calling it again does nothing.
    pub fn stop(&self) {
        let _ = self.0.send(true);
    }
}

/// switchyard's gateway over an event store, a stream bridge and a fleet backend.
///
/// [`router`](Self::router) gives the routes to mount in an application of one's own;
/// [`serve`](Self::serve) runs them as `switchyard serve` does. Either way, end with
/// [`serve`](Self::serve)'s return or [`shutdown`](Self::shutdown): open SSE streams end, writes in
/// flight finish, the scheduler and maintainer stop and the bridge closes.
#[derive(Debug)]
pub struct Gateway {
    state: AppState,
    security: Security,
    allow_open_network: bool,
    console: bool,
    stop: watch::Sender<bool>,
    scheduler: Option<SchedulerHandle>,
    maintenance: Option<MaintainerHandle>,
    /// Ends cancelled runs whose grace period ran out (ADR 0396).
    grace_keeper: Option<switchyard_fleet::ConsumerHandle>,
    webhook_worker: Option<WebhookWorker>,
}

impl Gateway {
    /// A builder over the three ports, with `switchyard serve`'s defaults.
    pub fn builder(
        store: Arc<dyn EventStore>,
        bridge: Arc<dyn StreamBridge>,
        fleet: Arc<dyn FleetBackend>,
    ) -> GatewayBuilder {
        GatewayBuilder {
            store,
            bridge,
            fleet,
            memory_bridge: None,
            kinds: BackendKinds::default(),
            auth: None,
            metrics_public: false,
            allow_open_network: false,
            limits: Limits::default(),
            cors_origins: Vec::new(),
            console: true,
            heartbeat: Duration::from_secs(15),
            stale_after: Duration::from_secs(3600),
            stream_grace: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(2),
            watch_queues: Vec::new(),
            scheduler: true,
            maintainer: Some(Duration::from_secs(1)),
            worker_idle_ttl: Some(Duration::from_secs(300)),
            lenient_event_kinds: false,
            webhooks: WebhookSettings::default(),
            webhook_worker: true,
        }
    }

    /// Every route (`/v1/…`, `/healthz`, `/readyz`, `/metrics`, `/openapi.json`, the console
    /// unless turned off) with admission: the token file when [`auth`](GatewayBuilder::auth) is
    /// set or the application's [`authenticator`](GatewayBuilder::authenticator), the body limit, content types, stream caps. The edge that [`serve`](Self::serve) adds
    /// (TLS, connection caps, `Host` and CORS rules, request timeouts) is left to the mounting
    /// application's own layers. A request that matches no route gets the gateway's JSON
    /// `no_route` 404, so `merge` it last or `nest` it under a prefix.
    pub fn router(&self) -> Router {
        crate::admitted(self.state.clone(), &self.security, self.console)
    }

    /// A handle that starts the shutdown of a mounted gateway: open SSE streams end (so an
    /// application's own graceful shutdown is not held by them) and `/healthz` answers 503.
    /// Call [`shutdown`](Self::shutdown) once the application's server has returned.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop.clone())
    }

    /// The OpenAPI 3.1 document of the routes, as `/openapi.json` serves it.
    pub fn openapi_json() -> String {
        crate::openapi_json()
    }

    /// Serves on `listener` (HTTPS with `tls`) with the whole edge until `signal` resolves,
    /// then shuts down gracefully (see [`shutdown`](Self::shutdown)): new connections are
    /// refused, open streams end without an end frame (clients reconnect elsewhere), requests in
    /// flight finish.
    ///
    /// Without [`auth`](GatewayBuilder::auth) or an
    /// [`authenticator`](GatewayBuilder::authenticator), a listener on a non-loopback address is refused
    /// with [`Error::Config`] unless [`allow_open_network`](GatewayBuilder::allow_open_network);
    /// on a loopback listener, requests whose `Host` is not a loopback name are refused (DNS
    /// rebinding).
    pub async fn serve(
        mut self,
        listener: TcpListener,
        tls: Option<Tls>,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let local = listener
            .local_addr()
            .map_err(|e| Error::config("listen", format!("no local address: {e}")))?;
        crate::check_protected_mode(local, self.security.auth.is_some(), self.allow_open_network)?;
        self.security.loopback = local.ip().is_loopback();
        let app = crate::app(self.state.clone(), &self.security, self.console)?;
        let stop = self.stop.clone();
        let stopping = self.stop.subscribe();
        tokio::spawn(async move {
            signal.await;
            tracing::info!("shutdown requested: draining");
            let _ = stop.send(true);
        });
        crate::server::run(listener, app, &self.security.limits, tls, stopping).await;
        self.shutdown().await;
        Ok(())
    }

    /// Ends the gateway: open SSE streams end, writes whose client went away are waited for,
    /// the scheduler and the maintainer stop, and the stream bridge is closed.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        // Writes whose client went away still run in their own task; wait for them.
        let _all_writes_done = self.state.writes.write().await;
        if let Some(worker) = self.webhook_worker {
            worker.shutdown().await;
        }
        if let Some(scheduler) = self.scheduler {
            scheduler.shutdown().await;
        }
        if let Some(maintenance) = self.maintenance {
            maintenance.shutdown().await;
        }
        if let Some(keeper) = self.grace_keeper {
            keeper.shutdown().await;
        }
        if let Err(e) = self.state.bridge.close().await {
            tracing::warn!(error = %e, "closing the stream bridge failed");
        }
        tracing::info!("gateway stopped");
    }
}
