//! The file is agentdeck 3.1.0's: the exact schema, rows the seed wrote are read back byte for
//! byte, and the rows we write are the seed's bytes.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Timelike, Utc};
use sqlx::Row;
use switchyard_conformance::harness::TempSqlite;
use switchyard_core::event::{Block, InvocableKind, MessageText, Payload, RunStarted};
use switchyard_core::{EventStore, ManualClock, RunContext, RunStatus};
use switchyard_store_sqlite::{SqliteEventStore, SqliteOptions};

use common::raw;

/// The seed's DDL, verbatim (agentdeck 3.1.0 `adapters/stores/sqlite/store.py`).
const SEED_DDL: &str = "
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,      -- namespace_key ('' = none)
    log_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL            -- Event.model_dump_json()
);
CREATE INDEX IF NOT EXISTS events_by_log ON events (namespace, log_key, id);
CREATE UNIQUE INDEX IF NOT EXISTS events_by_run ON events (namespace, log_key, run_id, seq);
";

/// Rows as the seed writes them: its JSON, its millisecond timestamps, `''` for no namespace.
const SEED_ROWS: [(&str, &str, &str, i64, &str); 3] = [
    (
        "acme",
        "s1",
        "r1",
        0,
        r#"{"v":{"major":3,"minor":1},"kind":"run.started","seq":0,"run_id":"r1","session_id":"s1","namespace":"acme","origin":"helper","ts":"2025-01-02T03:04:05.123000Z","payload":{"kind":"run.started","invocable":"helper","kind_of_invocable":"agent","input":[{"type":"text","text":"hi"}]}}"#,
    ),
    (
        "acme",
        "s1",
        "r1",
        1,
        r#"{"v":{"major":3,"minor":1},"kind":"text.delta","seq":1,"run_id":"r1","session_id":"s1","namespace":"acme","origin":"helper","ts":"2025-01-02T03:04:06Z","payload":{"kind":"text.delta","message_id":"m1","text":"héllo \"wörld\"\n"}}"#,
    ),
    (
        "",
        "solo",
        "solo",
        0,
        r#"{"v":{"major":3,"minor":1},"kind":"tool.call.completed","seq":0,"run_id":"solo","session_id":null,"namespace":null,"origin":"helper","ts":"2025-01-02T03:04:05Z","payload":{"kind":"tool.call.completed","call_id":"c1","tool":"search","result_preview":"ok","result_size":2,"result_sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","artifact_id":null,"error":null}}"#,
    ),
];

fn started() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

#[tokio::test]
async fn schema_is_the_seeds() {
    let file = TempSqlite::new();
    let _store = SqliteEventStore::open(file.path()).await.expect("open");
    let mut conn = raw(file.path()).await;
    let columns: Vec<(String, String, i64, i64)> =
        sqlx::query_as("SELECT name, type, \"notnull\", pk FROM pragma_table_info('events')")
            .fetch_all(&mut conn)
            .await
            .expect("table_info");
    let expected = [
        ("id", "INTEGER", 0, 1),
        ("namespace", "TEXT", 1, 0),
        ("log_key", "TEXT", 1, 0),
        ("run_id", "TEXT", 1, 0),
        ("seq", "INTEGER", 1, 0),
        ("data", "TEXT", 1, 0),
    ]
    .map(|(n, t, nn, pk)| (n.to_string(), t.to_string(), nn, pk));
    assert_eq!(columns, expected);
    let table_sql: String = sqlx::query_scalar(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'",
    )
    .fetch_one(&mut conn)
    .await
    .expect("events ddl");
    assert!(table_sql.contains("AUTOINCREMENT"), "{table_sql}");
    for (index, unique, cols) in [
        ("events_by_log", 0, vec!["namespace", "log_key", "id"]),
        (
            "events_by_run",
            1,
            vec!["namespace", "log_key", "run_id", "seq"],
        ),
    ] {
        let is_unique: i64 = sqlx::query_scalar(
            "SELECT \"unique\" FROM pragma_index_list('events') WHERE name = ?1",
        )
        .bind(index)
        .fetch_one(&mut conn)
        .await
        .expect("index_list");
        assert_eq!(is_unique, unique, "{index}");
        let names: Vec<String> =
            sqlx::query_scalar("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
                .bind(index)
                .fetch_all(&mut conn)
                .await
                .expect("index_info");
        assert_eq!(names, cols, "{index}");
    }
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .expect("journal_mode");
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn a_seed_file_is_read_back_and_claims_see_its_runs() {
    let file = TempSqlite::new();
    {
        // What the seed does: its DDL, then its inserts, on a file we have never opened.
        let mut conn = raw(file.path()).await;
        sqlx::raw_sql(SEED_DDL)
            .execute(&mut conn)
            .await
            .expect("seed ddl");
        for (ns, log, run, seq, data) in SEED_ROWS {
            sqlx::query(
                "INSERT INTO events (namespace, log_key, run_id, seq, data) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(ns)
            .bind(log)
            .bind(run)
            .bind(seq)
            .bind(data)
            .execute(&mut conn)
            .await
            .expect("seed insert");
        }
    }
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2025, 1, 2, 3, 30, 0)
            .single()
            .expect("date"),
    ));
    let store = SqliteEventStore::open_with(file.path(), SqliteOptions::default().clock(clock))
        .await
        .expect("open a seed file");

    let acme = RunContext::new("r1")
        .with_session("s1")
        .with_namespace("acme")
        .expect("ctx");
    let events = store.read(&acme, 0, None).await.expect("read");
    let json: Vec<String> = events.iter().map(|e| e.to_json()).collect();
    assert_eq!(json, vec![SEED_ROWS[0].4, SEED_ROWS[1].4]);
    let solo = RunContext::new("solo");
    let events = store.read(&solo, 0, None).await.expect("read");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].to_json(), SEED_ROWS[2].4);

    // The seed's open run holds the session for our claims (its index rows were built at open).
    let late = RunContext::new("r2")
        .with_session("s1")
        .with_namespace("acme")
        .expect("ctx");
    let (claim, event) = store
        .claim_start(&late, started(), "helper", Duration::from_secs(3600))
        .await
        .expect("claim_start");
    assert_eq!(claim.held_by.as_deref(), Some("r1"));
    assert!(event.is_none());
    assert_eq!(
        store.run_status(&acme).await.expect("status"),
        RunStatus::Running
    );
    // Our append continues the seed's seqs.
    let next = store
        .append(
            &acme,
            vec![Payload::TextDelta(MessageText {
                message_id: "m1".into(),
                text: "more".into(),
            })],
            "helper",
        )
        .await
        .expect("append");
    assert_eq!(next[0].seq, 2);
}

#[tokio::test]
async fn our_rows_are_the_seeds_bytes() {
    let file = TempSqlite::new();
    let at = Utc
        .with_ymd_and_hms(2025, 1, 2, 3, 4, 5)
        .single()
        .expect("date")
        .with_nanosecond(123_456_000)
        .expect("nanos");
    let store = SqliteEventStore::open_with(
        file.path(),
        SqliteOptions::default().clock(Arc::new(ManualClock::new(at))),
    )
    .await
    .expect("open");
    let ctx = RunContext::new("r1")
        .with_session("s1")
        .with_namespace("acme")
        .expect("ctx");
    let (claim, event) = store
        .claim_start(&ctx, started(), "helper", Duration::from_secs(3600))
        .await
        .expect("claim_start");
    assert!(claim.won());
    let event = event.expect("the opening event");
    // agentdeck's event JSON, byte-exact.
    let golden = r#"{"v":{"major":3,"minor":1},"kind":"run.started","seq":0,"run_id":"r1","session_id":"s1","namespace":"acme","origin":"helper","ts":"2025-01-02T03:04:05.123456Z","payload":{"kind":"run.started","invocable":"helper","kind_of_invocable":"agent","input":[{"type":"text","text":"hi"}]}}"#;
    assert_eq!(event.to_json(), golden);
    let mut conn = raw(file.path()).await;
    let row = sqlx::query("SELECT namespace, log_key, run_id, seq, data FROM events")
        .fetch_one(&mut conn)
        .await
        .expect("row");
    assert_eq!(row.get::<String, _>("namespace"), "acme");
    assert_eq!(row.get::<String, _>("log_key"), "s1");
    assert_eq!(row.get::<String, _>("run_id"), "r1");
    assert_eq!(row.get::<i64, _>("seq"), 0);
    assert_eq!(row.get::<String, _>("data"), golden);

    // No namespace is stored as '' and serialized as null, as the seed does.
    let solo = RunContext::new("solo");
    store
        .append(
            &solo,
            vec![Payload::TextDelta(MessageText {
                message_id: "m".into(),
                text: "x".into(),
            })],
            "helper",
        )
        .await
        .expect("append");
    let (ns, data): (String, String) =
        sqlx::query_as("SELECT namespace, data FROM events WHERE log_key = 'solo'")
            .fetch_one(&mut conn)
            .await
            .expect("row");
    assert_eq!(ns, "");
    assert!(
        data.contains(r#""session_id":null,"namespace":null"#),
        "{data}"
    );
}

#[tokio::test]
async fn sqlite_clock_stamps_milliseconds_like_the_seed() {
    let file = TempSqlite::new();
    let store = SqliteEventStore::open(file.path()).await.expect("open");
    let ctx = RunContext::new("r");
    let before = Utc::now();
    let events = store
        .append(
            &ctx,
            (0..3)
                .map(|i| {
                    Payload::TextDelta(MessageText {
                        message_id: "m".into(),
                        text: format!("{i}"),
                    })
                })
                .collect(),
            "helper",
        )
        .await
        .expect("append");
    let ts = events[0].ts;
    assert!(events.iter().all(|e| e.ts == ts), "one ts per batch");
    assert_eq!(
        ts.nanosecond() % 1_000_000,
        0,
        "millisecond precision: {ts}"
    );
    assert_eq!(ts.offset().local_minus_utc(), 0, "UTC");
    // SQLite's clock and the process's are the same host clock here; allow generous slack.
    let skew = (ts.to_utc() - before).num_seconds().abs();
    assert!(skew < 60, "ts {ts} far from now {before}");
}

/// Another process (here a raw connection inserting exactly as the seed does) writes the file while
/// our store has it open: claims see its runs open and close, with no code of ours in its path.
#[tokio::test]
async fn claims_see_runs_another_process_opens_and_closes() {
    let file = TempSqlite::new();
    let store = SqliteEventStore::open(file.path()).await.expect("open");
    let mut seed = raw(file.path()).await;
    let insert = |seq: i64, kind: &str, payload: &str| {
        format!(
            r#"{{"v":{{"major":3,"minor":1}},"kind":"{kind}","seq":{seq},"run_id":"py","session_id":"s","namespace":null,"origin":"helper","ts":"{}","payload":{payload}}}"#,
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3f000Z")
        )
    };
    let started_json = insert(
        0,
        "run.started",
        r#"{"kind":"run.started","invocable":"helper","kind_of_invocable":"agent","input":[]}"#,
    );
    sqlx::query(
        "INSERT INTO events (namespace, log_key, run_id, seq, data) VALUES ('', 's', 'py', 0, ?)",
    )
    .bind(&started_json)
    .execute(&mut seed)
    .await
    .expect("seed insert");
    let ctx = RunContext::new("rust").with_session("s");
    let (claim, _) = store
        .claim_start(&ctx, started(), "helper", Duration::from_secs(3600))
        .await
        .expect("claim_start");
    assert_eq!(
        claim.held_by.as_deref(),
        Some("py"),
        "the seed's run holds the session"
    );

    let completed_json = insert(
        1,
        "run.completed",
        r#"{"kind":"run.completed","output":[],"usage":{"input_tokens":0,"output_tokens":0,"usd":null}}"#,
    );
    sqlx::query(
        "INSERT INTO events (namespace, log_key, run_id, seq, data) VALUES ('', 's', 'py', 1, ?)",
    )
    .bind(&completed_json)
    .execute(&mut seed)
    .await
    .expect("seed insert");
    let (claim, event) = store
        .claim_start(&ctx, started(), "helper", Duration::from_secs(3600))
        .await
        .expect("claim_start");
    assert!(claim.won(), "the seed closed its run: {claim:?}");
    assert!(claim.overridden.is_empty());
    assert!(event.is_some());
    let py = RunContext::new("py").with_session("s");
    assert_eq!(
        store.run_status(&py).await.expect("status"),
        RunStatus::Completed
    );
}
