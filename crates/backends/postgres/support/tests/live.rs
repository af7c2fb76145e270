//! The support crate against a real server: pools in their schema, migrations that are
//! re-runnable and keep to their own tables, the error mapping on errors PostgreSQL really
//! sends, and notifications that survive a killed connection.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::migrate::Migrator;
use switchyard_conformance::harness::{postgres_query, postgres_url, unique_schema, with_database};
use switchyard_core::Error;
use switchyard_postgres_support::{
    Notifications, PoolOptions, PostgresUrl, Schema, Signal, connect, embed_migrations,
    embedded_migrator, error, is_retryable, migrate,
};

// The migrators' futures are ready at once: their files are embedded.
static ONE: LazyLock<Migrator> = LazyLock::new(|| {
    futures::executor::block_on(embedded_migrator(embed_migrations!(
        "tests/migrations_one",
        "1_things.sql",
        "2_things_note.sql"
    )))
    .expect("migrator")
});
static TWO: LazyLock<Migrator> = LazyLock::new(|| {
    futures::executor::block_on(embedded_migrator(embed_migrations!(
        "tests/migrations_two",
        "1_others.sql"
    )))
    .expect("migrator")
});

const WHAT: &str = "SupportTest";

fn url() -> PostgresUrl {
    PostgresUrl::parse(&postgres_url(), "url").expect("the harness URL parses")
}

async fn pool_in(schema: &str) -> sqlx::PgPool {
    let options = PoolOptions::default()
        .max_connections(4)
        .schema(Schema::new(schema).expect("schema"));
    connect(&url(), &options, WHAT).await.expect("connect")
}

fn tables_of(schema: &str) -> Vec<String> {
    postgres_query(
        &postgres_url(),
        &format!(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}' \
             ORDER BY table_name"
        ),
    )
    .expect("tables")
    .into_iter()
    .filter_map(|row| row.into_iter().next().flatten())
    .collect()
}

#[tokio::test]
async fn migrations_rerun_as_no_ops_and_keep_to_their_own_tables() {
    let schema_name = unique_schema("migrate");
    let schema = Schema::new(&schema_name).expect("schema");
    let pool = pool_in(&schema_name).await;
    // Several processes opening at once: each migration is applied once.
    let runs = (0..4).map(|_| migrate(&pool, &schema, "one_migrations", &ONE, WHAT));
    for result in futures::future::join_all(runs).await {
        result.expect("concurrent migrate");
    }
    migrate(&pool, &schema, "one_migrations", &ONE, WHAT)
        .await
        .expect("again: a no-op");
    migrate(&pool, &schema, "two_migrations", &TWO, WHAT)
        .await
        .expect("a second adapter in the same schema");
    assert_eq!(
        tables_of(&schema_name),
        ["one_migrations", "others", "things", "two_migrations"]
    );
    // The pool's search_path is the schema: unqualified names land there.
    sqlx::query("INSERT INTO things (id, name, note) VALUES (1, 'a', 'migration 2 ran')")
        .execute(&pool)
        .await
        .expect("insert");
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM one_migrations ORDER BY 1")
        .fetch_all(&pool)
        .await
        .expect("records");
    assert_eq!(versions, [1, 2]);
}

#[tokio::test]
async fn a_statement_timeout_cancels_slow_statements_but_not_migrations() {
    let schema_name = unique_schema("timeout");
    let schema = Schema::new(&schema_name).expect("schema");
    let options = PoolOptions::default()
        .max_connections(2)
        .statement_timeout(Duration::from_millis(200))
        .schema(schema.clone());
    let pool = connect(&url(), &options, WHAT).await.expect("connect");
    let slow = sqlx::query("SELECT pg_sleep(2)").execute(&pool).await;
    let slow = slow.map_err(|e| error(WHAT, "sleep", "pg_sleep", e));
    assert!(matches!(slow, Err(Error::Unavailable { .. })), "{slow:?}");
    // A migration waits behind another process's migration lock longer than the timeout.
    let holder = std::thread::spawn({
        let name = schema_name.clone();
        move || {
            postgres_query(
                &postgres_url(),
                &format!(
                    "BEGIN; SELECT pg_advisory_xact_lock({}, hashtext('{name}')); \
                     SELECT pg_sleep(1); COMMIT;",
                    0x7377_7964
                ),
            )
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    migrate(&pool, &schema, "one_migrations", &ONE, WHAT)
        .await
        .expect("migrations are exempt from the statement timeout");
    holder.join().expect("holder").expect("lock holder");
}

#[tokio::test]
async fn a_schema_from_another_build_is_a_config_error() {
    let schema_name = unique_schema("mismatch");
    let schema = Schema::new(&schema_name).expect("schema");
    let pool = pool_in(&schema_name).await;
    migrate(&pool, &schema, "one_migrations", &ONE, WHAT)
        .await
        .expect("migrate");
    sqlx::query("UPDATE one_migrations SET checksum = '\\x00' WHERE version = 2")
        .execute(&pool)
        .await
        .expect("tamper");
    match migrate(&pool, &schema, "one_migrations", &ONE, WHAT).await {
        Err(Error::Config { reason, .. }) => assert!(reason.contains("other contents"), "{reason}"),
        other => panic!("changed checksum: {other:?}"),
    }
    sqlx::query(
        "INSERT INTO one_migrations (version, description, checksum) VALUES (99, 'later', '\\x00')",
    )
    .execute(&pool)
    .await
    .expect("a newer build's record");
    match migrate(&pool, &schema, "one_migrations", &ONE, WHAT).await {
        Err(Error::Config { reason, .. }) => assert!(reason.contains("newer build"), "{reason}"),
        other => panic!("unknown version: {other:?}"),
    }
}

#[tokio::test]
async fn connect_errors_say_what_to_fix() {
    let missing = with_database(&postgres_url(), "no_such_database_here");
    let url = PostgresUrl::parse(&missing, "url").expect("parse");
    match connect(&url, &PoolOptions::default(), WHAT).await {
        Err(Error::Config { reason, .. }) => {
            assert!(reason.contains("create the database"), "{reason}")
        }
        other => panic!("missing database: {other:?}"),
    }
    // Nothing listens on port 1.
    let url = PostgresUrl::parse("postgres://u:secret@127.0.0.1:1/db", "url").expect("parse");
    let options = PoolOptions::default().connect_timeout(Duration::from_secs(2));
    match connect(&url, &options, WHAT).await {
        Err(e @ Error::Unavailable { .. }) => assert!(!e.to_string().contains("secret"), "{e}"),
        other => panic!("refused connection: {other:?}"),
    }
}

#[tokio::test]
async fn real_errors_map_by_sqlstate() {
    let schema_name = unique_schema("errors");
    let pool = pool_in(&schema_name).await;
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA {schema_name}; CREATE TABLE {schema_name}.u (id INT PRIMARY KEY, n INT NOT NULL)"
    ))
    .execute(&pool)
    .await
    .expect("setup");
    sqlx::query("INSERT INTO u VALUES (1, 0)")
        .execute(&pool)
        .await
        .expect("first");
    let dup = sqlx::query("INSERT INTO u VALUES (1, 0)")
        .execute(&pool)
        .await
        .expect_err("dup");
    assert!(matches!(
        error(WHAT, "insert", "u", dup),
        Error::Rejected { .. }
    ));
    let nul = sqlx::query("INSERT INTO u VALUES ($1::text::int, 0)")
        .bind("a\0b")
        .execute(&pool)
        .await
        .expect_err("NUL in text");
    assert!(matches!(
        error(WHAT, "insert", "u", nul),
        Error::InvalidInput { .. }
    ));

    // Two SERIALIZABLE transactions that read and write the same row: one loses.
    let mut a = pool.begin().await.expect("a");
    let mut b = pool.begin().await.expect("b");
    for tx in [&mut a, &mut b] {
        sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            .execute(&mut **tx)
            .await
            .expect("serializable");
        sqlx::query("SELECT n FROM u WHERE id = 1")
            .execute(&mut **tx)
            .await
            .expect("read");
    }
    sqlx::query("UPDATE u SET n = n + 1 WHERE id = 1")
        .execute(&mut *a)
        .await
        .expect("a writes");
    a.commit().await.expect("a commits");
    let lost = sqlx::query("UPDATE u SET n = n + 1 WHERE id = 1")
        .execute(&mut *b)
        .await
        .expect_err("b loses");
    assert!(is_retryable(&lost), "{lost}");
    assert!(matches!(
        error(WHAT, "update", "u", lost),
        Error::Contended { .. }
    ));
    drop(b);

    // A connection the server terminates: the next statement on it is transient.
    let mut conn = pool.acquire().await.expect("conn");
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await
        .expect("pid");
    postgres_query(
        &postgres_url(),
        &format!("SELECT pg_terminate_backend({pid})"),
    )
    .expect("kill");
    let gone = sqlx::query("SELECT 1")
        .execute(&mut *conn)
        .await
        .expect_err("terminated");
    let mapped = error(WHAT, "select", "u", gone);
    assert!(mapped.is_transient(), "{mapped:?}");
    drop(conn);
    // The pool checks connections before use: the next call gets a live one.
    sqlx::query("SELECT 1")
        .execute(&pool)
        .await
        .expect("a fresh connection");
}

#[tokio::test]
async fn notifications_fan_out_and_survive_a_terminated_connection() {
    let pool = pool_in(&unique_schema("listen")).await;
    let channel = unique_schema("chan");
    let hub = Notifications::listen(&pool, &[&channel], WHAT)
        .await
        .expect("listen");
    let mut first = hub.subscribe();
    let mut second = hub.subscribe();
    sqlx::query("SELECT pg_notify($1, 'hello')")
        .bind(&channel)
        .execute(&pool)
        .await
        .expect("notify");
    for sub in [&mut first, &mut second] {
        let got = tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .expect("in time");
        assert_eq!(
            got,
            Some(Signal::Notify {
                channel: channel.as_str().into(),
                payload: "hello".into()
            })
        );
    }
    // Kill the LISTEN connection: subscribers hear that they may have missed something, and
    // notifications flow again after it.
    let killed = postgres_query(
        &postgres_url(),
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = '{WHAT}' AND query LIKE 'LISTEN%'"
        ),
    )
    .expect("terminate");
    assert!(!killed.is_empty(), "found the LISTEN connection");
    let missed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if first.recv().await == Some(Signal::Missed) {
                return;
            }
        }
    })
    .await;
    assert!(
        missed.is_ok(),
        "a terminated LISTEN connection is reported as Missed"
    );
    sqlx::query("SELECT pg_notify($1, 'again')")
        .bind(&channel)
        .execute(&pool)
        .await
        .expect("notify");
    let again = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(Signal::Notify { payload, .. }) = first.recv().await {
                return payload;
            }
        }
    })
    .await
    .expect("notifications flow again");
    assert_eq!(&*again, "again");
}

/// A server that is down is reported as such, at once: opening a pool names the refused
/// connection instead of waiting the connect timeout, and a call inside a [`Circuit`] fails
/// within about the circuit's suspicion delay with `Unavailable` naming the server and the
/// refusal, instead of waiting the 10 s acquire timeout and blaming the pool's size. Calls
/// succeed again once the server is back (ADR 0355).
#[tokio::test]
async fn a_stopped_server_is_reported_as_refused_at_once_and_calls_succeed_after_restart() {
    use std::time::Instant;
    use switchyard_conformance::harness::PostgresServer;
    use switchyard_postgres_support::Circuit;

    let mut server = PostgresServer::start().expect("postgres");
    let url = PostgresUrl::parse(&server.url(), "url").expect("url");
    let pool = connect(&url, &PoolOptions::default(), WHAT)
        .await
        .expect("connect");
    let circuit = Circuit::new(&url, &pool, WHAT);
    let select = || {
        circuit.guard("select", "one", async {
            sqlx::query_scalar::<_, i32>("SELECT 1")
                .fetch_one(&pool)
                .await
                .map_err(|e| error(WHAT, "select", "one", e))
        })
    };
    assert_eq!(select().await.expect("a call while the server is up"), 1);
    let port = server.port();
    let names_the_refusal = |what: &str, e: &Error| {
        assert!(matches!(e, Error::Unavailable { .. }), "{what}: {e:?}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("cannot reach PostgreSQL at 127.0.0.1:{port}"))
                && text.contains("refused"),
            "{what}: {text}"
        );
    };

    server.stop();
    for what in ["the first call while down", "a later call while down"] {
        let began = Instant::now();
        let e = tokio::time::timeout(Duration::from_secs(30), select())
            .await
            .unwrap_or_else(|_| panic!("{what} hung"))
            .expect_err("no answer while the server is down");
        let took = began.elapsed();
        names_the_refusal(what, &e);
        // The acquire timeout is 10 s; the circuit answers after 0.3 s and one refused attempt.
        assert!(took < Duration::from_secs(2), "{what} took {took:?}");
    }
    let began = Instant::now();
    let e = connect(&url, &PoolOptions::default(), WHAT)
        .await
        .expect_err("no pool while the server is down");
    names_the_refusal("opening a pool while down", &e);
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "opening took {:?}",
        began.elapsed()
    );

    server.restart().expect("restart");
    let back = Instant::now();
    loop {
        match select().await {
            Ok(one) => {
                assert_eq!(one, 1);
                break;
            }
            Err(e) => {
                assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
                assert!(
                    back.elapsed() < Duration::from_secs(10),
                    "no answer {:?} after the restart: {e}",
                    back.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
