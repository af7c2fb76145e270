//! Several processes on one file: what agentdeck's own processes can rely on must hold for us.
//!
//! The parent spawns this very test binary as child processes, selecting the `worker` entry with
//! `--exact --ignored`, and the role with the `SWITCHYARD_SQLITE_WORKER` variable.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use switchyard_conformance::harness::TempSqlite;
use switchyard_core::event::{Block, InvocableKind, MessageText, Payload, RunStarted};
use switchyard_core::{EventStore, RunContext};
use switchyard_store_sqlite::SqliteEventStore;

const ROLE: &str = "SWITCHYARD_SQLITE_WORKER";
const PROCESSES: usize = 4;
const APPENDS: usize = 200;
const CLAIMS: usize = 50;

fn started() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

fn epoch_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// Runs `PROCESSES` children in `role` against `path`, all starting at the same instant, and
/// returns each one's `RESULT` number.
fn run_children(role: &str, path: &Path) -> Vec<usize> {
    let exe = std::env::current_exe().expect("test binary path");
    let start_at = epoch_ms() + 1500;
    let children: Vec<_> = (0..PROCESSES)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "worker",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ROLE, format!("{role}|{}|{i}|{start_at}", path.display()))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a worker process")
        })
        .collect();
    children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().expect("worker output");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "worker failed: {}\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
                .lines()
                .find_map(|l| l.split_once("RESULT ").map(|(_, n)| n))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("worker printed no RESULT:\n{stdout}"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_append_to_one_run_with_dense_seqs() {
    let file = TempSqlite::new();
    let store = SqliteEventStore::open(file.path()).await.expect("open");
    let path = file.path().to_path_buf();
    let appended = tokio::task::spawn_blocking(move || run_children("append", &path))
        .await
        .expect("join");
    assert_eq!(appended, vec![APPENDS; PROCESSES]);
    let ctx = RunContext::new("hot").with_session("s");
    let seqs: Vec<u64> = store
        .read_run(&ctx, 0)
        .await
        .expect("read_run")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (0..(PROCESSES * APPENDS) as u64).collect::<Vec<_>>());
    // Every process's events are there, in the log too.
    let log = store.read(&ctx, 0, None).await.expect("read");
    for i in 0..PROCESSES {
        let origin = format!("proc-{i}");
        assert_eq!(log.iter().filter(|e| e.origin == origin).count(), APPENDS);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_claim_one_session_with_one_winner() {
    let file = TempSqlite::new();
    let store = SqliteEventStore::open(file.path()).await.expect("open");
    let path = file.path().to_path_buf();
    let wins = tokio::task::spawn_blocking(move || run_children("claim", &path))
        .await
        .expect("join");
    assert_eq!(wins.iter().sum::<usize>(), 1, "wins per process: {wins:?}");
    let ctx = RunContext::new("any").with_session("c");
    let log = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(log.len(), 1, "exactly one run.started was written: {log:?}");
    assert_eq!(log[0].kind(), "run.started");
}

/// The child side. Not a test: `run_children` runs it in a fresh process with the role set; without
/// the variable it does nothing.
#[test]
#[ignore = "worker entry of the multi-process tests; spawned by them"]
fn worker() {
    let Ok(spec) = std::env::var(ROLE) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [role, path, index, start_at] = parts[..] else {
        panic!("bad {ROLE}: {spec}");
    };
    let start_at: u128 = start_at.parse().expect("start_at");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let result = runtime.block_on(async {
        let store = SqliteEventStore::open(path).await.expect("worker open");
        let wait = start_at.saturating_sub(epoch_ms());
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        let origin = format!("proc-{index}");
        match role {
            "append" => {
                let ctx = RunContext::new("hot").with_session("s");
                for n in 0..APPENDS {
                    let payload = Payload::TextDelta(MessageText {
                        message_id: "m".into(),
                        text: format!("{origin} {n}"),
                    });
                    store
                        .append(&ctx, vec![payload], &origin)
                        .await
                        .expect("append");
                }
                APPENDS
            }
            "claim" => {
                let mut won = 0;
                for n in 0..CLAIMS {
                    let ctx = RunContext::new(format!("{origin}-{n}")).with_session("c");
                    let (claim, event) = store
                        .claim_start(&ctx, started(), &origin, Duration::from_secs(3600))
                        .await
                        .expect("claim_start");
                    assert_eq!(claim.won(), event.is_some());
                    if claim.won() {
                        won += 1;
                    }
                }
                won
            }
            other => panic!("unknown role {other}"),
        }
    });
    // libtest prints "test worker ... " on the same line first.
    println!("\nRESULT {result}");
}
