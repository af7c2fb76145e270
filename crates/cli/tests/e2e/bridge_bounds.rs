//! The memory stream bridge is bounded: finished streams are released after the grace period, a
//! run keeps its newest events within its byte bound, and the oldest runs are evicted past the
//! total bound. `/metrics` shows what it retains.

use serde_json::json;

use crate::common::{Gateway, Http, PATIENCE, delta};

fn start(run: &str) -> String {
    json!({"run_id": run, "invocable": "h", "kind_of_invocable": "agent", "input": []}).to_string()
}

fn completed() -> String {
    json!({"kind": "run.completed", "output": [],
           "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}})
    .to_string()
}

async fn gauge(http: &Http, name: &str) -> u64 {
    let text = http.get("/metrics").await.text;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
        .parse()
        .expect("a number")
}

#[tokio::test]
async fn finished_streams_are_released_after_the_grace_period() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &["--stream-grace-secs", "0"]);
    let http = gw.http();
    assert_eq!(http.post("/v1/runs", &start("r")).await.code(), 201);
    assert_eq!(
        http.post("/v1/runs/r/events", &delta("hi")).await.code(),
        201
    );
    assert_eq!(gauge(&http, "switchyard_stream_retained_runs").await, 1);
    assert!(gauge(&http, "switchyard_stream_retained_bytes").await > 0);
    assert_eq!(
        http.post("/v1/runs/r/events", &completed()).await.code(),
        201
    );

    // The release runs in the background right after the end; wait for it (never timed).
    let deadline = std::time::Instant::now() + PATIENCE;
    while http.get("/v1/runs/r/stream").await.code() != 404 {
        assert!(std::time::Instant::now() < deadline, "never released");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(gauge(&http, "switchyard_stream_retained_runs").await, 0);
    assert_eq!(gauge(&http, "switchyard_stream_retained_bytes").await, 0);
    // The store still has the whole run.
    let read = http.get("/v1/runs/r").await.json();
    assert_eq!(read["events"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn memory_bridge_holds_at_most_its_byte_bounds() {
    const TOTAL: u64 = 250_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(
        dir.path(),
        &[
            "--stream-run-bytes",
            "100000",
            "--stream-total-bytes",
            &TOTAL.to_string(),
        ],
    );
    let http = gw.http();
    let big = "x".repeat(40_000);

    // One run past its own bound: its oldest events go, and their cursors get the gap frame.
    assert_eq!(http.post("/v1/runs", &start("a")).await.code(), 201);
    let mut sse = http.sse("/v1/runs/a/stream", None).await;
    let cursor = sse.next().await.expect("run.started").id.expect("id");
    drop(sse);
    for _ in 0..5 {
        assert_eq!(
            http.post("/v1/runs/a/events", &delta(&big)).await.code(),
            201
        );
    }
    let mut sse = http.sse("/v1/runs/a/stream", Some(&cursor)).await;
    let gap = sse.next().await.expect("gap frame");
    assert_eq!(gap.event, "gap");
    assert_eq!(gap.json()["run_id"], "a");
    assert!(gauge(&http, "switchyard_stream_retained_bytes").await <= 100_000);

    // More runs than the total bound holds: the oldest run is evicted whole.
    for run in ["b", "c", "d"] {
        assert_eq!(http.post("/v1/runs", &start(run)).await.code(), 201);
        for _ in 0..2 {
            let path = format!("/v1/runs/{run}/events");
            assert_eq!(http.post(&path, &delta(&big)).await.code(), 201);
        }
        assert!(gauge(&http, "switchyard_stream_retained_bytes").await <= TOTAL);
    }
    assert_eq!(
        gauge(&http, "switchyard_stream_retained_runs").await,
        3,
        "a was evicted"
    );
    let mut sse = http.sse("/v1/runs/d/stream", None).await;
    assert_eq!(sse.next().await.expect("d's start").event, "run.started");
    // The store keeps every event of the evicted run.
    let read = http.get("/v1/runs/a").await.json();
    assert_eq!(read["events"].as_array().map(Vec::len), Some(6));
    // The evicted run is still open, so its stream is followed as an open one (ADR 0356): the
    // subscriber waits and gets the run's next event.
    let mut evicted = http.sse("/v1/runs/a/stream", None).await;
    assert_eq!(
        http.post("/v1/runs/a/events", &delta("more")).await.code(),
        201
    );
    let next = evicted.next().await.expect("a's next event");
    assert_eq!(next.json()["seq"], 6, "{next:?}");
}
