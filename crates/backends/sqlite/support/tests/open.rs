//! Opening a file: create policy, pragmas in force, read-only readers, migrations racing.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::migrate::Migrator;
use switchyard_core::Error;
use switchyard_sqlite_support::{
    Create, Location, MAX_BUSY_TIMEOUT, OpenOptions, begin_immediate, embed_migrations,
    embedded_migrator, error, migrate, open,
};

static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    // The migrator's future is ready at once: its files are embedded.
    futures::executor::block_on(embedded_migrator(embed_migrations!(
        "tests/migrations",
        "0001_things.sql"
    )))
    .expect("migrator")
});

const WHAT: &str = "TestAdapter";

fn location(dir: &tempfile::TempDir, name: &str) -> Location {
    Location::path(dir.path().join(name), WHAT).expect("a file path")
}

#[tokio::test]
async fn the_writer_runs_wal_normal_and_the_busy_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = OpenOptions::default().busy_timeout(Duration::from_millis(1234));
    let mut db = open(&location(&dir, "a.db"), &options, &MIGRATOR, WHAT)
        .await
        .expect("open");
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut db.writer)
        .await
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut db.writer)
        .await
        .expect("synchronous");
    assert_eq!(sync, 1, "NORMAL");
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut db.writer)
        .await
        .expect("busy_timeout");
    assert_eq!(busy, 1234);
    // The migration ran: the table exists and the readers see the writer's rows.
    sqlx::query("INSERT INTO things (name) VALUES ('x')")
        .execute(&mut db.writer)
        .await
        .expect("insert");
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM things")
        .fetch_one(&db.readers)
        .await
        .expect("count");
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_busy_timeout_beyond_sqlites_int_is_cut_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = OpenOptions::default().busy_timeout(Duration::from_secs(u64::MAX));
    let mut db = open(&location(&dir, "a.db"), &options, &MIGRATOR, WHAT)
        .await
        .expect("open");
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut db.writer)
        .await
        .expect("busy_timeout");
    assert_eq!(
        u128::try_from(busy).ok(),
        Some(MAX_BUSY_TIMEOUT.as_millis())
    );
}

#[tokio::test]
async fn readers_cannot_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(
        &location(&dir, "a.db"),
        &OpenOptions::default(),
        &MIGRATOR,
        WHAT,
    )
    .await
    .expect("open");
    let refused = sqlx::query("INSERT INTO things (name) VALUES ('x')")
        .execute(&db.readers)
        .await;
    assert!(refused.is_err(), "a reader wrote");
}

#[tokio::test]
async fn create_policies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nested = location(&dir, "x/y/a.db");

    // Never: a missing file is a configuration error naming the file.
    match open(
        &location(&dir, "missing.db"),
        &OpenOptions::default().create(Create::Never),
        &MIGRATOR,
        WHAT,
    )
    .await
    {
        Err(Error::Config { reason, .. }) => assert!(reason.contains("missing.db"), "{reason}"),
        other => panic!("expected Config, got {other:?}"),
    }
    assert!(!dir.path().join("missing.db").exists());

    // File: the directory must exist; failing to open is transient (it may appear).
    match open(
        &nested,
        &OpenOptions::default().create(Create::File),
        &MIGRATOR,
        WHAT,
    )
    .await
    {
        Err(Error::Unavailable { op, key, .. }) => {
            assert_eq!(op, "open");
            assert!(key.contains("a.db"), "{key}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }

    // FileAndParents (the default) creates the directories too.
    let db = open(&nested, &OpenOptions::default(), &MIGRATOR, WHAT)
        .await
        .expect("open creating parents");
    assert!(db.path.exists());
    drop(db);

    // Never opens a file that exists.
    open(
        &nested,
        &OpenOptions::default().create(Create::Never),
        &MIGRATOR,
        WHAT,
    )
    .await
    .expect("an existing file");
}

#[tokio::test]
async fn processes_opening_a_new_file_at_once_all_migrate_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loc = location(&dir, "race.db");
    let opens = (0..6).map(|_| {
        let loc = loc.clone();
        tokio::spawn(async move { open(&loc, &OpenOptions::default(), &MIGRATOR, WHAT).await })
    });
    for opened in futures_join(opens).await {
        opened.expect("every open succeeds");
    }
}

async fn futures_join<T: Send + 'static>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn a_schema_from_another_build_fails_at_once_as_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loc = location(&dir, "a.db");
    let mut db = open(&loc, &OpenOptions::default(), &MIGRATOR, WHAT)
        .await
        .expect("open");
    // Pretend another build recorded version 1 with other contents.
    sqlx::query("UPDATE _sqlx_migrations SET checksum = x'00' WHERE version = 1")
        .execute(&mut db.writer)
        .await
        .expect("tamper");
    let started = std::time::Instant::now();
    match migrate(&mut db.writer, &MIGRATOR, "a.db").await {
        Err(Error::Config { reason, .. }) => assert!(reason.contains("a.db"), "{reason}"),
        other => panic!("expected Config, got {other:?}"),
    }
    // Not retried: the retries alone would sleep 0.9 s.
    assert!(started.elapsed() < Duration::from_millis(800));
}

#[tokio::test]
async fn unique_clashes_are_rejected_and_a_closed_pool_is_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut db = open(
        &location(&dir, "a.db"),
        &OpenOptions::default(),
        &MIGRATOR,
        WHAT,
    )
    .await
    .expect("open");
    let mut tx = begin_immediate(&mut db.writer, WHAT, "insert", "things")
        .await
        .expect("begin");
    sqlx::query("INSERT INTO things (name) VALUES ('x')")
        .execute(&mut *tx)
        .await
        .expect("first insert");
    let clash = sqlx::query("INSERT INTO things (name) VALUES ('x')")
        .execute(&mut *tx)
        .await
        .expect_err("a unique clash");
    assert!(switchyard_sqlite_support::is_unique_violation(&clash));
    assert!(matches!(
        error(WHAT, "insert", "things", clash),
        Error::Rejected { op: "insert", .. }
    ));
    drop(tx);
    db.readers.close().await;
    let closed = sqlx::query("SELECT 1")
        .execute(&db.readers)
        .await
        .expect_err("closed pool");
    assert!(matches!(
        error(WHAT, "read", "things", closed),
        Error::Closed { what: WHAT }
    ));
}
