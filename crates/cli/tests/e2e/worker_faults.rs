//! The fault scenario of HTTP workers (ADR 0352; the fault suite's rule, ADR 0120): plain
//! Python workers (`fixtures/http_worker.py`, urllib only, no switchyard library) ack, nack,
//! fail and overrun tasks while the test SIGKILLs them mid-task and starts new ones. Afterwards,
//! read from the data through a fresh gateway: every task ended exactly once, acked or
//! dead-lettered; none is left waiting, in flight or scheduled; none was confirmed acked twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use switchyard_conformance::harness::RedisServer;

use crate::common::{Gateway, Http, python};

const TASKS: usize = 200;
const WORKERS: usize = 4;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/fixtures/http_worker.py")
}

fn worker(python: &str, base: &str, log: &Path, seed: usize, drain: bool) -> Child {
    let mut cmd = Command::new(python);
    cmd.arg(script())
        .args([
            base,
            "faults",
            log.to_str().expect("utf-8"),
            &seed.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if drain {
        cmd.arg("--drain");
    }
    cmd.spawn().expect("start a python worker")
}

/// What the workers' logs say happened to each task.
#[derive(Debug, Default)]
struct Seen {
    acked: BTreeMap<String, u32>,
    failed: BTreeMap<String, u32>,
    nacked_dead: BTreeMap<String, u32>,
    /// Ends sent whose answer the kill cut off: unknown outcome.
    unknown: BTreeSet<String>,
    deliveries: usize,
}

fn read_logs(dir: &Path) -> Seen {
    let mut seen = Seen::default();
    for entry in std::fs::read_dir(dir).expect("logs") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("log");
        let mut pending: Option<String> = None;
        for line in text.lines() {
            let mut parts = line.split(' ');
            let (Some(what), Some(id)) = (parts.next(), parts.next()) else {
                continue; // a line cut by the kill
            };
            let id = id.to_string();
            match what {
                "ack?" | "fail?" | "nack?" => pending = Some(id),
                "acked" => {
                    *seen.acked.entry(id).or_default() += 1;
                    pending = None;
                }
                "failed" => {
                    *seen.failed.entry(id).or_default() += 1;
                    pending = None;
                }
                "nacked" => {
                    if parts.next() == Some("1") {
                        *seen.nacked_dead.entry(id).or_default() += 1;
                    }
                    pending = None;
                }
                "lost" => pending = None,
                "got" => seen.deliveries += 1,
                _ => {}
            }
        }
        // The process died between sending an end and reading its answer.
        if let Some(id) = pending {
            seen.unknown.insert(id);
        }
    }
    seen
}

#[tokio::test]
async fn http_workers_killed_mid_task_end_every_task_exactly_once() {
    let python = python();
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::start_in(
        dir.path(),
        &[
            "--redis",
            &redis.url(),
            "--maintain-every-ms",
            "200",
            "--no-scheduler",
        ],
    );
    let h = gateway.http();
    let mut ids = BTreeSet::new();
    for i in 0..TASKS {
        let id = format!("f-{i}");
        let body = json!({"payload": i, "id": id, "max_attempts": 3});
        let resp = h.post("/v1/queues/faults/tasks", &body.to_string()).await;
        assert_eq!(resp.code(), 201, "{}", resp.text);
        ids.insert(id);
    }

    // Faults: every 250 ms one worker is SIGKILLed and a new one started, for 6 s.
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let log = |n: usize| logs.join(format!("w{n}.log"));
    let mut next = 0usize;
    let mut running: Vec<Child> = (0..WORKERS)
        .map(|_| {
            next += 1;
            worker(&python, &gateway.base, &log(next), next, false)
        })
        .collect();
    let mut kills = 0;
    let faults_end = Instant::now() + Duration::from_secs(6);
    while Instant::now() < faults_end {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let victim = next % running.len();
        let _ = running[victim].kill();
        let _ = running[victim].wait();
        kills += 1;
        next += 1;
        running[victim] = worker(&python, &gateway.base, &log(next), next, false);
    }
    for mut w in running {
        let _ = w.kill();
        let _ = w.wait();
        kills += 1;
    }

    // Drain with workers that ack everything, until the queue holds nothing.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let drains: Vec<Child> = (0..2)
            .map(|_| {
                next += 1;
                worker(&python, &gateway.base, &log(next), next, true)
            })
            .collect();
        for mut d in drains {
            let _ = d.wait();
        }
        let s = h.get("/v1/queues/faults").await.json();
        let open: u64 = ["waiting", "in_flight", "scheduled"]
            .iter()
            .map(|k| s[*k].as_u64().unwrap_or(0))
            .sum();
        if open == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "tasks never drained: {s}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    drop(gateway);

    // Read the outcome from the data through a fresh gateway that maintains nothing.
    let fresh = Gateway::start_in(
        dir.path(),
        &["--redis", &redis.url(), "--no-maintainer", "--no-scheduler"],
    );
    let h: Http = fresh.http();
    let s = h.get("/v1/queues/faults").await.json();
    assert_eq!(s["waiting"], 0, "{s}");
    assert_eq!(s["in_flight"], 0, "{s}");
    assert_eq!(s["scheduled"], 0, "{s}");
    let dead = h
        .get("/v1/queues/faults/dead-letters?limit=1000")
        .await
        .json();
    let mut dead_count: BTreeMap<String, u32> = BTreeMap::new();
    for d in dead["dead_letters"].as_array().expect("dead letters") {
        *dead_count
            .entry(d["id"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    let seen = read_logs(&logs);
    eprintln!(
        "http worker faults: {kills} workers killed, {} deliveries, {} acked, {} dead-lettered \
         ({} failed by workers, {} at a nack of the last attempt), {} ends of unknown outcome",
        seen.deliveries,
        seen.acked.len(),
        dead_count.len(),
        seen.failed.len(),
        seen.nacked_dead.len(),
        seen.unknown.len()
    );
    assert!(kills >= 10, "the faults happened: {kills} kills");

    let twice: Vec<_> = seen.acked.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "confirmed acked twice: {twice:?}");
    let dead_twice: Vec<_> = dead_count.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dead_twice.is_empty(), "dead-lettered twice: {dead_twice:?}");
    let both: Vec<_> = seen
        .acked
        .keys()
        .filter(|id| dead_count.contains_key(*id))
        .collect();
    assert!(both.is_empty(), "acked and dead-lettered: {both:?}");
    // A confirmed fail, or a nack that said it dead-lettered, is in the dead letters.
    let missing_dead: Vec<_> = seen
        .failed
        .keys()
        .chain(seen.nacked_dead.keys())
        .filter(|id| !dead_count.contains_key(*id))
        .collect();
    assert!(
        missing_dead.is_empty(),
        "confirmed dead but not in the dead letters: {missing_dead:?}"
    );
    let unknown_ids: Vec<_> = dead_count.keys().filter(|id| !ids.contains(*id)).collect();
    assert!(
        unknown_ids.is_empty(),
        "dead letters of no task: {unknown_ids:?}"
    );
    // Every task ended: acked (confirmed), dead-lettered, or acked by a worker killed before it
    // read the answer (the only end the data cannot show).
    let lost: Vec<_> = ids
        .iter()
        .filter(|id| {
            !seen.acked.contains_key(*id)
                && !dead_count.contains_key(*id)
                && !seen.unknown.contains(*id)
        })
        .collect();
    assert!(lost.is_empty(), "tasks that never ended: {lost:?}");
}
