//! The README walkthrough, step by step, on the embedded default.

use serde_json::{Value, json};

use crate::common::{Gateway, delta, start_body};

#[tokio::test]
async fn readme_walkthrough() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();

    let health = http.get("/healthz").await;
    assert_eq!(health.code(), 200);
    assert_eq!(health.json()["status"], "ok");
    assert_eq!(health.json()["backends"]["event_store"], "sqlite");

    // 1. Start a run: it claims session s1.
    let started = http.post("/v1/runs", &start_body("run-1", "s1")).await;
    assert_eq!(started.code(), 201, "{}", started.text);
    let body = started.json();
    assert_eq!(body["run_id"], "run-1");
    assert_eq!(body["status"], "running");
    assert_eq!(body["event"]["kind"], "run.started");
    assert_eq!(body["event"]["seq"], 0);
    assert_eq!(body["event"]["session_id"], "s1");
    assert_eq!(
        started
            .headers
            .get("location")
            .and_then(|v| v.to_str().ok()),
        Some("/v1/runs/run-1?session=s1")
    );

    // The session is busy while run-1 is open.
    let busy = http.post("/v1/runs", &start_body("run-2", "s1")).await;
    assert_eq!(busy.code(), 409);
    assert_eq!(busy.json()["error"], "session_busy");
    assert_eq!(busy.json()["held_by"], "run-1");

    // 2. Append: one payload, then a batch that ends in an interrupt.
    let one = http
        .post("/v1/runs/run-1/events?session=s1", &delta("Hel"))
        .await;
    assert_eq!(one.code(), 201, "{}", one.text);
    assert_eq!(one.json()["events"][0]["seq"], 1);
    let batch = json!({"events": [
        {"kind": "text.delta", "message_id": "m1", "text": "lo"},
        {"kind": "run.interrupted", "interrupt_id": "i1", "reason": "approval",
         "payload": {"question": "ship it?"}, "thread_id": null, "expected_resume": null},
    ]});
    let two = http
        .post("/v1/runs/run-1/events?session=s1", &batch.to_string())
        .await;
    assert_eq!(two.code(), 201, "{}", two.text);
    assert_eq!(two.json()["status"], "waiting_human");

    // 3. Stream: the retained events replay, each with its id; disconnect after two.
    let mut sse = http.sse("/v1/runs/run-1/stream?session=s1", None).await;
    let first = sse.take(2).await;
    assert_eq!(first[0].event, "run.started");
    assert_eq!(first[0].json()["seq"], 0);
    assert_eq!(first[1].event, "text.delta");
    drop(sse);

    // 4. Reconnect with Last-Event-ID: exactly the events after it.
    let last = first[1].id.clone().expect("data frames carry an id");
    let mut sse = http
        .sse("/v1/runs/run-1/stream?session=s1", Some(&last))
        .await;
    let rest = sse.take(2).await;
    assert_eq!(
        rest.iter()
            .map(|f| f.json()["seq"].clone())
            .collect::<Vec<_>>(),
        vec![json!(2), json!(3)]
    );
    assert_eq!(rest[1].event, "run.interrupted");

    // 5. Resume: of two concurrent resumes exactly one wins.
    let answer =
        json!({"reason": "approved", "value": [{"type": "text", "text": "yes"}]}).to_string();
    let (a, b) = tokio::join!(
        http.post("/v1/runs/run-1/resume?session=s1", &answer),
        http.post("/v1/runs/run-1/resume?session=s1", &answer),
    );
    let mut codes = vec![a.code(), b.code()];
    codes.sort_unstable();
    assert_eq!(codes, vec![200, 409], "{} / {}", a.text, b.text);
    let loser = if a.code() == 409 { &a } else { &b };
    assert_eq!(loser.json()["error"], "not_resumable");
    assert_eq!(loser.json()["status"], "running");

    // The open stream sees the resume, then the completion and the end frame.
    let resumed = sse.next().await.expect("resumed frame");
    assert_eq!(resumed.event, "run.resumed");
    let done = json!({"kind": "run.completed", "output": [{"type": "text", "text": "Hello"}],
                      "usage": {"input_tokens": 3, "output_tokens": 5, "usd": null}});
    let completed = http
        .post("/v1/runs/run-1/events?session=s1", &done.to_string())
        .await;
    assert_eq!(completed.code(), 201, "{}", completed.text);
    assert_eq!(completed.json()["status"], "completed");
    let last = sse.next().await.expect("completed frame");
    assert_eq!(last.event, "run.completed");
    let end = sse.next().await.expect("end frame");
    assert_eq!((end.event.as_str(), end.data.as_str()), ("end", "null"));
    assert_eq!(sse.next().await, None, "the body ends after the end frame");

    // Read the run back, whole and from a seq.
    let read = http.get("/v1/runs/run-1?session=s1").await;
    assert_eq!(read.code(), 200);
    let events = read.json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(events.len(), 6);
    assert_eq!(read.json()["status"], "completed");
    let tail = http.get("/v1/runs/run-1?session=s1&from_seq=4").await;
    let seqs: Vec<Value> = tail.json()["events"]
        .as_array()
        .map(|a| a.iter().map(|e| e["seq"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(seqs, vec![json!(4), json!(5)]);

    // List by status.
    let listed = http.get("/v1/runs?status=completed").await;
    assert_eq!(
        listed.json()["runs"],
        json!([{"run_id": "run-1", "log_key": "s1", "session_id": "s1", "status": "completed"}])
    );
    assert_eq!(
        http.get("/v1/runs?status=running").await.json()["runs"],
        json!([])
    );

    // Appending to a finished run is refused.
    let late = http
        .post("/v1/runs/run-1/events?session=s1", &delta("x"))
        .await;
    assert_eq!(late.code(), 409);
    assert_eq!(late.json()["error"], "run_finished");

    // The session is free again.
    let next = http.post("/v1/runs", &start_body("run-2", "s1")).await;
    assert_eq!(next.code(), 201, "{}", next.text);

    // Queues: submit in the seed's envelope, look at it.
    let sub = http
        .post(
            "/v1/queues/jobs/tasks",
            r#"{"payload": {"query": "café"}, "id": "t-1"}"#,
        )
        .await;
    assert_eq!(sub.code(), 201, "{}", sub.text);
    assert_eq!(sub.json()["id"], "t-1");
    let dup_body = r#"{"payload": {"n": 2}, "idempotency_key": "k1"}"#;
    let first_dup = http.post("/v1/queues/jobs/tasks", dup_body).await;
    assert_eq!(first_dup.code(), 201);
    let second_dup = http.post("/v1/queues/jobs/tasks", dup_body).await;
    assert_eq!(second_dup.code(), 200);
    assert_eq!(second_dup.json()["duplicate"], true);
    assert_eq!(second_dup.json()["id"], first_dup.json()["id"]);
    let stats = http.get("/v1/queues/jobs").await;
    assert_eq!(stats.json()["waiting"], 2);
    assert_eq!(stats.json()["tiers"]["normal"], 2);
    assert_eq!(stats.json()["dead_letters"], 0);
    let peek = http.get("/v1/queues/jobs/tasks?limit=1").await;
    let task = &peek.json()["tasks"][0];
    assert_eq!(task["id"], "t-1");
    assert_eq!(task["payload"], json!({"query": "café"}));
    assert_eq!(task["attempt"], 0);
    assert!(task["submitted_at"].is_f64());

    // Metrics: requests by route and status, SSE subscribers, queue depths.
    let metrics = http.get("/metrics").await;
    assert_eq!(metrics.code(), 200);
    for line in [
        "switchyard_http_requests_total{method=\"POST\",route=\"/v1/runs\",status=\"201\"} 2",
        "switchyard_http_requests_total{method=\"POST\",route=\"/v1/runs\",status=\"409\"} 1",
        "switchyard_http_requests_total{method=\"POST\",route=\"/v1/runs/{run_id}/resume\",status=\"200\"} 1",
        "switchyard_queue_waiting{queue=\"jobs\",tier=\"normal\"} 2",
        "switchyard_queue_dead{queue=\"jobs\"} 0",
    ] {
        assert!(
            metrics.text.contains(line),
            "missing {line:?} in\n{}",
            metrics.text
        );
    }
    assert!(
        metrics
            .text
            .contains("# TYPE switchyard_sse_subscribers gauge")
    );
}
