//! Second messages to a busy session (ADR 0394), from a plain Python client
//! (`fixtures/multitask_client.py`, urllib only, no switchyard library): concurrent `enqueue`
//! claims wait with distinct places and each run starts exactly once, in the order of the
//! places, after the run before it ended; an `interrupt` ends the open run `cancelled`. Checked
//! afterwards from the data, through the gateway's reads.

use std::process::Command;

use chrono::{DateTime, FixedOffset};
use serde_json::Value;

use crate::common::{Gateway, Http, fixture, python};

const WAITERS: usize = 6;

fn ts(event: &Value) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(event["ts"].as_str().expect("ts")).expect("an RFC 3339 ts")
}

/// The events of `run` in session `s`.
async fn events(http: &Http, run: &str) -> Vec<Value> {
    let view = http.get(&format!("/v1/runs/{run}?session=s")).await;
    assert_eq!(view.code(), 200, "{run}: {:?}", view.json());
    view.json()["events"].as_array().expect("events").to_vec()
}

#[tokio::test]
async fn enqueued_runs_start_once_in_order_from_a_plain_python_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &[]);
    let http = gateway.http();
    let out = dir.path().join("seen.json");
    let script = fixture("multitask_client.py");
    let run = Command::new(python())
        .arg(&script)
        .args([
            gateway.base.as_str(),
            "s",
            &WAITERS.to_string(),
            out.to_str().expect("utf-8 path"),
        ])
        .output()
        .expect("run the Python client");
    assert!(
        run.status.success(),
        "the Python client failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let seen: Value =
        serde_json::from_slice(&std::fs::read(&out).expect("its output")).expect("JSON");

    // Distinct places 1..N, and the runs started in the order of their places.
    let places = seen["places"].as_object().expect("places");
    let mut by_place: Vec<(u64, String)> = places
        .iter()
        .map(|(run, p)| (p.as_u64().expect("a place"), run.clone()))
        .collect();
    by_place.sort();
    let numbers: Vec<u64> = by_place.iter().map(|(p, _)| *p).collect();
    assert_eq!(numbers, (1..=WAITERS as u64).collect::<Vec<_>>());
    let in_place_order: Vec<&str> = by_place.iter().map(|(_, r)| r.as_str()).collect();
    let started: Vec<&str> = seen["started_order"]
        .as_array()
        .expect("started_order")
        .iter()
        .map(|r| r.as_str().expect("a run id"))
        .collect();
    assert_eq!(started, in_place_order);

    // From the data: each started once, after the run before it ended.
    let mut previous_end = ts(events(&http, "holder")
        .await
        .last()
        .expect("the holder's end"));
    let mut gaps = Vec::new();
    for run in &in_place_order {
        let evs = events(&http, run).await;
        let starts: Vec<&Value> = evs.iter().filter(|e| e["kind"] == "run.started").collect();
        assert_eq!(starts.len(), 1, "{run} started {} times", starts.len());
        let start = ts(starts[0]);
        assert!(
            start >= previous_end,
            "{run} started at {start} before the run before it ended at {previous_end}"
        );
        gaps.push(
            (start - previous_end)
                .num_microseconds()
                .unwrap_or(i64::MAX),
        );
        let end = evs.last().expect("an end");
        assert_eq!(end["kind"], "run.completed", "{run}: {end}");
        previous_end = ts(end);
    }
    gaps.sort();
    println!(
        "hand-off (previous run's end → next run's start, store clock): p50 {} µs, max {} µs",
        gaps[gaps.len() / 2],
        gaps[gaps.len() - 1]
    );

    // The interrupt ended the open run, whose worker is then refused.
    let interrupt = &seen["interrupt"];
    assert_eq!(
        interrupt["ended"],
        serde_json::json!(["last"]),
        "{interrupt}"
    );
    let last = events(&http, "last").await;
    let end = last.last().expect("its end");
    assert_eq!(end["kind"], "run.cancelled");
    assert_eq!(end["payload"]["reason"], "interrupted by run boss");
    assert_eq!(seen["late_end"][0], 409, "{}", seen["late_end"]);
    assert_eq!(seen["late_end"][1]["error"], "run_finished");
}

/// The operator commands over a gateway: `runs line` lists the waiting runs, `runs cancel` takes
/// a waiting run out of the line and ends an open one (grace 0).
#[tokio::test]
async fn operators_list_the_line_and_cancel_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &[]);
    let http = gateway.http();
    let start = |run: &str, strategy: &str| {
        serde_json::json!({
            "run_id": run, "session_id": "s", "invocable": "helper",
            "kind_of_invocable": "agent", "input": [], "multitask_strategy": strategy,
        })
        .to_string()
    };
    assert_eq!(
        http.post("/v1/runs", &start("holder", "reject"))
            .await
            .code(),
        201
    );
    for run in ["w1", "w2"] {
        assert_eq!(
            http.post("/v1/runs", &start(run, "enqueue")).await.code(),
            202
        );
    }
    let base = gateway.base.as_str();
    let line = crate::common::json_of(&crate::common::run(
        dir.path(),
        &["--server", base, "runs", "line", "s", "--json"],
    ));
    let waiting: Vec<(&str, u64)> = line["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            (
                r["run_id"].as_str().expect("run_id"),
                r["position"].as_u64().expect("position"),
            )
        })
        .collect();
    assert_eq!(waiting, [("w1", 1), ("w2", 2)]);

    let out = crate::common::run(
        dir.path(),
        &["--server", base, "runs", "cancel", "w1", "--session", "s"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("will not start"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let ended = crate::common::json_of(&crate::common::run(
        dir.path(),
        &[
            "--server",
            base,
            "runs",
            "cancel",
            "holder",
            "--session",
            "s",
            "--grace",
            "0",
            "--reason",
            "maintenance",
            "--json",
        ],
    ));
    assert_eq!(ended["outcome"], "ended", "{ended}");
    // The end handed the session to the run still waiting.
    let w2 = http.get("/v1/runs/w2?session=s").await;
    assert_eq!(w2.json()["status"], "running", "{:?}", w2.json());
    let line = crate::common::json_of(&crate::common::run(
        dir.path(),
        &["--server", base, "runs", "line", "s", "--json"],
    ));
    assert_eq!(line["runs"], serde_json::json!([]));
}
