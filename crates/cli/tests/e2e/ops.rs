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
    assert_eq!(dead["total"], 3);
    let dead = &dead["dead_letters"];
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

/// The queue controls of issue 16 straight from the backend (`--url`): pause and resume, a rate
/// limit set and removed, the in-flight list with progress, dead letters requeued by REF (exactly
/// those, exit 4 for one no longer dead), and `dlq replay` as a deprecated alias. The worker verbs
/// need a gateway and say so.
#[tokio::test]
async fn queue_controls_and_chosen_dead_letters_over_a_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    let url = format!("sqlite://{}", dir.path().join("switchyard.db").display());
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("fleet");
    for i in 0..3 {
        fleet
            .queue_dead("jobs", format!("{{\"id\": \"d{i}\"}}").as_bytes())
            .await
            .expect("dead");
    }
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--url", &url]);
        run(dir.path(), &all)
    };

    // Pause: changed once, then already paused; the stats and the gateway see it.
    assert_eq!(
        json_of(&cli(&["queue", "pause", "jobs", "--json"])),
        json!({"queue": "jobs", "paused": true, "changed": true})
    );
    assert_eq!(
        json_of(&cli(&["queue", "pause", "jobs", "--json"]))["changed"],
        false
    );
    assert_eq!(http.get("/v1/queues/jobs").await.json()["paused"], true);
    let table = cli(&["queue", "stats", "jobs"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("paused"),
        "{}",
        String::from_utf8_lossy(&table.stdout)
    );
    assert_eq!(
        json_of(&cli(&["queue", "resume", "jobs", "--json"])),
        json!({"queue": "jobs", "paused": false, "changed": true})
    );

    // A rate limit, shown in the stats the command prints, then removed.
    let limited = json_of(&cli(&[
        "queue",
        "rate-limit",
        "jobs",
        "--max",
        "5",
        "--per",
        "2",
        "--json",
    ]));
    assert_eq!(limited["rate_limit"]["max"], 5, "{limited}");
    let off = json_of(&cli(&["queue", "rate-limit", "jobs", "--off", "--json"]));
    assert_eq!(off["rate_limit"], json!(null), "{off}");
    let neither = run(dir.path(), &["queue", "rate-limit", "jobs", "--max", "5"]);
    assert_eq!(neither.status.code(), Some(2), "--max needs --per");

    // Dead letters carry their REF; two of three requeued by REF, exactly those.
    let dead = json_of(&cli(&["queue", "dlq", "ls", "jobs", "--json"]));
    let refs: Vec<String> = dead["dead_letters"]
        .as_array()
        .expect("letters")
        .iter()
        .map(|l| l["ref"].as_str().expect("a ref").to_string())
        .collect();
    assert_eq!(refs.len(), 3);
    let chosen = cli(&[
        "queue", "dlq", "requeue", "jobs", "--ref", &refs[0], "--ref", &refs[2], "--json",
    ]);
    assert_eq!(
        json_of(&chosen),
        json!({"queue": "jobs", "requeued": 2, "missing": []})
    );
    let waiting = json_of(&cli(&["queue", "peek", "jobs", "--json"]));
    assert_eq!(
        waiting
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["id"].clone())
            .collect::<Vec<_>>(),
        vec![json!("d0"), json!("d2")]
    );
    let left = json_of(&cli(&["queue", "dlq", "ls", "jobs", "--json"]));
    let left = &left["dead_letters"];
    assert_eq!(left[0]["id"], "d1");
    assert_eq!(left.as_array().map(Vec::len), Some(1));
    // A letter requeued already is no longer dead: exit 4, and nothing else moves.
    let again = cli(&["queue", "dlq", "requeue", "jobs", "--ref", &refs[0]]);
    assert_eq!(again.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&again.stderr).contains("no longer dead"));
    assert_eq!(fleet.dlq_length("jobs").await.expect("length"), 1);
    let bad = cli(&["queue", "dlq", "requeue", "jobs", "--ref", "not base64!"]);
    assert_eq!(bad.status.code(), Some(2));

    // A reserved task with progress shows in flight (no receipt printed).
    let delivery = fleet
        .queue_reserve(
            "jobs",
            std::time::Duration::ZERO,
            std::time::Duration::from_secs(600),
        )
        .await
        .expect("reserve")
        .expect("a task");
    assert!(
        fleet
            .queue_progress("jobs", &delivery.receipt, br#"{"done": 3}"#)
            .await
            .expect("progress")
    );
    let flying = json_of(&cli(&["queue", "in-flight", "jobs", "--json"]));
    assert_eq!(flying[0]["id"], "d0", "{flying}");
    assert_eq!(flying[0]["progress"], json!({"done": 3}));
    assert!(flying[0].get("receipt").is_none());
    let table = cli(&["queue", "in-flight", "jobs"]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("{\"done\":3}"));

    // The old verb still works, with a deprecation note and its old JSON key.
    let replay = cli(&["queue", "dlq", "replay", "jobs", "--json"]);
    assert_eq!(json_of(&replay), json!({"queue": "jobs", "replayed": 1}));
    assert!(String::from_utf8_lossy(&replay.stderr).contains("deprecated"));

    // The worker verbs speak the gateway only.
    let reserve = run(dir.path(), &["queue", "reserve", "jobs"]);
    assert_eq!(reserve.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&reserve.stderr).contains("--server"));
}

/// `--sqlite` takes a path or any `sqlite:` URL the facade's openers take (`sqlite:///abs`,
/// `sqlite://rel`, `sqlite:rel`, query parameters dropped), for `serve` and the operator
/// commands alike; each form names the same file. An in-memory URL is refused with exit 2.
#[tokio::test]
async fn the_sqlite_flag_takes_a_path_or_a_sqlite_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let abs = dir.path().join("abs.db");
    let abs_url = format!("sqlite://{}", abs.display());
    assert!(abs_url.starts_with("sqlite:///"), "{abs_url}");
    for (flag, run_id) in [
        (abs_url.as_str(), "in-abs"),
        ("sqlite:rel.db?mode=rwc", "in-rel"),
    ] {
        let gw = Gateway::start_in(dir.path(), &["--sqlite", flag, "--no-scheduler"]);
        let started = gw.http().post("/v1/runs", &start_body(run_id, "s")).await;
        assert_eq!(started.code(), 201, "{flag}: {}", started.text);
    }
    assert!(abs.exists() && dir.path().join("rel.db").exists());
    let abs_path = abs.to_str().expect("utf-8").to_string();
    for (flag, run_id) in [
        (abs_url.as_str(), "in-abs"),
        (abs_path.as_str(), "in-abs"),
        ("sqlite:rel.db", "in-rel"),
        ("sqlite://rel.db", "in-rel"),
        ("SQLITE:rel.db", "in-rel"),
        ("rel.db", "in-rel"),
    ] {
        let runs = json_of(&run(
            dir.path(),
            &["--sqlite", flag, "runs", "ls", "--json"],
        ));
        assert!(runs.to_string().contains(run_id), "{flag}: {runs}");
    }
    let memory = run(dir.path(), &["--sqlite", "sqlite::memory:", "runs", "ls"]);
    assert_eq!(memory.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&memory.stderr).contains("memory://"),
        "{}",
        String::from_utf8_lossy(&memory.stderr)
    );
}
