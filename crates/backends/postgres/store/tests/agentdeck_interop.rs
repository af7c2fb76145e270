//! agentdeck 3.1.0's own `PostgresEventStore` (the real package, in a venv under the target
//! directory, made on first use and reused) and this store on one schema (ADR 0377): each reads
//! what the other wrote, field for field and byte for byte once both have read it back; claims
//! from both languages on one session have exactly one winner; appenders from both languages to
//! one run get dense seqs. `tests/fixtures/agentdeck/drive.py` is the Python side.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use switchyard_conformance::harness::{
    postgres_url, python_312, python_venv, unique_id, unique_schema,
};
use switchyard_core::event::{
    Block, Custom, InterruptReason, InvocableKind, MessageText, Payload, RunCompleted,
    RunInterrupted, RunStarted, ToolCallCompleted, Usage,
};
use switchyard_core::{Event, EventStore, RunContext, RunStatus};
use switchyard_store_postgres::{PostgresEventStore, PostgresOptions};

const HOUR: Duration = Duration::from_secs(3600);

/// The venv's Python with agentdeck-sdk 3.1.0 and psycopg, made on first use and reused.
fn agentdeck_python() -> PathBuf {
    static MADE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(py) = made.as_ref() {
        return py.clone();
    }
    // agentdeck 3.1.0 has no `postgres` extra (its psycopg comes with `durability`, along with
    // LangGraph's checkpointers): psycopg is named on its own.
    let py = python_venv(
        "agentdeck-venv",
        &python_312(
            "this test runs agentdeck 3.1.0's own PostgresEventStore, which needs Python 3.12 or newer",
        ),
        &["agentdeck-sdk==3.1.0", "psycopg[binary]>=3.2"],
        "import psycopg, importlib.metadata as m; \
         from agentdeck.adapters.stores.postgres import PostgresEventStore; \
         assert m.version('agentdeck-sdk') == '3.1.0'",
    );
    *made = Some(py.clone());
    py
}

fn drive_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentdeck/drive.py")
}

/// Runs `drive.py URL SCHEMA args…` to its end; the JSON line it prints.
async fn drive(schema: &str, args: &[&str]) -> Value {
    let mut command = Command::new(agentdeck_python());
    command
        .arg(drive_py())
        .args([postgres_url().as_str(), schema])
        .args(args);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("run drive.py");
    assert!(
        out.status.success(),
        "drive.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(out.stdout.trim_ascii()).expect("drive.py prints one JSON line")
}

/// A `drive.py` that runs in step with us: it says `ready`, we say `go`.
struct Stepped {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Stepped {
    fn spawn(schema: &str, args: &[&str]) -> Self {
        let mut child = Command::new(agentdeck_python())
            .arg(drive_py())
            .args([postgres_url().as_str(), schema])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn drive.py");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Stepped {
            child,
            stdin,
            stdout,
        }
    }

    fn line(&mut self) -> Value {
        let mut line = String::new();
        tokio::task::block_in_place(|| self.stdout.read_line(&mut line)).expect("read drive.py");
        assert!(
            !line.is_empty(),
            "drive.py ended early (its stderr is above)"
        );
        serde_json::from_str(&line).expect("drive.py prints JSON lines")
    }

    /// Waits for `ready`, tells it to start in a moment, and sleeps until that moment: both
    /// sides then start at the same instant of the wall clock.
    async fn go(&mut self) {
        assert_eq!(self.line(), Value::from("ready"));
        let at = SystemTime::now() + Duration::from_millis(300);
        let epoch_ms = at.duration_since(UNIX_EPOCH).expect("clock").as_millis();
        writeln!(self.stdin, "go {epoch_ms}").expect("write go");
        self.stdin.flush().expect("flush go");
        let wait = at.duration_since(SystemTime::now()).unwrap_or_default();
        tokio::time::sleep(wait).await;
    }

    fn finish(mut self) {
        let status = tokio::task::block_in_place(|| self.child.wait()).expect("wait drive.py");
        assert!(status.success(), "drive.py failed");
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a JSON string").to_owned())
        .collect()
}

fn json_value(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON")
}

async fn store(schema: &str) -> PostgresEventStore {
    PostgresEventStore::open_with(
        &postgres_url(),
        PostgresOptions::default()
            .schema(schema)
            .max_connections(32)
            // 250 appenders share 32 connections, and each connection's append waits behind
            // every writer of the log, agentdeck's included: on a loaded machine a caller can
            // wait longer than the default 10 s for a connection, which is the pool's limit, not
            // the store's.
            .acquire_timeout(Duration::from_secs(120)),
    )
    .await
    .expect("open")
}

fn opening() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi ✓")],
    }
}

/// agentdeck writes first (it creates the schema; we migrate it in place and fold its runs), then
/// we read: every event has the values agentdeck wrote, the status and the listing are its fold,
/// and our rendering of each event is byte for byte agentdeck's rendering of what it reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_writes_and_rust_reads() {
    let schema = unique_schema("py_writes");
    let ctx = RunContext::new(unique_id("run"))
        .with_session("s ✓ \"1\"")
        .with_namespace("acme/ü")
        .expect("ctx");
    let (ns, session, run) = (ctx.namespace_key(), ctx.log_key(), ctx.run_id());
    let written = drive(&schema, &["write", ns, session, run]).await;
    let appended = strings(&written["appended"]);
    assert_eq!(appended.len(), 7);

    let store = store(&schema).await;
    let ours = store.read_run(&ctx, 0).await.expect("read_run");
    assert_eq!(
        ours.iter()
            .map(|e| json_value(&e.to_json()))
            .collect::<Vec<_>>(),
        appended.iter().map(|e| json_value(e)).collect::<Vec<_>>(),
        "every field of every event, as agentdeck wrote it"
    );
    assert_eq!(
        ours.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (0..7).collect::<Vec<u64>>()
    );
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Completed
    );

    let theirs = drive(&schema, &["read", ns, session, run]).await;
    let ours_json: Vec<String> = ours.iter().map(Event::to_json).collect();
    assert_eq!(
        strings(&theirs["run"]),
        ours_json,
        "read_run, byte for byte"
    );
    let log: Vec<String> = store
        .read(&ctx, 0, None)
        .await
        .expect("read")
        .iter()
        .map(Event::to_json)
        .collect();
    assert_eq!(strings(&theirs["log"]), log, "read, byte for byte");
    assert_eq!(theirs["status"], "completed");
    let listed: Vec<Value> = store
        .list_runs(&ctx, None)
        .await
        .expect("list_runs")
        .into_iter()
        .map(|r| serde_json::json!([r.log_key, r.run_id, r.status.as_str()]))
        .collect();
    assert_eq!(theirs["runs"], Value::Array(listed));

    // The session is free (agentdeck's run completed): our claim wins, and agentdeck sees it.
    let next = RunContext::new(unique_id("next"))
        .with_session(session)
        .with_namespace(ns)
        .expect("ctx");
    let (claim, started) = store
        .claim_start(&next, opening(), "helper", HOUR)
        .await
        .expect("claim");
    assert!(claim.won() && started.is_some(), "{claim:?}");
    let theirs = drive(&schema, &["read", ns, session, next.run_id()]).await;
    assert_eq!(theirs["status"], "running");
    assert_eq!(
        strings(&theirs["run"]),
        vec![started.expect("event").to_json()]
    );
}

/// We write first (our migration creates the schema; agentdeck's own DDL then finds it), agentdeck
/// resumes our interrupted run (our status sees its write), and agentdeck's reading of every event
/// is byte for byte ours, and value for value what we appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_writes_and_python_reads() {
    let schema = unique_schema("rs_writes");
    let store = store(&schema).await;
    let ctx = RunContext::new(unique_id("run")).with_session(unique_id("s"));
    let (ns, session, run) = (ctx.namespace_key(), ctx.log_key(), ctx.run_id());
    let (claim, started) = store
        .claim_start(&ctx, opening(), "helper", HOUR)
        .await
        .expect("claim");
    assert!(claim.won());
    let mut appended = vec![started.expect("event")];
    let data = serde_json::json!({"zeta": 1, "a": [1, 2.5, null, true, "x"], "nested": {"bb": "x", "a": {}}});
    appended.extend(
        store
            .append(
                &ctx,
                vec![
                    Payload::TextDelta(MessageText {
                        message_id: "m1".into(),
                        text: "héllo \"wörld\"\n\u{1} ✓".into(),
                    }),
                    Payload::Custom(Custom {
                        name: "test.tick".into(),
                        data: serde_json::from_value(data).expect("object"),
                    }),
                    Payload::ToolCallCompleted(ToolCallCompleted {
                        call_id: "c1".into(),
                        tool: "search".into(),
                        result_preview: "ok".into(),
                        result_size: 2,
                        result_sha256: "a".repeat(64),
                        artifact_id: None,
                        error: None,
                    }),
                    Payload::RunInterrupted(RunInterrupted {
                        interrupt_id: "i1".into(),
                        reason: InterruptReason::Human,
                        payload: serde_json::from_value(serde_json::json!({"question": "ok?"}))
                            .expect("object"),
                        thread_id: None,
                        expected_resume: None,
                    }),
                ],
                "helper",
            )
            .await
            .expect("append"),
    );
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::WaitingHuman
    );

    let resumed = drive(&schema, &["resume", ns, session, run]).await;
    let resumed = resumed["event"]
        .as_str()
        .expect("agentdeck resumes our run");
    assert_eq!(json_value(resumed)["seq"], 5);
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Running,
        "agentdeck's write moved our status (the trigger)"
    );
    let done = store
        .append(
            &ctx,
            vec![Payload::RunCompleted(RunCompleted {
                output: vec![Block::text("done")],
                usage: Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    usd: Some(0.25),
                },
            })],
            "helper",
        )
        .await
        .expect("complete");
    assert_eq!(done[0].seq, 6);

    let theirs = drive(&schema, &["read", ns, session, run]).await;
    let theirs_run = strings(&theirs["run"]);
    let ours: Vec<String> = store
        .read_run(&ctx, 0)
        .await
        .expect("read_run")
        .iter()
        .map(Event::to_json)
        .collect();
    assert_eq!(theirs_run, ours, "read_run, byte for byte");
    let expected: Vec<Value> = appended
        .iter()
        .map(|e| json_value(&e.to_json()))
        .chain([json_value(resumed), json_value(&done[0].to_json())])
        .collect();
    assert_eq!(
        theirs_run.iter().map(|e| json_value(e)).collect::<Vec<_>>(),
        expected,
        "every field of every event, as we appended it"
    );
    assert_eq!(theirs["status"], "completed");
    assert_eq!(
        theirs["runs"],
        serde_json::json!([[session, run, "completed"]])
    );
}

/// 20 rounds, each on a fresh session: 4 claims from agentdeck (4 stores, 4 connections) and 4 of
/// ours start together; exactly one wins, and every other names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_across_languages_have_one_winner_per_round() {
    const ROUNDS: usize = 20;
    const CONTENDERS: usize = 4;
    let schema = unique_schema("claims");
    let store = Arc::new(store(&schema).await);
    let prefix = unique_id("race");
    let mut python = Stepped::spawn(
        &schema,
        &[
            "claims",
            "",
            &prefix,
            &ROUNDS.to_string(),
            &CONTENDERS.to_string(),
        ],
    );
    let mut wins = [0_usize; 2];
    for round in 0..ROUNDS {
        let session = format!("{prefix}-{round}");
        python.go().await;
        let ours: Vec<_> = (0..CONTENDERS)
            .map(|c| {
                let store = store.clone();
                let ctx = RunContext::new(format!("rs-{round}-{c}")).with_session(&session);
                tokio::spawn(async move {
                    let claim = store.claim_start(&ctx, opening(), "helper", HOUR).await;
                    (ctx.run_id().to_owned(), claim)
                })
            })
            .collect();
        let mut winners = Vec::new();
        let mut holders = Vec::new();
        for task in ours {
            let (run, claim) = task.await.expect("task");
            let (claim, event) = claim.expect("no errors on our side");
            match claim.held_by {
                None => {
                    assert!(event.is_some());
                    winners.push(run);
                    wins[0] += 1;
                }
                Some(holder) => holders.push(holder),
            }
        }
        let theirs = python.line();
        assert_eq!(theirs["errors"], serde_json::json!([]), "round {round}");
        for run in strings(&theirs["won"]) {
            winners.push(run);
            wins[1] += 1;
        }
        holders.extend(strings(&theirs["held"]));
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert!(
            holders.iter().all(|h| *h == winners[0]),
            "round {round}: every loser names {}: {holders:?}",
            winners[0]
        );
        let ctx = RunContext::new(winners[0].clone()).with_session(&session);
        assert_eq!(store.read(&ctx, 0, None).await.expect("read").len(), 1);
    }
    python.finish();
    eprintln!("wins: ours {}, agentdeck's {}", wins[0], wins[1]);
}

/// 250 appenders of agentdeck's (each its own store and connection) and 250 of ours (a pool of
/// 32) append to one run at once, 4 appends each (so that the two sides overlap: one append each
/// is over before the other language's first reaches the lock): ours all succeed, and the run's
/// seqs are 0..N, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appenders_from_both_languages_get_dense_seqs() {
    const EACH: usize = 250;
    const TIMES: usize = 4;
    let schema = unique_schema("dense");
    let store = Arc::new(store(&schema).await);
    let ctx = RunContext::new(unique_id("run")).with_session(unique_id("s"));
    let mut python = Stepped::spawn(
        &schema,
        &[
            "appends",
            "",
            ctx.log_key(),
            ctx.run_id(),
            &EACH.to_string(),
            &TIMES.to_string(),
        ],
    );
    python.go().await;
    // Ours start once agentdeck's first append is stored: on a loaded machine the Python
    // process can take longer to start writing than our grouped appends take to finish, and
    // then nothing ran at once (the interleaving is checked below).
    let started = std::time::Instant::now();
    while !store
        .read_run(&ctx, 0)
        .await
        .expect("read_run")
        .iter()
        .any(|e| e.origin == "python")
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "agentdeck stored nothing within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let ours: Vec<_> = (0..EACH)
        .map(|i| {
            let (store, ctx) = (store.clone(), ctx.clone());
            tokio::spawn(async move {
                let mut events = Vec::new();
                for k in 0..TIMES {
                    let payload = Payload::TextDelta(MessageText {
                        message_id: "m".into(),
                        text: format!("rs {i}.{k}"),
                    });
                    events.extend(store.append(&ctx, vec![payload], "rust").await?);
                }
                Ok::<_, switchyard_core::Error>(events)
            })
        })
        .collect();
    let mut seqs = Vec::new();
    let mut errors = Vec::new();
    for task in ours {
        match task.await.expect("task") {
            Ok(events) => seqs.extend(events.iter().map(|e| e.seq)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    let theirs = python.line();
    python.finish();
    assert_eq!(errors, Vec::<String>::new(), "no errors on our side");
    let their_errors = theirs["errors"].as_array().map_or(0, Vec::len);
    assert_eq!(theirs["errors"], serde_json::json!([]), "agentdeck's side");
    seqs.extend(
        theirs["seqs"]
            .as_array()
            .expect("seqs")
            .iter()
            .map(|s| s.as_u64().expect("seq")),
    );
    seqs.sort_unstable();
    let total = 2 * EACH * TIMES - their_errors;
    assert_eq!(seqs, (0..total as u64).collect::<Vec<_>>());
    let stored = store.read_run(&ctx, 0).await.expect("read_run");
    assert_eq!(
        stored.iter().map(|e| e.seq).collect::<Vec<_>>(),
        seqs,
        "stored once each, in seq order"
    );
    // The two languages' appends really ran at once: their events interleave. Our concurrent
    // appends of one log go in groups under one lock (ADR 0386), so ours land in blocks between
    // agentdeck's single appends: three switches (a block of each side between blocks of the
    // other) already need both sides writing during each other's span.
    let switches = stored
        .windows(2)
        .filter(|w| w[0].origin != w[1].origin)
        .count();
    eprintln!(
        "{switches} switches between the languages in {total} events; first {} {}, last {} {}",
        stored[0].origin,
        stored[0].ts,
        stored[total - 1].origin,
        stored[total - 1].ts
    );
    assert!(
        switches >= 3,
        "only {switches} switches: the appenders did not overlap"
    );
}

/// A session's line (ADR 0394) beside agentdeck 3.1.0: a run waiting for the session has no
/// event, so agentdeck reads only kinds it knows and does not see the session held by it; its
/// own claim wins while the line waits, and the line's hand-off then waits behind agentdeck's
/// run and starts the waiting run once that run ends. An interrupt's `run.cancelled` reads back
/// in Python as the kind it knows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_run_is_invisible_to_agentdeck_and_waits_behind_its_claims() {
    use switchyard_core::store::{Claimed, Multitask, Turn};

    let schema = unique_schema("line");
    // agentdeck makes the schema, as a Python service that came first would.
    drive(&schema, &["read", "", "warm", "warm"]).await;
    let store: Arc<dyn EventStore> = Arc::new(store(&schema).await);
    let session = unique_id("s");
    let ctx = |run: &str| RunContext::new(run).with_session(session.clone());
    let claim = |run: &'static str, strategy| {
        let store = store.clone();
        let ctx = ctx(run);
        async move {
            store
                .claim(&ctx, opening(), "rust", HOUR, strategy)
                .await
                .expect("claim")
        }
    };
    assert!(matches!(
        claim("holder", Multitask::Reject).await,
        Claimed::Started { .. }
    ));
    assert!(matches!(
        claim("waiting", Multitask::Enqueue).await,
        Claimed::Queued { position: 1, .. }
    ));
    let completed = || {
        Payload::RunCompleted(RunCompleted {
            output: vec![Block::text("done")],
            usage: Usage {
                input_tokens: 1,
                output_tokens: 1,
                usd: None,
            },
        })
    };
    // Ended without a hand-off: the line still waits, and agentdeck sees a free session.
    store
        .append(&ctx("holder"), vec![completed()], "rust")
        .await
        .expect("end the holder");
    let seen = drive(&schema, &["read", "", &session, "waiting"]).await;
    assert_eq!(seen["status"], "pending", "{seen}");
    assert_eq!(seen["run"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["log"].as_array().map(Vec::len), Some(2), "{seen}");
    let py = drive(&schema, &["claim", "", &session, "python-run"]).await;
    assert_eq!(py["won"], true, "agentdeck saw the session held: {py}");

    // Our hand-off now waits behind agentdeck's open run ...
    assert_eq!(
        store.turn(&ctx("waiting")).await.expect("turn").0,
        Turn::Waiting { position: 1 }
    );
    // ... and starts the waiting run once it ends.
    store
        .append(&ctx("python-run"), vec![completed()], "rust")
        .await
        .expect("end agentdeck's run");
    let (turn, _) = store.turn(&ctx("waiting")).await.expect("turn");
    assert!(
        matches!(turn, Turn::Started { ref event } if event.run_id == "waiting"),
        "{turn:?}"
    );

    // An interrupt ends it with a kind agentdeck knows.
    assert!(matches!(
        claim("boss", Multitask::Interrupt).await,
        Claimed::Started { .. }
    ));
    let seen = drive(&schema, &["read", "", &session, "waiting"]).await;
    assert_eq!(seen["status"], "cancelled", "{seen}");
    let log: Vec<Value> = seen["log"]
        .as_array()
        .expect("log")
        .iter()
        .map(|e| serde_json::from_str(e.as_str().expect("json text")).expect("an event"))
        .collect();
    let kinds: Vec<&str> = log.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "run.started",
            "run.completed",
            "run.started",
            "run.completed",
            "run.started",
            "run.cancelled",
            "run.started"
        ]
    );
}
