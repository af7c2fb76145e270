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
