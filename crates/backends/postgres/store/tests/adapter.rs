//! What the suite cannot see, on the switchyard layout (ADR 0222, kept by ADR 0378): 500
//! appenders on one run, the stored bytes, the database clock, claims from two stores at once, the
//! open-runs index, the conditional append's function, hostile values, re-opening. agentdeck's
//! layout has its own in `agentdeck_layout.rs`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use switchyard_conformance::harness::{postgres_query, postgres_url, unique_id, unique_schema};
use switchyard_core::event::{
    Block, Custom, InterruptReason, InvocableKind, Payload, RunCompleted, RunInterrupted,
    RunResumed, RunStarted, Usage,
};
use switchyard_core::{Error, EventStore, RunContext};
use switchyard_store_postgres::{PostgresEventStore, PostgresLayout, PostgresOptions};

async fn store_in(schema: &str, connections: u32) -> PostgresEventStore {
    PostgresEventStore::open_with(
        &postgres_url(),
        PostgresOptions::default()
            .max_connections(connections)
            .schema(schema)
            .layout(PostgresLayout::Switchyard),
    )
    .await
    .expect("open")
}

fn rows(sql: &str) -> Vec<Vec<Option<String>>> {
    postgres_query(&postgres_url(), sql).expect(sql)
}

fn opening(_: &RunContext) -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi ✓")],
    }
}

fn custom(i: usize) -> Payload {
    Payload::Custom(Custom {
        name: "test.tick".into(),
        data: serde_json::from_value(serde_json::json!({"i": i, "text": "héllo ✓ \"q\" \\ \u{1}"}))
            .expect("object"),
    })
}

/// The issue's requirement: 500 appenders on one run at once, each one statement; all succeed,
/// and the seqs are 0..N without a gap or a repeat, in append order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_hundred_concurrent_appenders_to_one_run_get_dense_seqs() {
    let store = Arc::new(store_in(&unique_schema("dense"), 32).await);
    let ctx = RunContext::new(unique_id("run")).with_session(unique_id("s"));
    let tasks: Vec<_> = (0..500)
        .map(|i| {
            let (store, ctx) = (store.clone(), ctx.clone());
            tokio::spawn(async move {
                let batch = if i % 5 == 0 {
                    vec![custom(i), custom(i)]
                } else {
                    vec![custom(i)]
                };
                store.append(&ctx, batch, "test").await
            })
        })
        .collect();
    let mut seqs = Vec::new();
    for task in tasks {
        let events = task.await.expect("task").expect("every append succeeds");
        let first = events[0].seq;
        for (k, event) in events.iter().enumerate() {
            assert_eq!(
                event.seq,
                first + k as u64,
                "a batch's seqs are consecutive"
            );
            assert_eq!(event.ts, events[0].ts, "a batch shares one ts");
            seqs.push(event.seq);
        }
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..600).collect::<Vec<u64>>());
    let read = store.read_run(&ctx, 0).await.expect("read");
    assert_eq!(read.iter().map(|e| e.seq).collect::<Vec<_>>(), seqs);
    assert!(
        read.windows(2).all(|w| w[0].ts <= w[1].ts),
        "ts never goes back within a run"
    );
}

/// The stored `data` is byte for byte `Event::to_json()` of the event `append` returned, for
/// escapes, unicode, control characters and a ts with and without a fraction.
#[tokio::test]
async fn stored_bytes_are_event_to_json() {
    let schema = unique_schema("bytes");
    let store = store_in(&schema, 4).await;
    let ctx = RunContext::new(unique_id("run"))
        .with_session("s \"quoted\" ✓")
        .with_namespace("ns/ü")
        .expect("namespace");
    let mut written = Vec::new();
    let (_, started) = store
        .claim_start(&ctx, opening(&ctx), "o\u{2028}", Duration::from_secs(60))
        .await
        .expect("claim");
    written.push(started.expect("won"));
    written.extend(
        store
            .append(&ctx, (0..3).map(custom).collect(), "o")
            .await
            .expect("append"),
    );
    for event in &written {
        let stored = rows(&format!(
            "SELECT data FROM {schema}.events WHERE seq = {} AND run_id = '{}'",
            event.seq,
            ctx.run_id()
        ));
        assert_eq!(
            stored[0][0].as_deref(),
            Some(event.to_json().as_str()),
            "seq {}",
            event.seq
        );
    }
    // An injected clock on a whole second: the fraction is left out, as Python writes it.
    let clock = Arc::new(switchyard_core::ManualClock::new(
        DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .expect("ts")
            .with_timezone(&Utc),
    ));
    let pinned = PostgresEventStore::open_with(
        &postgres_url(),
        PostgresOptions::default()
            .schema(&schema)
            .layout(PostgresLayout::Switchyard)
            .clock(clock),
    )
    .await
    .expect("open");
    let events = pinned
        .append(&ctx, vec![custom(9)], "o")
        .await
        .expect("append");
    assert!(
        events[0]
            .to_json()
            .contains(r#""ts":"2026-12-01T10:00:00Z""#)
    );
    let stored = rows(&format!(
        "SELECT data FROM {schema}.events WHERE seq = {} AND run_id = '{}'",
        events[0].seq,
        ctx.run_id()
    ));
    assert_eq!(stored[0][0].as_deref(), Some(events[0].to_json().as_str()));
}

/// `ts` comes from the database's clock: between two readings of it around the append.
#[tokio::test]
async fn the_database_clock_stamps_ts() {
    let store = store_in(&unique_schema("clock"), 2).await;
    let ctx = RunContext::new(unique_id("run"));
    let now = || {
        let text = rows(
            "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
        );
        DateTime::parse_from_rfc3339(text[0][0].as_deref().expect("now")).expect("parse")
    };
    let before = now();
    let events = store
        .append(&ctx, vec![custom(0)], "o")
        .await
        .expect("append");
    let after = now();
    assert!(
        before <= events[0].ts && events[0].ts <= after,
        "{before} {} {after}",
        events[0].ts
    );
}

/// Two stores on one schema (two gateways): of 40 concurrent claims of one session, exactly one
/// wins and the others name it; of 40 concurrent resumes of its interrupted run, exactly one
/// gets the event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_from_two_stores_are_exactly_once() {
    let schema = unique_schema("claims");
    let stores = [
        Arc::new(store_in(&schema, 8).await),
        Arc::new(store_in(&schema, 8).await),
    ];
    let session = unique_id("s");
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let store = stores[i % 2].clone();
            let ctx = RunContext::new(format!("run-{i:02}")).with_session(&session);
            tokio::spawn(async move {
                let claim = store
                    .claim_start(&ctx, opening(&ctx), "o", Duration::from_secs(600))
                    .await;
                (ctx, claim)
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut holders = Vec::new();
    for task in tasks {
        let (ctx, claim) = task.await.expect("task");
        let (claim, event) = claim.expect("a lost claim is data, not an error");
        match claim.held_by {
            None => winners.push((ctx, event.expect("the winner's event"))),
            Some(holder) => holders.push(holder),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one claim wins");
    let (ctx, _) = winners.pop().expect("winner");
    assert!(
        holders.iter().all(|h| h == ctx.run_id()),
        "every loser names the winner"
    );

    let interrupt = Payload::RunInterrupted(RunInterrupted {
        interrupt_id: "i1".into(),
        reason: InterruptReason::Human,
        payload: Default::default(),
        thread_id: None,
        expected_resume: None,
    });
    stores[0]
        .append(&ctx, vec![interrupt], "o")
        .await
        .expect("interrupt");
    let resumes: Vec<_> = (0..40)
        .map(|i| {
            let (store, ctx) = (stores[i % 2].clone(), ctx.clone());
            tokio::spawn(async move {
                let resumed = RunResumed {
                    reason: Some("ok".into()),
                    value: None,
                };
                store.claim_resume(&ctx, resumed, "o").await
            })
        })
        .collect();
    let mut got = 0;
    for task in resumes {
        if task.await.expect("task").expect("resume").is_some() {
            got += 1;
        }
    }
    assert_eq!(got, 1, "exactly one resume gets the event");
    let done = Payload::RunCompleted(RunCompleted {
        output: vec![],
        usage: Usage {
            input_tokens: 1,
            output_tokens: 1,
            usd: None,
        },
    });
    stores[1]
        .append(&ctx, vec![done], "o")
        .await
        .expect("complete");
    let next = RunContext::new("run-next").with_session(&session);
    let (claim, _) = stores[1]
        .claim_start(&next, opening(&next), "o", Duration::from_secs(600))
        .await
        .expect("claim");
    assert!(claim.won(), "a completed run holds nothing");
}

/// The claim reads the log's open runs from the partial index `runs_open`, not the log's
/// history: with thousands of closed runs, the planner's choice for the function's query is an
/// index scan of `runs_open`.
#[tokio::test]
async fn claims_read_the_open_runs_index() {
    let schema = unique_schema("index");
    let _store = store_in(&schema, 2).await;
    postgres_query(
        &postgres_url(),
        &format!(
            "INSERT INTO {schema}.runs (namespace, log_key, run_id, next_seq, last_ts, status) \
             SELECT '', 'log-' || (i % 50), 'run-' || i, 2, now(), \
                    CASE WHEN i % 1000 = 0 THEN 'run.started' ELSE 'run.completed' END \
             FROM generate_series(1, 20000) AS i; ANALYZE {schema}.runs"
        ),
    )
    .expect("history");
    let plan = rows(&format!(
        "EXPLAIN SELECT r.run_id FROM {schema}.runs AS r \
         WHERE r.namespace = '' AND r.log_key = 'log-0' \
           AND r.status IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted') \
         ORDER BY r.run_id LIMIT 1"
    ))
    .into_iter()
    .filter_map(|row| row.into_iter().next().flatten())
    .collect::<Vec<_>>()
    .join("\n");
    assert!(plan.contains("runs_open"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}

/// A won claim commits durably; a lost one ('held', 'exists') wrote nothing but its lock and
/// commits without waiting for the WAL flush, so the next claimer of the log gets the lock at
/// once (ADR 0348). Read from `synchronous_commit` inside the claim's own transaction.
#[tokio::test]
async fn only_lost_claims_commit_without_waiting_for_the_flush() {
    let schema = unique_schema("lostsync");
    let _store = store_in(&schema, 2).await;
    let claim = |run: &str| {
        rows(&format!(
            "BEGIN; \
             SELECT outcome FROM {schema}.claim_start('', 'log', '{run}', 3600000000, NULL, \
               '{{\"seq\":', ',\"ts\":\"', '\"}}'); \
             SHOW synchronous_commit; \
             COMMIT"
        ))
        .into_iter()
        .map(|row| row.into_iter().next().flatten().unwrap_or_default())
        .collect::<Vec<_>>()
    };
    assert_eq!(claim("a"), ["won", "on"], "the winner's commit is durable");
    assert_eq!(claim("b"), ["held", "off"], "a claim on a held log");
    assert_eq!(claim("a"), ["exists", "off"], "a claim of a run id in use");
    assert_eq!(
        rows("SHOW synchronous_commit"),
        [[Some("on".to_string())]],
        "a session's setting is untouched"
    );
}

/// `append_if_open` is one call of the schema's function (ADR 0365): a refusal writes no row, not
/// even the run's, and commits without waiting for the WAL flush (it wrote nothing but a lock); a
/// write commits durably. Read from `synchronous_commit` inside the call's own transaction.
#[tokio::test]
async fn a_conditional_append_is_one_function_call() {
    let schema = unique_schema("appendif");
    let store = store_in(&schema, 2).await;
    let call = |run: &str| {
        rows(&format!(
            "BEGIN; \
             SELECT first_seq, status_before FROM {schema}.append_if_open('', 'log', '{run}', 1, \
               NULL, NULL, ARRAY['{{\"seq\":'], ',\"ts\":\"', ARRAY['\"}}'], \
               ARRAY['text.delta']); \
             SHOW synchronous_commit; \
             COMMIT"
        ))
    };
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        call("ghost"),
        [vec![None, some("")], vec![some("off")]],
        "an unknown run is refused as pending"
    );
    assert_eq!(
        rows(&format!(
            "SELECT count(*) FROM {schema}.runs WHERE run_id = 'ghost'"
        )),
        [[some("0")]],
        "a refusal creates no run"
    );
    let ctx = RunContext::new("r").with_session("log");
    let (claim, _) = store
        .claim_start(&ctx, opening(&ctx), "o", Duration::from_secs(3600))
        .await
        .expect("claim");
    assert!(claim.won());
    assert_eq!(
        call("r"),
        [vec![some("1"), some("run.started")], vec![some("on")]],
        "an open run takes the batch, durably, and says the status it had"
    );
    store
        .append(
            &ctx,
            vec![Payload::RunCompleted(RunCompleted {
                output: vec![],
                usage: Usage {
                    input_tokens: 0,
                    output_tokens: 0,
                    usd: None,
                },
            })],
            "o",
        )
        .await
        .expect("complete");
    assert_eq!(
        call("r"),
        [vec![None, some("run.completed")], vec![some("off")]],
        "a finished run refuses with its latest lifecycle kind"
    );
    assert_eq!(
        rows(&format!(
            "SELECT max(seq) FROM {schema}.events WHERE run_id = 'r'"
        )),
        [[some("2")]],
        "nothing after the terminal event"
    );
}

/// Values PostgreSQL cannot hold are the caller's to fix, never a panic or a transient error.
#[tokio::test]
async fn nul_in_an_id_is_invalid_input() {
    let store = store_in(&unique_schema("nul"), 2).await;
    let ctx = RunContext::new("run\0x");
    match store.append(&ctx, vec![custom(0)], "o").await {
        Err(Error::InvalidInput { .. }) => {}
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

/// Opening again is a no-op migration; the store's tables are in its schema and nowhere else.
#[tokio::test]
async fn reopening_keeps_the_schema_and_its_data() {
    let schema = unique_schema("reopen");
    let ctx = RunContext::new(unique_id("run"));
    store_in(&schema, 2)
        .await
        .append(&ctx, vec![custom(0)], "o")
        .await
        .expect("append");
    let again = store_in(&schema, 2).await;
    let events = again
        .append(&ctx, vec![custom(1)], "o")
        .await
        .expect("append after reopening");
    assert_eq!(events[0].seq, 1);
    let tables: Vec<String> = rows(&format!(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}' ORDER BY 1"
    ))
    .into_iter()
    .filter_map(|row| row.into_iter().next().flatten())
    .collect();
    assert_eq!(
        tables,
        [
            "events",
            "logs",
            "runs",
            "store_migrations",
            "switchyard_line"
        ]
    );
    match PostgresEventStore::open_with(
        &postgres_url(),
        PostgresOptions::default().schema("Not-Valid"),
    )
    .await
    {
        Err(Error::Config { key, .. }) => assert_eq!(key, "schema"),
        other => panic!("{other:?}"),
    }
}
