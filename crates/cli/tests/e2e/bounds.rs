//! Client numbers are bounded (422 naming the field, never a 500 or a panic), and `serve` refuses
//! absurd settings at start.

use serde_json::json;

use std::process::Stdio;

use crate::common::{Gateway, PATIENCE, command};

#[tokio::test]
async fn huge_numbers_are_422_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    let start = json!({"run_id": "r", "session_id": "s", "stale_after_secs": 10_000_000_000_000_u64,
                       "invocable": "h", "kind_of_invocable": "agent", "input": []});
    let r = http.post("/v1/runs", &start.to_string()).await;
    assert_eq!(r.code(), 422, "{}", r.text);
    assert_eq!(r.json()["field"], "stale_after_secs");
    assert_eq!(
        http.get("/v1/runs/r?session=s").await.code(),
        404,
        "nothing written"
    );

    for (field, value) in [
        ("ttl_seconds", json!(10_000_000_000_000_u64)),
        ("max_attempts", json!(u64::MAX)),
    ] {
        let mut body = json!({"payload": 1});
        body[field] = value;
        let r = http.post("/v1/queues/q/tasks", &body.to_string()).await;
        assert_eq!(r.code(), 422, "{field}: {}", r.text);
        assert_eq!(r.json()["field"], field);
    }
    assert_eq!(http.get("/v1/queues/q").await.json()["waiting"], 0);
    let r = http
        .post(
            "/v1/queues/q/dead-letters/replay",
            r#"{"limit": 18446744073709551615}"#,
        )
        .await;
    assert_eq!(r.code(), 422, "{}", r.text);
    assert_eq!(r.json()["field"], "limit");
    let r = http.get("/v1/queues/q/tasks?limit=100000").await;
    assert_eq!(r.code(), 422, "{}", r.text);
    assert_eq!(r.json()["field"], "limit");

    // A run started with an ordinary bound reads fine; a from_seq past the stored range is 422.
    let start = json!({"run_id": "ok", "stale_after_secs": 315_360_000_u64,
                       "invocable": "h", "kind_of_invocable": "agent", "input": []});
    assert_eq!(http.post("/v1/runs", &start.to_string()).await.code(), 201);
    let r = http.get("/v1/runs/ok?from_seq=18446744073709551615").await;
    assert_eq!(r.code(), 422, "{}", r.text);
    assert_eq!(r.json()["field"], "from_seq");
    assert_eq!(http.get("/healthz").await.code(), 200);
}

#[test]
fn serve_refuses_a_huge_stale_after_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("switchyard.db");
    let mut child = command(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--sqlite"])
        .arg(&db)
        .args(["--stale-after-secs", "10000000000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn switchyard");
    // A gateway that starts anyway would serve forever: give up on it after a while.
    let deadline = std::time::Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        status.is_some_and(|s| !s.success()),
        "serve must refuse to start: {status:?} {stderr}"
    );
    assert!(stderr.contains("--stale-after-secs"), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("listening"),
        "it never listened"
    );
}

/// One append carries at most 1000 events: a batch of 10,000 (well under the body limit) or of
/// 1001 is refused with 422 `too_many_events`, naming the limit, and stores nothing; 1000 are
/// stored. The OpenAPI document states the bound on the route's body.
#[tokio::test]
async fn an_append_batch_holds_at_most_1000_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &["--no-scheduler"]);
    let http = gw.http();
    let start = serde_json::json!({"run_id": "r", "invocable": "helper",
        "kind_of_invocable": "agent", "input": []});
    assert_eq!(http.post("/v1/runs", &start.to_string()).await.code(), 201);
    let batch = |n: usize| {
        let one = serde_json::json!({"kind": "text.delta", "message_id": "m", "text": "x"});
        serde_json::json!({"events": vec![one; n]}).to_string()
    };
    for n in [10_000, 1_001] {
        let refused = http.post("/v1/runs/r/events", &batch(n)).await;
        assert_eq!(refused.code(), 422, "{n}: {}", refused.text);
        let body = refused.json();
        assert_eq!(body["error"], "too_many_events", "{body}");
        assert_eq!(body["field"], "events", "{body}");
        assert_eq!(body["max_events"], 1000, "{body}");
        assert!(
            body["message"].as_str().is_some_and(|m| m.contains("1000")),
            "{body}"
        );
    }
    let read = http.get("/v1/runs/r").await.json();
    assert_eq!(
        read["events"].as_array().map(Vec::len),
        Some(1),
        "nothing stored"
    );

    let stored = http.post("/v1/runs/r/events", &batch(1_000)).await;
    assert_eq!(stored.code(), 201, "{}", stored.text);
    assert_eq!(stored.json()["events"].as_array().map(Vec::len), Some(1000));

    let doc = http.get("/openapi.json").await.json();
    let events = &doc["components"]["schemas"]["AppendBatch"]["properties"]["events"];
    assert_eq!(events["maxItems"], 1000, "{events}");
    let route = &doc["paths"]["/v1/runs/{run_id}/events"]["post"];
    assert!(
        route["responses"]["422"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("too_many_events")),
        "{route}"
    );
}
