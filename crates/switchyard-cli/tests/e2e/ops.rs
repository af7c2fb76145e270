//! Operator commands over a backend URL, next to a running gateway.

use serde_json::json;

use crate::common::{Gateway, json_of, run, start_body};

#[tokio::test]
async fn operator_commands_read_and_repair_over_a_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r1", "s1")).await.code(),
        201
    );
    assert_eq!(
        http.post(
            "/v1/queues/jobs/tasks",
            r#"{"payload": {"n": 1}, "id": "t1"}"#
        )
        .await
        .code(),
        201
    );
    let db = dir.path().join("switchyard.db");
    let url = format!("sqlite://{}", db.display());
    // Dead letters and a worker, written straight to the same file.
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("fleet");
    for i in 0..3 {
        fleet
            .queue_dead(
                "jobs",
                format!("{{\"id\": \"d{i}\", \"payload\": {i}}}").as_bytes(),
            )
            .await
            .expect("dead");
    }
    fleet
        .worker_register("crawler", "w1", &json!({"cpu": 4}))
        .await
        .expect("register");

    let runs = json_of(&run(dir.path(), &["runs", "ls", "--json", "--url", &url]));
    assert_eq!(
        runs,
        json!([{"run_id": "r1", "log_key": "s1", "session_id": "s1", "status": "running"}])
    );
    let sqlite = db.to_str().expect("utf-8");
    let show = json_of(&run(
        dir.path(),
        &[
            "runs",
            "show",
            "r1",
            "--session",
            "s1",
            "--json",
            "--sqlite",
            sqlite,
        ],
    ));
    assert_eq!(show["status"], "running");
    assert_eq!(show["events"][0]["kind"], "run.started");
    let missing = run(dir.path(), &["runs", "show", "ghost", "--url", &url]);
    assert_eq!(missing.status.code(), Some(4));

    let stats = json_of(&run(
        dir.path(),
        &["queue", "stats", "jobs", "--json", "--url", &url],
    ));
    assert_eq!(stats["waiting"], 1);
    assert_eq!(stats["tiers"], json!({"high": 0, "normal": 1, "low": 0}));
    assert_eq!(stats["in_flight"], 0);
    assert_eq!(stats["dead_letters"], 3);
    let peek = json_of(&run(
        dir.path(),
        &["queue", "peek", "jobs", "--json", "--url", &url],
    ));
    assert_eq!(peek[0]["id"], "t1");
    let dead = json_of(&run(
        dir.path(),
        &["queue", "dlq", "ls", "jobs", "--json", "--url", &url],
    ));
    assert_eq!(dead.as_array().map(Vec::len), Some(3));
    assert_eq!(dead[0]["id"], "d0");

    let replay = run(
        dir.path(),
        &[
            "queue", "dlq", "replay", "jobs", "--limit", "2", "--json", "--url", &url,
        ],
    );
    assert_eq!(json_of(&replay), json!({"queue": "jobs", "replayed": 2}));
    assert!(String::from_utf8_lossy(&replay.stderr).contains("replayed 2/2"));
    // The gateway sees the repair.
    let after = http.get("/v1/queues/jobs").await.json();
    assert_eq!((&after["waiting"], &after["dead"]), (&json!(3), &json!(1)));

    let workers = json_of(&run(
        dir.path(),
        &["workers", "ls", "--json", "--url", &url],
    ));
    assert_eq!(workers[0]["worker_id"], "w1");
    assert_eq!(workers[0]["automation_type"], "crawler");
    assert_eq!(workers[0]["state"], "IDLE");

    // Tailing needs a shared bridge; the memory one is refused with a hint.
    let tail = run(dir.path(), &["runs", "tail", "r1", "--url", "memory://"]);
    assert!(!tail.status.success());
    assert!(String::from_utf8_lossy(&tail.stderr).contains("redis"));
    // A bad URL is one clear error.
    let bad = run(dir.path(), &["runs", "ls", "--url", "mysql://x"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown scheme"));
}
