//! `switchyard task show|wait|cancel` and `queue retention` (ADR 0380) on the embedded default,
//! through its gateway with a token and straight from its SQLite file: the same answers both ways.

use std::path::Path;

use serde_json::json;

use crate::common::{Gateway, json_of, run};
use crate::security::token_entry;

fn via(dir: &Path, server: &str, token_file: &Path, args: &[&str]) -> std::process::Output {
    let token = token_file.to_str().expect("utf-8");
    let mut all = vec!["--server", server, "--token-file", token];
    all.extend_from_slice(args);
    run(dir, &all)
}

#[tokio::test]
async fn task_commands_through_a_gateway_and_straight_from_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (secret, entry) = token_entry(
        dir.path(),
        "ops",
        &[
            "--namespace",
            "*",
            "--queue",
            "*",
            "--right",
            "read",
            "--right",
            "write",
        ],
    );
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, entry).expect("tokens");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &secret).expect("token file");
    let gw = Gateway::embedded(dir.path(), &["--auth", tokens.to_str().expect("utf-8")]);
    let http = gw.http().with_token(&secret);
    for id in ["t-1", "t-2", "t-3"] {
        let body = json!({"id": id, "payload": {"n": 1}}).to_string();
        assert_eq!(http.post("/v1/queues/jobs/tasks", &body).await.code(), 201);
    }
    let db = format!("sqlite://{}", dir.path().join("switchyard.db").display());
    let (server, tf) = (gw.base.as_str(), token_file.as_path());

    // Show, both ways alike.
    let shown = via(
        dir.path(),
        server,
        tf,
        &["task", "show", "jobs", "t-1", "--json"],
    );
    assert!(shown.status.success(), "{shown:?}");
    let through = json_of(&shown);
    assert_eq!(through["state"], "waiting");
    let direct = json_of(&run(
        dir.path(),
        &["task", "show", "jobs", "t-1", "--json", "--url", &db],
    ));
    assert_eq!(direct["state"], "waiting");
    assert_eq!(direct["submitted_at"], through["submitted_at"]);
    let table = via(dir.path(), server, tf, &["task", "show", "jobs", "t-1"]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("state         waiting"));
    let missing = via(dir.path(), server, tf, &["task", "show", "jobs", "nope"]);
    assert_eq!(missing.status.code(), Some(4), "{missing:?}");
    let missing = run(dir.path(), &["task", "show", "jobs", "nope", "--url", &db]);
    assert_eq!(missing.status.code(), Some(4), "{missing:?}");

    // Wait: a task that does not end is exit 6 with its record.
    let waited = via(
        dir.path(),
        server,
        tf,
        &["task", "wait", "jobs", "t-1", "--timeout", "0.5", "--json"],
    );
    assert_eq!(waited.status.code(), Some(6), "{waited:?}");
    let record: serde_json::Value = serde_json::from_slice(&waited.stdout).expect("the record");
    assert_eq!(record["state"], "waiting");

    // Cancel one through the gateway, one straight from the file, then every waiting one.
    let out = via(
        dir.path(),
        server,
        tf,
        &["task", "cancel", "jobs", "t-1", "--json"],
    );
    assert_eq!(
        json_of(&out),
        json!({"results": [{"id": "t-1", "outcome": "cancelled", "state": "cancelled"}]})
    );
    let out = run(
        dir.path(),
        &[
            "task", "cancel", "jobs", "t-2", "nope", "--json", "--url", &db,
        ],
    );
    let results = json_of(&out)["results"].clone();
    assert_eq!(results[0]["outcome"], "cancelled");
    assert_eq!(results[1]["outcome"], "unknown");
    let out = via(
        dir.path(),
        server,
        tf,
        &["task", "cancel", "jobs", "--all-waiting"],
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("1 scheduled or waiting"),
        "{out:?}"
    );
    let waited = via(
        dir.path(),
        server,
        tf,
        &["task", "wait", "jobs", "t-3", "--json"],
    );
    assert_eq!(waited.status.code(), Some(0), "an ended task: {waited:?}");
    assert_eq!(json_of(&waited)["state"], "cancelled");

    // Retention: read, set one field, read back straight from the file.
    let out = via(
        dir.path(),
        server,
        tf,
        &[
            "queue",
            "retention",
            "jobs",
            "--set",
            "completed.count=5",
            "--json",
        ],
    );
    let r = json_of(&out);
    assert_eq!(r["completed"], json!({"count": 5, "age_seconds": 86400.0}));
    let r = json_of(&run(
        dir.path(),
        &["queue", "retention", "jobs", "--json", "--url", &db],
    ));
    assert_eq!(r["completed"]["count"], 5);
    let bad = via(
        dir.path(),
        server,
        tf,
        &["queue", "retention", "jobs", "--set", "events.count=5"],
    );
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("events.count"),
        "{bad:?}"
    );
    let bad = run(
        dir.path(),
        &["queue", "retention", "jobs", "--set", "dead.count=5"],
    );
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    gw.terminate();
}

/// `queues.max_result_bytes` in the config file (ADR 0384): an ack whose result is over the
/// configured limit is 413 `result_too_large` naming that limit and changes nothing; one under it
/// is stored. The default gateway stores the same large result. Out of bounds, or with the
/// memory fleet, `serve` refuses to start and names the key.
#[tokio::test]
async fn configured_result_limit_is_enforced_and_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, "[queues]\nmax_result_bytes = 2048\n").expect("config");
    let gw = Gateway::embedded(dir.path(), &["--config", config.to_str().expect("utf-8")]);
    let http = gw.http();
    let body = json!({"id": "big", "payload": {"n": 1}}).to_string();
    assert_eq!(http.post("/v1/queues/jobs/tasks", &body).await.code(), 201);
    let reserved = http
        .post("/v1/queues/jobs/reservations", r#"{"max": 1}"#)
        .await
        .json();
    let receipt = reserved["tasks"][0]["receipt"]
        .as_str()
        .expect("a receipt")
        .to_string();
    let ack = format!("/v1/queues/jobs/reservations/{receipt}/ack");
    // 3,000 bytes of JSON: under the default 1 MiB, over the configured 2,048.
    let large = json!({"result": "x".repeat(2998)}).to_string();
    let refused = http.post(&ack, &large).await;
    assert_eq!(refused.code(), 413, "{}", refused.text);
    let answer = refused.json();
    assert_eq!(answer["error"], "result_too_large");
    assert_eq!(answer["limit"], 2048);
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|m| m.contains("2048")),
        "{answer}"
    );
    let task = http.get("/v1/queues/jobs/tasks/big").await.json();
    assert_eq!(task["state"], "running", "the refused ack changed nothing");
    let small = json!({"result": {"rows": 7}}).to_string();
    assert_eq!(http.post(&ack, &small).await.code(), 200);
    let task = http.get("/v1/queues/jobs/tasks/big").await.json();
    assert_eq!(
        (&task["state"], &task["result"]),
        (&json!("completed"), &json!({"rows": 7}))
    );
    gw.terminate();

    // The same large result on a gateway without the key: stored.
    let other = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(other.path(), &[]);
    let http = gw.http();
    assert_eq!(http.post("/v1/queues/jobs/tasks", &body).await.code(), 201);
    let reserved = http
        .post("/v1/queues/jobs/reservations", r#"{"max": 1}"#)
        .await
        .json();
    let receipt = reserved["tasks"][0]["receipt"].as_str().expect("a receipt");
    let done = http
        .post(
            &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
            &large,
        )
        .await;
    assert_eq!(done.code(), 200, "{}", done.text);
    gw.terminate();

    for (text, why) in [
        ("[queues]\nmax_result_bytes = 1000\n", "below 1 KiB"),
        ("[queues]\nmax_result_bytes = 67108865\n", "above 64 MiB"),
        (
            "[urls]\nfleet = \"memory://\"\n[queues]\nmax_result_bytes = 2048\n",
            "the memory fleet",
        ),
    ] {
        std::fs::write(&config, text).expect("config");
        let out = run(
            dir.path(),
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--config",
                config.to_str().expect("utf-8"),
            ],
        );
        assert!(!out.status.success(), "{why}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("queues.max_result_bytes"),
            "{why}: {out:?}"
        );
    }
}
