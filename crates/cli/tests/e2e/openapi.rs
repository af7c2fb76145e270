//! `GET /openapi.json` (ADR 0305): an OpenAPI 3.1 document with the bearer scheme, public even
//! with `--auth`, describing the worker API; error responses validate against it too.

use crate::common::Gateway;
use crate::contract::Contract;
use crate::security::token_file;

#[tokio::test]
async fn the_document_is_public_and_describes_the_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (tokens, [secret, _, _]) = token_file(dir.path());
    let tokens = tokens.to_str().expect("utf-8").to_string();
    let gateway = Gateway::embedded(dir.path(), &["--auth", &tokens, "--no-scheduler"]);
    let h = gateway.http();
    let resp = h.get("/openapi.json").await;
    assert_eq!(resp.code(), 200, "no token needed: {}", resp.text);
    assert!(
        resp.headers["content-type"]
            .to_str()
            .expect("type")
            .starts_with("application/json")
    );
    let doc = resp.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["type"],
        "http"
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert_eq!(doc["security"], serde_json::json!([{"bearer": []}]));
    let paths = doc["paths"].as_object().expect("paths");
    // Code generators (the TypeScript client's among them) name a function after each
    // operation: the ids must be unique, as OpenAPI requires.
    let mut ids = std::collections::BTreeSet::new();
    for (path, item) in paths {
        for (method, op) in item.as_object().expect("path item") {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}: no operationId"));
            assert!(
                ids.insert(id.to_string()),
                "{method} {path}: operationId {id} repeats"
            );
        }
    }
    for route in [
        "/v1/queues/{queue}/reservations",
        "/v1/queues/{queue}/reservations/{receipt}/ack",
        "/v1/queues/{queue}/reservations/{receipt}/nack",
        "/v1/queues/{queue}/reservations/{receipt}/fail",
        "/v1/queues/{queue}/reservations/{receipt}/extend",
        "/v1/queues/{queue}/reservations/{receipt}/progress",
        "/v1/queues/{queue}/in-flight",
        "/v1/queues/{queue}/pause",
        "/v1/queues/{queue}/resume",
        "/v1/queues/{queue}/rate-limit",
        "/v1/queues/{queue}/dead-letters/requeue",
        "/v1/schedules",
        "/v1/schedules/{name}",
        "/v1/webhooks",
        "/v1/webhooks/{id}",
        "/v1/webhooks/{id}/deliveries",
    ] {
        assert!(paths.contains_key(route), "{route} missing");
    }
    assert_eq!(
        doc["paths"]["/v1/queues/{queue}/dead-letters/replay"]["post"]["deprecated"],
        true
    );

    // Refusals are documented too: 401 without a token, 403 out of scope, 422 on a bad body.
    let c = Contract::fetch(&h).await;
    let route = "/v1/queues/{queue}/reservations";
    let anonymous = h.post("/v1/queues/jobs-1/reservations", "{}").await;
    assert_eq!(anonymous.code(), 401);
    c.check("post", route, &anonymous);
    let a = h.with_token(&secret);
    let other = a.post("/v1/queues/mail/reservations", "{}").await;
    assert_eq!(other.code(), 403);
    c.check("post", route, &other);
    let bad = a
        .post("/v1/queues/jobs-1/reservations", r#"{"max": 1000}"#)
        .await;
    assert_eq!(bad.code(), 422);
    c.check("post", route, &bad);
    let ok = a.post("/v1/queues/jobs-1/reservations", "{}").await;
    assert_eq!(ok.code(), 200, "{}", ok.text);
    assert_eq!(c.check("post", route, &ok)["tasks"], serde_json::json!([]));
    // Schedules need a token over every queue.
    let schedules = a.get("/v1/schedules").await;
    assert_eq!(schedules.code(), 403, "{}", schedules.text);
}

/// The body that starts run `run_id` (no session).
fn start_body(run_id: &str) -> String {
    serde_json::json!({"run_id": run_id, "invocable": "a", "kind_of_invocable": "agent", "input": []})
        .to_string()
}

/// One payload of every kind of the event model, as a client sends it.
fn payload_bodies() -> Vec<serde_json::Value> {
    use serde_json::json;
    let sha = "0123456789abcdef".repeat(4);
    vec![
        json!({"kind": "run.started", "invocable": "a", "kind_of_invocable": "agent", "input": []}),
        json!({"kind": "run.completed", "output": [{"type": "text", "text": "done"}],
               "usage": {"input_tokens": 1, "output_tokens": 2, "usd": 0.01}}),
        json!({"kind": "run.failed", "error_code": "tool_error", "message": "m", "retryable": false}),
        json!({"kind": "run.paused", "reason": "lunch"}),
        json!({"kind": "run.resumed", "value": [{"type": "text", "text": "yes"}]}),
        json!({"kind": "run.cancelled"}),
        json!({"kind": "run.interrupted", "interrupt_id": "i", "reason": "human", "payload": {}}),
        json!({"kind": "control.requested", "verb": "pause", "reason": null}),
        json!({"kind": "control.observed", "verb": "pause", "safe_point": "stream_item"}),
        json!({"kind": "text.delta", "message_id": "m", "text": "hel"}),
        json!({"kind": "thought.delta", "message_id": "m", "text": "hmm"}),
        json!({"kind": "message.completed", "message_id": "m", "text": "hello"}),
        json!({"kind": "tool.call.started", "call_id": "c", "tool": "search", "args": {"q": "x"}}),
        json!({"kind": "tool.call.completed", "call_id": "c", "tool": "search", "result_preview": "r",
               "result_size": 1, "result_sha256": sha, "artifact_id": null, "error": null}),
        json!({"kind": "node.updated", "node": "plan", "state_patch": {"step": 2}}),
        json!({"kind": "artifact.created", "artifact_id": "a", "media_type": "text/plain",
               "uri": "file:///tmp/a", "size": 5}),
        json!({"kind": "usage.reported", "model": "m", "usage": {"input_tokens": 3, "output_tokens": 4}}),
        json!({"kind": "input.appended", "input": [{"type": "resource", "uri": "s3://b/k"}], "source": "user"}),
        json!({"kind": "status.reported", "message": "working"}),
        json!({"kind": "progress.reported", "step": "indexing", "current": 2, "total": 5}),
        json!({"kind": "custom", "name": "acme.thing", "data": {"x": 1}}),
    ]
}

/// The events route's request schema (ADR 0373): a body of every kind the document maps
/// validates and is stored (but `run.started` and `run.resumed`, which have their own routes),
/// a typo'd kind does not validate and is refused with 422 on its `kind`, and a gateway started
/// with `--lenient-event-kinds` stores it as `raw_payload` in an answer the document describes.
#[tokio::test]
async fn every_payload_kind_is_in_the_request_schema_and_a_typo_is_not() {
    use serde_json::json;
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &["--no-scheduler"]);
    let h = gateway.http();
    let c = Contract::fetch(&h).await;
    let doc = h.get("/openapi.json").await.json();
    let mut documented: Vec<String> =
        doc["components"]["schemas"]["Payload"]["discriminator"]["mapping"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
    let bodies = payload_bodies();
    let mut sent: Vec<String> = bodies
        .iter()
        .map(|b| b["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    documented.sort();
    sent.sort();
    assert_eq!(sent, documented, "a body for every documented kind");

    let route = "/v1/runs/{run_id}/events";
    for (i, body) in bodies.iter().enumerate() {
        let errors = c.request_errors("post", route, body);
        assert!(errors.is_empty(), "{body}: {errors:?}");
        let run = format!("k{i}");
        let start = h.post("/v1/runs", &start_body(&run)).await;
        assert_eq!(start.code(), 201, "{}", start.text);
        let resp = h
            .post(&format!("/v1/runs/{run}/events"), &body.to_string())
            .await;
        let own_route =
            ["run.started", "run.resumed"].contains(&body["kind"].as_str().unwrap_or(""));
        assert_eq!(
            resp.code(),
            if own_route { 422 } else { 201 },
            "{body}: {}",
            resp.text
        );
        c.check("post", route, &resp);
    }
    let batch = json!({"events": [bodies[9], bodies[18]], "origin": "e2e"});
    assert!(c.request_errors("post", route, &batch).is_empty());
    let start = h.post("/v1/runs", &start_body("b")).await;
    assert_eq!(start.code(), 201, "{}", start.text);
    let stored = h.post("/v1/runs/b/events", &batch.to_string()).await;
    assert_eq!(stored.code(), 201, "{}", stored.text);
    assert_eq!(
        c.check("post", route, &stored)["events"][1]["origin"],
        "e2e"
    );

    let typo = json!({"kind": "tool.call", "call_id": "c", "tool": "search", "args": {}});
    assert!(
        !c.request_errors("post", route, &typo).is_empty(),
        "{typo} validated"
    );
    let in_batch = json!({"events": [bodies[9], typo]});
    assert!(!c.request_errors("post", route, &in_batch).is_empty());
    let refused = h.post("/v1/runs/b/events", &typo.to_string()).await;
    assert_eq!(refused.code(), 422, "{}", refused.text);
    let body = c.check("post", route, &refused);
    assert_eq!(body["field"], "kind", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("--lenient-event-kinds")),
        "{body}"
    );

    let lenient_dir = tempfile::tempdir().expect("tempdir");
    let lenient = Gateway::embedded(
        lenient_dir.path(),
        &["--no-scheduler", "--lenient-event-kinds"],
    );
    let l = lenient.http();
    let start = l.post("/v1/runs", &start_body("r")).await;
    assert_eq!(start.code(), 201, "{}", start.text);
    let kept = l.post("/v1/runs/r/events", &typo.to_string()).await;
    assert_eq!(kept.code(), 201, "{}", kept.text);
    let body = c.check("post", route, &kept);
    assert_eq!(
        body["events"][0]["payload"]["raw_payload"]["tool"],
        "search"
    );
}

#[tokio::test]
async fn the_openapi_command_prints_the_served_document() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = crate::common::run(dir.path(), &["openapi"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let gateway = Gateway::embedded(dir.path(), &["--no-scheduler"]);
    let served = gateway.http().get("/openapi.json").await.json();
    assert_eq!(printed, served);
    assert_eq!(printed["openapi"], "3.1.0");
}
