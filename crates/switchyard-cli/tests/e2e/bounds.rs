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
