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
