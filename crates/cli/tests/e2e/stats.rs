//! Queue counts (`queue stats --json`, the stats route, `/metrics` of watched queues), key
//! prefixes on Redis, and `switchyard bench`.

use std::time::Duration;

use serde_json::json;
use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_kit::core::Priority;

use crate::common::{Gateway, json_of, run, start_body};

const LONG: Duration = Duration::from_secs(3600);
const BRIEF: Duration = Duration::from_millis(1);

#[tokio::test]
async fn queue_stats_json_and_the_gauges_of_a_watched_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("switchyard.db");
    let url = format!("sqlite://{}", db.display());
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("fleet");
    for (body, p) in [
        ("h1", Priority::High),
        ("h2", Priority::High),
        ("h3", Priority::High),
        ("n1", Priority::Normal),
        ("n2", Priority::Normal),
        ("n3", Priority::Normal),
        ("l1", Priority::Low),
    ] {
        fleet
            .queue_push("jobs", body.as_bytes(), p)
            .await
            .expect("push");
    }
    let reserve = |visibility| {
        let fleet = fleet.clone();
        async move {
            fleet
                .queue_reserve("jobs", Duration::ZERO, visibility)
                .await
                .expect("reserve")
                .expect("a task")
        }
    };
    let _held = reserve(LONG).await; // h1: in flight
    let _lapsing = reserve(BRIEF).await; // h2: in flight, overdue once 1 ms has passed
    let later = reserve(LONG).await; // h3: scheduled in an hour
    assert!(
        fleet
            .queue_nack("jobs", &later.receipt, b"h3", LONG)
            .await
            .expect("nack")
    );
    let failed = reserve(LONG).await; // n1: dead
    assert!(
        fleet
            .queue_fail("jobs", &failed.receipt, b"n1")
            .await
            .expect("fail")
    );
    let soon = reserve(LONG).await; // n2: scheduled, due once 1 ms has passed
    assert!(
        fleet
            .queue_nack("jobs", &soon.receipt, b"n2", BRIEF)
            .await
            .expect("nack")
    );
    fleet
        .queue_push("unwatched", b"x", Priority::Normal)
        .await
        .expect("push");
    // Waiting for the 1 ms timers to lapse (a wait, not a timing assertion).
    tokio::time::sleep(Duration::from_millis(100)).await;

    let want = json!({
        "queue": "jobs",
        "waiting": 2,
        "tiers": {"high": 0, "normal": 1, "low": 1},
        "in_flight": 2,
        "overdue": 1,
        "scheduled": 2,
        "due": 1,
        "dead": 1,
        "dead_letters": 1,
        "paused": false,
        "rate_limit": null,
        "throttled_ms": 0,
        // The ends of tasks with records (ADR 0380): these were pushed without.
        "completed": 0,
        "failed": 0,
        "dead_lettered": 0,
        "cancelled": 0,
    });
    let stats = json_of(&run(
        dir.path(),
        &["queue", "stats", "jobs", "--json", "--url", &url],
    ));
    assert_eq!(stats, want);
    let table = run(dir.path(), &["queue", "stats", "jobs", "--url", &url]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("in flight     2  (1 overdue"),
        "table shows every count:\n{text}"
    );

    // A gateway on the same file that never submitted to `jobs` reports it because it watches it.
    // Its queue maintainer is off: it would return the overdue reservation and move the due
    // retry, and the counts of those unmoved tasks are what this checks.
    let gw = Gateway::embedded(
        dir.path(),
        &[
            "--watch-queue",
            "jobs",
            "--watch-queue",
            "idle",
            "--no-maintainer",
        ],
    );
    let http = gw.http();
    assert_eq!(http.get("/v1/queues/jobs").await.json(), want);
    let metrics = http.get("/metrics").await;
    assert_eq!(metrics.code(), 200);
    for line in [
        "# TYPE switchyard_queue_waiting gauge",
        "switchyard_queue_waiting{queue=\"jobs\",tier=\"high\"} 0",
        "switchyard_queue_waiting{queue=\"jobs\",tier=\"normal\"} 1",
        "switchyard_queue_waiting{queue=\"jobs\",tier=\"low\"} 1",
        "switchyard_queue_in_flight{queue=\"jobs\"} 2",
        "switchyard_queue_overdue{queue=\"jobs\"} 1",
        "switchyard_queue_scheduled{queue=\"jobs\"} 2",
        "switchyard_queue_due{queue=\"jobs\"} 1",
        "switchyard_queue_dead{queue=\"jobs\"} 1",
        "switchyard_queue_in_flight{queue=\"idle\"} 0",
        "switchyard_queue_waiting{queue=\"idle\",tier=\"normal\"} 0",
    ] {
        assert!(
            metrics.text.contains(line),
            "missing {line:?} in\n{}",
            metrics.text
        );
    }
    assert!(
        !metrics.text.contains("queue=\"unwatched\""),
        "a queue neither watched nor seen is not reported (no scan)"
    );

    let empty = run(
        dir.path(),
        &["serve", "--watch-queue", "", "--listen", "127.0.0.1:0"],
    );
    assert!(!empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stderr).contains("--watch-queue"));
}

#[tokio::test]
async fn serve_and_operator_commands_use_the_configured_key_prefixes() {
    let url = redis_url();
    let p = unique_prefix("cli");
    let (events, stream, fleet) = (
        format!("{p}:events"),
        format!("{p}:stream"),
        format!("{p}:fleet:"),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::start_in(
        dir.path(),
        &[
            "--redis",
            &url,
            "--event-store-prefix",
            &events,
            "--stream-bridge-prefix",
            &stream,
            "--fleet-prefix",
            &fleet,
        ],
    );
    let http = gw.http();
    let run_id = format!("run-{p}");
    assert_eq!(
        http.post("/v1/runs", &start_body(&run_id, &run_id))
            .await
            .code(),
        201
    );
    assert_eq!(
        http.post("/v1/queues/jobs/tasks", r#"{"payload": 1}"#)
            .await
            .code(),
        201
    );

    // The task is under the fleet prefix, and only there.
    let prefixed = switchyard_kit::open_fleet_backend_prefixed(&url, Some(&fleet))
        .await
        .expect("fleet");
    assert_eq!(prefixed.queue_size("jobs").await.expect("size"), 1);
    let other = switchyard_kit::open_fleet_backend_prefixed(&url, Some(&format!("{p}:else:")))
        .await
        .expect("fleet");
    assert_eq!(other.queue_size("jobs").await.expect("size"), 0);
    let stats = json_of(&run(
        dir.path(),
        &[
            "queue",
            "stats",
            "jobs",
            "--json",
            "--redis",
            &url,
            "--fleet-prefix",
            &fleet,
        ],
    ));
    assert_eq!(stats["tiers"]["normal"], 1);

    // The run is under the event store prefix.
    let show = |prefix: &str| {
        run(
            dir.path(),
            &[
                "runs",
                "show",
                &run_id,
                "--session",
                &run_id,
                "--json",
                "--redis",
                &url,
                "--event-store-prefix",
                prefix,
            ],
        )
    };
    assert_eq!(json_of(&show(&events))["status"], "running");
    assert_eq!(
        show(&format!("{p}:nothing")).status.code(),
        Some(4),
        "not under another prefix"
    );
}

// `switchyard bench` exists with the `bench` feature only; `cargo xtask test` turns it on.
#[cfg(feature = "bench")]
#[test]
fn bench_runs_one_tiny_sqlite_case_and_saves_the_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let db = dir.path().join("db");
    let result = run(
        dir.path(),
        &[
            "bench",
            "--quick",
            "--suite",
            "store-sqlite",
            "--only",
            "append, 1 writer",
            "--case-ms",
            "50",
            "--sqlite-dir",
            db.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ],
    );
    assert!(
        result.status.success(),
        "{:?}: {}",
        result.status,
        String::from_utf8_lossy(&result.stderr)
    );
    let table = String::from_utf8_lossy(&result.stdout);
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    assert!(
        rows.iter().any(|l| l.starts_with("| floor")),
        "the floor row:\n{table}"
    );
    assert!(
        rows.iter()
            .any(|l| l.starts_with("| store") && l.contains("append, 1 writer")),
        "the one case asked for:\n{table}"
    );
    let saved = std::fs::read_to_string(out.join("latest.md")).expect("latest.md");
    assert_eq!(saved.trim_end(), table.trim_end());
    assert!(out.join("latest.json").exists());

    let bad = run(dir.path(), &["bench", "--suite", "store"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown suite"));
}
