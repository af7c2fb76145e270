//! Appends that commit in groups (ADR 0385): concurrent plain appends share script calls, and
//! each caller still gets exactly its own outcome — dense seqs per run, a refusal for a run that
//! is not open, a `WRONGTYPE` for a foreign key — whatever else rode in its group.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{HOUR, raw, started, text};
use switchyard_conformance::harness::{RedisServer, unique_prefix};
use switchyard_core::event::{Payload, RunCompleted, Usage};
use switchyard_core::{Appended, Error, EventStore, RunContext, RunStatus};

/// `evalsha` calls of the server so far (from `INFO commandstats`).
async fn evalsha_calls(url: &str) -> u64 {
    command_calls(url, "evalsha").await
}

/// `calls` of `cmd` on the server so far (from `INFO commandstats`).
async fn command_calls(url: &str, cmd: &str) -> u64 {
    let info = raw(url, &["INFO", "commandstats"])
        .await
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{cmd}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
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
async fn concurrent_appends_share_script_calls_and_keep_each_callers_outcome() {
    // A private server: its command counts are this test's alone.
    let server = RedisServer::start().expect("a private redis-server (install redis-server)");
    let url = server.url();
    let store = Arc::new(common::store_at(&url, &unique_prefix("groups"), None).await);

    // 16 open runs, 4 finished ones, and one whose run LIST key holds a string.
    let open: Vec<RunContext> = (0..16)
        .map(|i| RunContext::new(format!("open-{i}")).with_session(format!("s{i}")))
        .collect();
    for ctx in &open {
        let (claim, _) = store
            .claim_start(ctx, started(), "o", HOUR)
            .await
            .expect("claim");
        assert!(claim.won());
    }
    let done: Vec<RunContext> = (0..4)
        .map(|i| RunContext::new(format!("done-{i}")).with_session(format!("d{i}")))
        .collect();
    for ctx in &done {
        store
            .claim_start(ctx, started(), "o", HOUR)
            .await
            .expect("claim");
        store
            .append(ctx, vec![completed()], "o")
            .await
            .expect("complete");
    }
    let foreign = RunContext::new("foreign").with_session("f");
    let run_key = store
        .keys()
        .run(foreign.namespace_key(), foreign.log_key(), foreign.run_id());
    raw(&url, &["SET", &run_key, "not a list"])
        .await
        .expect("SET");

    let before = evalsha_calls(&url).await;
    const PER_WRITER: usize = 25;
    let mut tasks = Vec::new();
    for w in 0..64 {
        let store = store.clone();
        let (open, done, foreign) = (open.clone(), done.clone(), foreign.clone());
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for i in 0..PER_WRITER {
                let pick = (w * PER_WRITER + i) % 23;
                let (ctx, kind) = match pick {
                    0..16 => (&open[pick], "open"),
                    16..20 => (&done[pick - 16], "done"),
                    _ => (&foreign, "foreign"),
                };
                let events = if i % 5 == 0 {
                    vec![text(format!("{w}-{i}-a")), text(format!("{w}-{i}-b"))]
                } else {
                    vec![text(format!("{w}-{i}"))]
                };
                let out = if i % 2 == 0 {
                    store
                        .append_if_open(ctx, events.clone(), "o")
                        .await
                        .map(|a| match a {
                            Appended::Stored { events, .. } => Ok(events),
                            Appended::NotOpen(s) => Err(s),
                        })
                } else {
                    store.append(ctx, events.clone(), "o").await.map(Ok)
                };
                outcomes.push((
                    ctx.run_id().to_string(),
                    kind,
                    i % 2 == 0,
                    events.len(),
                    out,
                ));
            }
            outcomes
        }));
    }
    let mut stored_by_run: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut appends = 0u64;
    for task in tasks {
        for (run, kind, conditional, n, out) in task.await.expect("join") {
            appends += 1;
            match (kind, conditional, out) {
                ("open", _, Ok(Ok(events))) => {
                    assert_eq!(events.len(), n);
                    assert!(events.iter().all(|e| e.run_id == run));
                    stored_by_run
                        .entry(run)
                        .or_default()
                        .extend(events.iter().map(|e| e.seq));
                }
                ("done", true, Ok(Err(status))) => assert_eq!(status, RunStatus::Completed),
                // An unconditional append does not look at the status (the seed's rule).
                ("done", false, Ok(Ok(events))) => {
                    stored_by_run
                        .entry(run)
                        .or_default()
                        .extend(events.iter().map(|e| e.seq));
                }
                ("foreign", _, Err(Error::Rejected { message, .. })) => {
                    assert!(message.contains("WRONGTYPE"), "{message}");
                }
                (kind, conditional, other) => {
                    panic!("{kind} run, conditional {conditional}: unexpected {other:?}")
                }
            }
        }
    }
    let calls = evalsha_calls(&url).await - before;
    assert!(
        calls * 2 < appends,
        "{appends} concurrent appends took {calls} script calls: they were not grouped"
    );

    // Every run's log is dense and holds exactly what its callers were told.
    for ctx in open.iter().chain(&done) {
        let stored = store.read_run(ctx, 0).await.expect("read_run");
        let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..stored.len() as u64).collect::<Vec<_>>());
        let mut told = stored_by_run.remove(ctx.run_id()).unwrap_or_default();
        told.sort_unstable();
        // The claim's run.started (and a finished run's run.completed) were not in the groups.
        let first = if ctx.run_id().starts_with("done") {
            2
        } else {
            1
        };
        assert_eq!(told, (first..stored.len() as u64).collect::<Vec<_>>());
    }
    // Nothing of the foreign run was written.
    assert_eq!(
        raw(&url, &["GET", &run_key]).await.expect("GET"),
        "not a list"
    );
}

/// A lone append is not held back waiting for company: one call, one script call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_append_is_one_script_call() {
    let server = RedisServer::start().expect("a private redis-server (install redis-server)");
    let url = server.url();
    let store = common::store_at(&url, &unique_prefix("lone"), None).await;
    let ctx = RunContext::new("r").with_session("s");
    store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim");
    for i in 0..5 {
        let before = evalsha_calls(&url).await;
        let events = store
            .append(&ctx, vec![text(format!("{i}"))], "o")
            .await
            .expect("append");
        assert_eq!(events[0].seq, i + 1);
        assert_eq!(evalsha_calls(&url).await - before, 1);
    }
}

/// ADR 0399: the ops of a group on one log push it once, after the last op. The log must still
/// hold every event in the order the runs' seqs say, its openlen mark must still follow it, and
/// an op whose run LIST is foreign must leave nothing in it; and the log's pushes must have been
/// shared (two `RPUSH`es per op, one on the log and one on the run, before this change).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_groups_appends_to_one_log_push_it_once_and_keep_its_order_and_mark() {
    let server = RedisServer::start().expect("a private redis-server (install redis-server)");
    let url = server.url();
    let store = Arc::new(common::store_at(&url, &unique_prefix("one-log"), None).await);

    // One session: a claimed run (so the openlen mark is kept from the start), seven runs
    // written without a claim (an unconditional append does not look at the status), and one
    // run whose LIST key holds a string.
    let runs: Vec<RunContext> = (0..8)
        .map(|i| RunContext::new(format!("r{i}")).with_session("s"))
        .collect();
    let (claim, _) = store
        .claim_start(&runs[0], started(), "o", HOUR)
        .await
        .expect("claim");
    assert!(claim.won());
    let foreign = RunContext::new("rx").with_session("s");
    let keys = store.keys();
    let (ns, log) = (foreign.namespace_key(), foreign.log_key());
    let foreign_key = keys.run(ns, log, foreign.run_id());
    raw(&url, &["SET", &foreign_key, "not a list"])
        .await
        .expect("SET");

    let pushes_before = command_calls(&url, "rpush").await;
    let mut tasks = Vec::new();
    for w in 0..32 {
        let store = store.clone();
        let (runs, foreign) = (runs.clone(), foreign.clone());
        tasks.push(tokio::spawn(async move {
            let mut stored = 0u64;
            for i in 0..20 {
                let pick = (w * 20 + i) % 9;
                let ctx = runs.get(pick).unwrap_or(&foreign);
                let events = if i % 4 == 0 {
                    vec![text(format!("{w}-{i}-a")), text(format!("{w}-{i}-b"))]
                } else {
                    vec![text(format!("{w}-{i}"))]
                };
                match store.append(ctx, events, "o").await {
                    Ok(_) => {
                        assert!(pick < 8, "the foreign run took an append");
                        stored += 1;
                    }
                    Err(Error::Rejected { message, .. }) => {
                        assert_eq!(pick, 8, "{message}");
                        assert!(message.contains("WRONGTYPE"), "{message}");
                    }
                    Err(e) => panic!("append: {e:?}"),
                }
            }
            stored
        }));
    }
    let mut ops = 0u64;
    for task in tasks {
        ops += task.await.expect("join");
    }
    let pushes = command_calls(&url, "rpush").await - pushes_before;
    assert!(
        pushes * 4 < ops * 7,
        "{ops} stored appends took {pushes} RPUSH calls: their log pushes were not shared"
    );

    // The log holds every run's events, each run's in seq order, and nothing else.
    let logged = store.read(&runs[0], 0, None).await.expect("read the log");
    let mut next: BTreeMap<String, u64> = BTreeMap::new();
    for e in &logged {
        let want = next.entry(e.run_id.clone()).or_default();
        assert_eq!(e.seq, *want, "run {} is out of order in the log", e.run_id);
        *want += 1;
    }
    for ctx in &runs {
        let stored = store.read_run(ctx, 0).await.expect("read_run");
        assert_eq!(next.get(ctx.run_id()).copied(), Some(stored.len() as u64));
    }
    assert!(!next.contains_key("rx"));
    // The mark followed the log (only this store wrote it, so it stayed in step).
    let len = raw(&url, &["LLEN", &keys.log(ns, log)])
        .await
        .expect("LLEN");
    let mark = raw(&url, &["GET", &keys.openlen(ns, log)])
        .await
        .expect("GET");
    assert_eq!(mark, len);
    assert_eq!(len, logged.len().to_string());
    assert_eq!(
        raw(&url, &["GET", &foreign_key]).await.expect("GET"),
        "not a list"
    );
    // A claim after the groups still sees the open run: the mark did not skip it.
    let (again, _) = store
        .claim_start(
            &RunContext::new("late").with_session("s"),
            started(),
            "o",
            HOUR,
        )
        .await
        .expect("claim");
    assert!(!again.won(), "the session's open run was missed: {again:?}");
}
