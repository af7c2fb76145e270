//! `/metrics` in the Prometheus text format: requests by method, route and status; open SSE
//! subscribers; publish failures; queue depths of the queues this gateway has seen.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use switchyard_core::fleet::FleetBackend;

/// At most this many queues are reported (hostile names must not grow memory without bound).
const MAX_TRACKED_QUEUES: usize = 256;

#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    sse_open: AtomicI64,
    publish_failures: AtomicU64,
    queues: Mutex<BTreeSet<String>>,
}

impl Metrics {
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
        let queues = self.queues.lock().map(|s| s.clone()).unwrap_or_default();
        let mut waiting = String::new();
        let mut dead = String::new();
        for queue in queues {
            let label = escape(&queue);
            if let Ok(n) = fleet.queue_size(&queue).await {
                let _ = writeln!(waiting, "switchyard_queue_waiting{{queue=\"{label}\"}} {n}");
            }
            if let Ok(n) = fleet.dlq_length(&queue).await {
                let _ = writeln!(
                    dead,
                    "switchyard_queue_dead_letters{{queue=\"{label}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP switchyard_queue_waiting Tasks waiting in a queue's three tiers.\n");
        out.push_str("# TYPE switchyard_queue_waiting gauge\n");
        out.push_str(&waiting);
        out.push_str("# HELP switchyard_queue_dead_letters Dead-lettered tasks of a queue.\n");
        out.push_str("# TYPE switchyard_queue_dead_letters gauge\n");
        out.push_str(&dead);
        out
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
        let fleet = switchyard::core::MemoryFleetBackend::new();
        fleet
            .queue_push("q\"1", b"{}", switchyard::core::Priority::Normal)
            .await
            .expect("push");
        m.track_queue("q\"1");
        let text = m.render(&fleet).await;
        assert!(text.contains(
            "switchyard_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 2"
        ));
        assert!(text.contains("switchyard_sse_subscribers 1"));
        assert!(text.contains("switchyard_queue_waiting{queue=\"q\\\"1\"} 1"));
        drop(guard);
        assert!(
            m.render(&fleet)
                .await
                .contains("switchyard_sse_subscribers 0")
        );
    }
}
