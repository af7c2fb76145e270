//! The HTTP worker API and the queue controls (ADR 0306) on the embedded default (SQLite) and on
//! Redis: every response is also checked against `/openapi.json`.

use hyper::Method;
use serde_json::{Value, json};
use switchyard_conformance::harness::RedisServer;

use crate::common::{Gateway, Http, PATIENCE};
use crate::contract::Contract;

const TASKS: &str = "/v1/queues/{queue}/tasks";
const STATS: &str = "/v1/queues/{queue}";
const RESERVE: &str = "/v1/queues/{queue}/reservations";
const IN_FLIGHT: &str = "/v1/queues/{queue}/in-flight";
const DEAD: &str = "/v1/queues/{queue}/dead-letters";
const REQUEUE: &str = "/v1/queues/{queue}/dead-letters/requeue";

fn on(receipt: &str, verb: &str) -> (String, String) {
    (
        format!(
            "/v1/queues/jobs/reservations/{}/{verb}",
            switchyard_core::keys::quote(receipt)
        ),
        format!("/v1/queues/{{queue}}/reservations/{{receipt}}/{verb}"),
    )
}

struct Client {
    h: Http,
    c: Contract,
}

impl Client {
    async fn post(&self, path: &str, route: &str, body: Value, status: u16) -> Value {
        let resp = self.h.post(path, &body.to_string()).await;
        assert_eq!(resp.code(), status, "POST {path} {body}: {}", resp.text);
        self.c.check("post", route, &resp)
    }

    async fn get(&self, path: &str, route: &str) -> Value {
        let resp = self.h.get(path).await;
        assert_eq!(resp.code(), 200, "GET {path}: {}", resp.text);
        self.c.check("get", route, &resp)
    }

    async fn reserve(&self, queue: &str, body: Value) -> Vec<Value> {
        let got = self
            .post(
                &format!("/v1/queues/{queue}/reservations"),
                RESERVE,
                body,
                200,
            )
            .await;
        got["tasks"].as_array().cloned().expect("tasks")
    }

    async fn on(&self, receipt: &str, verb: &str, body: Value, status: u16) -> Value {
        let (path, route) = on(receipt, verb);
        self.post(&path, &route, body, status).await
    }
}

async fn worker_api(gateway: &Gateway) {
    let h = gateway.http();
    let w = Client {
        c: Contract::fetch(&h).await,
        h,
    };
    let tasks = "/v1/queues/jobs/tasks";

    // Now, after a delay, at an instant (RFC 3339 or unix seconds); not both.
    w.post(tasks, TASKS, json!({"payload": {"n": 1}}), 201)
        .await;
    w.post(
        tasks,
        TASKS,
        json!({"payload": {"n": 2}, "delay_seconds": 3600}),
        201,
    )
    .await;
    w.post(
        tasks,
        TASKS,
        json!({"payload": {"n": 3}, "run_at": "2030-01-01T00:00:00+01:00"}),
        201,
    )
    .await;
    w.post(
        tasks,
        TASKS,
        json!({"payload": {"n": 3}, "run_at": 1_900_000_000.5}),
        201,
    )
    .await;
    let both = w
        .post(
            tasks,
            TASKS,
            json!({"payload": 1, "delay_seconds": 1, "run_at": 1}),
            422,
        )
        .await;
    assert_eq!(both["field"], "run_at");
    for run_at in [
        json!("tomorrow"),
        json!("2099-01-01T00:00:00Z"),
        json!(-1),
        json!(true),
    ] {
        let bad = w
            .post(tasks, TASKS, json!({"payload": 1, "run_at": run_at}), 422)
            .await;
        assert_eq!(bad["field"], "run_at");
    }
    let stats = w.get("/v1/queues/jobs", STATS).await;
    assert_eq!(stats["waiting"], 1, "{stats}");
    assert_eq!(stats["scheduled"], 3, "{stats}");
    assert_eq!(stats["paused"], false);
    assert_eq!(stats["rate_limit"], Value::Null);
    assert_eq!(stats["throttled_ms"], 0);

    // Reserve, report progress, extend, ack; a second ack has lost the task.
    let got = w
        .reserve("jobs", json!({"max": 10, "visibility_seconds": 60}))
        .await;
    assert_eq!(got.len(), 1, "{got:?}");
    let task = &got[0];
    assert_eq!(task["payload"], json!({"n": 1}));
    assert_eq!(task["attempt"], 1);
    assert_eq!(task["priority"], "normal");
    assert!(task.get("last_error").is_none());
    let receipt = task["receipt"].as_str().expect("receipt").to_string();
    assert_eq!(
        w.on(&receipt, "progress", json!({"pct": 50}), 200).await,
        json!({"ok": true})
    );
    let seen = w.get("/v1/queues/jobs/in-flight?limit=5", IN_FLIGHT).await;
    let seen = seen["in_flight"].as_array().cloned().expect("in_flight");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["progress"], json!({"pct": 50}));
    assert_eq!(seen[0]["payload"], json!({"n": 1}));
    assert_eq!(seen[0]["id"], task["id"]);
    assert!(seen[0].get("receipt").is_none(), "observers get no receipt");
    w.on(&receipt, "extend", json!({"visibility_seconds": 120}), 200)
        .await;
    w.on(&receipt, "ack", json!({}), 200).await;
    let lost = w.on(&receipt, "ack", json!({}), 409).await;
    assert_eq!(lost["error"], "receipt_not_current");
    assert_eq!(
        w.on(&receipt, "nack", json!({}), 409).await["error"],
        "receipt_not_current"
    );
    assert_eq!(
        w.on(&receipt, "progress", json!(1), 409).await["error"],
        "receipt_not_current"
    );
    assert_eq!(
        w.on(&receipt, "fail", json!({"reason": "late"}), 409).await["error"],
        "receipt_not_current"
    );

    // Nack keeps the task as delivered; fail dead-letters it with the reason.
    w.post(
        tasks,
        TASKS,
        json!({"payload": {"n": 4}, "priority": "high"}),
        201,
    )
    .await;
    let first = w.reserve("jobs", json!({})).await;
    assert_eq!(first[0]["payload"], json!({"n": 4}));
    assert_eq!(first[0]["priority"], "high");
    let r1 = first[0]["receipt"].as_str().expect("receipt").to_string();
    w.on(&r1, "nack", json!({"delay_seconds": 0}), 200).await;
    let again = w.reserve("jobs", json!({"max": 1})).await;
    assert_eq!(again[0]["payload"], json!({"n": 4}));
    assert_eq!(again[0]["attempt"], 2);
    let r2 = again[0]["receipt"].as_str().expect("receipt").to_string();
    w.on(&r2, "fail", json!({"reason": "boom"}), 200).await;
    let dead = w.get("/v1/queues/jobs/dead-letters", DEAD).await;
    assert_eq!(dead["total"], 1);
    let letter = &dead["dead_letters"][0];
    assert_eq!(letter["payload"], json!({"n": 4}));
    assert_eq!(letter["last_error"]["message"], "boom");
    assert_eq!(letter["last_error"]["attempt"], 2);
    let letter_ref = letter["ref"].as_str().expect("ref").to_string();

    // Requeue the chosen letter by its ref; an unknown ref is reported missing.
    let requeued = w
        .post(
            "/v1/queues/jobs/dead-letters/requeue",
            REQUEUE,
            json!({"refs": [letter_ref, "bm9wZQ"], "priority": "low"}),
            200,
        )
        .await;
    assert_eq!(requeued["requeued"], 1);
    assert_eq!(requeued["missing"], json!(["bm9wZQ"]));
    let bad_ref = w
        .post(
            "/v1/queues/jobs/dead-letters/requeue",
            REQUEUE,
            json!({"refs": ["*"]}),
            422,
        )
        .await;
    assert_eq!(bad_ref["field"], "refs[0]");
    assert_eq!(
        w.get("/v1/queues/jobs/dead-letters", DEAD).await["total"],
        0
    );
    let stats = w.get("/v1/queues/jobs", STATS).await;
    assert_eq!(stats["tiers"]["low"], 1, "{stats}");
    // The old route still works, says it is deprecated and points to the new one.
    let old = w.h.post("/v1/queues/jobs/dead-letters/replay", "{}").await;
    assert_eq!(old.code(), 200);
    w.c.check("post", "/v1/queues/{queue}/dead-letters/replay", &old);
    assert_eq!(old.json()["replayed"], 0);
    assert_eq!(old.headers["deprecation"], "true");
    let link = old.headers["link"].to_str().expect("link");
    assert!(
        link.contains("/v1/queues/jobs/dead-letters/requeue"),
        "{link}"
    );

    // Pause: nothing is handed out, submits still land; resume.
    let paused = w
        .post(
            "/v1/queues/jobs/pause",
            "/v1/queues/{queue}/pause",
            json!({}),
            200,
        )
        .await;
    assert_eq!(
        paused,
        json!({"queue": "jobs", "paused": true, "changed": true})
    );
    let again = w
        .post(
            "/v1/queues/jobs/pause",
            "/v1/queues/{queue}/pause",
            json!({}),
            200,
        )
        .await;
    assert_eq!(again["changed"], false);
    assert!(w.reserve("jobs", json!({"max": 5})).await.is_empty());
    w.post(tasks, TASKS, json!({"payload": {"n": 5}}), 201)
        .await;
    assert_eq!(w.get("/v1/queues/jobs", STATS).await["paused"], true);
    let metrics = w.h.get("/metrics").await.text;
    assert!(
        metrics.contains("switchyard_queue_paused{queue=\"jobs\"} 1"),
        "{metrics}"
    );
    let resumed = w
        .post(
            "/v1/queues/jobs/resume",
            "/v1/queues/{queue}/resume",
            json!({}),
            200,
        )
        .await;
    assert_eq!(
        resumed,
        json!({"queue": "jobs", "paused": false, "changed": true})
    );

    // A rate limit of one per hour: one task now, then none; the stats say how long to wait.
    let route = "/v1/queues/{queue}/rate-limit";
    let limited =
        w.h.request(
            Method::PUT,
            "/v1/queues/jobs/rate-limit",
            Some(r#"{"max": 1, "per_seconds": 3600}"#),
        )
        .await;
    assert_eq!(limited.code(), 200, "{}", limited.text);
    let limited = w.c.check("put", route, &limited);
    assert_eq!(
        limited["rate_limit"],
        json!({"max": 1, "per_seconds": 3600.0})
    );
    assert_eq!(w.reserve("jobs", json!({"max": 10})).await.len(), 1);
    assert!(w.reserve("jobs", json!({"max": 10})).await.is_empty());
    let stats = w.get("/v1/queues/jobs", STATS).await;
    assert!(stats["throttled_ms"].as_u64().expect("ms") > 0, "{stats}");
    let metrics = w.h.get("/metrics").await.text;
    assert!(
        metrics.contains("switchyard_queue_throttled_seconds{queue=\"jobs\"} "),
        "{metrics}"
    );
    let invalid =
        w.h.request(
            Method::PUT,
            "/v1/queues/jobs/rate-limit",
            Some(r#"{"max": 0, "per_seconds": 1}"#),
        )
        .await;
    assert_eq!(invalid.code(), 422, "{}", invalid.text);
    assert_eq!(w.c.check("put", route, &invalid)["field"], "max");
    let cleared =
        w.h.request(Method::DELETE, "/v1/queues/jobs/rate-limit", None)
            .await;
    assert_eq!(cleared.code(), 200, "{}", cleared.text);
    assert_eq!(
        w.c.check("delete", route, &cleared)["rate_limit"],
        Value::Null
    );
    assert_eq!(w.reserve("jobs", json!({"max": 10})).await.len(), 1);

    // Bounds: 422 naming the field.
    for (body, field) in [
        (json!({"max": 0}), "max"),
        (json!({"max": 101}), "max"),
        (json!({"visibility_seconds": 43_201}), "visibility_seconds"),
        (json!({"visibility_seconds": 0}), "visibility_seconds"),
        (json!({"wait_seconds": 31}), "wait_seconds"),
        (json!({"wait_seconds": -1}), "wait_seconds"),
        (json!({"mx": 1}), "mx"),
    ] {
        let refused = w
            .post("/v1/queues/jobs/reservations", RESERVE, body.clone(), 422)
            .await;
        assert_eq!(refused["field"], field, "{body}");
    }
    let big = json!({"blob": "x".repeat(70 * 1024)});
    let held = w.reserve("jobs", json!({})).await;
    assert!(held.is_empty(), "{held:?}");
    let refused = w.on("r", "progress", big, 422).await;
    assert_eq!(refused["error"], "invalid_input");

    // A long poll is answered by a task submitted while it waits.
    let poller = w.h.clone();
    let poll = tokio::spawn(async move {
        poller
            .post(
                "/v1/queues/poll/reservations",
                r#"{"wait_seconds": 15, "visibility_seconds": 30}"#,
            )
            .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    w.post(
        "/v1/queues/poll/tasks",
        TASKS,
        json!({"payload": "late"}),
        201,
    )
    .await;
    let polled = tokio::time::timeout(PATIENCE, poll)
        .await
        .expect("the poll answered")
        .expect("join");
    assert_eq!(polled.code(), 200, "{}", polled.text);
    let polled = w.c.check("post", RESERVE, &polled);
    assert_eq!(polled["tasks"][0]["payload"], "late", "{polled}");
}

#[tokio::test]
async fn worker_api_on_the_embedded_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &["--no-scheduler"]);
    worker_api(&gateway).await;
}

#[tokio::test]
async fn worker_api_on_redis() {
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::start_in(dir.path(), &["--redis", &redis.url(), "--no-scheduler"]);
    worker_api(&gateway).await;
}
