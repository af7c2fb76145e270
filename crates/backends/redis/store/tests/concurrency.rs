//! Contention: many appenders to one run, many claimants of one session, and a connection killed
//! between a claim's WATCH and its EXEC.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{HOUR, started, text};
use switchyard_conformance::harness::{RedisServer, unique_prefix};
use switchyard_core::event::{Payload, RunPaused, RunResumed};
use switchyard_core::{EventStore, RunContext};
use switchyard_store_redis::{RedisEventStore, RedisStoreOptions};

async fn appenders(n: usize) {
    let store = Arc::new(common::store("appenders", None).await);
    let ctx = RunContext::new("hot").with_session("s");
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let store = store.clone();
            let ctx = ctx.clone();
            tokio::spawn(async move { store.append(&ctx, vec![text(format!("{i}"))], "o").await })
        })
        .collect();
    let mut seqs = Vec::new();
    for task in tasks {
        let events = task.await.expect("join").expect("no appender may fail");
        seqs.push(events[0].seq);
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..n as u64).collect::<Vec<_>>());
    let stored = store.read_run(&ctx, 0).await.expect("read_run");
    assert_eq!(stored.len(), n);
    assert!(stored.iter().enumerate().all(|(i, e)| e.seq == i as u64));
    let mut texts: Vec<String> = stored
        .iter()
        .map(|e| match &e.payload {
            Payload::TextDelta(m) => m.text.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), n, "every append stored exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn append_100_concurrent_writers_one_run() {
    appenders(100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn append_500_concurrent_writers_one_run() {
    appenders(500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claim_start_64_contenders_one_winner() {
    let store = Arc::new(common::store("claim64", None).await);
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let ctx = RunContext::new(format!("r{i:02}")).with_session("s");
                let t0 = Instant::now();
                let out = store.claim_start(&ctx, started(), "o", HOUR).await;
                (ctx.run_id().to_string(), out, t0.elapsed())
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut holders = Vec::new();
    let mut lat = Vec::new();
    for task in tasks {
        let (run, out, elapsed) = task.await.expect("join");
        let (claim, event) = out.expect("a claim never errors under contention");
        lat.push(elapsed);
        match claim.held_by {
            None => {
                assert!(event.is_some());
                winners.push(run);
            }
            Some(holder) => {
                assert!(event.is_none());
                holders.push(holder);
            }
        }
    }
    assert_eq!(winners.len(), 1, "exactly one winner");
    assert!(
        holders.iter().all(|h| h == &winners[0]),
        "losers name the winner"
    );
    let ctx = RunContext::new("x").with_session("s");
    let log = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(log.len(), 1, "one run.started in the log");
    lat.sort();
    println!(
        "claim_start x64: winners={} p50={:?} p99={:?}",
        winners.len(),
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100]
    );
}

/// The claim's connection is killed after WATCH and the reads, and a rival claim wins meanwhile.
/// fred reconnects and re-sends MULTI/EXEC on a connection with no WATCH; the EXEC block's own
/// guard must refuse it, and the claim must then report the rival as the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connection_killed_between_watch_and_exec() {
    let mut server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let prefix = unique_prefix("kill");
    let rival = Arc::new(common::store_at(&url, &prefix, None).await);
    let fired = Arc::new(AtomicBool::new(false));
    let hook_url = url.clone();
    let hook_rival = rival.clone();
    let hook_fired = fired.clone();
    let mut options = RedisStoreOptions::default().prefix(&prefix);
    options.before_exec = Some(Arc::new(move |client_id: u64| {
        let url = hook_url.clone();
        let rival = hook_rival.clone();
        let fired = hook_fired.clone();
        Box::pin(async move {
            if fired.swap(true, Ordering::SeqCst) {
                return;
            }
            let killed = common::raw(&url, &["CLIENT", "KILL", "ID", &client_id.to_string()])
                .await
                .expect("CLIENT KILL");
            assert_eq!(killed, "1", "the claim's connection was killed");
            let ctx = RunContext::new("rival").with_session("s");
            let (claim, _) = rival
                .claim_start(&ctx, started(), "o", HOUR)
                .await
                .expect("rival claim");
            assert!(claim.won(), "the rival claims the free session");
        })
    }));
    let store = RedisEventStore::connect_with(&url, options)
        .await
        .expect("connect");
    let ctx = RunContext::new("victim").with_session("s");
    let (claim, event) = store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim after reconnect");
    assert!(fired.load(Ordering::SeqCst), "the hook ran");
    assert_eq!(
        claim.held_by.as_deref(),
        Some("rival"),
        "no unguarded EXEC applied"
    );
    assert!(event.is_none());
    let log = rival.read(&ctx, 0, None).await.expect("read");
    assert_eq!(log.len(), 1, "exactly one run.started: {log:?}");
    assert_eq!(log[0].run_id, "rival");
    server.kill();
}

/// A claim cancelled between WATCH and EXEC must not leave its WATCH armed on the pooled
/// connection: the next claim on that connection would be aborted by the old watch and need an
/// extra round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_claim_does_not_leak_its_watch() {
    use std::sync::atomic::AtomicUsize;
    let prefix = unique_prefix("cancel");
    let url = switchyard_conformance::harness::redis_url();
    let calls = Arc::new(AtomicUsize::new(0));
    let hook_calls = calls.clone();
    let mut options = RedisStoreOptions::default().prefix(&prefix);
    options.claim_connections = 1;
    options.before_exec = Some(Arc::new(move |_| {
        let n = hook_calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if n == 0 {
                // The first claim stalls here until it is cancelled.
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
        })
    }));
    let store = RedisEventStore::connect_with(&url, options)
        .await
        .expect("connect");
    let a = RunContext::new("a").with_session("s1");
    let cancelled = tokio::time::timeout(
        Duration::from_millis(200),
        store.claim_start(&a, started(), "o", HOUR),
    )
    .await;
    assert!(cancelled.is_err(), "the first claim was cancelled");
    // A write to the key the cancelled claim watched.
    store
        .append(&a, vec![text("x")], "o")
        .await
        .expect("append");
    let before = calls.load(Ordering::SeqCst);
    let b = RunContext::new("b").with_session("s2");
    let (claim, _) = store
        .claim_start(&b, started(), "o", HOUR)
        .await
        .expect("claim");
    assert!(claim.won());
    assert_eq!(
        calls.load(Ordering::SeqCst) - before,
        1,
        "the second claim needed exactly one round (no leaked WATCH aborted it)"
    );
}

/// A claim that loses every round gives up with `Contended` after exactly the configured bound,
/// having written nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contended_only_after_the_bound() {
    use std::sync::atomic::AtomicUsize;
    let prefix = unique_prefix("bound");
    let url = switchyard_conformance::harness::redis_url();
    let writer = Arc::new(common::store_at(&url, &prefix, None).await);
    let rounds = Arc::new(AtomicUsize::new(0));
    let (hook_writer, hook_rounds) = (writer.clone(), rounds.clone());
    let mut options = RedisStoreOptions::default().prefix(&prefix);
    options.max_claim_rounds = 5;
    options.before_exec = Some(Arc::new(move |_| {
        let (writer, rounds) = (hook_writer.clone(), hook_rounds.clone());
        Box::pin(async move {
            let n = rounds.fetch_add(1, Ordering::SeqCst);
            // A pending run (no lifecycle event) writes to the log between WATCH and EXEC.
            let ctx = RunContext::new("noise").with_session("s");
            writer
                .append(&ctx, vec![text(format!("n{n}"))], "o")
                .await
                .expect("noise append");
        })
    }));
    let store = RedisEventStore::connect_with(&url, options)
        .await
        .expect("connect");
    let ctx = RunContext::new("claimant").with_session("s");
    match store.claim_start(&ctx, started(), "o", HOUR).await {
        Err(switchyard_core::Error::Contended { op, attempts, .. }) => {
            assert_eq!(op, "claim_start");
            assert_eq!(attempts, 5);
        }
        other => panic!("expected Contended, got {other:?}"),
    }
    assert_eq!(
        rounds.load(Ordering::SeqCst),
        5,
        "one EXEC attempt per round"
    );
    let log = writer.read(&ctx, 0, None).await.expect("read");
    assert!(
        log.iter().all(|e| e.run_id == "noise"),
        "the claimant wrote nothing"
    );
}

/// Options whose first claim EXEC times out but applies later, after the next round's receipt
/// read and before its reads: `CLIENT PAUSE WRITE` holds the EXEC past the command timeout; the
/// claim connection's next commands queue behind it, while the receipt is read on the pool.
fn late_first_exec(url: &str, prefix: &str) -> (RedisStoreOptions, Arc<AtomicBool>) {
    let paused = Arc::new(AtomicBool::new(false));
    let (hook_url, hook_paused) = (url.to_string(), paused.clone());
    let mut options = RedisStoreOptions::default().prefix(prefix);
    options.claim_connections = 1;
    options.command_timeout = Duration::from_secs(1);
    options.before_exec = Some(Arc::new(move |_| {
        let (url, paused) = (hook_url.clone(), hook_paused.clone());
        Box::pin(async move {
            if paused.swap(true, Ordering::SeqCst) {
                return;
            }
            // Longer than the command timeout, shorter than two of them.
            let ok = common::raw(&url, &["CLIENT", "PAUSE", "1500", "WRITE"])
                .await
                .expect("CLIENT PAUSE");
            assert_eq!(ok, "OK");
        })
    }));
    (options, paused)
}

/// A claim_start whose EXEC applied after its timeout finds its own run in the next round: that
/// is its win, not "run already exists".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_start_exec_that_applies_after_its_timeout_is_the_claims_own_win() {
    let mut server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let (options, paused) = late_first_exec(&url, &unique_prefix("late-start"));
    let store = RedisEventStore::connect_with(&url, options)
        .await
        .expect("connect");
    let ctx = RunContext::new("late").with_session("s");
    let (claim, event) = store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("the claim's own late write is its win");
    assert!(paused.load(Ordering::SeqCst), "the hook paused the server");
    assert!(claim.won(), "held by {:?}", claim.held_by);
    let event = event.expect("the opening event");
    let log = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(log, vec![event], "exactly the one run.started");
    server.kill();
}

/// A claim_resume whose EXEC applied after its timeout finds the run no longer paused in the next
/// round: it resumed it, and must return the event rather than `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resume_exec_that_applies_after_its_timeout_is_the_resumes_own_event() {
    let mut server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let prefix = unique_prefix("late-resume");
    let setup = common::store_at(&url, &prefix, None).await;
    let ctx = RunContext::new("late").with_session("s");
    let (claim, _) = setup
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim");
    assert!(claim.won());
    setup
        .append(
            &ctx,
            vec![Payload::RunPaused(RunPaused { reason: None })],
            "o",
        )
        .await
        .expect("pause");
    let (options, paused) = late_first_exec(&url, &prefix);
    let store = RedisEventStore::connect_with(&url, options)
        .await
        .expect("connect");
    let resumed = RunResumed {
        reason: None,
        value: None,
    };
    let event = store
        .claim_resume(&ctx, resumed, "o")
        .await
        .expect("resume");
    assert!(paused.load(Ordering::SeqCst), "the hook paused the server");
    let event = event.expect("the resume's own late write is its event");
    let run = setup.read_run(&ctx, 0).await.expect("read");
    assert_eq!(run.len(), 3, "started, paused, one resumed: {run:?}");
    assert_eq!(run[2], event);
    server.kill();
}
