//! Streams are addressed like runs (namespace, session, run id), and run ids are never reused.

use serde_json::{Value, json};
use switchyard_conformance::harness::{RedisServer, redis_cmd};

use crate::common::{Gateway, Http, delta, start_body};

fn start_in(run: &str, namespace: &str) -> String {
    json!({
        "run_id": run, "namespace": namespace,
        "invocable": "helper", "kind_of_invocable": "agent",
        "input": [{"type": "text", "text": namespace}],
    })
    .to_string()
}

fn completed() -> String {
    json!({"kind": "run.completed", "output": [],
           "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}})
    .to_string()
}

/// Run `shared` in two namespaces: A's subscriber sees only A's events, B's end does not end it.
async fn same_run_id_in_two_namespaces(http: &Http) {
    for ns in ["tenantA", "tenantB"] {
        let r = http.post("/v1/runs", &start_in("shared", ns)).await;
        assert_eq!(r.code(), 201, "{}", r.text);
    }
    let mut a = http
        .sse("/v1/runs/shared/stream?namespace=tenantA", None)
        .await;
    let first = a.next().await.expect("A's run.started");
    assert_eq!(first.event, "run.started");
    assert_eq!(first.json()["namespace"], "tenantA");

    // B talks and finishes while A is still running.
    let b_events = "/v1/runs/shared/events?namespace=tenantB";
    assert_eq!(http.post(b_events, &delta("from B")).await.code(), 201);
    assert_eq!(http.post(b_events, &completed()).await.code(), 201);
    // A goes on.
    let a_events = "/v1/runs/shared/events?namespace=tenantA";
    assert_eq!(http.post(a_events, &delta("from A")).await.code(), 201);
    assert_eq!(http.post(a_events, &completed()).await.code(), 201);

    let mut frames = Vec::new();
    while let Some(frame) = a.next().await {
        frames.push(frame);
    }
    let names: Vec<&str> = frames.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(names, ["text.delta", "run.completed", "end"], "{frames:?}");
    assert_eq!(frames[0].json()["payload"]["text"], "from A");
    for frame in &frames[..2] {
        assert_eq!(frame.json()["namespace"], "tenantA", "{frame:?}");
    }

    // B's own stream holds B's events only; the default namespace has no such stream.
    let mut b = http
        .sse("/v1/runs/shared/stream?namespace=tenantB", None)
        .await;
    let b_frames = b.take(3).await;
    let texts: Vec<Value> = b_frames
        .iter()
        .map(|f| f.json()["namespace"].clone())
        .collect();
    assert_eq!(texts, vec![json!("tenantB"); 3]);
    assert_eq!(b_frames[1].json()["payload"]["text"], "from B");
    assert_eq!(http.get("/v1/runs/shared/stream").await.code(), 404);
}

#[tokio::test]
async fn streams_never_cross_namespaces_in_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    same_run_id_in_two_namespaces(&gw.http()).await;
}

#[tokio::test]
async fn streams_never_cross_namespaces_on_redis() {
    // A private server: the gateway uses the default key prefixes.
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let url = redis.url();
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::start_in(dir.path(), &["--redis", &url]);
    let http = gw.http();
    same_run_id_in_two_namespaces(&http).await;

    // A run with neither namespace nor session keeps deer-flow's key, `<prefix>:<run_id>`, so a
    // Python deer-flow peer finds it; a namespaced run is under the composite stream id.
    let body = json!({"run_id": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "invocable": "h",
                      "kind_of_invocable": "agent", "input": []});
    assert_eq!(http.post("/v1/runs", &body.to_string()).await.code(), 201);
    let exists = |key: &str| redis_cmd(&url, &["EXISTS", key]).expect("EXISTS");
    assert_eq!(
        exists("deerflow:stream_bridge:7c9e6679-7425-40de-944b-e07fc1f90ae7"),
        "1"
    );
    assert_eq!(exists("deerflow:stream_bridge:n:tenantA:r:shared"), "1");
    assert_eq!(exists("deerflow:stream_bridge:shared"), "0");
}

#[tokio::test]
async fn sessions_address_streams_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r", "s1")).await.code(),
        201
    );
    assert_eq!(
        http.post("/v1/runs", &start_body("r", "s2")).await.code(),
        201
    );
    assert_eq!(
        http.post("/v1/runs/r/events?session=s2", &completed())
            .await
            .code(),
        201
    );
    assert_eq!(
        http.post("/v1/runs/r/events?session=s1", &delta("one"))
            .await
            .code(),
        201
    );
    let mut s1 = http.sse("/v1/runs/r/stream?session=s1", None).await;
    let frames = s1.take(2).await;
    assert_eq!(
        frames[1].event, "text.delta",
        "s2's end is not s1's: {frames:?}"
    );
    assert!(frames.iter().all(|f| f.json()["session_id"] == "s1"));
}

#[tokio::test]
async fn a_finished_run_cannot_be_started_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r1", "s")).await.code(),
        201
    );
    assert_eq!(
        http.post("/v1/runs/r1/events?session=s", &completed())
            .await
            .code(),
        201
    );
    let again = http.post("/v1/runs", &start_body("r1", "s")).await;
    assert_eq!(again.code(), 409, "{}", again.text);
    assert_eq!(again.json()["error"], "run_exists");
    let read = http.get("/v1/runs/r1?session=s").await.json();
    assert_eq!(read["status"], "completed");
    assert_eq!(read["events"].as_array().map(Vec::len), Some(2));

    // The same holds for a run without a session, and for one still running.
    let body = json!({"run_id": "solo", "invocable": "h", "kind_of_invocable": "agent",
                      "input": [], "stale_after_secs": 0})
    .to_string();
    assert_eq!(http.post("/v1/runs", &body).await.code(), 201);
    let again = http.post("/v1/runs", &body).await;
    assert_eq!(again.code(), 409, "{}", again.text);
    assert_eq!(again.json()["error"], "run_exists");
    assert_eq!(
        http.get("/v1/runs/solo").await.json()["events"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // Another session may use the id: it is another run.
    assert_eq!(
        http.post("/v1/runs", &start_body("r1", "t")).await.code(),
        201
    );
}
