//! Schedules over HTTP (ADR 0308) on the embedded default and on Redis, checked against
//! `/openapi.json`.

use hyper::Method;
use serde_json::{Value, json};
use switchyard_conformance::harness::RedisServer;

use crate::common::{Gateway, Http};
use crate::contract::Contract;

const ONE: &str = "/v1/schedules/{name}";

async fn call(
    h: &Http,
    c: &Contract,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let text = body.map(|b| b.to_string());
    let resp = h.request(method.clone(), path, text.as_deref()).await;
    let route = if path == "/v1/schedules" {
        "/v1/schedules"
    } else {
        ONE
    };
    let json = c.check(&method.as_str().to_lowercase(), route, &resp);
    (resp.code(), json)
}

async fn schedules(gateway: &Gateway) {
    let h = gateway.http();
    let c = Contract::fetch(&h).await;
    let spec = json!({"cron": "0 0 3 * * *", "timezone": "Europe/Berlin", "queue": "reports",
                      "payload": {"kind": "nightly"}, "catch_up": "skip"});
    let path = "/v1/schedules/nightly%20report";
    let (code, put) = call(&h, &c, Method::PUT, path, Some(spec)).await;
    assert_eq!(code, 200, "{put}");
    assert_eq!(put["name"], "nightly report");
    assert_eq!(put["spec"]["cron"], "0 0 3 * * *");
    assert_eq!(put["spec"]["priority"], 0);
    assert_eq!(put["spec"]["enabled"], true);
    assert!(put["spec"]["created_at"].as_i64().expect("created_at") > 1_700_000_000);
    let (code, got) = call(&h, &c, Method::GET, path, None).await;
    assert_eq!(code, 200);
    assert_eq!(got, put);
    let (_, all) = call(&h, &c, Method::GET, "/v1/schedules", None).await;
    assert_eq!(all["schedules"], json!([put]));

    // Invalid documents are 422 naming the field; nothing is stored.
    for (body, field) in [
        (json!({"cron": "not cron", "queue": "q"}), "cron"),
        (
            json!({"cron": "0 0 3 * * *", "queue": "q", "timezone": "Mars/Base"}),
            "timezone",
        ),
        (json!({"cron": "0 0 3 * * *", "queue": ""}), "queue"),
        (
            json!({"cron": "0 0 3 * * *", "queue": "q", "timezon": "UTC"}),
            "schedule",
        ),
    ] {
        let (code, refused) =
            call(&h, &c, Method::PUT, "/v1/schedules/bad", Some(body.clone())).await;
        assert_eq!(code, 422, "{body}: {refused}");
        assert_eq!(refused["field"], field, "{body}: {refused}");
    }
    let (code, missing) = call(&h, &c, Method::GET, "/v1/schedules/bad", None).await;
    assert_eq!(code, 404);
    assert_eq!(missing["error"], "unknown_schedule");

    let (code, deleted) = call(&h, &c, Method::DELETE, path, None).await;
    assert_eq!(code, 200);
    assert_eq!(deleted, json!({"name": "nightly report", "deleted": true}));
    let (_, again) = call(&h, &c, Method::DELETE, path, None).await;
    assert_eq!(again["deleted"], false);
    let (_, all) = call(&h, &c, Method::GET, "/v1/schedules", None).await;
    assert_eq!(all["schedules"], json!([]));
}

#[tokio::test]
async fn schedules_on_the_embedded_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &["--no-scheduler"]);
    schedules(&gateway).await;
}

#[tokio::test]
async fn schedules_on_redis() {
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::start_in(dir.path(), &["--redis", &redis.url(), "--no-scheduler"]);
    schedules(&gateway).await;
}

#[tokio::test]
async fn serve_runs_a_scheduler_that_fires_stored_schedules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &[]);
    let h = gateway.http();
    let every_second = json!({"cron": "* * * * * *", "queue": "ticks", "payload": {"tick": true}});
    let put = h
        .request(
            Method::PUT,
            "/v1/schedules/heartbeat",
            Some(&every_second.to_string()),
        )
        .await;
    assert_eq!(put.code(), 200, "{}", put.text);
    crate::common::eventually("a tick enqueued on `ticks`", || {
        let h = h.clone();
        async move {
            let stats = h.get("/v1/queues/ticks").await.json();
            stats["waiting"].as_u64().unwrap_or(0) >= 1
        }
    })
    .await;
    let task = h.get("/v1/queues/ticks/tasks?limit=1").await.json();
    assert_eq!(task["tasks"][0]["payload"], json!({"tick": true}), "{task}");
}
