//! agentdeck's layout (ADR 0377) beyond the suite: the schema is agentdeck's, JSONB keeps values
//! (not bytes), values JSONB cannot hold are the caller's to fix, rows that are no event never
//! fail a writer, READ COMMITTED is required; and what ADR 0378 decides for databases of the
//! switchyard layout: each layout refuses the other's schema, the default refuses to leave an old
//! store behind, and the ADR's conversion statement carries a store over.

use std::time::Duration;

use serde_json::Value;
use switchyard_conformance::harness::{
    fresh_database, postgres_exec, postgres_query, postgres_url, unique_id, unique_schema,
};
use switchyard_core::event::{
    Block, Custom, InterruptReason, InvocableKind, MessageText, Payload, RunCompleted,
    RunInterrupted, RunStarted, Usage,
};
use switchyard_core::{Error, EventStore, RunContext, RunStatus};
use switchyard_store_postgres::{PostgresEventStore, PostgresLayout, PostgresOptions};

const HOUR: Duration = Duration::from_secs(3600);

async fn open(url: &str, options: PostgresOptions) -> switchyard_core::Result<PostgresEventStore> {
    PostgresEventStore::open_with(url, options.max_connections(4)).await
}

fn rows(sql: &str) -> Vec<Vec<Option<String>>> {
    postgres_query(&postgres_url(), sql).expect(sql)
}

fn column(sql: &str) -> Vec<String> {
    rows(sql)
        .into_iter()
        .map(|row| row.into_iter().next().flatten().unwrap_or_default())
        .collect()
}

fn opening() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

fn custom(data: Value) -> Payload {
    Payload::Custom(Custom {
        name: "test.tick".into(),
        data: serde_json::from_value(data).expect("object"),
    })
}

fn text(s: &str) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: s.into(),
    })
}

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![],
        usage: Usage {
            input_tokens: 1,
            output_tokens: 2,
            usd: Some(0.5),
        },
    })
}

fn interrupted() -> Payload {
    Payload::RunInterrupted(RunInterrupted {
        interrupt_id: "i1".into(),
        reason: InterruptReason::Human,
        payload: Default::default(),
        thread_id: None,
        expected_resume: None,
    })
}

/// agentdeck 3.1.0's DDL (`PostgresEventStore.__init__`), for a schema named `schema`.
fn agentdeck_ddl(schema: &str) -> String {
    format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.events ( id BIGSERIAL PRIMARY KEY, namespace TEXT NOT \
         NULL, log_key TEXT NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL, data JSONB NOT NULL);
         CREATE INDEX IF NOT EXISTS events_by_log ON {schema}.events (namespace, log_key, id);
         CREATE UNIQUE INDEX IF NOT EXISTS events_by_run ON {schema}.events (namespace, log_key, run_id, seq);"
    )
}

#[tokio::test]
async fn the_schema_is_agentdecks() {
    let schema = unique_schema("adschema");
    let store = open(&postgres_url(), PostgresOptions::default().schema(&schema))
        .await
        .expect("open");
    assert_eq!(store.layout(), PostgresLayout::Agentdeck);
    let columns = rows(&format!(
        "SELECT column_name, data_type, is_nullable, column_default IS NOT NULL \
         FROM information_schema.columns WHERE table_schema = '{schema}' AND table_name = 'events' \
         ORDER BY ordinal_position"
    ));
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        columns,
        [
            ["id", "bigint", "NO", "t"],
            ["namespace", "text", "NO", "f"],
            ["log_key", "text", "NO", "f"],
            ["run_id", "text", "NO", "f"],
            ["seq", "integer", "NO", "f"],
            ["data", "jsonb", "NO", "f"],
        ]
        .map(|row| row.map(some).to_vec())
    );
    let indexes = column(&format!(
        "SELECT indexname || ': ' || regexp_replace(indexdef, ' ON .*USING btree', '') \
         FROM pg_indexes WHERE schemaname = '{schema}' AND tablename = 'events' ORDER BY 1"
    ));
    assert_eq!(
        indexes,
        [
            "events_by_log: CREATE INDEX events_by_log (namespace, log_key, id)",
            "events_by_run: CREATE UNIQUE INDEX events_by_run (namespace, log_key, run_id, seq)",
            "events_pkey: CREATE UNIQUE INDEX events_pkey (id)",
        ]
    );
    // agentdeck's own setup on our schema finds everything there.
    postgres_exec(&postgres_url(), &agentdeck_ddl(&schema)).expect("agentdeck's DDL");
}

/// JSONB keeps values: the stored value is `to_json()`'s (compared as JSON by PostgreSQL), and a
/// read gives back the events `append` returned. The text comes back in JSONB's key order, and
/// a read renders it in the envelope's order, the same on every read.
#[tokio::test]
async fn jsonb_keeps_values_not_bytes() {
    let schema = unique_schema("advalues");
    let store = open(&postgres_url(), PostgresOptions::default().schema(&schema))
        .await
        .expect("open");
    let ctx = RunContext::new(unique_id("run"))
        .with_session("s \"q\" ✓")
        .with_namespace("ns/ü")
        .expect("ctx");
    let (_, started) = store
        .claim_start(&ctx, opening(), "o\u{2028}", HOUR)
        .await
        .expect("claim");
    let mut written = vec![started.expect("won")];
    written.extend(
        store
            .append(
                &ctx,
                vec![
                    custom(serde_json::json!({
                        "zeta": 1, "alpha": [1.5, -0.25, 1e300, null], "mid": {"b": true, "a": "\u{1}é"}
                    })),
                    text("héllo \"wörld\"\n"),
                ],
                "o",
            )
            .await
            .expect("append"),
    );
    for event in &written {
        let same = column(&format!(
            "SELECT data = CAST($${}$$ AS jsonb) FROM {schema}.events WHERE run_id = '{}' AND seq = {}",
            event.to_json(),
            ctx.run_id(),
            event.seq
        ));
        assert_eq!(same, ["t"], "seq {}", event.seq);
    }
    let read = store.read_run(&ctx, 0).await.expect("read");
    assert_eq!(read, written, "the events append returned");
    let again = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(
        read.iter().map(|e| e.to_json()).collect::<Vec<_>>(),
        again.iter().map(|e| e.to_json()).collect::<Vec<_>>()
    );
    // The custom data's keys come back in JSONB's order (shorter keys first), not as written.
    assert!(
        read[1].to_json().contains(r#""data":{"mid":"#),
        "{}",
        read[1].to_json()
    );
}

/// A run's next seq is one backward seek of `events_by_run`, however long the run, also on a
/// table the planner has no statistics for (ADR 0391). A `MAX(seq)` read every index entry of
/// the run there: 2,000 for an append to a run of 2,000 events. Counted by the index's tuples
/// read in the appending transaction, for both functions that append (`append_group`, the
/// store's appends; `append_events`, its conditional and resuming writes).
#[tokio::test]
async fn a_runs_next_seq_is_one_seek_however_long_the_run() {
    let schema = unique_schema("adseek");
    let store = open(&postgres_url(), PostgresOptions::default().schema(&schema))
        .await
        .expect("open");
    // No ANALYZE may come while the run grows: the table stays as a fresh one is.
    postgres_exec(
        &postgres_url(),
        &format!("ALTER TABLE {schema}.events SET (autovacuum_enabled = off)"),
    )
    .expect("autovacuum off");
    let ctx = RunContext::new(unique_id("run")).with_session("s");
    store
        .claim_start(&ctx, opening(), "o", HOUR)
        .await
        .expect("claim")
        .1
        .expect("won");
    for _ in 0..10 {
        store
            .append(&ctx, (0..200).map(|_| text("t")).collect(), "o")
            .await
            .expect("append");
    }
    let run = ctx.run_id();
    for call in [
        format!(
            "append_group(0, '', 's', NULL, ARRAY['{run}'], ARRAY[false], ARRAY[',\"ts\":\"'], \
             ARRAY[1], ARRAY[1], ARRAY['{{\"seq\":'], ARRAY['\"}}'])"
        ),
        format!(
            "append_events(0, '', 's', '{run}', NULL, ARRAY['{{\"seq\":'], ',\"ts\":\"', \
             ARRAY['\"}}'])"
        ),
    ] {
        // One implicit transaction: the call, then what it read of the index so far.
        let read = rows(&format!(
            "SET search_path TO {schema}; SELECT * FROM {call}; \
             SELECT pg_stat_get_xact_tuples_returned('{schema}.events_by_run'::regclass)"
        ));
        let last = read.last().and_then(|row| row[0].clone()).expect("a count");
        let tuples: u64 = last.parse().expect("a number");
        assert!(tuples <= 2, "{call} read {tuples} index entries");
    }
}

/// PostgreSQL's JSONB cannot hold U+0000: such an event is the caller's to fix, and nothing of
/// its batch is written.
#[tokio::test]
async fn a_nul_character_is_invalid_input() {
    let store = open(
        &postgres_url(),
        PostgresOptions::default().schema(unique_schema("adnul")),
    )
    .await
    .expect("open");
    let ctx = RunContext::new(unique_id("run"));
    match store
        .append(&ctx, vec![text("fine"), text("a\u{0}b")], "o")
        .await
    {
        Err(Error::InvalidInput { .. }) => {}
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    assert!(store.read_run(&ctx, 0).await.expect("read").is_empty());
    match store
        .append(&RunContext::new("run\0x"), vec![text("x")], "o")
        .await
    {
        Err(Error::InvalidInput { .. }) => {}
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

/// Rows written behind the store's back that are no event (JSON of another shape) never fail the
/// writer's insert: the trigger skips what has no lifecycle kind.
#[tokio::test]
async fn rows_that_are_no_event_never_fail_a_writer() {
    let schema = unique_schema("adrows");
    let store = open(&postgres_url(), PostgresOptions::default().schema(&schema))
        .await
        .expect("open");
    postgres_exec(
        &postgres_url(),
        &format!(
            "INSERT INTO {schema}.events (namespace, log_key, run_id, seq, data) VALUES \
             ('', 'x', 'x', 0, '[1, 2]'), ('', 'x', 'x', 1, '\"run.started\"'), \
             ('', 'x', 'x', 2, '{{\"kind\": 5}}'), ('', 'x', 'x', 3, 'null')"
        ),
    )
    .expect("rows of any JSON");
    let ctx = RunContext::new("x");
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Pending
    );
    assert!(matches!(
        store.read(&ctx, 0, None).await,
        Err(Error::Corrupt { .. })
    ));
}

/// A Python service may connect as a role of its own with rights on agentdeck's `events` only:
/// its inserts still keep `event_runs` (the trigger runs as its owner), so our status sees them.
#[tokio::test]
async fn another_role_with_rights_on_events_only_keeps_the_status() {
    let schema = unique_schema("adrole");
    let store = open(&postgres_url(), PostgresOptions::default().schema(&schema))
        .await
        .expect("open");
    let role = unique_schema("adrole_py");
    let started = r#"{"v":{"major":3,"minor":1},"kind":"run.started","seq":0,"run_id":"r","session_id":null,"namespace":null,"origin":"o","ts":"2026-01-01T00:00:00Z","payload":{"kind":"run.started","invocable":"o","kind_of_invocable":"agent","input":[]}}"#;
    postgres_exec(
        &postgres_url(),
        &format!(
            "CREATE ROLE {role}; \
             GRANT USAGE ON SCHEMA {schema} TO {role}; \
             GRANT SELECT, INSERT ON {schema}.events TO {role}; \
             GRANT USAGE ON SEQUENCE {schema}.events_id_seq TO {role}; \
             BEGIN; SET LOCAL ROLE {role}; \
             INSERT INTO {schema}.events (namespace, log_key, run_id, seq, data) \
             VALUES ('', 'r', 'r', 0, '{started}'); COMMIT"
        ),
    )
    .expect("an insert by a role with rights on events only");
    assert_eq!(
        store
            .run_status(&RunContext::new("r"))
            .await
            .expect("status"),
        RunStatus::Running
    );
}

/// A transaction stronger than READ COMMITTED would let two claims win (the function's reads
/// would see the snapshot taken before the lock): it is refused, saying what to set.
#[tokio::test]
async fn stronger_isolation_is_refused() {
    let schema = unique_schema("adiso");
    let _store = open(&postgres_url(), PostgresOptions::default().schema(&schema))
        .await
        .expect("open");
    let refused = postgres_query(
        &postgres_url(),
        &format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; \
             SELECT * FROM {schema}.append_events(1, '', 'l', 'r', NULL, \
               ARRAY['{{\"seq\":'], ',\"ts\":\"', ARRAY['\"}}']); COMMIT"
        ),
    )
    .expect_err("refused");
    assert!(refused.contains("READ COMMITTED"), "{refused}");
}

/// Each layout refuses a schema holding the other's tables, naming the way out.
#[tokio::test]
async fn each_layout_refuses_the_others_schema() {
    let url = postgres_url();
    let old = unique_schema("adold");
    open(
        &url,
        PostgresOptions::default()
            .schema(&old)
            .layout(PostgresLayout::Switchyard),
    )
    .await
    .expect("open the switchyard layout");
    match open(&url, PostgresOptions::default().schema(&old)).await {
        Err(Error::Config {
            key,
            reason: message,
        }) => {
            assert_eq!(key, "schema");
            assert!(
                message.contains("PostgresLayout::Switchyard") && message.contains("ADR 0378"),
                "{message}"
            );
        }
        other => panic!("expected Config, got {other:?}"),
    }
    let new = unique_schema("adnew");
    open(&url, PostgresOptions::default().schema(&new))
        .await
        .expect("open agentdeck's layout");
    match open(
        &url,
        PostgresOptions::default()
            .schema(&new)
            .layout(PostgresLayout::Switchyard),
    )
    .await
    {
        Err(Error::Config {
            reason: message, ..
        }) => {
            assert!(message.contains("PostgresLayout::Agentdeck"), "{message}")
        }
        other => panic!("expected Config, got {other:?}"),
    }
}

/// A database whose store is in the switchyard layout's default schema: opening with every
/// default is refused (it would start an empty store in `agentdeck_events` and leave the old one
/// behind); naming the layout opens either.
#[tokio::test]
async fn the_defaults_refuse_to_leave_an_old_store_behind() {
    let url = fresh_database(&postgres_url(), "adguard");
    let old = open(
        &url,
        PostgresOptions::default().layout(PostgresLayout::Switchyard),
    )
    .await
    .expect("the switchyard layout, in its default schema");
    assert_eq!(old.schema(), "switchyard");
    match open(&url, PostgresOptions::default()).await {
        Err(Error::Config {
            reason: message, ..
        }) => {
            assert!(message.contains("ADR 0378"), "{message}")
        }
        other => panic!("expected Config, got {other:?}"),
    }
    let fresh = open(
        &url,
        PostgresOptions::default().layout(PostgresLayout::Agentdeck),
    )
    .await
    .expect("agentdeck's layout, chosen");
    assert_eq!(fresh.schema(), "agentdeck_events");
    // Once agentdeck's layout exists, the defaults open it.
    open(&url, PostgresOptions::default())
        .await
        .expect("the defaults");
}

/// ADR 0378's conversion: one INSERT … SELECT from the switchyard layout's `events` into
/// agentdeck's, with both stopped. Every event, status, listing and claim is the same after.
#[tokio::test]
async fn the_adrs_conversion_carries_a_store_over() {
    let url = postgres_url();
    let (from, to) = (unique_schema("adfrom"), unique_schema("adto"));
    let old = open(
        &url,
        PostgresOptions::default()
            .schema(&from)
            .layout(PostgresLayout::Switchyard),
    )
    .await
    .expect("open");
    let done = RunContext::new("done").with_session("s");
    let waiting = RunContext::new("waiting").with_session("s");
    let solo = RunContext::new("solo").with_namespace("acme").expect("ctx");
    for ctx in [&done, &waiting, &solo] {
        let (claim, _) = old
            .claim_start(ctx, opening(), "o", HOUR)
            .await
            .expect("claim");
        assert!(claim.won());
        let last = if ctx.run_id() == "waiting" {
            interrupted()
        } else {
            completed()
        };
        old.append(
            ctx,
            vec![custom(serde_json::json!({"b": 1, "a": 2})), last],
            "o",
        )
        .await
        .expect("append");
    }
    old.close().await;
    let new = open(&url, PostgresOptions::default().schema(&to))
        .await
        .expect("open");
    postgres_exec(
        &url,
        &format!(
            "INSERT INTO {to}.events (namespace, log_key, run_id, seq, data) \
             SELECT namespace, log_key, run_id, seq, CAST(data AS jsonb) FROM {from}.events \
             ORDER BY id"
        ),
    )
    .expect("the ADR's statement");
    let old = open(
        &url,
        PostgresOptions::default()
            .schema(&from)
            .layout(PostgresLayout::Switchyard),
    )
    .await
    .expect("open");
    for ctx in [&done, &waiting, &solo] {
        assert_eq!(
            new.read(ctx, 0, None).await.expect("read"),
            old.read(ctx, 0, None).await.expect("read"),
            "{}",
            ctx.run_id()
        );
        assert_eq!(
            new.run_status(ctx).await.expect("status"),
            old.run_status(ctx).await.expect("status")
        );
        assert_eq!(
            new.list_runs(ctx, None).await.expect("list"),
            old.list_runs(ctx, None).await.expect("list")
        );
    }
    let late = RunContext::new("late").with_session("s");
    let (claim, _) = new
        .claim_start(&late, opening(), "o", HOUR)
        .await
        .expect("claim");
    assert_eq!(claim.held_by.as_deref(), Some("waiting"));
    let events = new
        .append(&done, vec![text("after")], "o")
        .await
        .expect("append");
    assert_eq!(events[0].seq, 3, "seqs continue");
}
