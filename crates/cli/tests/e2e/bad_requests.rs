//! Bad requests get a 4xx JSON error that names the problem, and change nothing.

use hyper::Method;
use serde_json::json;

use crate::common::{Gateway, Http, delta, start_body};

async fn expect(
    http: &Http,
    method: Method,
    path: &str,
    body: Option<&str>,
    code: u16,
) -> serde_json::Value {
    let r = http.request(method, path, body).await;
    assert_eq!(r.code(), code, "{path} {body:?}: {}", r.text);
    let json = r.json();
    assert!(json["error"].is_string(), "{}", r.text);
    assert!(json["message"].is_string(), "{}", r.text);
    json
}

#[tokio::test]
async fn bad_requests_get_4xx_and_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("good", "s")).await.code(),
        201
    );
    let before = http.get("/v1/runs?status=").await.json();
    let good_before = http.get("/v1/runs/good?session=s").await.json();

    let post = Method::POST;
    let get = Method::GET;
    // Malformed JSON, wrong body shapes.
    let e = expect(&http, post.clone(), "/v1/runs", Some("{\"run_id\": "), 400).await;
    assert_eq!(e["error"], "malformed_json");
    expect(&http, post.clone(), "/v1/runs", Some("[1, 2]"), 400).await;
    expect(&http, post.clone(), "/v1/runs", None, 400).await;
    expect(
        &http,
        post.clone(),
        "/v1/runs/good/events?session=s",
        Some("nope"),
        400,
    )
    .await;
    // Schema and event-model violations name the field.
    let e = expect(
        &http,
        post.clone(),
        "/v1/runs",
        Some(r#"{"run_id": "x", "invocable": "h", "kind_of_invocable": "robot", "input": []}"#),
        422,
    )
    .await;
    assert_eq!(e["field"], "kind_of_invocable");
    let e = expect(&http, post.clone(), "/v1/runs", Some(r#"{"run_id": "x", "invocable": "h", "kind_of_invocable": "agent", "input": [{"type": "text"}]}"#), 422).await;
    assert!(
        e["field"]
            .as_str()
            .is_some_and(|f| f.starts_with("input[0]")),
        "{e}"
    );
    let e = expect(
        &http,
        post.clone(),
        "/v1/runs",
        Some(r#"{"run_id": "x", "colour": "blue"}"#),
        422,
    )
    .await;
    assert_eq!(e["field"], "colour");
    let e = expect(
        &http,
        post.clone(),
        "/v1/runs/good/events?session=s",
        Some(r#"{"kind": "text.delta", "message_id": "m"}"#),
        422,
    )
    .await;
    assert_eq!(e["field"], "text");
    let e = expect(&http, post.clone(), "/v1/runs/good/events?session=s", Some(&json!({"events": [{"kind": "text.delta", "message_id": "m", "text": "ok"}, {"kind": "usage.reported", "model": "m", "usage": {"input_tokens": -1, "output_tokens": 0, "usd": null}}]}).to_string()), 422).await;
    assert!(
        e["field"]
            .as_str()
            .is_some_and(|f| f.starts_with("events[1].usage")),
        "{e}"
    );
    let e = expect(
        &http,
        post.clone(),
        "/v1/runs/good/events?session=s",
        Some(r#"{"kind": "Bad Kind"}"#),
        422,
    )
    .await;
    assert_eq!(e["field"], "kind");
    let e = expect(&http, post.clone(), "/v1/runs/good/events?session=s", Some(&json!({"kind": "run.started", "invocable": "h", "kind_of_invocable": "agent", "input": []}).to_string()), 422).await;
    assert_eq!(e["field"], "kind");
    expect(
        &http,
        post.clone(),
        "/v1/runs/good/events?session=s",
        Some(r#"{"events": []}"#),
        422,
    )
    .await;
    expect(
        &http,
        post.clone(),
        "/v1/queues/q/tasks",
        Some(r#"{"id": "t"}"#),
        422,
    )
    .await;
    let e = expect(
        &http,
        post.clone(),
        "/v1/queues/q/tasks",
        Some(r#"{"payload": 1, "priority": "urgent"}"#),
        422,
    )
    .await;
    assert_eq!(e["field"], "priority");

    // Unknown runs.
    let e = expect(
        &http,
        post.clone(),
        "/v1/runs/ghost/events",
        Some(&delta("boo")),
        404,
    )
    .await;
    assert_eq!(e["error"], "unknown_run");
    expect(
        &http,
        post.clone(),
        "/v1/runs/good/events",
        Some(&delta("wrong log")),
        404,
    )
    .await;
    expect(&http, get.clone(), "/v1/runs/ghost", None, 404).await;
    expect(
        &http,
        post.clone(),
        "/v1/runs/ghost/resume",
        Some("{}"),
        404,
    )
    .await;
    expect(&http, get.clone(), "/v1/runs/ghost/stream", None, 404).await;
    let e = expect(
        &http,
        post.clone(),
        "/v1/runs/good/resume?session=s",
        Some("{}"),
        409,
    )
    .await;
    assert_eq!(e["status"], "running");

    // Hostile ids: control characters, invalid UTF-8, empty, oversized.
    let long = "x".repeat(600);
    for path in [
        "/v1/runs/a%0Ab/events".to_string(),
        "/v1/runs/a%00b".to_string(),
        "/v1/runs/%FF%FE".to_string(),
        "/v1/runs/good?session=".to_string(),
        "/v1/runs/good?session=a%0Db".to_string(),
        "/v1/runs?namespace=".to_string(),
        format!("/v1/runs/{long}"),
        "/v1/queues/%0A".to_string(),
        "/v1/runs/good?from_seq=-1".to_string(),
        "/v1/runs?status=sleeping".to_string(),
    ] {
        let method = if path.ends_with("/events") {
            post.clone()
        } else {
            get.clone()
        };
        let body = (method == Method::POST).then(|| delta("x"));
        expect(&http, method, &path, body.as_deref(), 400).await;
    }
    let e = expect(
        &http,
        post.clone(),
        "/v1/runs",
        Some(&start_body("a\nb", "s2")),
        422,
    )
    .await;
    assert_eq!(e["field"], "run_id");
    expect(
        &http,
        post.clone(),
        "/v1/runs",
        Some(&start_body("", "s2")),
        422,
    )
    .await;
    // Unknown routes and methods are JSON too.
    expect(&http, get.clone(), "/v1/nothing", None, 404).await;
    expect(&http, Method::DELETE, "/v1/runs", None, 405).await;

    // Nothing changed.
    assert_eq!(http.get("/v1/runs?status=").await.json(), before);
    assert_eq!(
        http.get("/v1/runs/good?session=s").await.json(),
        good_before
    );
    assert_eq!(http.get("/v1/queues/q").await.json()["waiting"], 0);

    // Ids with `:`, `{`, `}`, `%`, `/`, spaces and unicode are ordinary ids, isolated from others.
    let odd = "a:b{c}%2F é✓";
    let started = http.post("/v1/runs", &start_body(odd, "s:{x}")).await;
    assert_eq!(started.code(), 201, "{}", started.text);
    let location = started.headers["location"]
        .to_str()
        .expect("ascii")
        .to_string();
    let read = http.get(&location).await;
    assert_eq!(read.code(), 200, "{location}");
    assert_eq!(read.json()["run_id"], odd);
    assert_eq!(read.json()["session_id"], "s:{x}");
    assert_eq!(
        http.get("/v1/runs/good?session=s").await.json(),
        good_before
    );

    // The gateway survived all of it.
    assert_eq!(http.get("/healthz").await.code(), 200);
}
