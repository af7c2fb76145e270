//! Webhooks through `switchyard serve` (ADR 0395): the default refuses a loopback target; with
//! `[webhooks]` allowing 127.0.0.1 in the config file, a gateway on Redis (and one on
//! PostgreSQL) delivers a run's end
//! and a task's ack to a Python receiver that checks the signature, retrying its two failures.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_conformance::harness::{RedisServer, postgres_url, unique_schema};

use crate::common::{Gateway, Http, eventually, json_of, run, start_body};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The gateway tests' receiver (`webhook_receiver.py`); killed when dropped.
struct Receiver {
    child: Child,
    base: String,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    async fn start(dir: &std::path::Path) -> Receiver {
        let port_file = dir.join("receiver.port");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../gateway/tests/fixtures/webhook_receiver.py"
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
        };
        eventually("the receiver listens", || {
            let ready = std::fs::read_to_string(&port_file).is_ok();
            async move { ready }
        })
        .await;
        let port = std::fs::read_to_string(&port_file).expect("the port");
        receiver.base = format!("http://127.0.0.1:{}", port.trim());
        receiver
    }

    async fn received(&self) -> Vec<Value> {
        Http::new(&self.base)
            .get("/received")
            .await
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

#[tokio::test]
async fn a_gateway_on_redis_delivers_signed_webhooks_as_its_config_allows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(dir.path()).await;

    // The default: a loopback receiver is refused, naming `url`.
    let strict = Gateway::embedded(dir.path(), &["--no-scheduler"]);
    let refused = strict
        .http()
        .post(
            "/v1/webhooks",
            &json!({"url": format!("{}/ok", receiver.base), "events": ["run.completed"]})
                .to_string(),
        )
        .await;
    assert_eq!(refused.code(), 422, "{}", refused.text);
    assert_eq!(refused.json()["field"], "url");
    drop(strict);

    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let url = redis.url();
    delivers_signed(dir.path(), &receiver, &["--redis", &url]).await;
}

#[tokio::test]
async fn a_gateway_on_postgres_delivers_signed_webhooks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(dir.path()).await;
    let url = format!("{}?schema={}", postgres_url(), unique_schema("webhooks"));
    delivers_signed(dir.path(), &receiver, &["--postgres", &url]).await;
}

/// With `[webhooks]` allowing 127.0.0.1, a gateway on `backend` delivers a run's end and a
/// task's ack to a receiver that fails twice first.
async fn delivers_signed(dir: &std::path::Path, receiver: &Receiver, backend: &[&str]) {
    let config = dir.join("switchyard.toml");
    std::fs::write(
        &config,
        "[webhooks]\nallowed_cidrs = [\"127.0.0.1\"]\nbackoff_ms = 50\nbackoff_cap_ms = 100\ntimeout_ms = 2000\n",
    )
    .expect("config");
    let mut args = backend.to_vec();
    args.extend(["--config", config.to_str().expect("path")]);
    let gateway = Gateway::start_in(dir, &args);
    let h = gateway.http();
    let created = h
        .post(
            "/v1/webhooks",
            &json!({"url": format!("{}/flaky", receiver.base), "secret": SECRET,
                    "events": ["run.completed", "task.completed"], "queues": ["jobs"]})
            .to_string(),
        )
        .await;
    assert_eq!(created.code(), 201, "{}", created.text);
    let id = created.json()["id"].as_str().expect("an id").to_string();

    assert_eq!(
        h.post("/v1/runs", &start_body("run-w", "s")).await.code(),
        201
    );
    let ended = h
        .post(
            "/v1/runs/run-w/events?session=s",
            &json!({"kind": "run.completed", "output": [],
                    "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}})
            .to_string(),
        )
        .await;
    assert_eq!(ended.code(), 201, "{}", ended.text);
    let submitted = h
        .post(
            "/v1/queues/jobs/tasks",
            &json!({"id": "t-1", "payload": {"n": 1}}).to_string(),
        )
        .await;
    assert_eq!(submitted.code(), 201, "{}", submitted.text);
    let reserved = h
        .post(
            "/v1/queues/jobs/reservations",
            &json!({"max": 1}).to_string(),
        )
        .await;
    assert_eq!(reserved.code(), 200, "{}", reserved.text);
    let receipt = reserved.json()["tasks"][0]["receipt"]
        .as_str()
        .expect("a task")
        .to_string();
    let acked = h
        .post(
            &format!(
                "/v1/queues/jobs/reservations/{}/ack",
                switchyard_core::keys::quote(&receipt)
            ),
            "{}",
        )
        .await;
    assert_eq!(acked.code(), 200, "{}", acked.text);

    // Two 500s first, then both messages, every one signed.
    eventually("both messages delivered", || async {
        receiver.received().await.len() >= 4
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = receiver.received().await;
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got.iter().all(|r| r["valid"] == true), "{got:?}");
    let mut types: Vec<&str> = got[2..]
        .iter()
        .filter_map(|r| r["body"]["type"].as_str())
        .collect();
    types.sort_unstable();
    assert_eq!(types, ["run.completed", "task.completed"]);
    let log = h.get(&format!("/v1/webhooks/{id}/deliveries")).await.json();
    let rows = log["deliveries"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 4, "{log}");
    assert_eq!(
        rows.iter().filter(|r| r["delivered"] == true).count(),
        2,
        "{log}"
    );
}

#[tokio::test]
async fn the_operator_commands_create_list_show_the_log_of_and_delete_a_webhook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &["--no-scheduler"]);
    let server = gateway.base.clone();
    let created = json_of(&run(
        dir.path(),
        &[
            "webhook",
            "create",
            "https://93.184.216.34/hook",
            "--event",
            "run.failed",
            "--event",
            "task.dead",
            "--queue",
            "jobs",
            "--server",
            &server,
            "--json",
        ],
    ));
    assert!(
        created["secret"]
            .as_str()
            .is_some_and(|s| s.starts_with("whsec_")),
        "{created}"
    );
    let id = created["id"].as_str().expect("an id").to_string();
    let list = json_of(&run(
        dir.path(),
        &["webhook", "ls", "--server", &server, "--json"],
    ));
    assert_eq!(list["webhooks"][0]["id"], id.as_str());
    assert!(!list.to_string().contains("whsec_"), "{list}");
    let table = run(dir.path(), &["webhook", "ls", "--server", &server]);
    assert!(String::from_utf8_lossy(&table.stdout).contains(&id));
    let log = json_of(&run(
        dir.path(),
        &["webhook", "deliveries", &id, "--server", &server, "--json"],
    ));
    assert_eq!(log["deliveries"], json!([]));
    // The default gateway refuses a loopback target; the command says why and fails.
    let refused = run(
        dir.path(),
        &[
            "webhook",
            "create",
            "http://127.0.0.1:9/",
            "--event",
            "run.failed",
            "--server",
            &server,
        ],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not a public address"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let deleted = json_of(&run(
        dir.path(),
        &["webhook", "rm", &id, "--server", &server, "--json"],
    ));
    assert_eq!(deleted["deleted"], true);
    let again = run(dir.path(), &["webhook", "rm", &id, "--server", &server]);
    assert_eq!(again.status.code(), Some(4), "not found");
    // Without a gateway the commands say where to send them.
    let nowhere = run(dir.path(), &["webhook", "ls"]);
    assert!(String::from_utf8_lossy(&nowhere.stderr).contains("--server"));
}
