//! `/metrics` in the Prometheus text format: requests by method, route and status; open SSE
//! subscribers; publish failures; the counts of every watched queue (`--watch-queue`,
//! `watch_queues`) and of the queues this gateway has seen, each from one `queue_stats` snapshot.
//! Queues are never discovered by scanning the backend (no `SCAN` on Redis).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use switchyard_core::fleet::{FleetBackend, Priority, QueueStats};
use switchyard_core::stream::MemoryStreamBridge;

/// At most this many queues are reported (hostile names must not grow memory without bound).
const MAX_TRACKED_QUEUES: usize = 256;

#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    sse_open: AtomicI64,
    publish_failures: AtomicU64,
    /// Named by the operator: always reported, outside the cap.
    watched: BTreeSet<String>,
    /// Submitted to through this gateway, up to [`MAX_TRACKED_QUEUES`].
    queues: Mutex<BTreeSet<String>>,
    /// The in-process bridge, whose retained runs and bytes are reported (a Redis bridge's
    /// memory is Redis's, reported by Redis).
    memory_bridge: Option<MemoryStreamBridge>,
}

/// The per-queue gauges: name, help, and the count they show.
type Gauge = (&'static str, &'static str, fn(&QueueStats) -> u64);

const QUEUE_GAUGES: [Gauge; 5] = [
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
];

impl Metrics {
    /// Metrics that always report the queues in `watched` (plus those seen later).
    pub fn watching(watched: impl IntoIterator<Item = String>) -> Self {
        Metrics {
            watched: watched.into_iter().collect(),
            ..Metrics::default()
        }
    }

    /// Also reports what `bridge` retains.
    pub fn with_memory_bridge(mut self, bridge: Option<MemoryStreamBridge>) -> Self {
        self.memory_bridge = bridge;
        self
    }

    pub fn count(&self, method: &str, route: &str, status: u16) {
        if let Ok(mut map) = self.requests.lock() {
            *map.entry((method.to_string(), route.to_string(), status))
                .or_default() += 1;
        }
    }

    pub fn publish_failed(&self) {
        self.publish_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn track_queue(&self, name: &str) {
        if let Ok(mut set) = self.queues.lock()
            && (set.len() < MAX_TRACKED_QUEUES || set.contains(name))
        {
            set.insert(name.to_string());
        }
    }

    /// One open SSE subscriber until the guard drops.
    pub fn sse_guard(self: &Arc<Self>) -> SseGuard {
        self.sse_open.fetch_add(1, Ordering::Relaxed);
        SseGuard(self.clone())
    }

    pub async fn render(&self, fleet: &dyn FleetBackend) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP switchyard_http_requests_total HTTP requests by method, route and status.\n",
        );
        out.push_str("# TYPE switchyard_http_requests_total counter\n");
        let requests = self.requests.lock().map(|m| m.clone()).unwrap_or_default();
        for ((method, route, status), n) in requests {
            let _ = writeln!(
                out,
                "switchyard_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {n}",
                escape(&method),
                escape(&route)
            );
        }
        out.push_str("# HELP switchyard_sse_subscribers Open SSE streams.\n");
        out.push_str("# TYPE switchyard_sse_subscribers gauge\n");
        let _ = writeln!(
            out,
            "switchyard_sse_subscribers {}",
            self.sse_open.load(Ordering::Relaxed)
        );
        out.push_str("# HELP switchyard_publish_failures_total Stored events the stream bridge did not take.\n");
        out.push_str("# TYPE switchyard_publish_failures_total counter\n");
        let _ = writeln!(
            out,
            "switchyard_publish_failures_total {}",
            self.publish_failures.load(Ordering::Relaxed)
        );
        if let Some(bridge) = &self.memory_bridge {
            let retained = bridge.retained();
            out.push_str("# HELP switchyard_stream_retained_runs Runs whose events the memory stream bridge retains.\n");
            out.push_str("# TYPE switchyard_stream_retained_runs gauge\n");
            let _ = writeln!(out, "switchyard_stream_retained_runs {}", retained.runs);
            out.push_str("# HELP switchyard_stream_retained_bytes Bytes of events the memory stream bridge retains.\n");
            out.push_str("# TYPE switchyard_stream_retained_bytes gauge\n");
            let _ = writeln!(out, "switchyard_stream_retained_bytes {}", retained.bytes);
        }
        let mut queues = self.queues.lock().map(|s| s.clone()).unwrap_or_default();
        queues.extend(self.watched.iter().cloned());
        let mut snapshots = Vec::with_capacity(queues.len());
        for queue in queues {
            match fleet.queue_stats(&queue).await {
                Ok(stats) => snapshots.push((escape(&queue), stats)),
                Err(e) => tracing::warn!(queue = %queue, error = %e, "queue stats failed"),
            }
        }
        out.push_str("# HELP switchyard_queue_waiting Tasks waiting in a queue's tier.\n");
        out.push_str("# TYPE switchyard_queue_waiting gauge\n");
        for (label, stats) in &snapshots {
            for p in Priority::ORDER {
                let _ = writeln!(
                    out,
                    "switchyard_queue_waiting{{queue=\"{label}\",tier=\"{}\"}} {}",
                    tier_name(p),
                    stats.waiting_in(p)
                );
            }
        }
        for (name, help, value) in QUEUE_GAUGES {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (label, stats) in &snapshots {
                let _ = writeln!(out, "{name}{{queue=\"{label}\"}} {}", value(stats));
            }
        }
        out
    }
}

fn tier_name(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

/// Decrements the open-subscriber gauge when the SSE body is dropped (end, shutdown or disconnect).
#[derive(Debug)]
pub struct SseGuard(Arc<Metrics>);

impl Drop for SseGuard {
    fn drop(&mut self) {
        self.0.sse_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Prometheus label-value escaping.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Middleware counting every response by its route template (not the raw path, which would let
/// clients create unbounded label sets).
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = request.method().as_str().to_string();
    let response = next.run(request).await;
    metrics.count(&method, &route, response.status().as_u16());
    response
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
    async fn renders_counters_gauge_and_queues() {
        let m = Arc::new(Metrics::default());
        m.count("GET", "/healthz", 200);
        m.count("GET", "/healthz", 200);
        let guard = m.sse_guard();
        let fleet = switchyard_kit::core::MemoryFleetBackend::new();
        fleet
            .queue_push("q\"1", b"{}", switchyard_kit::core::Priority::Normal)
            .await
            .expect("push");
        m.track_queue("q\"1");
        let text = m.render(&fleet).await;
        assert!(text.contains(
            "switchyard_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 2"
        ));
        assert!(text.contains("switchyard_sse_subscribers 1"));
        assert!(text.contains("switchyard_queue_waiting{queue=\"q\\\"1\",tier=\"normal\"} 1"));
        assert!(text.contains("switchyard_queue_waiting{queue=\"q\\\"1\",tier=\"high\"} 0"));
        assert!(text.contains("switchyard_queue_dead{queue=\"q\\\"1\"} 0"));
        drop(guard);
        // A watched queue is reported without being seen.
        let watching = Metrics::watching(["idle".to_string()]);
        let text = watching.render(&fleet).await;
        assert!(text.contains("switchyard_queue_in_flight{queue=\"idle\"} 0"));
        assert!(!text.contains("q\\\"1"), "not seen by this gateway");
        assert!(
            m.render(&fleet)
                .await
                .contains("switchyard_sse_subscribers 0")
        );
    }
}
