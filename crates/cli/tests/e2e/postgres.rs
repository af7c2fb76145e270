//! Two gateway processes on one PostgreSQL serve one deployment's runs, streams and queues.

use serde_json::json;
use switchyard_conformance::harness::{postgres_url, unique_schema};

use crate::common::{Gateway, delta, start_body};

#[tokio::test]
async fn two_gateways_on_one_postgres_share_runs_streams_and_claims() {
    // A schema of its own on the shared server: the gateways create and migrate it.
    let url = format!("{}?schema={}", postgres_url(), unique_schema("e2e"));
    let dir = tempfile::tempdir().expect("tempdir");
    let a = Gateway::start_in(dir.path(), &["--postgres", &url]);
    let b = Gateway::start_in(dir.path(), &["--postgres", &url]);
    let (ha, hb) = (a.http(), b.http());
    let health = hb.get("/healthz").await.json();
    assert_eq!(health["backends"]["event_store"], "postgres");
    assert_eq!(health["backends"]["stream_bridge"], "postgres");
    assert_eq!(health["backends"]["fleet"], "postgres");

    // A run started on A streams from B, live events included.
    assert_eq!(
        ha.post("/v1/runs", &start_body("run-x", "s")).await.code(),
        201
    );
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

    // A session claimed on A is busy on B.
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
    let kinds: Vec<String> = sse.take(2).await.into_iter().map(|f| f.event).collect();
    assert_eq!(kinds, vec!["run.interrupted", "run.resumed"]);

    // A client that reconnects to the other gateway with Last-Event-ID gets what followed.
    let after = live.id.expect("frames carry ids");
    let mut again = ha
        .sse("/v1/runs/run-x/stream?session=s", Some(&after))
        .await;
    assert_eq!(
        again.next().await.map(|f| f.event),
        Some("run.interrupted".into())
    );

    let done = json!({"kind": "run.completed", "output": [],
                      "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}});
    assert_eq!(
        ha.post("/v1/runs/run-x/events?session=s", &done.to_string())
            .await
            .code(),
        201
    );
    assert_eq!(
        sse.next().await.map(|f| f.event),
        Some("run.completed".into())
    );
    assert_eq!(sse.next().await.map(|f| f.event), Some("end".into()));
    // The session is free again, on either gateway.
    assert_eq!(
        hb.post("/v1/runs", &start_body("run-z", "s")).await.code(),
        201
    );
}
