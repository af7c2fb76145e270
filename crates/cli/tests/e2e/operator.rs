//! Operator commands through the gateway (`--server` with a token), no database created by a
//! read, `runs tail` on the embedded default, histograms that move, completions and the man page
//! (ADRs 0240–0242).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use serde_json::json;

use switchyard_conformance::harness::{redis_url, unique_prefix};

use crate::common::{Gateway, PATIENCE, command, delta, json_of, run, start_body};
use crate::security::token_entry;

/// `args` with `--server` and `--token-file`, run from `dir`.
fn via(dir: &Path, server: &str, token_file: &Path, args: &[&str]) -> std::process::Output {
    let token = token_file.to_str().expect("utf-8");
    let mut all = vec!["--server", server, "--token-file", token];
    all.extend_from_slice(args);
    run(dir, &all)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn every_operator_command_works_through_a_gateway_with_a_token() {
    let server_dir = tempfile::tempdir().expect("tempdir");
    let (secret, entry) = token_entry(
        server_dir.path(),
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
    let (narrow, narrow_entry) = token_entry(
        server_dir.path(),
        "narrow",
        &["--namespace", "*", "--queue", "jobs-*", "--right", "read"],
    );
    let tokens = server_dir.path().join("tokens.toml");
    std::fs::write(&tokens, format!("{entry}{narrow_entry}")).expect("tokens");
    let gw = Gateway::embedded(
        server_dir.path(),
        &[
            "--auth",
            tokens.to_str().expect("utf-8"),
            "--watch-queue",
            "idle",
        ],
    );
    let http = gw.http().with_token(&secret);
    assert_eq!(
        http.post("/v1/runs", &start_body("r1", "s1")).await.code(),
        201
    );
    let long_id = format!("task-{}", "x".repeat(120));
    for (queue, body) in [
        (
            "jobs-a",
            json!({"payload": {"n": 1}, "id": long_id}).to_string(),
        ),
        ("mail", json!({"payload": {"n": 2}, "id": "m1"}).to_string()),
    ] {
        let path = format!("/v1/queues/{queue}/tasks");
        assert_eq!(http.post(&path, &body).await.code(), 201);
    }
    let fleet = switchyard_kit::open_fleet_backend(&format!(
        "sqlite://{}",
        server_dir.path().join("switchyard.db").display()
    ))
    .await
    .expect("fleet");
    for i in 0..3 {
        fleet
            .queue_dead("jobs-a", format!("{{\"id\": \"d{i}\"}}").as_bytes())
            .await
            .expect("dead");
    }
    fleet
        .worker_register("crawler", "w1", &json!({"cpu": 4}))
        .await
        .expect("register");

    // The operator's machine: an empty directory with a URL and a token file, nothing else.
    let op = tempfile::tempdir().expect("tempdir");
    let token_file = op.path().join("token");
    std::fs::write(&token_file, format!("{secret}\n")).expect("token");
    let base = gw.base.as_str();

    let runs = json_of(&via(
        op.path(),
        base,
        &token_file,
        &["runs", "ls", "--json"],
    ));
    assert_eq!(
        runs,
        json!([{"run_id": "r1", "log_key": "s1", "session_id": "s1", "status": "running"}])
    );
    // The walkthrough's run shows by id alone: its session is found in the run list.
    let show = json_of(&via(
        op.path(),
        base,
        &token_file,
        &["runs", "show", "r1", "--json"],
    ));
    assert_eq!(
        (&show["status"], &show["log_key"]),
        (&json!("running"), &json!("s1"))
    );
    let ghost = via(op.path(), base, &token_file, &["runs", "show", "ghost"]);
    assert_eq!(ghost.status.code(), Some(4), "{}", stderr(&ghost));

    let queues = json_of(&via(
        op.path(),
        base,
        &token_file,
        &["queue", "ls", "--json"],
    ));
    assert_eq!(
        queues,
        json!(["idle", "jobs-a", "mail"]),
        "holding tasks, plus watched"
    );
    let stats = json_of(&via(
        op.path(),
        base,
        &token_file,
        &["queue", "stats", "jobs-a", "--json"],
    ));
    assert_eq!((&stats["waiting"], &stats["dead"]), (&json!(1), &json!(3)));
    // A watched queue is known while empty; a misspelt one is exit 4 naming the known ones.
    let idle = via(op.path(), base, &token_file, &["queue", "stats", "idle"]);
    assert!(idle.status.success(), "{}", stderr(&idle));
    let typo = via(op.path(), base, &token_file, &["queue", "stats", "jobs-b"]);
    assert_eq!(typo.status.code(), Some(4));
    assert!(stderr(&typo).contains("unknown queue \"jobs-b\"") && stderr(&typo).contains("jobs-a"));

    // Ids print raw and whole in the table, without JSON quotes.
    let peek = via(op.path(), base, &token_file, &["queue", "peek", "jobs-a"]);
    assert!(peek.status.success(), "{}", stderr(&peek));
    let row = stdout(&peek).lines().nth(1).expect("a row").to_string();
    assert!(row.starts_with(&format!("{long_id} ")), "{row:?}");
    assert!(
        !stdout(&peek).contains('"') || row.contains("{\"n\":1}"),
        "{row:?}"
    );
    assert!(
        !stdout(&peek).contains('\u{1b}'),
        "no colour off a terminal"
    );

    let dead = json_of(&via(
        op.path(),
        base,
        &token_file,
        &["queue", "dlq", "ls", "jobs-a", "--json"],
    ));
    assert_eq!(dead["dead_letters"].as_array().map(Vec::len), Some(3));
    let replay = via(
        op.path(),
        base,
        &token_file,
        &["queue", "dlq", "replay", "jobs-a", "--limit", "2", "--json"],
    );
    assert_eq!(json_of(&replay), json!({"queue": "jobs-a", "replayed": 2}));
    assert_eq!(fleet.dlq_length("jobs-a").await.expect("length"), 1);
    let workers = json_of(&via(
        op.path(),
        base,
        &token_file,
        &["workers", "ls", "--json"],
    ));
    assert_eq!(workers[0]["worker_id"], "w1");

    // Tokens: none is 5, a narrow one sees its queues only.
    let bare = run(op.path(), &["--server", base, "queue", "ls"]);
    assert_eq!(bare.status.code(), Some(5), "{}", stderr(&bare));
    assert!(stderr(&bare).contains("SWITCHYARD_TOKEN"));
    let narrow_ls = command(op.path())
        .env("SWITCHYARD_TOKEN", &narrow)
        .env("SWITCHYARD_SERVER", base)
        .args(["queue", "ls", "--json"])
        .output()
        .expect("run");
    assert_eq!(json_of(&narrow_ls), json!(["jobs-a"]));
    let missing = via(op.path(), base, &op.path().join("nope"), &["queue", "ls"]);
    assert_eq!(missing.status.code(), Some(4));

    // Nothing was created on the operator's side.
    let left: Vec<_> = std::fs::read_dir(op.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("token")]);
}

#[test]
fn reads_never_create_a_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("elsewhere.db");
    let url = format!("sqlite://{}", missing.display());
    for args in [
        vec!["runs", "ls"],
        vec!["runs", "show", "r1"],
        vec!["queue", "ls"],
        vec!["queue", "stats", "jobs"],
        vec!["queue", "dlq", "replay", "jobs"],
        vec!["workers", "ls", "--url", url.as_str()],
    ] {
        let out = run(dir.path(), &args);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("no database at"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("--server"), "names the way out");
    }
    let left = std::fs::read_dir(dir.path()).expect("read_dir").count();
    assert_eq!(left, 0, "no switchyard.db, -wal or -shm");
}

#[tokio::test]
async fn runs_tail_follows_the_embedded_default_through_its_gateway() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r1", "s1")).await.code(),
        201
    );
    let events = "/v1/runs/r1/events?session=s1";
    assert_eq!(http.post(events, &delta("Hel")).await.code(), 201);
    // No --server: the embedded default's bridge lives in the gateway at `listen`.
    let listen = gw.base.trim_start_matches("http://").to_string();
    let (mut tail, mut lines) = spawn_tail(
        dir.path(),
        &[("SWITCHYARD_LISTEN", &listen)],
        &["r1", "--session", "s1"],
    );
    assert_eq!(next_frame(&mut lines)["event"], "run.started");
    let second = next_frame(&mut lines);
    assert_eq!(
        (&second["event"], &second["data"]["seq"]),
        (&json!("text.delta"), &json!(1))
    );
    assert!(
        second["id"].as_str().is_some_and(|id| !id.is_empty()),
        "with its id"
    );
    assert_eq!(http.post(events, &delta("lo")).await.code(), 201);
    let done = json!({"kind": "run.completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}});
    assert_eq!(http.post(events, &done.to_string()).await.code(), 201);
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(&l.expect("read")).expect("json"))
        .collect();
    let kinds: Vec<&str> = rest.iter().filter_map(|f| f["event"].as_str()).collect();
    assert_eq!(kinds, ["text.delta", "run.completed"]);
    let status = exit_of(&mut tail);
    assert!(status.success(), "exit 0 at the end of the run");
}

/// Spawns `switchyard runs tail … --json` and returns it with its stdout lines.
fn spawn_tail(
    dir: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> (
    std::process::Child,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
) {
    let mut tail = command(dir)
        .envs(env.iter().copied())
        .args(["runs", "tail"])
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tail");
    let lines = BufReader::new(tail.stdout.take().expect("stdout")).lines();
    (tail, lines)
}

fn next_frame(
    lines: &mut std::io::Lines<BufReader<std::process::ChildStdout>>,
) -> serde_json::Value {
    let line = lines.next().expect("a line").expect("read");
    serde_json::from_str(&line).expect("json")
}

/// Waits for the tail to exit (bounded by [`PATIENCE`]).
fn exit_of(tail: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        if let Some(status) = tail.try_wait().expect("wait") {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the tail did not exit"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[tokio::test]
async fn runs_tail_reconnects_across_a_gateway_restart_without_losing_or_repeating() {
    let url = redis_url();
    let p = unique_prefix("tail");
    let (events_prefix, stream_prefix, fleet_prefix) = (
        format!("{p}:events"),
        format!("{p}:stream"),
        format!("{p}:"),
    );
    let args = [
        "--redis",
        url.as_str(),
        "--event-store-prefix",
        events_prefix.as_str(),
        "--stream-bridge-prefix",
        stream_prefix.as_str(),
        "--fleet-prefix",
        fleet_prefix.as_str(),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::start_in(dir.path(), &args);
    let base = gw.base.clone();
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r1", "s1")).await.code(),
        201
    );
    let events = "/v1/runs/r1/events?session=s1";
    assert_eq!(http.post(events, &delta("Hel")).await.code(), 201);
    let (mut tail, mut lines) = spawn_tail(
        dir.path(),
        &[],
        &["--server", &base, "r1", "--session", "s1"],
    );
    assert_eq!(next_frame(&mut lines)["data"]["seq"], 0);
    assert_eq!(next_frame(&mut lines)["data"]["seq"], 1);
    // SIGTERM ends the stream without its `end` frame; a gateway on the same address and Redis
    // takes over, and the tail resumes after the last id it printed.
    assert!(gw.terminate().success());
    let listen = base.trim_start_matches("http://");
    let again = Gateway::start_listening(dir.path(), listen, &args);
    let http = again.http();
    assert_eq!(http.post(events, &delta("lo")).await.code(), 201);
    let done = json!({"kind": "run.completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}});
    assert_eq!(http.post(events, &done.to_string()).await.code(), 201);
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.expect("read")).expect("json"))
        .map(|f| f["data"]["seq"].clone())
        .collect();
    assert_eq!(rest, [json!(2), json!(3)], "each event once, in order");
    assert!(exit_of(&mut tail).success());
}

/// The sample of `name` (exact label set) in an OpenMetrics text, 0 when absent.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().expect("a number"))
}

#[tokio::test]
async fn latency_histograms_move_after_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    let count = "switchyard_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/runs\",status=\"200\"}";
    let calls = "switchyard_backend_call_duration_seconds_count{port=\"event_store\",adapter=\"sqlite\",call=\"list_runs\",outcome=\"ok\"}";
    let before = http.get("/metrics").await;
    assert!(
        before
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/openmetrics-text")),
    );
    assert_eq!(sample(&before.text, count), 0.0);
    for _ in 0..3 {
        assert_eq!(http.get("/v1/runs").await.code(), 200);
    }
    let after = http.get("/metrics").await.text;
    assert_eq!(sample(&after, count), 3.0);
    assert_eq!(sample(&after, calls), 3.0);
    let inf = "switchyard_http_request_duration_seconds_bucket{le=\"+Inf\",method=\"GET\",route=\"/v1/runs\",status=\"200\"}";
    let inf_alt = "switchyard_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/runs\",status=\"200\",le=\"+Inf\"}";
    assert_eq!(sample(&after, inf).max(sample(&after, inf_alt)), 3.0);
    assert!(
        sample(
            &after,
            "switchyard_http_request_duration_seconds_sum{method=\"GET\",route=\"/v1/runs\",status=\"200\"}"
        ) > 0.0
    );
    // An SSE stream's life is counted when it closes.
    assert_eq!(
        http.post("/v1/runs", &start_body("r1", "s1")).await.code(),
        201
    );
    let mut sse = http.sse("/v1/runs/r1/stream?session=s1", None).await;
    sse.take(1).await;
    let open = http.get("/metrics").await.text;
    assert_eq!(sample(&open, "switchyard_sse_subscribers"), 1.0);
    assert_eq!(sample(&open, "switchyard_sse_streams_total"), 1.0);
    drop(sse);
    crate::common::eventually("the stream's lifetime is observed", || async {
        sample(
            &http.get("/metrics").await.text,
            "switchyard_sse_stream_duration_seconds_count",
        ) == 1.0
    })
    .await;
}

#[test]
fn completions_and_the_man_page_come_from_the_command_line_definition() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (shell, marker) in [
        ("bash", "_switchyard()"),
        ("zsh", "#compdef switchyard"),
        ("fish", "complete -c switchyard"),
    ] {
        let out = run(dir.path(), &["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(marker), "{shell}");
        assert!(text.contains("--server") && text.contains("dlq"), "{shell}");
    }
    let man = run(dir.path(), &["man"]);
    assert!(man.status.success());
    let text = stdout(&man);
    assert!(
        text.starts_with(".ie") || text.contains(".TH switchyard"),
        "{text:.200}"
    );
    assert!(text.contains("completions"));
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

/// Issue 16's commands through a gateway: delayed and timed submits, the worker verbs on
/// receipts (reserve, progress, extend, ack, fail with a reason, nack), the in-flight list, dead
/// letters requeued by REF, pause and a rate limit, and schedules stored from a file and stdin.
#[tokio::test]
async fn worker_verbs_submits_and_schedules_through_a_gateway() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let op = tempfile::tempdir().expect("tempdir");
    let base = gw.base.clone();
    let cli = |args: &[&str]| {
        let mut all = vec!["--server", base.as_str()];
        all.extend_from_slice(args);
        run(op.path(), &all)
    };
    let http = gw.http();

    // Submits: now, in an hour, at a past instant (due at once).
    let now = json_of(&cli(&[
        "task",
        "submit",
        "jobs",
        r#"{"n": 1}"#,
        "--id",
        "t1",
        "--json",
    ]));
    assert_eq!(now["id"], "t1");
    let later = cli(&[
        "task",
        "submit",
        "jobs",
        r#"{"n": 2}"#,
        "--id",
        "t2",
        "--delay",
        "3600",
    ]);
    assert!(later.status.success(), "{}", stderr(&later));
    assert!(
        stdout(&later).contains("due in 3600 s"),
        "{}",
        stdout(&later)
    );
    let past = cli(&[
        "task",
        "submit",
        "jobs",
        r#"{"n": 3}"#,
        "--id",
        "t3",
        "--run-at",
        "2000-01-01T00:00:00Z",
    ]);
    assert!(past.status.success(), "{}", stderr(&past));
    let both = run(
        op.path(),
        &[
            "task", "submit", "jobs", "{}", "--delay", "1", "--run-at", "1",
        ],
    );
    assert_eq!(
        both.status.code(),
        Some(2),
        "--delay and --run-at exclude each other"
    );
    let stats = http.get("/v1/queues/jobs").await.json();
    assert_eq!(
        (&stats["waiting"], &stats["scheduled"]),
        (&json!(2), &json!(1))
    );

    // Reserve two, report progress on one, see it in flight, extend, ack; a second ack is refused.
    let tasks = json_of(&cli(&[
        "queue",
        "reserve",
        "jobs",
        "--max",
        "2",
        "--visibility",
        "600",
        "--json",
    ]));
    let ids: Vec<&str> = tasks
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, ["t1", "t3"]);
    let r1 = tasks[0]["receipt"].as_str().expect("receipt").to_string();
    let r3 = tasks[1]["receipt"].as_str().expect("receipt").to_string();
    let progress = cli(&["queue", "progress", "jobs", &r1, r#"{"pct": 50}"#]);
    assert!(progress.status.success(), "{}", stderr(&progress));
    let flying = json_of(&cli(&["queue", "in-flight", "jobs", "--json"]));
    let t1 = flying
        .as_array()
        .expect("list")
        .iter()
        .find(|t| t["id"] == "t1")
        .expect("t1 in flight")
        .clone();
    assert_eq!(t1["progress"], json!({"pct": 50}));
    assert!(
        cli(&["queue", "extend", "jobs", &r1, "--visibility", "900"])
            .status
            .success()
    );
    assert!(cli(&["queue", "ack", "jobs", &r1]).status.success());
    let stale = cli(&["queue", "ack", "jobs", &r1]);
    assert_eq!(stale.status.code(), Some(1));
    assert!(
        stderr(&stale).contains("reserve again"),
        "{}",
        stderr(&stale)
    );

    // Fail with a reason: the dead letter keeps it; requeued by its REF, then nacked back.
    assert!(
        cli(&["queue", "fail", "jobs", &r3, "--reason", "boom"])
            .status
            .success()
    );
    let dead = json_of(&cli(&["queue", "dlq", "ls", "jobs", "--json"]));
    let dead = &dead["dead_letters"];
    assert_eq!(dead[0]["id"], "t3");
    assert_eq!(dead[0]["last_error"]["message"], "boom", "{dead}");
    let reference = dead[0]["ref"].as_str().expect("a ref").to_string();
    assert_eq!(
        json_of(&cli(&[
            "queue", "dlq", "requeue", "jobs", "--ref", &reference, "--json"
        ])),
        json!({"queue": "jobs", "requeued": 1, "missing": []})
    );
    let again = json_of(&cli(&["queue", "reserve", "jobs", "--json"]));
    assert_eq!(again[0]["id"], "t3");
    let receipt = again[0]["receipt"].as_str().expect("receipt").to_string();
    assert!(cli(&["queue", "nack", "jobs", &receipt]).status.success());
    assert_eq!(http.get("/v1/queues/jobs").await.json()["waiting"], 1);

    // Paused: a reserve gets nothing; resumed: it gets the task. A rate limit shows in the stats.
    assert_eq!(
        json_of(&cli(&["queue", "pause", "jobs", "--json"]))["paused"],
        true
    );
    assert_eq!(
        json_of(&cli(&["queue", "reserve", "jobs", "--json"])),
        json!([])
    );
    assert_eq!(
        json_of(&cli(&["queue", "resume", "jobs", "--json"]))["paused"],
        false
    );
    let limited = json_of(&cli(&[
        "queue",
        "rate-limit",
        "jobs",
        "--max",
        "10",
        "--per",
        "60",
        "--json",
    ]));
    assert_eq!(limited["rate_limit"]["max"], 10, "{limited}");
    assert_eq!(
        limited["rate_limit"]["per_seconds"].as_f64(),
        Some(60.0),
        "{limited}"
    );
    let shown = cli(&["queue", "stats", "jobs"]);
    assert!(
        stdout(&shown).contains("rate limit    10 per 60 s"),
        "{}",
        stdout(&shown)
    );
    assert_eq!(
        json_of(&cli(&["queue", "rate-limit", "jobs", "--off", "--json"]))["rate_limit"],
        json!(null)
    );

    // Schedules: put from a file and from stdin, list, get, delete; a second delete is exit 4.
    let spec =
        json!({"cron": "0 0 3 * * *", "timezone": "UTC", "queue": "jobs", "payload": {"k": 1}});
    let file = op.path().join("nightly.json");
    std::fs::write(&file, spec.to_string()).expect("spec");
    let put = cli(&["schedule", "put", "nightly", file.to_str().expect("utf-8")]);
    assert!(put.status.success(), "{}", stderr(&put));
    let mut child = command(op.path())
        .args(["--server", base.as_str(), "schedule", "put", "hourly"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        let hourly =
            json!({"cron": "0 0 * * * *", "timezone": "UTC", "queue": "jobs", "payload": null});
        stdin
            .write_all(hourly.to_string().as_bytes())
            .expect("write");
    }
    let piped = child.wait_with_output().expect("wait");
    assert!(piped.status.success(), "{}", stderr(&piped));
    let listed = json_of(&cli(&["schedule", "ls", "--json"]));
    let names: Vec<&str> = listed
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["hourly", "nightly"]);
    let got = json_of(&cli(&["schedule", "get", "nightly", "--json"]));
    let got = got.get("spec").unwrap_or(&got);
    assert_eq!(got["cron"], "0 0 3 * * *");
    assert!(cli(&["schedule", "rm", "nightly"]).status.success());
    assert_eq!(cli(&["schedule", "rm", "nightly"]).status.code(), Some(4));
    assert_eq!(cli(&["schedule", "get", "nightly"]).status.code(), Some(4));
    let bad = cli(&[
        "schedule",
        "put",
        "broken",
        file.with_extension("missing").to_str().expect("utf-8"),
    ]);
    assert_eq!(bad.status.code(), Some(4));
}

/// `queue dlq ls` says when it shows only part of the letters, prints the attempt each letter
/// died at (its `last_error.attempt`; the envelope's own `attempt` is the count it was submitted
/// with), and its `--json` is the gateway's `{queue, total, dead_letters}`, through a gateway and
/// straight from the backend alike.
#[tokio::test]
async fn dlq_ls_says_how_many_it_shows_and_the_attempt_letters_died_at() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &["--no-scheduler"]);
    let url = format!("sqlite://{}", dir.path().join("switchyard.db").display());
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("fleet");
    for i in 0..28 {
        let letter = json!({"id": format!("d{i:02}"), "payload": {"n": i}, "attempt": 0,
            "max_attempts": 3, "last_error": {"message": "boom", "attempt": 3, "at": 1.0}});
        fleet
            .queue_dead("jobs", letter.to_string().as_bytes())
            .await
            .expect("dead letter");
    }
    fleet
        .queue_dead("old", br#"{"id": "o1", "payload": 1, "attempt": 2}"#)
        .await
        .expect("a letter without last_error");
    let op = tempfile::tempdir().expect("tempdir");
    let base = gw.base.as_str();

    let table = run(op.path(), &["--server", base, "queue", "dlq", "ls", "jobs"]);
    assert!(table.status.success(), "{}", stderr(&table));
    let rows: Vec<String> = stdout(&table).lines().skip(1).map(str::to_string).collect();
    assert_eq!(rows.len(), 20, "{rows:?}");
    for row in &rows {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], "3", "ATTEMPT is the attempt it died at: {row}");
    }
    assert!(
        stderr(&table).contains("showing 20 of 28; --limit N for more"),
        "{}",
        stderr(&table)
    );
    let all = run(
        op.path(),
        &[
            "--server", base, "queue", "dlq", "ls", "jobs", "--limit", "30",
        ],
    );
    assert_eq!(stdout(&all).lines().count(), 29);
    assert!(
        !stderr(&all).contains("showing"),
        "all shown: {}",
        stderr(&all)
    );
    let old = run(op.path(), &["--server", base, "queue", "dlq", "ls", "old"]);
    let row = stdout(&old).lines().nth(1).unwrap_or_default().to_string();
    assert_eq!(row.split_whitespace().nth(1), Some("2"), "{row}");

    let through = json_of(&run(
        op.path(),
        &["--server", base, "queue", "dlq", "ls", "jobs", "--json"],
    ));
    let direct = json_of(&run(
        op.path(),
        &["queue", "dlq", "ls", "jobs", "--json", "--url", &url],
    ));
    let gateway = gw.http().get("/v1/queues/jobs/dead-letters").await.json();
    for shown in [&through, &direct] {
        assert_eq!(shown["queue"], "jobs", "{shown}");
        assert_eq!(shown["total"], 28, "{shown}");
        assert_eq!(shown["dead_letters"].as_array().map(Vec::len), Some(20));
        assert_eq!(shown, &gateway, "the gateway's shape");
    }
}
