//! Chaos: claims and appends from many tasks while another connection keeps killing the store's
//! connections (`CLIENT KILL TYPE normal SKIPME yes`) on a private server.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::started;
use switchyard_conformance::harness::{LoseReply, RedisServer, redis_cmd, reply_losing_proxy};
use switchyard_core::event::{MessageText, Payload, RunPaused, RunResumed};
use switchyard_core::{Error, Event, EventStore, RunContext};

const HOUR: Duration = Duration::from_secs(3600);
const SESSIONS: usize = 20;
const CLAIMS_PER_SESSION: usize = 10;
const APPEND_RUNS: usize = 8;
const APPENDS_PER_RUN: usize = 100;

fn text_of(e: &Event) -> String {
    match &e.payload {
        Payload::TextDelta(m) => m.text.clone(),
        other => panic!("unexpected payload {other:?}"),
    }
}

#[allow(clippy::large_enum_variant)]
enum Op {
    Claim(usize, Result<(bool, Option<Event>), Error>),
    Append(usize, String, Result<Vec<Event>, Error>),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_connections_never_double_or_lose_writes() {
    let mut server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let store = Arc::new(common::store_at(&url, "chaos", None).await);

    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicUsize::new(0));
    let killer = {
        let (url, stop, kills) = (url.clone(), stop.clone(), kills.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(n) =
                    common::raw(&url, &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]).await
                {
                    kills.fetch_add(n.parse().unwrap_or(0), Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    let mut tasks = Vec::new();
    for i in 0..SESSIONS * CLAIMS_PER_SESSION {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let session = i % SESSIONS;
            let run = format!("c{i}");
            let ctx = RunContext::new(run.clone()).with_session(format!("s{session}"));
            let out = store
                .claim_start(&ctx, started(), "o", HOUR)
                .await
                .map(|(claim, event)| (claim.won(), event));
            Op::Claim(session, out)
        }));
    }
    for i in 0..APPEND_RUNS * APPENDS_PER_RUN {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let run = i % APPEND_RUNS;
            let ctx = RunContext::new(format!("a{run}"));
            let text = format!("t{i}");
            let payload = Payload::TextDelta(MessageText {
                message_id: "m".into(),
                text: text.clone(),
            });
            let out = store.append(&ctx, vec![payload], "o").await;
            Op::Append(run, text, out)
        }));
    }

    let mut winners: BTreeMap<usize, Vec<Event>> = BTreeMap::new();
    let mut appended: BTreeMap<usize, Vec<Event>> = BTreeMap::new();
    let (mut ok, mut errors) = (0usize, 0usize);
    for task in tasks {
        match task.await.expect("join") {
            Op::Claim(session, Ok((won, event))) => {
                ok += 1;
                assert_eq!(won, event.is_some());
                if let Some(event) = event {
                    winners.entry(session).or_default().push(event);
                }
            }
            Op::Append(run, text, Ok(events)) => {
                ok += 1;
                assert_eq!(text_of(&events[0]), text);
                appended.entry(run).or_default().push(events[0].clone());
            }
            Op::Claim(_, Err(e)) | Op::Append(_, _, Err(e)) => {
                errors += 1;
                assert!(
                    matches!(e, Error::Unavailable { .. } | Error::Contended { .. }),
                    "only transient typed errors under connection kills: {e:?}"
                );
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    killer.await.expect("killer");

    // Verify on a fresh connection.
    let check = common::store_at(&url, "chaos", None).await;
    for session in 0..SESSIONS {
        let ctx = RunContext::new("x").with_session(format!("s{session}"));
        let log = check.read(&ctx, 0, None).await.expect("read");
        let starts: Vec<&Event> = log.iter().filter(|e| e.kind() == "run.started").collect();
        assert!(
            starts.len() <= 1,
            "session s{session} has two winners: {starts:?}"
        );
        let won = winners.remove(&session).unwrap_or_default();
        assert!(won.len() <= 1, "two callers told they won s{session}");
        for w in won {
            assert_eq!(
                starts.first().map(|e| e.to_json()),
                Some(w.to_json()),
                "winner's event is readable"
            );
        }
    }
    for run in 0..APPEND_RUNS {
        let ctx = RunContext::new(format!("a{run}"));
        let events = check.read_run(&ctx, 0).await.expect("read_run");
        assert!(
            events.iter().enumerate().all(|(i, e)| e.seq == i as u64),
            "run a{run}: seqs are dense and unique"
        );
        let texts: Vec<String> = events.iter().map(text_of).collect();
        let unique: BTreeSet<&String> = texts.iter().collect();
        assert_eq!(
            unique.len(),
            texts.len(),
            "run a{run}: no append applied twice"
        );
        for e in appended.remove(&run).unwrap_or_default() {
            let stored = events
                .get(e.seq as usize)
                .expect("acknowledged event is stored");
            assert_eq!(
                stored.to_json(),
                e.to_json(),
                "acknowledged event readable at its seq"
            );
        }
    }
    println!(
        "chaos: {ok} ok, {errors} typed errors, {} connections killed",
        kills.load(Ordering::SeqCst)
    );
    assert!(
        kills.load(Ordering::SeqCst) > 0,
        "the killer killed something"
    );
    server.kill();
}

/// Claims name the append script by its SHA-1 inside MULTI (ADR 0330). After the server lost its
/// script cache (a restart, `SCRIPT FLUSH`, a promoted replica) the EXEC replies NOSCRIPT having
/// written nothing; the claim loads the script again and wins in a later round.
#[tokio::test]
async fn claims_survive_a_flushed_script_cache() {
    let server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let store = common::store_at(&url, "flush", None).await;
    let ctx = RunContext::new("a").with_session("s");
    common::raw(&url, &["SCRIPT", "FLUSH"])
        .await
        .expect("SCRIPT FLUSH");
    let (claim, event) = store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim_start after SCRIPT FLUSH");
    assert!(claim.won(), "{claim:?}");
    assert_eq!(event.map(|e| e.seq), Some(0));
    store
        .append(
            &ctx,
            vec![Payload::RunPaused(RunPaused {
                reason: Some("wait".into()),
            })],
            "o",
        )
        .await
        .expect("pause");
    common::raw(&url, &["SCRIPT", "FLUSH"])
        .await
        .expect("SCRIPT FLUSH");
    let resumed = store
        .claim_resume(
            &ctx,
            RunResumed {
                reason: None,
                value: None,
            },
            "o",
        )
        .await
        .expect("claim_resume after SCRIPT FLUSH");
    assert_eq!(resumed.map(|e| e.seq), Some(2));
    let events = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![0, 1, 2],
        "each claim wrote once"
    );
}

/// A proxy in front of Redis that, once `armed`, loses the first reply carrying a claim's EXEC
/// result (an array of one) and empties the server's script cache before closing: the EXEC ran,
/// its reply is lost, and the block fred re-sends on a new connection meets `NOSCRIPT`.
fn proxy_losing_an_exec_reply(upstream_url: String, armed: Arc<AtomicBool>) -> String {
    let upstream = upstream_url.trim_start_matches("redis://").to_string();
    reply_losing_proxy(&upstream, move || -> LoseReply {
        let (armed, url) = (armed.clone(), upstream_url.clone());
        Box::new(move |reply| {
            let exec_reply = reply.windows(4).any(|w| w == b"*1\r\n");
            if !(exec_reply && armed.swap(false, Ordering::SeqCst)) {
                return false;
            }
            let flushed = redis_cmd(&url, &["SCRIPT", "FLUSH"]);
            assert_eq!(flushed.as_deref(), Ok("OK"));
            true
        })
    })
    .expect("proxy")
}

/// A claim's EXEC applies, its reply is lost, and fred's re-send of the block meets an emptied
/// script cache (what a SIGKILLed and restarted server does). `NOSCRIPT` then says nothing about
/// the first send: the claim must read its receipt and answer with its win, not find its own run
/// and answer "run already exists" (ADR 0351).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resent_claim_meeting_an_emptied_script_cache_finds_its_own_win() {
    let server = RedisServer::start().expect("redis-server");
    let armed = Arc::new(AtomicBool::new(false));
    let proxy = proxy_losing_an_exec_reply(server.url(), armed.clone());
    let hook_armed = armed.clone();
    let mut options = switchyard_store_redis::RedisStoreOptions::default().prefix("lost-exec");
    options.before_exec = Some(Arc::new(move |_| {
        let armed = hook_armed.clone();
        Box::pin(async move {
            armed.store(true, Ordering::SeqCst);
        })
    }));
    let store = switchyard_store_redis::RedisEventStore::connect_with(&proxy, options)
        .await
        .expect("connect");
    let ctx = RunContext::new("lost").with_session("s");
    let (claim, event) = store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("the claim's own first send is its win");
    assert!(
        !armed.load(Ordering::SeqCst),
        "the proxy lost the EXEC reply"
    );
    assert!(claim.won(), "held by {:?}", claim.held_by);
    let event = event.expect("the opening event");
    let log = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(log, vec![event], "exactly the one run.started");
}

/// While Redis is known to be down (its connection refused), calls fail at once with
/// `Unavailable` naming the server and the refusal, instead of waiting in fred's reconnect queue
/// for the 5 s command timeout in each of a claim's 16 rounds (which made the gateway's
/// `POST /v1/runs` hang its whole 30 s deadline); once Redis is back, calls succeed again with no
/// reconnect by hand (ADR 0355).
#[tokio::test]
async fn a_stopped_redis_fails_calls_at_once_naming_it_and_they_succeed_after_restart() {
    let mut server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let store = common::store_at(&url, "down", None).await;
    let ctx = RunContext::new("before").with_session("s-before");
    store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim_start while Redis is up");

    server.kill();
    // The first call may be queued before the client sees the drop; the failed reconnect ends it.
    for (i, what) in ["the first call after the kill", "a later call"]
        .into_iter()
        .enumerate()
    {
        let ctx = RunContext::new(format!("down-{i}")).with_session(format!("s-down-{i}"));
        let began = std::time::Instant::now();
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            store.claim_start(&ctx, started(), "o", HOUR),
        )
        .await
        .unwrap_or_else(|_| panic!("{what} hung"));
        let took = began.elapsed();
        let e = out.expect_err("no claim while Redis is down");
        assert!(matches!(e, Error::Unavailable { .. }), "{what}: {e:?}");
        let text = e.to_string();
        assert!(
            text.contains(&format!(
                "cannot reach Redis at 127.0.0.1:{}",
                server.port()
            )) && text.contains("refused")
                && text.contains("retrying in the background"),
            "{what}: {text}"
        );
        // Well under one 5 s command timeout, with room for a slow machine.
        assert!(took < Duration::from_secs(2), "{what} took {took:?}");
        let read = store.read(&ctx, 0, None).await;
        assert!(matches!(read, Err(Error::Unavailable { .. })), "{read:?}");
    }

    server.restart().expect("restart");
    let back = std::time::Instant::now();
    for attempt in 0.. {
        // A fresh run each time: a failed attempt's outcome is unknown.
        let ctx =
            RunContext::new(format!("after-{attempt}")).with_session(format!("s-after-{attempt}"));
        match store.claim_start(&ctx, started(), "o", HOUR).await {
            Ok((claim, event)) => {
                assert!(claim.won() && event.is_some());
                break;
            }
            Err(e) => {
                assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
                // The reconnect backoff is at most 2 s; ten leaves room for a slow machine.
                assert!(
                    back.elapsed() < Duration::from_secs(10),
                    "no claim {:?} after Redis came back: {e}",
                    back.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
