//! Appends that commit in groups on agentdeck's layout (ADR 0386): concurrent appends to one log
//! share a lock, a call and a commit, and each caller still gets exactly its own outcome — dense
//! seqs per run, a refusal for a run that is not open, `InvalidInput` for a value PostgreSQL
//! cannot hold — whatever else rode in its group.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use switchyard_conformance::harness::{postgres_url, unique_id, unique_schema};
use switchyard_core::event::{
    Block, InvocableKind, MessageText, Payload, RunCompleted, RunStarted, Usage,
};
use switchyard_core::{Appended, Error, EventStore, RunContext, RunStatus};
use switchyard_store_postgres::{PostgresEventStore, PostgresOptions};

const HOUR: Duration = Duration::from_secs(3600);

fn opening() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

fn text(s: String) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: s,
    })
}

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![],
        usage: Usage {
            input_tokens: 1,
            output_tokens: 2,
            usd: None,
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_to_one_log_share_calls_and_keep_each_callers_outcome() {
    let store = Arc::new(
        PostgresEventStore::open_with(
            &postgres_url(),
            PostgresOptions::default()
                .schema(unique_schema("groups"))
                .max_connections(8),
        )
        .await
        .expect("open"),
    );
    // 4 finished runs of their own sessions.
    let mut closed = Vec::new();
    for i in 0..4 {
        let ctx = RunContext::new(unique_id(&format!("done{i}"))).with_session(unique_id("d"));
        let (claim, _) = store
            .claim_start(&ctx, opening(), "o", HOUR)
            .await
            .expect("claim");
        assert!(claim.won());
        store
            .append(&ctx, vec![completed()], "o")
            .await
            .expect("complete");
        closed.push(ctx);
    }
    // 8 open runs of one session (its log), started by appends: a log may hold several open
    // runs when they are written directly, as agentdeck's own store allows.
    let shared = unique_id("shared");
    let open: Vec<RunContext> = (0..8)
        .map(|i| RunContext::new(format!("{shared}-o{i}")).with_session(shared.clone()))
        .collect();
    for ctx in &open {
        store
            .append(ctx, vec![Payload::RunStarted(opening())], "o")
            .await
            .expect("start");
    }

    const WRITERS: usize = 48;
    const PER_WRITER: usize = 20;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let store = store.clone();
        let (open, closed) = (open.clone(), closed.clone());
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for i in 0..PER_WRITER {
                let k = w * PER_WRITER + i;
                // Most appends go to the shared session's open runs; every fifth, conditional,
                // to a finished run of the other session; one in 97 holds a NUL.
                let (ctx, finished) = if k % 5 == 4 {
                    (&closed[k % closed.len()], true)
                } else {
                    (&open[k % open.len()], false)
                };
                let nul = k.is_multiple_of(97);
                let body = if nul {
                    format!("{w}-{i}\u{0}")
                } else {
                    format!("{w}-{i}")
                };
                let events = if i.is_multiple_of(3) {
                    vec![text(format!("{body}-a")), text(format!("{body}-b"))]
                } else {
                    vec![text(body)]
                };
                let n = events.len();
                let out = if finished || i.is_multiple_of(2) {
                    store.append_if_open(ctx, events, "o").await
                } else {
                    store
                        .append(ctx, events, "o")
                        .await
                        .map(|events| Appended::stored(events, RunStatus::Running))
                };
                outcomes.push((ctx.run_id().to_string(), finished, nul, n, out));
            }
            outcomes
        }));
    }
    let mut told: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut stamps = BTreeSet::new();
    let mut written = 0usize;
    for task in tasks {
        for (run, finished, nul, n, out) in task.await.expect("join") {
            match (finished, nul, out) {
                // A finished run refuses before anything is written, NUL or not.
                (true, _, Ok(Appended::NotOpen(status))) => {
                    assert!(!status.is_open(), "{run} is {status}");
                }
                (false, true, Err(Error::InvalidInput { .. })) => {}
                (false, false, Ok(Appended::Stored { events, status })) => {
                    assert_eq!(status, RunStatus::Running);
                    assert_eq!(events.len(), n);
                    assert!(events.iter().all(|e| e.run_id == run));
                    stamps.insert(events[0].ts);
                    written += 1;
                    told.entry(run)
                        .or_default()
                        .extend(events.iter().map(|e| e.seq));
                }
                (finished, nul, other) => {
                    panic!("{run} (finished {finished}, NUL {nul}): unexpected {other:?}")
                }
            }
        }
    }
    // Concurrent appends shared calls: each call reads the clock once, so a group's ops share
    // their ts, where calls of their own each have one.
    assert!(
        stamps.len() * 2 < written,
        "{written} concurrent appends to one log were stamped {} times: they were not grouped",
        stamps.len()
    );
    for ctx in &open {
        let stored = store.read_run(ctx, 0).await.expect("read_run");
        let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..stored.len() as u64).collect::<Vec<_>>());
        let mut mine = told.remove(ctx.run_id()).unwrap_or_default();
        mine.sort_unstable();
        // seq 0 is the run.started written before the writers.
        assert_eq!(mine, (1..stored.len() as u64).collect::<Vec<_>>());
    }
    for ctx in &closed {
        let stored = store.read_run(ctx, 0).await.expect("read_run");
        assert!(
            stored
                .iter()
                .all(|e| !matches!(e.payload, Payload::TextDelta(_))),
            "nothing was appended to finished run {}",
            ctx.run_id()
        );
    }
}
