//! `/metrics` through `prometheus-client` (ADR 0241), in the OpenMetrics text format Prometheus
//! scrapes: requests and their latency by method, route and status; backend calls and their
//! latency by port, adapter, call and outcome; SSE streams opened, open and their lifetimes;
//! publish failures; the memory bridge's retention; the counts of every watched queue
//! (`--watch-queue`, `watch_queues`) and of the queues this gateway has seen, each from one
//! `queue_stats` snapshot at scrape time. Queues are never discovered by scanning the backend.
//! The names are documented in docs/operations.md; tests pin them.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use switchyard_core::fleet::{FleetBackend, Priority, QueueStats};
use switchyard_core::observe::{Call, Observer, Outcome};
use switchyard_core::stream::MemoryStreamBridge;
use switchyard_fleet::Maintainer;
use tracing::Instrument as _;

/// At most this many queues are reported (hostile names must not grow memory without bound).
const MAX_TRACKED_QUEUES: usize = 256;

/// The `Content-Type` of `/metrics`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label value, escaped as the exposition format requires (`\\`, `\"`, `\n`):
/// `prometheus-client` writes label values as they are, and queue and token names are
/// caller-chosen.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Text(pub String);

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Text(s.to_string())
    }
}

impl EncodeLabelValue for Text {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        use std::fmt::Write as _;
        encoder.write_str(&escape(&self.0))
    }
}

/// Prometheus label-value escaping.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: Text,
    route: Text,
    status: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    port: Text,
    adapter: Text,
    call: Text,
    outcome: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: Text,
}

/// A queue and the end its tasks reached (ADR 0380).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndLabels {
    queue: Text,
    state: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TierLabels {
    queue: Text,
    tier: Text,
}

/// Requests on token-protected routes, by token name (`-` when none matched) and outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AuthLabels {
    pub token: Text,
    pub outcome: Text,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Half a millisecond to about 16 s, doubling: HTTP requests and backend calls.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// A tenth of a second to about 7 h, ×4: how long SSE streams stay open.
fn lifetime_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 4.0, 10))
}

/// The per-queue gauges: name, help, and the count they show.
type QueueGauge = (&'static str, &'static str, fn(&QueueStats) -> u64);

const QUEUE_GAUGES: [QueueGauge; 6] = [
    (
        "switchyard_queue_in_flight",
        "Reserved tasks not yet acked, nacked or failed (overdue ones included).",
        |s| s.in_flight,
    ),
    (
        "switchyard_queue_overdue",
        "In-flight tasks whose visibility lapsed; the next sweep requeues them.",
        |s| s.overdue,
    ),
    (
        "switchyard_queue_scheduled",
        "Delayed retries not yet back in their tier (due ones included).",
        |s| s.scheduled,
    ),
    (
        "switchyard_queue_due",
        "Scheduled retries whose delay has passed; the next reserve moves them.",
        |s| s.due,
    ),
    (
        "switchyard_queue_dead",
        "Dead-lettered tasks of a queue.",
        |s| s.dead,
    ),
    (
        "switchyard_queue_paused",
        "1 while reservations on the queue are paused, else 0.",
        |s| u64::from(s.paused),
    ),
];

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Histograms<RequestLabels>,
    backend_seconds: Histograms<CallLabels>,
    sse_open: Gauge,
    sse_opened: Counter,
    sse_seconds: Histogram,
    publish_failures: Counter,
    retained_runs: Gauge,
    retained_bytes: Gauge,
    queue_waiting: Family<TierLabels, Gauge>,
    queue_gauges: Vec<Family<QueueLabels, Gauge>>,
    queue_throttled: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    queue_ended: Family<EndLabels, Counter>,
    maintained: [Family<QueueLabels, Counter>; 3],
    workers_evicted: Counter,
    /// The queue maintainer of `serve` (ADR 0352): told of every queue this gateway touches,
    /// and read for what it moved.
    maintainer: OnceLock<Maintainer>,
    /// Named by the operator: always reported, outside the cap.
    watched: BTreeSet<String>,
    /// Submitted to through this gateway, up to [`MAX_TRACKED_QUEUES`].
    queues: Mutex<BTreeSet<String>>,
    /// The in-process bridge, whose retained runs and bytes are reported (a Redis bridge's
    /// memory is Redis's, reported by Redis).
    memory_bridge: Option<MemoryStreamBridge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(Vec::new(), None, None)
    }
}

impl Metrics {
    /// Metrics that always report the queues in `watched` (plus those seen later), what
    /// `memory_bridge` retains, the backend calls reported to it as the ports' [`Observer`] (ADR
    /// 0374), and the token counters of `auth` (with `--auth`).
    pub fn new(
        watched: impl IntoIterator<Item = String>,
        memory_bridge: Option<MemoryStreamBridge>,
        auth: Option<Family<AuthLabels, Counter>>,
    ) -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "switchyard_http_requests",
            "HTTP requests by method, route and status",
            requests.clone(),
        );
        let request_seconds: Histograms<RequestLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "switchyard_http_request_duration_seconds",
            "Time from a request's head to its response head, by method, route and status (an SSE stream's open, not its life)",
            request_seconds.clone(),
        );
        let backend_seconds: Histograms<CallLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "switchyard_backend_call_duration_seconds",
            "Backend calls the gateway made, by port, adapter, call and outcome (ok or error)",
            backend_seconds.clone(),
        );
        let sse_open = Gauge::default();
        registry.register(
            "switchyard_sse_subscribers",
            "Open SSE streams",
            sse_open.clone(),
        );
        let sse_opened = Counter::default();
        registry.register(
            "switchyard_sse_streams",
            "SSE streams opened",
            sse_opened.clone(),
        );
        let sse_seconds = lifetime_histogram();
        registry.register(
            "switchyard_sse_stream_duration_seconds",
            "How long closed SSE streams stayed open (ended, shut down or disconnected)",
            sse_seconds.clone(),
        );
        let publish_failures = Counter::default();
        registry.register(
            "switchyard_publish_failures",
            "Stored events the stream bridge did not take",
            publish_failures.clone(),
        );
        let retained_runs = Gauge::default();
        let retained_bytes = Gauge::default();
        if memory_bridge.is_some() {
            registry.register(
                "switchyard_stream_retained_runs",
                "Runs whose events the memory stream bridge retains",
                retained_runs.clone(),
            );
            registry.register(
                "switchyard_stream_retained_bytes",
                "Bytes of events the memory stream bridge retains",
                retained_bytes.clone(),
            );
        }
        let queue_waiting = Family::<TierLabels, Gauge>::default();
        registry.register(
            "switchyard_queue_waiting",
            "Tasks waiting in a queue's tier",
            queue_waiting.clone(),
        );
        let mut queue_gauges = Vec::with_capacity(QUEUE_GAUGES.len());
        for (name, help, _) in QUEUE_GAUGES {
            let family = Family::<QueueLabels, Gauge>::default();
            registry.register(name, help.trim_end_matches('.'), family.clone());
            queue_gauges.push(family);
        }
        let queue_throttled = Family::<QueueLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "switchyard_queue_throttled_seconds",
            "Seconds until the queue's rate limit hands out its next token (0 when one is available or there is no limit)",
            queue_throttled.clone(),
        );
        let queue_ended = Family::<EndLabels, Counter>::default();
        registry.register(
            "switchyard_queue_tasks_ended",
            "Tasks with an id that ended, by end (completed, failed, dead, cancelled), as the backend counts them",
            queue_ended.clone(),
        );
        let maintained: [Family<QueueLabels, Counter>; 3] = Default::default();
        for ((name, help), family) in MAINTAINED.iter().zip(&maintained) {
            registry.register(*name, *help, family.clone());
        }
        let workers_evicted = Counter::default();
        registry.register(
            "switchyard_maintainer_workers_evicted",
            "Registered workers the queue maintainer removed after their heartbeats stopped",
            workers_evicted.clone(),
        );
        if let Some(auth) = auth {
            registry.register(
                "switchyard_auth_requests",
                "Requests on token-protected routes by token name (\"-\" when none matched) and outcome",
                auth,
            );
        }
        Metrics {
            registry,
            requests,
            request_seconds,
            backend_seconds,
            sse_open,
            sse_opened,
            sse_seconds,
            publish_failures,
            retained_runs,
            retained_bytes,
            queue_waiting,
            queue_gauges,
            queue_throttled,
            queue_ended,
            maintained,
            workers_evicted,
            maintainer: OnceLock::new(),
            watched: watched.into_iter().collect(),
            queues: Mutex::new(BTreeSet::new()),
            memory_bridge,
        }
    }

    /// Metrics that always report the queues in `watched` (plus those seen later).
    #[cfg(test)]
    pub fn watching(watched: impl IntoIterator<Item = String>) -> Self {
        Metrics::new(watched, None, None)
    }

    fn request_done(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let labels = RequestLabels {
            method: method.into(),
            route: route.into(),
            status: Text(status.to_string()),
        };
        self.requests.get_or_create(&labels).inc();
        self.request_seconds.get_or_create(&labels).observe(seconds);
    }

    pub fn publish_failed(&self) {
        self.publish_failures.inc();
    }

    /// Reports what `maintainer` moves, and tells it of every queue tracked from now on.
    pub fn set_maintainer(&self, maintainer: Maintainer) {
        for queue in self.known_queues() {
            maintainer.note_queue(&queue);
        }
        let _ = self.maintainer.set(maintainer);
    }

    pub fn track_queue(&self, name: &str) {
        // The maintainer keeps every queue this gateway touches going, even past the cap on
        // the queues `/metrics` reports.
        if let Some(m) = self.maintainer.get() {
            m.note_queue(name);
        }
        if let Ok(mut set) = self.queues.lock()
            && (set.len() < MAX_TRACKED_QUEUES || set.contains(name))
        {
            set.insert(name.to_string());
        }
    }

    /// The queues this gateway watches or has submitted to: known even while they are empty.
    pub fn known_queues(&self) -> BTreeSet<String> {
        let mut queues = self.queues.lock().map(|s| s.clone()).unwrap_or_default();
        queues.extend(self.watched.iter().cloned());
        queues
    }

    /// One open SSE stream until the guard drops.
    pub fn sse_guard(self: &Arc<Self>) -> SseGuard {
        self.sse_open.inc();
        self.sse_opened.inc();
        SseGuard {
            metrics: self.clone(),
            opened: Instant::now(),
        }
    }

    /// The OpenMetrics text: the queue gauges and the bridge's retention are read now.
    pub async fn render(&self, fleet: &dyn FleetBackend) -> String {
        if let Some(bridge) = &self.memory_bridge {
            let retained = bridge.retained();
            self.retained_runs.set(gauge_value(retained.runs as u64));
            self.retained_bytes.set(gauge_value(retained.bytes as u64));
        }
        for queue in self.known_queues() {
            let stats = match fleet.queue_stats(&queue).await {
                Ok(stats) => stats,
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "queue stats failed");
                    continue;
                }
            };
            for p in Priority::ORDER {
                let labels = TierLabels {
                    queue: queue.as_str().into(),
                    tier: tier_name(p).into(),
                };
                self.queue_waiting
                    .get_or_create(&labels)
                    .set(gauge_value(stats.waiting_in(p)));
            }
            let labels = QueueLabels {
                queue: queue.as_str().into(),
            };
            for ((_, _, value), family) in QUEUE_GAUGES.iter().zip(&self.queue_gauges) {
                family
                    .get_or_create(&labels)
                    .set(gauge_value(value(&stats)));
            }
            self.queue_throttled
                .get_or_create(&labels)
                .set(stats.throttled_ms as f64 / 1000.0);
            // The backend keeps the totals; a counter only moves forward, so it is raised by what
            // ended since the last scrape.
            for (state, total) in [
                ("completed", stats.completed),
                ("failed", stats.failed),
                ("dead", stats.dead_lettered),
                ("cancelled", stats.cancelled),
            ] {
                let counter = self.queue_ended.get_or_create(&EndLabels {
                    queue: queue.as_str().into(),
                    state: state.into(),
                });
                counter.inc_by(total.saturating_sub(counter.get()));
            }
        }
        self.render_maintainer();
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding the metrics failed");
        }
        out
    }
}

impl Metrics {
    /// Brings the maintainer's counters up to its totals (a counter only moves forward, so
    /// each one is raised by what was moved since the last render).
    fn render_maintainer(&self) {
        let Some(m) = self.maintainer.get() else {
            return;
        };
        let stats = m.stats();
        let evicted = stats
            .workers_evicted
            .saturating_sub(self.workers_evicted.get());
        self.workers_evicted.inc_by(evicted);
        for (reported, (queue, moved)) in stats
            .queues
            .iter()
            .filter(|(_, q)| q.swept + q.promoted + q.errors > 0)
            .enumerate()
        {
            // Bounded like the queue gauges: queues come from the data.
            if reported >= MAX_TRACKED_QUEUES {
                break;
            }
            let labels = QueueLabels {
                queue: queue.as_str().into(),
            };
            for (family, total) in
                self.maintained
                    .iter()
                    .zip([moved.swept, moved.promoted, moved.errors])
            {
                let counter = family.get_or_create(&labels);
                counter.inc_by(total.saturating_sub(counter.get()));
            }
        }
    }
}

/// The queue maintainer's per-queue counters: lapsed reservations returned, due tasks moved,
/// failed calls.
const MAINTAINED: [(&str, &str); 3] = [
    (
        "switchyard_maintainer_swept",
        "Lapsed reservations the queue maintainer returned to their queue",
    ),
    (
        "switchyard_maintainer_promoted",
        "Due scheduled tasks the queue maintainer moved to their tier",
    ),
    (
        "switchyard_maintainer_errors",
        "Queue maintenance calls that failed (tried again next period)",
    ),
];

fn gauge_value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn tier_name(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

/// Closes one SSE stream's account when its body is dropped (end, shutdown or disconnect).
#[derive(Debug)]
pub struct SseGuard {
    metrics: Arc<Metrics>,
    opened: Instant,
}

impl Drop for SseGuard {
    fn drop(&mut self) {
        self.metrics.sse_open.dec();
        self.metrics
            .sse_seconds
            .observe(self.opened.elapsed().as_secs_f64());
    }
}

/// Middleware counting and timing every response by its route template (not the raw path,
/// which would let clients create unbounded label sets), inside a `request` span that carries
/// the request id, so every log line of the request and its backend calls can be found by it.
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let route = crate::route_of(&request).unwrap_or_else(|| "unmatched".to_string());
    let method = request.method().as_str().to_string();
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let span = tracing::info_span!(
        "request", %request_id, %method, %route, status = tracing::field::Empty
    );
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("status", status);
    metrics.request_done(&method, &route, status, started.elapsed().as_secs_f64());
    response
}

/// Every backend call of the gateway's ports is reported here by the [`Observed`] wrappers the
/// builder puts around them (ADR 0374): one histogram series per port, adapter, call and
/// outcome.
///
/// [`Observed`]: switchyard_core::observe::Observed
impl Observer for Metrics {
    fn finished(&self, call: &Call<'_>, elapsed: Duration, outcome: Outcome) {
        let labels = CallLabels {
            port: call.port.as_str().into(),
            adapter: call.adapter.into(),
            call: call.name.into(),
            outcome: match outcome {
                Outcome::Ok => "ok",
                _ => "error",
            }
            .into(),
        };
        self.backend_seconds
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::fleet::JobQueue;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[tokio::test]
    async fn renders_counters_histograms_gauges_and_queues() {
        let m = Arc::new(Metrics::default());
        m.request_done("GET", "/healthz", 200, 0.001);
        m.request_done("GET", "/healthz", 200, 0.003);
        let guard = m.sse_guard();
        let fleet: Arc<dyn FleetBackend> =
            Arc::new(switchyard_kit::core::MemoryFleetBackend::new());
        let fleet = switchyard_core::observe::Observed::new(fleet, "memory", m.clone());
        fleet
            .queue_push("q\"1", b"{}", switchyard_kit::core::Priority::Normal)
            .await
            .expect("push");
        m.track_queue("q\"1");
        let text = m.render(&fleet).await;
        assert!(text.contains(
            "switchyard_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 2"
        ));
        assert!(text.contains(
            "switchyard_http_request_duration_seconds_count{method=\"GET\",route=\"/healthz\",status=\"200\"} 2"
        ));
        assert!(text.contains(
            "switchyard_backend_call_duration_seconds_count{port=\"fleet\",adapter=\"memory\",call=\"queue_stats\",outcome=\"ok\"} 1"
        ));
        assert!(text.contains("switchyard_sse_subscribers 1"));
        assert!(text.contains("switchyard_sse_streams_total 1"));
        assert!(text.contains("switchyard_queue_waiting{queue=\"q\\\"1\",tier=\"normal\"} 1"));
        assert!(text.contains("switchyard_queue_waiting{queue=\"q\\\"1\",tier=\"high\"} 0"));
        assert!(text.contains("switchyard_queue_dead{queue=\"q\\\"1\"} 0"));
        assert!(text.contains("switchyard_queue_paused{queue=\"q\\\"1\"} 0"));
        assert!(text.contains("switchyard_queue_throttled_seconds{queue=\"q\\\"1\"} 0.0"));
        assert!(text.ends_with("# EOF\n"));
        drop(guard);
        let text = m.render(&fleet).await;
        assert!(text.contains("switchyard_sse_subscribers 0"));
        assert!(text.contains("switchyard_sse_stream_duration_seconds_count 1"));
        // A watched queue is reported without being seen.
        let watching = Metrics::watching(["idle".to_string()]);
        let text = watching.render(&fleet).await;
        assert!(text.contains("switchyard_queue_in_flight{queue=\"idle\"} 0"));
        assert!(!text.contains("q\\\"1"), "not seen by this gateway");
    }
}
