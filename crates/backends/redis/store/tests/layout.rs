//! The seed's key layout and value formats, checked key by key, and interop with seed writes.

mod common;

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use common::{HOUR, started, text};
use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_core::event::{Block, Payload, RunCompleted, Usage};
use switchyard_core::store::QueuedRun;
use switchyard_core::{Error, EventStore, ManualClock, RunContext, RunStatus};

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![Block::text("done")],
        usage: Usage {
            input_tokens: 1,
            output_tokens: 2,
            usd: None,
        },
    })
}

async fn cmd(args: &[&str]) -> String {
    common::raw(&redis_url(), args)
        .await
        .expect("redis command")
}

fn lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[tokio::test]
async fn seed_layout_exact_keys_and_values() {
    let prefix = unique_prefix("layout");
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5)
            .single()
            .expect("date")
            + chrono::TimeDelta::microseconds(123_456),
    ));
    let store = common::store_at(&redis_url(), &prefix, Some(clock.clone())).await;
    let ctx = RunContext::new("é~_.-")
        .with_session("x/y z:1")
        .with_namespace("a:b")
        .expect("ns");
    let (claim, opened) = store
        .claim_start(&ctx, started(), "helper", HOUR)
        .await
        .expect("claim");
    assert!(claim.won());
    let started_json = r#"{"v":{"major":3,"minor":1},"kind":"run.started","seq":0,"run_id":"é~_.-","session_id":"x/y z:1","namespace":"a:b","origin":"helper","ts":"2025-01-02T03:04:05.123456Z","payload":{"kind":"run.started","invocable":"helper","kind_of_invocable":"agent","input":[{"type":"text","text":"hi"}]}}"#;
    assert_eq!(opened.expect("event").to_json(), started_json);

    clock.advance(chrono::TimeDelta::microseconds(-123_456) + chrono::TimeDelta::seconds(1));
    let appended = store
        .append(&ctx, vec![text("a"), completed()], "helper")
        .await
        .expect("append");
    let text_json = r#"{"v":{"major":3,"minor":1},"kind":"text.delta","seq":1,"run_id":"é~_.-","session_id":"x/y z:1","namespace":"a:b","origin":"helper","ts":"2025-01-02T03:04:06Z","payload":{"kind":"text.delta","message_id":"m","text":"a"}}"#;
    let done_json = r#"{"v":{"major":3,"minor":1},"kind":"run.completed","seq":2,"run_id":"é~_.-","session_id":"x/y z:1","namespace":"a:b","origin":"helper","ts":"2025-01-02T03:04:06Z","payload":{"kind":"run.completed","output":[{"type":"text","text":"done"}],"usage":{"input_tokens":1,"output_tokens":2,"usd":null}}}"#;
    assert_eq!(appended[0].to_json(), text_json);
    assert_eq!(appended[1].to_json(), done_json);

    let p = &prefix;
    let log = format!("{p}:log:a%3Ab:x%2Fy%20z%3A1");
    let run = format!("{p}:run:a%3Ab:x%2Fy%20z%3A1:%C3%A9~_.-");
    let seq = format!("{p}:seq:a%3Ab:x%2Fy%20z%3A1:%C3%A9~_.-");
    let life = format!("{p}:life:a%3Ab:x%2Fy%20z%3A1:%C3%A9~_.-");
    let logruns = format!("{p}:logruns:a%3Ab:x%2Fy%20z%3A1");
    let runs = format!("{p}:runs:a%3Ab");
    let openlen = format!("{p}:openlen:a%3Ab:x%2Fy%20z%3A1");

    let all = cmd(&["KEYS", &format!("{p}:*")]).await;
    let mut keys: Vec<String> = lines(&all)
        .into_iter()
        .filter(|k| !k.starts_with(&format!("{p}:op:")))
        .collect();
    keys.sort();
    let mut expected = vec![
        log.clone(),
        run.clone(),
        seq.clone(),
        life.clone(),
        logruns.clone(),
        runs.clone(),
        openlen.clone(),
    ];
    expected.sort();
    // The open SET emptied when the run completed, so Redis removed it.
    assert_eq!(keys, expected);

    assert_eq!(cmd(&["TYPE", &log]).await, "list");
    let stored = format!("{started_json}\n{text_json}\n{done_json}");
    assert_eq!(cmd(&["LRANGE", &log, "0", "-1"]).await, stored);
    assert_eq!(cmd(&["LRANGE", &run, "0", "-1"]).await, stored);
    assert_eq!(cmd(&["TYPE", &seq]).await, "zset");
    assert_eq!(
        cmd(&["ZRANGE", &seq, "0", "-1", "WITHSCORES"]).await,
        "0\n0\n1\n1\n2\n2"
    );
    assert_eq!(cmd(&["GET", &life]).await, done_json);
    assert_eq!(cmd(&["SMEMBERS", &logruns]).await, "é~_.-");
    assert_eq!(cmd(&["SMEMBERS", &runs]).await, "x%2Fy%20z%3A1:%C3%A9~_.-");
    assert_eq!(cmd(&["GET", &openlen]).await, "3");
    // Op receipts expire.
    let ops = lines(&cmd(&["KEYS", &format!("{p}:op:*")]).await);
    assert_eq!(ops.len(), 2, "one receipt per write: {ops:?}");
    for op in ops {
        let ttl: i64 = cmd(&["TTL", &op]).await.parse().expect("ttl");
        assert!(ttl > 0, "receipt {op} must expire");
    }
}

#[tokio::test]
async fn null_namespace_is_an_empty_segment() {
    let prefix = unique_prefix("layout");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = RunContext::new("solo");
    store
        .claim_start(&ctx, started(), "helper", HOUR)
        .await
        .expect("claim");
    assert_eq!(cmd(&["LLEN", &format!("{prefix}:log::solo")]).await, "1");
    assert_eq!(
        cmd(&["SMEMBERS", &format!("{prefix}:runs:")]).await,
        "solo:solo"
    );
    assert_eq!(
        cmd(&["SMEMBERS", &format!("{prefix}:open::solo")]).await,
        "solo"
    );
}

#[tokio::test]
async fn redis_time_stamps_ts() {
    let store = common::store("time", None).await;
    let ctx = RunContext::new("r");
    let before: Vec<i64> = cmd(&["TIME"])
        .await
        .lines()
        .map(|l| l.parse().expect("int"))
        .collect();
    let events = store
        .append(&ctx, vec![text("a"), text("b")], "o")
        .await
        .expect("append");
    let after: Vec<i64> = cmd(&["TIME"])
        .await
        .lines()
        .map(|l| l.parse().expect("int"))
        .collect();
    let micros = |t: &[i64]| t[0] * 1_000_000 + t[1];
    let ts = events[0].ts.timestamp_micros();
    assert!(
        micros(&before) <= ts && ts <= micros(&after),
        "ts comes from Redis TIME"
    );
    assert_eq!(events[0].ts, events[1].ts, "a batch shares one ts");
    // What the script wrote is what the call returned, byte for byte.
    let stored = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(
        stored.iter().map(|e| e.to_json()).collect::<Vec<_>>(),
        events.iter().map(|e| e.to_json()).collect::<Vec<_>>()
    );
}

/// A seed process writes with plain MULTI commands and keeps no open-run index: a claim must
/// still see its open run, and see it close.
#[tokio::test]
async fn runs_opened_by_a_seed_writer_hold_the_session() {
    let prefix = unique_prefix("interop");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = RunContext::new("mine").with_session("s");
    // Our run opens and completes first, so the index is in step.
    store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim");
    store
        .append(&ctx, vec![completed()], "o")
        .await
        .expect("complete");

    // Then the seed opens "py" (its exact writes), with a fresh ts.
    let now = Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let py_started = format!(
        r#"{{"v":{{"major":3,"minor":1}},"kind":"run.started","seq":0,"run_id":"py","session_id":"s","namespace":null,"origin":"o","ts":"{now}","payload":{{"kind":"run.started","invocable":"helper","kind_of_invocable":"agent","input":[]}}}}"#
    );
    let seed_write = |json: String, seq: &'static str| {
        let prefix = prefix.clone();
        async move {
            cmd(&["RPUSH", &format!("{prefix}:log::s"), &json]).await;
            cmd(&["RPUSH", &format!("{prefix}:run::s:py"), &json]).await;
            cmd(&["ZADD", &format!("{prefix}:seq::s:py"), seq, seq]).await;
            cmd(&["SET", &format!("{prefix}:life::s:py"), &json]).await;
            cmd(&["SADD", &format!("{prefix}:logruns::s"), "py"]).await;
            cmd(&["SADD", &format!("{prefix}:runs:"), "s:py"]).await;
        }
    };
    seed_write(py_started, "0").await;

    let other = RunContext::new("next").with_session("s");
    let (claim, event) = store
        .claim_start(&other, started(), "o", HOUR)
        .await
        .expect("claim");
    assert_eq!(
        claim.held_by.as_deref(),
        Some("py"),
        "the seed's open run holds the session"
    );
    assert!(event.is_none());
    // The refused claim kept what it reconciled: the index is in step with the log again.
    assert_eq!(cmd(&["GET", &format!("{prefix}:openlen::s")]).await, "3");
    assert_eq!(cmd(&["SMEMBERS", &format!("{prefix}:open::s")]).await, "py");

    let py_done = format!(
        r#"{{"v":{{"major":3,"minor":1}},"kind":"run.cancelled","seq":1,"run_id":"py","session_id":"s","namespace":null,"origin":"o","ts":"{now}","payload":{{"kind":"run.cancelled","reason":null}}}}"#
    );
    seed_write(py_done, "1").await;
    let (claim, event) = store
        .claim_start(&other, started(), "o", HOUR)
        .await
        .expect("claim");
    assert!(claim.won(), "the seed closed its run: {claim:?}");
    assert_eq!(event.expect("event").seq, 0);
    // And the seed's run continues its own seqs when we append to it.
    let py = RunContext::new("py").with_session("s");
    let events = store
        .append(&py, vec![text("late")], "o")
        .await
        .expect("append");
    assert_eq!(events[0].seq, 2);
}

#[tokio::test]
async fn wrong_type_key_is_rejected_and_writes_nothing() {
    let prefix = unique_prefix("badtype");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = RunContext::new("r").with_session("s");
    cmd(&["SET", &format!("{prefix}:seq::s:r"), "not a zset"]).await;
    match store.append(&ctx, vec![text("a")], "o").await {
        Err(Error::Rejected { key, .. }) => assert_eq!(key, format!("{prefix}:seq::s:r")),
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(cmd(&["EXISTS", &format!("{prefix}:log::s")]).await, "0");
    assert_eq!(cmd(&["EXISTS", &format!("{prefix}:run::s:r")]).await, "0");
    // Reads of a wrong-type key are typed errors too.
    cmd(&["SET", &format!("{prefix}:log::t"), "x"]).await;
    let t = RunContext::new("r").with_session("t");
    assert!(matches!(
        store.read(&t, 0, None).await,
        Err(Error::Rejected { .. })
    ));
}

/// The run-index keys are only written by lifecycle events: a foreign type there rejects a
/// lifecycle append (nothing written) and not a plain one (ADR 0130).
#[tokio::test]
async fn wrong_type_index_key_rejects_lifecycle_appends_only() {
    let prefix = unique_prefix("badindex");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = RunContext::new("r").with_session("s");
    let logruns = format!("{prefix}:logruns::s");
    cmd(&["SET", &logruns, "not a set"]).await;
    match store.append(&ctx, vec![completed()], "o").await {
        Err(Error::Rejected { key, .. }) => assert_eq!(key, logruns),
        other => panic!("expected Rejected, got {other:?}"),
    }
    for key in ["log::s", "run::s:r", "seq::s:r", "life::s:r"] {
        assert_eq!(
            cmd(&["EXISTS", &format!("{prefix}:{key}")]).await,
            "0",
            "{key}"
        );
    }
    let events = store
        .append(&ctx, vec![text("plain")], "o")
        .await
        .expect("a plain event does not write the run index");
    assert_eq!(events[0].seq, 0);
    // Keys of the claim index and the run LIST are checked through the script's reads.
    let t = RunContext::new("r").with_session("t");
    cmd(&["SADD", &format!("{prefix}:run::t:r"), "x"]).await;
    match store.append(&t, vec![text("a")], "o").await {
        Err(Error::Rejected { key, .. }) => assert_eq!(key, format!("{prefix}:run::t:r")),
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(cmd(&["EXISTS", &format!("{prefix}:log::t")]).await, "0");
    let u = RunContext::new("r").with_session("u");
    cmd(&["LPUSH", &format!("{prefix}:openlen::u"), "x"]).await;
    match store.append(&u, vec![text("a")], "o").await {
        Err(Error::Rejected { key, .. }) => assert_eq!(key, format!("{prefix}:openlen::u")),
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(cmd(&["EXISTS", &format!("{prefix}:log::u")]).await, "0");
}

/// A plain append checks the log and run LISTs through its own RPUSHes (ADR 0331): a foreign
/// type there is `Rejected` naming the key, and what the call had pushed, and its receipt, are
/// taken back, so nothing of it remains.
#[tokio::test]
async fn foreign_list_undoes_a_plain_append() {
    let prefix = unique_prefix("undo");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let log = format!("{prefix}:log::s");
    // The log LIST itself is foreign: nothing is written at all.
    cmd(&["SET", &log, "not a list"]).await;
    let ctx = RunContext::new("r").with_session("s");
    match store.append(&ctx, vec![text("a")], "o").await {
        Err(Error::Rejected { key, .. }) => assert_eq!(key, log),
        other => panic!("expected Rejected, got {other:?}"),
    }
    for key in ["run::s:r", "seq::s:r", "openlen::s"] {
        assert_eq!(
            cmd(&["EXISTS", &format!("{prefix}:{key}")]).await,
            "0",
            "{key}"
        );
    }
    assert_eq!(cmd(&["GET", &log]).await, "not a list");

    // A log with another run's events and a foreign run LIST, for one event and for a batch:
    // the log is left exactly as it was, and no receipt is left behind.
    let t = RunContext::new("other").with_session("t");
    store
        .append(&t, vec![text("x"), text("y")], "o")
        .await
        .expect("append");
    let log = format!("{prefix}:log::t");
    let before = cmd(&["LRANGE", &log, "0", "-1"]).await;
    let openlen = cmd(&["GET", &format!("{prefix}:openlen::t")]).await;
    let run = format!("{prefix}:run::t:r");
    cmd(&["SADD", &run, "x"]).await;
    let r = RunContext::new("r").with_session("t");
    for batch in [vec![text("a")], vec![text("a"), text("b"), text("c")]] {
        match store.append_with_op("t", batch, &r, "o", "op-undo").await {
            Err(Error::Rejected { key, .. }) => assert_eq!(key, run),
            other => panic!("expected Rejected, got {other:?}"),
        }
        assert_eq!(cmd(&["LRANGE", &log, "0", "-1"]).await, before);
        assert_eq!(
            cmd(&["GET", &format!("{prefix}:openlen::t")]).await,
            openlen
        );
        assert_eq!(cmd(&["EXISTS", &format!("{prefix}:seq::t:r")]).await, "0");
    }
    // With the key repaired, the same op token writes: no receipt was left by the refusals.
    cmd(&["DEL", &run]).await;
    let events = store
        .append_with_op("t", vec![text("a")], &r, "o", "op-undo")
        .await
        .expect("append");
    assert_eq!(events[0].seq, 0);
    assert_eq!(cmd(&["LLEN", &log]).await, "3");
    assert_eq!(cmd(&["GET", &format!("{prefix}:openlen::t")]).await, "3");
}

/// A batch larger than one call can carry is written in slices, still as one atomic append with
/// dense seqs in all three structures.
#[tokio::test]
async fn large_batch_is_written_in_slices() {
    let prefix = unique_prefix("slices");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = RunContext::new("r").with_session("s");
    let batch: Vec<_> = (0..2_500).map(|i| text(format!("chunk {i}"))).collect();
    let events = store.append(&ctx, batch, "o").await.expect("append");
    assert_eq!(events.len(), 2_500);
    assert_eq!(events.last().map(|e| e.seq), Some(2_499));
    let read = store.read_run(&ctx, 0).await.expect("read");
    assert_eq!(read, events);
    assert_eq!(cmd(&["LLEN", &format!("{prefix}:log::s")]).await, "2500");
    assert_eq!(cmd(&["ZCARD", &format!("{prefix}:seq::s:r")]).await, "2500");
    assert_eq!(
        cmd(&[
            "ZRANGE",
            &format!("{prefix}:seq::s:r"),
            "1000",
            "1000",
            "WITHSCORES"
        ])
        .await,
        "1000\n1000"
    );
    assert_eq!(cmd(&["GET", &format!("{prefix}:openlen::s")]).await, "2500");
    let next = store
        .append(&ctx, vec![text("next")], "o")
        .await
        .expect("append");
    assert_eq!(next[0].seq, 2_500);
}

#[tokio::test]
async fn missing_or_corrupt_life_key_keeps_the_hold() {
    let prefix = unique_prefix("life");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = RunContext::new("live").with_session("s");
    store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim");
    // An evicted life key: the run list still says the run is open, and it keeps its hold.
    cmd(&["DEL", &format!("{prefix}:life::s:live")]).await;
    let other = RunContext::new("other").with_session("s");
    let (claim, _) = store
        .claim_start(&other, started(), "o", HOUR)
        .await
        .expect("claim");
    assert_eq!(claim.held_by.as_deref(), Some("live"));
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Running
    );
    // A corrupt life value is recovered the same way.
    cmd(&["SET", &format!("{prefix}:life::s:live"), "{not json"]).await;
    let (claim, _) = store
        .claim_start(&other, started(), "o", HOUR)
        .await
        .expect("claim");
    assert_eq!(claim.held_by.as_deref(), Some("live"));
    let runs = store.list_runs(&ctx, None).await.expect("list");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Running);
}

/// A write re-sent with the same op token (what fred does after a reconnect) applies once.
#[tokio::test]
async fn resent_write_applies_once() {
    let store = common::store("resend", None).await;
    let ctx = RunContext::new("r");
    let first = store
        .append_with_op("r", vec![text("a"), text("b")], &ctx, "o", "op-1")
        .await
        .expect("append");
    let again = store
        .append_with_op("r", vec![text("a"), text("b")], &ctx, "o", "op-1")
        .await
        .expect("append");
    assert_eq!(first, again);
    assert_eq!(store.read(&ctx, 0, None).await.expect("read").len(), 2);
}

#[tokio::test]
async fn read_run_from_seq_is_served_by_redis() {
    let store = common::store("readrun", None).await;
    let ctx = RunContext::new("r");
    for i in 0..10 {
        store
            .append(&ctx, vec![text(i.to_string())], "o")
            .await
            .expect("append");
    }
    let tail = store.read_run(&ctx, 7).await.expect("read_run");
    assert_eq!(
        tail.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    assert!(store.read_run(&ctx, 10).await.expect("read_run").is_empty());
    assert!(
        store
            .read_run(&ctx, u64::MAX)
            .await
            .expect("read_run")
            .is_empty()
    );
}

#[tokio::test]
async fn check_server_reports_eviction_and_persistence() {
    let mut server = switchyard_conformance::harness::RedisServer::start_with(&[
        "--maxmemory-policy",
        "allkeys-lru",
    ])
    .expect("redis-server");
    let store = common::store_at(&server.url(), "chk", None).await;
    let report = store.check_server().await.expect("check");
    assert_eq!(report.maxmemory_policy.as_deref(), Some("allkeys-lru"));
    assert!(
        report
            .issues
            .iter()
            .any(|i| matches!(i, switchyard_store_redis::ServerIssue::Eviction { .. }))
    );
    assert!(
        report
            .issues
            .contains(&switchyard_store_redis::ServerIssue::PersistenceOff)
    );
    server.kill();

    let mut good = switchyard_conformance::harness::RedisServer::start_with(&[
        "--maxmemory-policy",
        "noeviction",
        "--appendonly",
        "yes",
    ])
    .expect("redis-server");
    let store = common::store_at(&good.url(), "chk", None).await;
    let report = store.check_server().await.expect("check");
    assert!(report.issues.is_empty(), "{:?}", report.issues);
    good.kill();
}

#[tokio::test]
async fn bad_urls_are_config_errors() {
    for url in ["http://localhost", "redis-sentinel://x:1", "redis://:@[::1"] {
        match switchyard_store_redis::RedisEventStore::connect(url).await {
            Err(Error::Config { key, .. }) => assert_eq!(key, "url"),
            other => panic!("{url}: expected Config, got {other:?}"),
        }
    }
}

/// An undecodable entry in the log (written by something else) cannot name its run: the claim
/// rebuilds the open-run index from the seed's `logruns` and `life` keys and keeps every hold.
#[tokio::test]
async fn undecodable_log_entry_rebuilds_the_open_index() {
    let prefix = unique_prefix("rebuild");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let live = RunContext::new("live").with_session("s");
    store
        .claim_start(&live, started(), "o", HOUR)
        .await
        .expect("claim");
    cmd(&["RPUSH", &format!("{prefix}:log::s"), "{garbage"]).await;
    let other = RunContext::new("other").with_session("s");
    let (claim, _) = store
        .claim_start(&other, started(), "o", HOUR)
        .await
        .expect("claim");
    assert_eq!(claim.held_by.as_deref(), Some("live"));
    store
        .append(&live, vec![completed()], "o")
        .await
        .expect("complete");
    let (claim, event) = store
        .claim_start(&other, started(), "o", HOUR)
        .await
        .expect("claim");
    assert!(claim.won(), "{claim:?}");
    assert!(event.is_some());
    // The log itself reports the bad entry as corrupt, naming it.
    match store.read(&other, 0, None).await {
        Err(Error::Corrupt { location, .. }) => assert_eq!(location, format!("{prefix}:log::s[1]")),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[tokio::test]
async fn check_server_without_config_access_is_unverifiable() {
    let mut server = switchyard_conformance::harness::RedisServer::start_with(&[
        "--rename-command",
        "CONFIG",
        "",
    ])
    .expect("redis-server");
    let store = common::store_at(&server.url(), "chk", None).await;
    let report = store
        .check_server()
        .await
        .expect("a refused CONFIG is not an error");
    assert!(report.maxmemory_policy.is_none());
    assert!(report.issues.iter().any(|i| matches!(
        i,
        switchyard_store_redis::ServerIssue::Unverifiable {
            setting: "maxmemory-policy",
            ..
        }
    )));
    server.kill();
}

/// The line of waiting runs (ADR 0394) is one LIST beside the log, `P:line:{ns}:{log}`, holding
/// each entry's JSON and nothing in the log; an entry that holds a run id but is not an entry is
/// `Corrupt` at the key, for reads and pushes alike; a foreign type there is refused.
#[tokio::test]
async fn the_line_is_one_list_beside_the_log() {
    let prefix = unique_prefix("layout");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = |run: &str| {
        RunContext::new(run)
            .with_session("x/y z:1")
            .with_namespace("a:b")
            .expect("ns")
    };
    let entry = |run: &str| QueuedRun {
        run_id: run.into(),
        opening: started(),
        origin: "helper".into(),
        stale_after: HOUR,
    };
    for (n, run) in ["é~_.-", "w\"2"].into_iter().enumerate() {
        let place = store.line_push(&ctx(run), &entry(run)).await.expect("push");
        assert_eq!(place, n as u64 + 1);
    }
    let line = format!("{prefix}:line:a%3Ab:x%2Fy%20z%3A1");
    assert_eq!(store.keys().line("a:b", "x/y z:1"), line);
    // Only the line: a waiting run writes nothing a seed process reads.
    assert_eq!(
        lines(&cmd(&["KEYS", &format!("{prefix}:*")]).await),
        [line.as_str()]
    );
    assert_eq!(cmd(&["TYPE", &line]).await, "list");
    let stored = format!("{}\n{}", entry("é~_.-").to_json(), entry("w\"2").to_json());
    assert_eq!(cmd(&["LRANGE", &line, "0", "-1"]).await, stored);

    // Garbage holding a run id's JSON text: pushing or removing that id cannot tell whether it
    // waits, and says where; a read names the entry too.
    cmd(&["RPUSH", &line, "not an entry \"zz\""]).await;
    for refused in [
        store.line_push(&ctx("zz"), &entry("zz")).await.err(),
        store.line_remove(&ctx("zz"), "zz").await.err(),
        store.line_read(&ctx("zz"), 10).await.err(),
    ] {
        assert!(
            matches!(refused, Some(Error::Corrupt { ref location, .. }) if *location == format!("{line}[2]")),
            "{refused:?}"
        );
    }
    assert_eq!(cmd(&["LLEN", &line]).await, "3", "nothing was written");
    // Other ids pass the garbage by: it holds no text of theirs.
    assert!(
        store
            .line_remove(&ctx("w\"2"), "w\"2")
            .await
            .expect("remove")
    );
    assert_eq!(
        store.line_push(&ctx("v"), &entry("v")).await.expect("push"),
        3
    );

    let foreign = format!("{prefix}:line:a%3Ab:other");
    cmd(&["SET", &foreign, "x"]).await;
    let other = RunContext::new("r")
        .with_session("other")
        .with_namespace("a:b")
        .expect("ns");
    let refused = store.line_push(&other, &entry("r")).await;
    assert!(
        matches!(refused, Err(Error::Rejected { .. })),
        "{refused:?}"
    );
    assert_eq!(cmd(&["GET", &foreign]).await, "x");
}
