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

/// A schedule's queue follows the name rule of every queue route (1..=512 bytes, no control
/// characters): such documents are refused with 422 naming `queue`. Documents stored earlier
/// straight through the fleet port (another writer, an older gateway) fire nothing and are
/// reported in the log, and a queue already filled under such a name is left out of
/// `GET /v1/queues` (with a warning), so the listing only names queues the routes can reach.
#[tokio::test]
async fn schedule_queues_follow_the_queue_name_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("switchyard.db").display());
    let long = "q".repeat(600);
    let bad = ["nul\0queue", "line\nqueue", "del\u{7f}queue", long.as_str()];
    {
        let fleet = switchyard_kit::open_fleet_backend(&url)
            .await
            .expect("fleet");
        for (i, queue) in bad.iter().enumerate() {
            let doc = json!({"cron": "* * * * * *", "queue": queue, "payload": {"n": i}});
            fleet
                .schedule_put(&format!("bad-{i}"), doc.to_string().as_bytes())
                .await
                .expect("stored without the gateway");
        }
        let good = json!({"cron": "* * * * * *", "queue": "ticks", "payload": {}});
        fleet
            .schedule_put("good", good.to_string().as_bytes())
            .await
            .expect("stored");
        fleet
            .queue_dead("tab\tqueue", b"{\"id\": \"t\"}")
            .await
            .expect("a letter under a name no route accepts");
    }
    let db = dir.path().join("switchyard.db");
    let mut cmd = crate::common::command(dir.path());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--sqlite"])
        .arg(&db)
        .stderr(std::process::Stdio::piped());
    let gateway = Gateway::spawn(cmd);
    let h = gateway.http();

    for queue in bad {
        let body = json!({"cron": "* * * * * *", "queue": queue}).to_string();
        let refused = h
            .request(Method::PUT, "/v1/schedules/again", Some(&body))
            .await;
        assert_eq!(refused.code(), 422, "{queue:?}: {}", refused.text);
        let refused = refused.json();
        assert_eq!(refused["field"], "queue", "{refused}");
        assert_eq!(refused["error"], "invalid_input", "{refused}");
    }
    assert_eq!(h.get("/v1/schedules/again").await.code(), 404);

    // The scheduler's rounds visit every schedule; the good one fires, so the bad ones were seen.
    crate::common::eventually("a tick enqueued on `ticks`", || {
        let h = h.clone();
        async move { h.get("/v1/queues/ticks").await.json()["waiting"].as_u64() >= Some(1) }
    })
    .await;
    let listed = h.get("/v1/queues").await;
    assert_eq!(listed.code(), 200, "{}", listed.text);
    assert_eq!(listed.json(), json!({"queues": ["ticks"]}));
    // Stored documents are still shown as they are, so an operator can find and fix them.
    let all = h.get("/v1/schedules").await.json();
    assert_eq!(all["schedules"].as_array().map(Vec::len), Some(5), "{all}");

    let log = gateway.kill_and_read_stderr();
    for i in 0..bad.len() {
        assert!(
            log.lines()
                .any(|l| l.contains("schedule document is unusable")
                    && l.contains(&format!("bad-{i}"))),
            "bad-{i} reported: {log}"
        );
    }
    assert!(
        log.contains("left out of GET /v1/queues") && log.contains("tab\\tqueue"),
        "the unlisted queue is reported: {log}"
    );
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("fleet");
    assert_eq!(
        fleet.queue_names().await.expect("names"),
        ["tab\tqueue", "ticks"],
        "no bad schedule enqueued anything"
    );
}
