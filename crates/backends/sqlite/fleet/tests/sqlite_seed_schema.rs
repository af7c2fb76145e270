//! A file created by the seed (fleet-framework 0.1.0's exact DDL) is adopted in
//! place: the seed's rows are served, and what we write stays readable by the seed's SQL.

use std::time::Duration;

use serde_json::json;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{Row, SqlitePool};
use switchyard_conformance::harness::TempSqlite;
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_sqlite::SqliteFleetBackend;

/// The seed's tables, column for column, as its `SqliteBackend._init_schema` creates them.
const SEED_DDL: &str = r#"
CREATE TABLE kv (ns TEXT NOT NULL, key TEXT NOT NULL, value BLOB, expires_at REAL, PRIMARY KEY (ns, key));
CREATE TABLE pool_items (name TEXT NOT NULL, item_id TEXT NOT NULL, payload BLOB, tags TEXT, expires_at REAL, PRIMARY KEY (name, item_id));
CREATE TABLE pool_claims (name TEXT NOT NULL, item_id TEXT NOT NULL, until REAL NOT NULL, PRIMARY KEY (name, item_id));
CREATE TABLE locks (name TEXT PRIMARY KEY, token TEXT, expires_at REAL NOT NULL);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE queues (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, tier TEXT NOT NULL, body BLOB);
CREATE INDEX queues_name_tier ON queues (name, tier, id);
CREATE TABLE queue_processing (name TEXT NOT NULL, task_id TEXT NOT NULL, body BLOB, deadline REAL, PRIMARY KEY (name, task_id));
CREATE TABLE queue_scheduled (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, available_at REAL, body BLOB);
CREATE INDEX queue_scheduled_name_at ON queue_scheduled (name, available_at);
CREATE TABLE queue_dead (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, body BLOB);
CREATE INDEX queue_dead_name_id ON queue_dead (name, id);
CREATE TABLE streams (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, score REAL, body BLOB);
CREATE INDEX streams_name_score ON streams (name, score);
CREATE TABLE workers (automation_type TEXT NOT NULL, worker_id TEXT NOT NULL, hardware TEXT, config TEXT,
    config_gen INTEGER DEFAULT 0, state TEXT DEFAULT 'IDLE', last_seen REAL DEFAULT 0, last_error TEXT,
    stats TEXT DEFAULT '{}', PRIMARY KEY (automation_type, worker_id));
CREATE TABLE worker_stats_history (automation_type TEXT NOT NULL, worker_id TEXT NOT NULL, ts REAL, frame TEXT);
CREATE INDEX worker_stats_history_idx ON worker_stats_history (automation_type, worker_id, ts);
CREATE TABLE catalog (automation_type TEXT PRIMARY KEY, doc BLOB);
"#;

const ENVELOPE: &[u8] = br#"{"id": "t-1", "payload": {"query": "caf\u00e9", "page": 1}, "attempt": 0, "submitted_at": 1795999426.797343, "ttl_seconds": 60}"#;

async fn seed_pool(db: &TempSqlite) -> SqlitePool {
    SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(db.path())
                .create_if_missing(true),
        )
        .await
        .expect("seed connection")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopts_a_seed_created_file_and_stays_seed_readable() {
    let db = TempSqlite::new();
    let seed = seed_pool(&db).await;
    sqlx::raw_sql(SEED_DDL)
        .execute(&seed)
        .await
        .expect("seed DDL");
    // Rows as the seed writes them (autocommit INSERTs naming their columns).
    let now = 1.0e9_f64 * 3.0; // far future: never expired
    for (sql, binds) in [
        (
            "INSERT INTO queues (name, tier, body) VALUES ('jobs', 'normal', ?1)",
            vec![ENVELOPE.to_vec()],
        ),
        (
            "INSERT INTO queues (name, tier, body) VALUES ('jobs', 'high', ?1)",
            vec![b"high-from-seed".to_vec()],
        ),
        (
            "INSERT INTO queue_scheduled (name, available_at, body) VALUES ('jobs', 1.0, ?1)",
            vec![b"due-from-seed".to_vec()],
        ),
        (
            "INSERT INTO kv (ns, key, value, expires_at) VALUES ('idem:x', 'old', ?1, 1.0)",
            vec![b"expired".to_vec()],
        ),
        (
            "INSERT INTO queue_dead (name, body) VALUES ('jobs', ?1)",
            vec![b"dead-from-seed".to_vec()],
        ),
        (
            "INSERT INTO catalog (automation_type, doc) VALUES ('scraper', ?1)",
            vec![br#"{"v": 1}"#.to_vec()],
        ),
    ] {
        let mut q = sqlx::query(sql);
        for b in binds {
            q = q.bind(b);
        }
        q.execute(&seed).await.expect("seed row");
    }
    sqlx::query(
        "INSERT INTO workers (automation_type, worker_id, hardware, config, config_gen) \
         VALUES ('scraper', 'w1', '{\"cpu\": 4}', '{\"slots\": 2}', 5)",
    )
    .execute(&seed)
    .await
    .expect("seed worker");
    sqlx::query("INSERT INTO locks (name, token, expires_at) VALUES ('l', 'seedtoken', ?1)")
        .bind(now)
        .execute(&seed)
        .await
        .expect("seed lock");

    let b = SqliteFleetBackend::open(db.path()).await.expect("adopt");
    // Opening again runs no migration twice.
    let again = SqliteFleetBackend::open(db.path()).await.expect("reopen");
    again.close().await;

    // The seed's rows are served: high first, then the due scheduled task (to normal, after the
    // seed's normal row), all with a first attempt.
    assert_eq!(b.queue_size("jobs").await.expect("size"), 2);
    let d1 = b
        .queue_reserve("jobs", Duration::ZERO, Duration::from_secs(30))
        .await
        .expect("reserve")
        .expect("seed task");
    assert_eq!(
        (d1.body.as_slice(), d1.attempt),
        (&b"high-from-seed"[..], 1)
    );
    let d2 = b
        .queue_reserve("jobs", Duration::ZERO, Duration::from_secs(30))
        .await
        .expect("reserve")
        .expect("seed task");
    assert_eq!(d2.body, ENVELOPE);
    assert_eq!(d2.task_id.as_deref(), Some("t-1"));
    let d3 = b
        .queue_reserve("jobs", Duration::ZERO, Duration::from_secs(30))
        .await
        .expect("reserve")
        .expect("scheduled seed task");
    assert_eq!(
        (d3.body.as_slice(), d3.priority),
        (&b"due-from-seed"[..], Priority::Normal)
    );
    assert_eq!(
        b.kv_get("idem:x", "old").await.expect("kv"),
        None,
        "seed expiry honoured"
    );
    assert_eq!(
        b.dlq_peek("jobs", 5).await.expect("dlq"),
        vec![b"dead-from-seed".to_vec()]
    );
    assert_eq!(
        b.catalog_get("scraper").await.expect("catalog"),
        Some(br#"{"v": 1}"#.to_vec())
    );
    let w = b
        .worker_get("scraper", "w1")
        .await
        .expect("worker")
        .expect("seed worker");
    assert_eq!(
        (w.hardware, w.config, w.config_gen, w.state.as_str()),
        (json!({"cpu": 4}), json!({"slots": 2}), 5, "IDLE")
    );
    assert!(
        b.lock_acquire("l", Duration::from_secs(5), Duration::ZERO)
            .await
            .expect("lock")
            .is_none(),
        "the seed's live lock is respected"
    );

    // The seed reads what we write with its own SQL.
    let processing: Vec<(String, Vec<u8>, f64)> = sqlx::query_as(
        "SELECT task_id, body, deadline FROM queue_processing WHERE name = 'jobs' ORDER BY deadline",
    )
    .fetch_all(&seed)
    .await
    .expect("seed reads reservations");
    assert_eq!(processing.len(), 3);
    assert!(processing.iter().any(|(_, body, _)| body == ENVELOPE));
    assert!(b.queue_ack("jobs", &d1.receipt).await.expect("ack"));
    b.queue_push("jobs", b"from-rust", Priority::Low)
        .await
        .expect("push");
    let row = sqlx::query(
        "SELECT body FROM queues WHERE name = 'jobs' AND tier = 'low' ORDER BY id LIMIT 1",
    )
    .fetch_one(&seed)
    .await
    .expect("seed pops our push");
    assert_eq!(row.get::<Vec<u8>, _>(0), b"from-rust");
    b.worker_register("scraper", "w2", &json!({"gpu": "é"}))
        .await
        .expect("register");
    let hw: String = sqlx::query_scalar(
        "SELECT hardware FROM workers WHERE automation_type = 'scraper' AND worker_id = 'w2'",
    )
    .fetch_one(&seed)
    .await
    .expect("seed reads worker");
    assert_eq!(hw, r#"{"gpu": "\u00e9"}"#, "json.dumps bytes");

    // The seed removing and re-registering a worker cannot send its generation back.
    sqlx::query("DELETE FROM workers WHERE automation_type = 'scraper' AND worker_id = 'w1'")
        .execute(&seed)
        .await
        .expect("seed remove");
    sqlx::query(
        "INSERT INTO workers (automation_type, worker_id, hardware, config, config_gen) \
         VALUES ('scraper', 'w1', '{}', '{}', 0)",
    )
    .execute(&seed)
    .await
    .expect("seed re-register");
    let (_, generation) = b.worker_get_config("scraper", "w1").await.expect("config");
    assert_eq!(generation, 6, "above the removed worker's 5");

    // The seed's expired-lock takeover still works on our rows.
    let g = b
        .lock_acquire("mine", Duration::from_millis(100), Duration::ZERO)
        .await
        .expect("lock")
        .expect("free");
    assert!(g.fence >= 1);
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shares_the_migrations_table_with_other_stores() {
    let db = TempSqlite::new();
    let other = seed_pool(&db).await;
    // Another store's migration history in the same file.
    sqlx::raw_sql(
        "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
         installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success BOOLEAN NOT NULL, \
         checksum BLOB NOT NULL, execution_time BIGINT NOT NULL); \
         INSERT INTO _sqlx_migrations VALUES (1, 'events', CURRENT_TIMESTAMP, 1, X'00', 1);",
    )
    .execute(&other)
    .await
    .expect("other store");
    let b = SqliteFleetBackend::open(db.path())
        .await
        .expect("open next to another store");
    b.queue_push("q", b"x", Priority::Normal)
        .await
        .expect("push");
    assert_eq!(b.queue_size("q").await.expect("size"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_rows_are_typed_errors_and_block_nothing_else() {
    let db = TempSqlite::new();
    let b = SqliteFleetBackend::open(db.path()).await.expect("open");
    b.worker_register("at", "good", &json!({}))
        .await
        .expect("register");
    b.pool_put("p", "fine", b"x", &serde_json::Map::new(), None)
        .await
        .expect("put");
    let raw = seed_pool(&db).await;
    sqlx::query(
        "INSERT INTO workers (automation_type, worker_id, hardware, config) \
         VALUES ('at', 'bad', 'not json', '{}')",
    )
    .execute(&raw)
    .await
    .expect("corrupt worker");
    sqlx::query("INSERT INTO pool_items (name, item_id, payload, tags) VALUES ('p', 'broken', X'00', '[oops')")
        .execute(&raw)
        .await
        .expect("corrupt item");

    let err = b.worker_get("at", "bad").await.expect_err("corrupt");
    match err {
        switchyard_core::Error::Corrupt { location, .. } => {
            assert!(
                location.contains("bad") && location.contains("hardware"),
                "{location}"
            )
        }
        other => panic!("expected Corrupt, got {other}"),
    }
    assert!(
        b.worker_get("at", "good")
            .await
            .expect("other worker")
            .is_some()
    );
    assert!(matches!(
        b.pool_list("p").await,
        Err(switchyard_core::Error::Corrupt { .. })
    ));
    let claim = b
        .pool_claim_any("p", &serde_json::Map::new(), Duration::from_secs(5))
        .await
        .expect("claim")
        .expect("the good item is still claimable");
    assert_eq!(claim.item.id, "fine");
}

#[tokio::test]
async fn memory_paths_are_refused() {
    let err = SqliteFleetBackend::open(":memory:")
        .await
        .expect_err("refused");
    assert!(
        matches!(err, switchyard_core::Error::Config { .. }),
        "{err}"
    );
}
