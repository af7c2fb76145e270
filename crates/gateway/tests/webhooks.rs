//! Webhooks (ADR 0395) end to end: a gateway on the memory backends, its webhook worker
//! delivering to a Python receiver on 127.0.0.1 that checks the Standard Webhooks signature
//! with the standard library only. A run's end and a task's ack are delivered signed; a
//! receiver that fails twice is retried with backoff until it takes the message, and the log
//! shows each attempt; private targets, redirects and slow receivers are refused or cut off.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use common::{World, call, reserve, submit};
use serde_json::{Value, json};
use switchyard_gateway::WebhookSettings;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The Python receiver; killed when dropped.
struct Receiver {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    async fn start() -> Receiver {
        let dir = tempfile::tempdir().expect("tempdir");
        let port_file = dir.path().join("port");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/webhook_receiver.py"
        );
        let child = Command::new("python3")
            .arg(script)
            .arg(SECRET)
            .arg(&port_file)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs the receiver");
        let mut receiver = Receiver {
            child,
            base: String::new(),
            _dir: dir,
        };
        for _ in 0..200 {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                receiver.base = format!("http://127.0.0.1:{}", port.trim());
                return receiver;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the receiver did not start");
    }

    async fn received(&self) -> Vec<Value> {
        let body: Value = reqwest::get(format!("{}/received", self.base))
            .await
            .expect("the receiver answers")
            .json()
            .await
            .expect("JSON");
        body.as_array().cloned().unwrap_or_default()
    }

    /// Waits until `n` messages arrived on `path` (10 s at most).
    async fn wait_for(&self, path: &str, n: usize) -> Vec<Value> {
        for _ in 0..200 {
            let got: Vec<Value> = self
                .received()
                .await
                .into_iter()
                .filter(|r| r["path"] == path)
                .collect();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{n} messages on {path} did not arrive");
    }
}

/// A gateway over fresh memory backends.
async fn world_with(settings: WebhookSettings) -> World {
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    world_on(fleet, settings, true).await
}

/// A gateway over `fleet` (and a memory store and bridge of its own), running the webhook
/// worker or not.
async fn world_on(
    fleet: Arc<dyn switchyard_core::fleet::FleetBackend>,
    settings: WebhookSettings,
    worker: bool,
) -> World {
    common::world_over(fleet, r#"["*"]"#, |b| {
        b.maintainer(Some(Duration::from_millis(20)))
            .webhooks(settings)
            .webhook_worker(worker)
    })
    .await
}

fn loopback() -> WebhookSettings {
    WebhookSettings {
        allowed_cidrs: vec!["127.0.0.1/32".into()],
        backoff: Duration::from_millis(100),
        backoff_cap: Duration::from_millis(400),
        timeout: Duration::from_secs(2),
        dispatch_every: Duration::from_millis(20),
        ..WebhookSettings::default()
    }
}

async fn subscribe(w: &World, body: Value) -> Value {
    let (status, created) = call(w, "POST", "/v1/webhooks", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created
}

/// Starts run `run` and ends it `run.completed`.
async fn run_to_the_end(w: &World, run: &str) {
    let (status, body) = call(
        w,
        "POST",
        "/v1/runs",
        Some(
            json!({"run_id": run, "session_id": format!("s-{run}"), "invocable": "helper",
                    "kind_of_invocable": "agent", "input": []}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = call(
        w,
        "POST",
        &format!("/v1/runs/{run}/events?session=s-{run}"),
        Some(json!({"kind": "run.completed", "output": [],
                    "usage": {"input_tokens": 1, "output_tokens": 2, "usd": null}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// The delivery log once it holds `n` attempts (10 s at most).
async fn log_of(w: &World, id: &str, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let (status, log) = call(w, "GET", &format!("/v1/webhooks/{id}/deliveries"), None).await;
        assert_eq!(status, StatusCode::OK, "{log}");
        let rows = log["deliveries"].as_array().cloned().unwrap_or_default();
        if rows.len() >= n {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the log of {id} did not reach {n} attempts");
}

#[tokio::test]
async fn a_run_end_and_an_acked_task_are_delivered_signed() {
    let receiver = Receiver::start().await;
    let w = world_with(loopback()).await;
    let created = subscribe(
        &w,
        json!({"url": format!("{}/ok", receiver.base), "secret": SECRET,
               "events": ["run.completed", "task.completed"], "queues": ["jobs"]}),
    )
    .await;
    assert_eq!(created["secret"], SECRET);
    let id = created["id"].as_str().expect("an id").to_string();
    // The secret is shown once: never in a listing or a read.
    let (_, list) = call(&w, "GET", "/v1/webhooks", None).await;
    assert_eq!(list["webhooks"][0]["id"], id.as_str());
    assert!(!list.to_string().contains("whsec_"), "{list}");
    let (_, one) = call(&w, "GET", &format!("/v1/webhooks/{id}"), None).await;
    assert!(one.get("secret").is_none(), "{one}");
    // A token that does not cover every queue may not manage webhooks.
    let (status, _) = common::call_as(&w, common::A_ONLY, "GET", "/v1/webhooks", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    run_to_the_end(&w, "r1").await;
    let got = receiver.wait_for("/ok", 1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let run = &got[0];
    assert_eq!(run["valid"], true, "{run}");
    assert_eq!(run["content_type"], "application/json");
    assert!(
        run["id"].as_str().is_some_and(|i| i.starts_with("msg_")),
        "{run}"
    );
    assert_eq!(run["body"]["type"], "run.completed");
    assert_eq!(run["body"]["data"]["run_id"], "r1");
    assert_eq!(run["body"]["data"]["session_id"], "s-r1");
    assert_eq!(run["body"]["data"]["payload"]["kind"], "run.completed");

    submit(&w, "jobs", "t-1").await;
    let receipt = reserve(&w, "jobs").await;
    let (status, body) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        Some(json!({"result": {"answer": 42}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let got = receiver.wait_for("/ok", 2).await;
    let task = &got[1];
    assert_eq!(task["valid"], true, "{task}");
    assert_eq!(task["body"]["type"], "task.completed");
    assert_eq!(task["body"]["data"]["queue"], "jobs");
    assert_eq!(task["body"]["data"]["task_id"], "t-1");
    assert_eq!(task["body"]["data"]["result"], json!({"answer": 42}));
    assert_ne!(task["id"], run["id"]);

    let log = log_of(&w, &id, 2).await;
    assert!(
        log.iter()
            .all(|r| r["status"] == 200 && r["delivered"] == true && r["attempt"] == 1),
        "{log:?}"
    );
    // Newest first.
    assert_eq!(log[0]["event"], "task.completed");
    // Exactly the two: nothing more arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().await.len(), 2);

    let (status, gone) = call(&w, "DELETE", &format!("/v1/webhooks/{id}"), None).await;
    assert_eq!(
        (status, gone["deleted"].clone()),
        (StatusCode::OK, json!(true))
    );
    let (status, err) = call(&w, "GET", &format!("/v1/webhooks/{id}"), None).await;
    assert_eq!(
        (status, err["error"].clone()),
        (StatusCode::NOT_FOUND, json!("unknown_webhook")),
        "{err}"
    );
}

#[tokio::test]
async fn a_failing_receiver_is_retried_with_backoff_until_it_takes_the_message() {
    let receiver = Receiver::start().await;
    let w = world_with(loopback()).await;
    let created = subscribe(
        &w,
        json!({"url": format!("{}/flaky", receiver.base), "secret": SECRET, "events": ["run.completed"]}),
    )
    .await;
    let id = created["id"].as_str().expect("an id");
    run_to_the_end(&w, "r2").await;
    let got = receiver.wait_for("/flaky", 3).await;
    assert!(got.iter().all(|r| r["valid"] == true), "{got:?}");
    // One message, tried three times under one id.
    assert!(got.iter().all(|r| r["id"] == got[0]["id"]), "{got:?}");
    let log = log_of(&w, id, 3).await;
    let seen: Vec<(Value, Value, Value)> = log
        .iter()
        .rev()
        .map(|r| {
            (
                r["attempt"].clone(),
                r["status"].clone(),
                r["delivered"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (json!(1), json!(500), json!(false)),
            (json!(2), json!(500), json!(false)),
            (json!(3), json!(200), json!(true)),
        ],
        "{log:?}"
    );
    assert!(log.iter().all(|r| r["latency_ms"].is_u64()), "{log:?}");
    assert!(
        log[2]["error"].as_str().is_some_and(|e| e.contains("500")),
        "{log:?}"
    );
    // The retries waited their backoff: 100 ms, then 200 ms.
    let at = |r: &Value| {
        chrono::DateTime::parse_from_rfc3339(r["at"].as_str().expect("a time")).expect("RFC 3339")
    };
    assert!(
        at(&log[1]) - at(&log[2]) >= chrono::TimeDelta::milliseconds(90),
        "{log:?}"
    );
    assert!(
        at(&log[0]) - at(&log[1]) >= chrono::TimeDelta::milliseconds(190),
        "{log:?}"
    );
}

#[tokio::test]
async fn private_targets_bad_fields_redirects_and_slow_receivers_are_refused() {
    // Without the allowance, loopback and private targets are refused naming `url`.
    let strict = world_with(WebhookSettings::default()).await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.1/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/latest",
        "http://localhost:9/hook",
        "ftp://example.com/hook",
    ] {
        let (status, err) = call(
            &strict,
            "POST",
            "/v1/webhooks",
            Some(json!({"url": url, "events": ["run.completed"]})),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {err}");
        assert_eq!(err["field"], "url", "{url}: {err}");
    }
    for (body, field) in [
        (
            json!({"url": "https://93.184.216.34/", "events": ["run.exploded"]}),
            "events",
        ),
        (
            json!({"url": "https://93.184.216.34/", "events": []}),
            "events",
        ),
        (
            json!({"url": "https://93.184.216.34/", "events": ["task.dead"]}),
            "queues",
        ),
        (
            json!({"url": "https://93.184.216.34/", "events": ["run.failed"], "secret": "nope"}),
            "secret",
        ),
        (json!({"events": ["run.failed"]}), "url"),
    ] {
        let (status, err) = call(&strict, "POST", "/v1/webhooks", Some(body.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {err}");
        assert_eq!(err["field"], field, "{body}: {err}");
    }
    let (status, err) = call(&strict, "GET", "/v1/webhooks/wh_nope/deliveries", None).await;
    assert_eq!(
        (status, err["error"].clone()),
        (StatusCode::NOT_FOUND, json!("unknown_webhook"))
    );

    let receiver = Receiver::start().await;
    let w = world_with(WebhookSettings {
        max_attempts: 2,
        timeout: Duration::from_millis(500),
        ..loopback()
    })
    .await;
    let redirect = subscribe(
        &w,
        json!({"url": format!("{}/redirect", receiver.base), "secret": SECRET, "events": ["run.completed"]}),
    )
    .await;
    let slow = subscribe(
        &w,
        json!({"url": format!("{}/slow", receiver.base), "secret": SECRET, "events": ["run.completed"]}),
    )
    .await;
    run_to_the_end(&w, "r3").await;
    let log = log_of(&w, redirect["id"].as_str().expect("an id"), 2).await;
    assert!(
        log.iter()
            .all(|r| r["status"] == 302 && r["delivered"] == false),
        "{log:?}"
    );
    assert!(
        log[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("redirects are not followed")),
        "{log:?}"
    );
    let log = log_of(&w, slow["id"].as_str().expect("an id"), 2).await;
    assert!(
        log.iter()
            .all(|r| r["status"].is_null() && r["delivered"] == false),
        "{log:?}"
    );
    assert!(
        log[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("timed out")),
        "{log:?}"
    );
    // The redirect was not followed: `/ok` never got a message.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(receiver.received().await.iter().all(|r| r["path"] != "/ok"));
    // After its last attempt the delivery is a dead letter of the internal queue.
    let (status, dead) = call(
        &w,
        "GET",
        "/v1/queues/switchyard.webhooks/dead-letters",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{dead}");
    assert_eq!(
        dead["dead_letters"].as_array().map(Vec::len),
        Some(2),
        "{dead}"
    );
}

/// Acks task `id` of `jobs` through the worker API.
async fn ack_task(w: &World, id: &str) {
    submit(w, "jobs", id).await;
    let receipt = reserve(w, "jobs").await;
    let (status, body) = call(
        w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn task_ends_while_no_worker_runs_are_delivered_once_after_the_restart() {
    let receiver = Receiver::start().await;
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    let first = world_on(fleet.clone(), loopback(), true).await;
    subscribe(
        &first,
        json!({"url": format!("{}/ok", receiver.base), "secret": SECRET,
               "events": ["task.completed"], "queues": ["jobs"]}),
    )
    .await;
    ack_task(&first, "t-1").await;
    receiver.wait_for("/ok", 1).await;
    first.shutdown().await;

    // No gateway delivers meanwhile: the ends wait in the queue's end-event log.
    let idle = world_on(fleet.clone(), loopback(), false).await;
    ack_task(&idle, "t-2").await;
    ack_task(&idle, "t-3").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(receiver.received().await.len(), 1);
    idle.shutdown().await;

    let again = world_on(fleet, loopback(), true).await;
    let got = receiver.wait_for("/ok", 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got_after = receiver.received().await;
    assert_eq!(got_after.len(), 3, "{got_after:?}");
    // Deliveries run side by side, so they may arrive in any order; each arrives once.
    let mut ids: Vec<&str> = got
        .iter()
        .filter_map(|r| r["body"]["data"]["task_id"].as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["t-1", "t-2", "t-3"]);
    assert!(got.iter().all(|r| r["valid"] == true), "{got:?}");
    again.shutdown().await;
}

#[tokio::test]
async fn a_queue_followed_again_starts_at_its_end_not_where_a_deleted_subscription_stopped() {
    let receiver = Receiver::start().await;
    let w = world_with(loopback()).await;
    let body = json!({"url": format!("{}/ok", receiver.base), "secret": SECRET,
                      "events": ["task.completed"], "queues": ["jobs"]});
    let first = subscribe(&w, body.clone()).await;
    let (status, _) = call(
        &w,
        "DELETE",
        &format!("/v1/webhooks/{}", first["id"].as_str().expect("an id")),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // Nobody follows `jobs` now: this end is for no one.
    ack_task(&w, "t-old").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    subscribe(&w, body).await;
    ack_task(&w, "t-new").await;
    receiver.wait_for("/ok", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = receiver.received().await;
    let ids: Vec<&str> = got
        .iter()
        .filter_map(|r| r["body"]["data"]["task_id"].as_str())
        .collect();
    assert_eq!(ids, ["t-new"], "{got:?}");
}

#[tokio::test]
async fn webhooks_work_on_the_sqlite_fleet_too() {
    // Subscriptions, cursors, the delivery log and the delivery queue are all plain fleet
    // calls: the same flow on SQLite, with no adapter code of its own.
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("fleet.db").display());
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("the SQLite fleet");
    let w = world_on(fleet, loopback(), true).await;
    let created = subscribe(
        &w,
        json!({"url": format!("{}/flaky", receiver.base), "secret": SECRET,
               "events": ["run.completed", "task.completed"], "queues": ["jobs"]}),
    )
    .await;
    let id = created["id"].as_str().expect("an id");
    run_to_the_end(&w, "r-sqlite").await;
    ack_task(&w, "t-sqlite").await;
    // Two failures first (the receiver's), then both messages.
    let got = receiver.wait_for("/flaky", 4).await;
    let mut types: Vec<&str> = got
        .iter()
        .skip(2)
        .filter_map(|r| r["body"]["type"].as_str())
        .collect();
    types.sort_unstable();
    assert_eq!(types, ["run.completed", "task.completed"], "{got:?}");
    assert!(got.iter().all(|r| r["valid"] == true), "{got:?}");
    let log = log_of(&w, id, 4).await;
    assert_eq!(
        log.iter().filter(|r| r["delivered"] == true).count(),
        2,
        "{log:?}"
    );
    assert_eq!(
        log.iter().filter(|r| r["status"] == 500).count(),
        2,
        "{log:?}"
    );
}
