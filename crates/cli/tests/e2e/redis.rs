//! Two gateway processes on one Redis serve one fleet.

use serde_json::json;
use switchyard_conformance::harness::RedisServer;

use crate::common::{Gateway, delta, start_body};

#[tokio::test]
async fn two_gateways_on_one_redis_share_runs_streams_and_claims() {
    // A private server: the gateways use the default key prefixes, so no other test may share it.
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let url = redis.url();
    let dir = tempfile::tempdir().expect("tempdir");
    let a = Gateway::start_in(dir.path(), &["--redis", &url]);
    let b = Gateway::start_in(dir.path(), &["--redis", &url]);
    let (ha, hb) = (a.http(), b.http());
    assert_eq!(
        hb.get("/healthz").await.json()["backends"]["stream_bridge"],
        "redis"
    );

    // Started on A ...
    assert_eq!(
        ha.post("/v1/runs", &start_body("run-x", "s")).await.code(),
        201
    );
    // ... streams from B, live events included.
    let mut sse = hb.sse("/v1/runs/run-x/stream?session=s", None).await;
    let first = sse.next().await.expect("run.started");
    assert_eq!(first.event, "run.started");
    assert_eq!(
        ha.post("/v1/runs/run-x/events?session=s", &delta("hi"))
            .await
            .code(),
        201
    );
    let live = sse.next().await.expect("text.delta");
    assert_eq!(live.event, "text.delta");
    assert_eq!(live.json()["payload"]["text"], "hi");

    // The session claimed on A is busy on B.
    let busy = hb.post("/v1/runs", &start_body("run-y", "s")).await;
    assert_eq!(busy.code(), 409, "{}", busy.text);
    assert_eq!(busy.json()["held_by"], "run-x");

    // B reads and lists what A wrote.
    let read = hb.get("/v1/runs/run-x?session=s").await;
    assert_eq!(read.json()["events"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        hb.get("/v1/runs?status=running").await.json()["runs"],
        json!([{"run_id": "run-x", "log_key": "s", "session_id": "s", "status": "running"}])
    );

    // Resumes sent to both gateways at once: exactly one wins.
    let interrupt = json!({"kind": "run.interrupted", "interrupt_id": "i", "reason": "human",
                           "payload": {}, "thread_id": null, "expected_resume": null});
    assert_eq!(
        hb.post("/v1/runs/run-x/events?session=s", &interrupt.to_string())
            .await
            .code(),
        201
    );
    let (ra, rb) = tokio::join!(
        ha.post("/v1/runs/run-x/resume?session=s", "{}"),
        hb.post("/v1/runs/run-x/resume?session=s", "{}"),
    );
    let mut codes = vec![ra.code(), rb.code()];
    codes.sort_unstable();
    assert_eq!(codes, vec![200, 409]);

    // A queue submitted on A is seen on B.
    assert_eq!(
        ha.post("/v1/queues/q/tasks", r#"{"payload": 1}"#)
            .await
            .code(),
        201
    );
    assert_eq!(hb.get("/v1/queues/q").await.json()["waiting"], 1);

    // B's subscriber sees the interrupt and the resume (published by A or B), then the end.
    let kinds: Vec<String> = sse.take(2).await.into_iter().map(|f| f.event).collect();
    assert_eq!(kinds, vec!["run.interrupted", "run.resumed"]);
    let done = json!({"kind": "run.failed", "error_code": "tool_error", "message": "boom", "retryable": true});
    assert_eq!(
        ha.post("/v1/runs/run-x/events?session=s", &done.to_string())
            .await
            .code(),
        201
    );
    assert_eq!(sse.next().await.map(|f| f.event), Some("run.failed".into()));
    assert_eq!(sse.next().await.map(|f| f.event), Some("end".into()));

    // `switchyard runs tail` follows the same stream from outside any gateway, until its end.
    let out = crate::common::command(dir.path())
        .args([
            "runs",
            "tail",
            "run-x",
            "--session",
            "s",
            "--json",
            "--redis",
            &url,
        ])
        .output()
        .expect("runs tail");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("one JSON per line")["event"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        events,
        vec![
            "run.started",
            "text.delta",
            "run.interrupted",
            "run.resumed",
            "run.failed"
        ]
    );
}

/// The config file's `[options.<port>]` tables reach the adapters `switchyard serve` opens (as
/// they reach `Switchyard::open`): key prefixes set there, not in `[prefixes]`, name the keys the
/// gateway writes.
#[tokio::test]
async fn the_config_files_port_options_reach_the_served_adapters() {
    use switchyard_conformance::harness::redis_cmd;

    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let url = redis.url();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("switchyard.toml");
    std::fs::write(
        &config,
        "[options.event_store]\nprefix = \"cfg:events\"\n\
         [options.stream_bridge]\nprefix = \"cfg:bridge\"\n\
         [options.fleet]\nprefix = \"cfg:fleet:\"\n",
    )
    .expect("write config");
    let gw = Gateway::start_in(
        dir.path(),
        &["--redis", &url, "--config", config.to_str().expect("path")],
    );
    let h = gw.http();
    assert_eq!(
        h.post("/v1/runs", &start_body("run-c", "s")).await.code(),
        201
    );
    let submitted = h
        .post(
            "/v1/queues/jobs/tasks",
            &json!({"payload": {"n": 1}}).to_string(),
        )
        .await;
    assert_eq!(submitted.code(), 201, "{}", submitted.text);
    let keys = redis_cmd(&url, &["KEYS", "*"]).expect("KEYS");
    let keys: Vec<&str> = keys.lines().collect();
    for prefix in ["cfg:events", "cfg:bridge", "cfg:fleet:fleet:queue:jobs"] {
        assert!(
            keys.iter().any(|k| k.starts_with(prefix)),
            "no key under {prefix}: {keys:?}"
        );
    }
    assert!(
        !keys
            .iter()
            .any(|k| k.starts_with("agentdeck:") || k.starts_with("deerflow:")),
        "a default prefix was used: {keys:?}"
    );
}
