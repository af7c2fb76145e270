//! Opening a database file: one writer connection, a read pool, WAL and the pragmas, checked.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, Sqlite, SqliteConnection, Transaction};
use switchyard_core::{Error, Result};

use crate::error::error;
use crate::location::{Create, Location};
use crate::migrate::migrate;
use sqlx::migrate::Migrator;

/// The longest busy timeout SQLite can hold: `i32::MAX` milliseconds. (sqlx panics on a
/// longer one, so [`OpenOptions::busy_timeout`] cuts it here.)
pub const MAX_BUSY_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// How [`open`] opens a file. Every SQLite adapter's options map onto these.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    busy_timeout: Duration,
    readers: u32,
    create: Create,
    writer_row_buffer: Option<usize>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            busy_timeout: Duration::from_secs(10),
            readers: 4,
            create: Create::default(),
            writer_row_buffer: None,
        }
    }
}

impl OpenOptions {
    /// How long a statement waits for another process's write lock before failing with
    /// [`Error::Unavailable`]. Default 10 s (the seeds: 5 s). SQLite counts it in an `int` of
    /// milliseconds: a longer timeout is cut to [`MAX_BUSY_TIMEOUT`] (about 24.8 days).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout.min(MAX_BUSY_TIMEOUT);
        self
    }

    /// Connections of the read pool (at least 1). Default 4.
    pub fn readers(mut self, readers: u32) -> Self {
        self.readers = readers.max(1);
        self
    }

    /// What to do when the file does not exist. Default [`Create::FileAndParents`].
    pub fn create(mut self, create: Create) -> Self {
        self.create = create;
        self
    }

    /// Results the writer connection buffers before its thread waits for the caller (sqlx's
    /// default: 50). An adapter that streams one result per statement of a long multi-statement
    /// string (the fleet's group commit) raises it so the thread does not stop every 50.
    pub fn writer_row_buffer(mut self, rows: usize) -> Self {
        self.writer_row_buffer = Some(rows.max(1));
        self
    }
}

/// An open database: the writer connection, the read pool and the file.
///
/// The adapter keeps the writer behind an async mutex, never in a pool: the process's writes
/// queue there in order instead of contending for the file lock, and a pool would hand the
/// connection back through a spawned task after every use (ADR 0100).
#[derive(Debug)]
pub struct Database {
    /// The one writer connection: WAL, `synchronous=NORMAL`, the busy timeout, migrated.
    pub writer: SqliteConnection,
    /// Read-only connections reading WAL snapshots, so reads never queue behind writes.
    pub readers: SqlitePool,
    /// The file.
    pub path: PathBuf,
}

/// Opens `location` for the adapter `what` (named in errors): creates the file as `options`
/// allow, connects the writer in WAL with `synchronous=NORMAL` and the busy timeout, checks that
/// SQLite applied all three, runs `migrator` ([`migrate`]), then opens the read pool.
///
/// Fails with [`Error::Config`] when the file is missing and may not be created, when its
/// directory cannot be created, or when SQLite refuses a pragma (WAL needs shared memory: a
/// network filesystem refuses it), and with [`Error::Unavailable`] when the file cannot be
/// opened or migrated.
pub async fn open(
    location: &Location,
    options: &OpenOptions,
    migrator: &Migrator,
    what: &'static str,
) -> Result<Database> {
    let path = location.as_path();
    let shown = location.to_string();
    prepare(path, options.create)?;
    let base = SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(options.busy_timeout)
        .synchronous(SqliteSynchronous::Normal);
    let mut writer_options = base
        .clone()
        .create_if_missing(options.create != Create::Never)
        .journal_mode(SqliteJournalMode::Wal);
    if let Some(rows) = options.writer_row_buffer {
        writer_options = writer_options.row_buffer_size(rows);
    }
    let mut writer = writer_options
        .connect()
        .await
        .map_err(|e| error(what, "open", &shown, e))?;
    if let Err(e) = check_pragmas(&mut writer, options, what, &shown).await {
        let _ = writer.close().await;
        return Err(e);
    }
    if let Err(e) = migrate(&mut writer, migrator, &shown).await {
        let _ = writer.close().await;
        return Err(e);
    }
    // Readers never write: read-only connections make that a guarantee, and they skip the
    // ping sqlx would send before every acquire (a broken connection fails the read with a
    // transient error either way).
    let readers = SqlitePoolOptions::new()
        .max_connections(options.readers.max(1))
        .min_connections(0)
        .test_before_acquire(false)
        .connect_with(base.read_only(true))
        .await
        .map_err(|e| error(what, "open", &shown, e))?;
    Ok(Database {
        writer,
        readers,
        path: path.to_path_buf(),
    })
}

/// Applies the create policy before SQLite sees the path.
fn prepare(path: &Path, create: Create) -> Result<()> {
    match create {
        Create::Never if !path.exists() => Err(Error::config(
            "path",
            format!(
                "{}: no such database file; check the path, or let the adapter create it",
                path.display()
            ),
        )),
        Create::FileAndParents => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| {
                    Error::config(
                        "path",
                        format!("cannot create the directory {}: {e}", parent.display()),
                    )
                })?;
            }
            Ok(())
        }
        Create::Never | Create::File => Ok(()),
    }
}

/// SQLite answers a pragma it cannot apply by keeping the old value, silently: read each back.
async fn check_pragmas(
    conn: &mut SqliteConnection,
    options: &OpenOptions,
    what: &'static str,
    shown: &str,
) -> Result<()> {
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| error(what, "open", shown, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::config(
            "path",
            format!(
                "{shown}: SQLite refused WAL (journal_mode is {mode}); \
                 use a local filesystem that supports shared memory"
            ),
        ));
    }
    // 1 is NORMAL.
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| error(what, "open", shown, e))?;
    if synchronous != 1 {
        return Err(Error::config(
            "path",
            format!("{shown}: SQLite kept synchronous={synchronous} instead of NORMAL (1)"),
        ));
    }
    let busy_ms: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| error(what, "open", shown, e))?;
    // `busy_timeout` is at most MAX_BUSY_TIMEOUT, which fits.
    let wanted = i64::try_from(options.busy_timeout.as_millis()).unwrap_or(i64::MAX);
    if busy_ms != wanted {
        return Err(Error::config(
            "busy_timeout",
            format!("{shown}: SQLite kept busy_timeout={busy_ms} ms instead of {wanted} ms"),
        ));
    }
    Ok(())
}

/// Starts a write transaction that holds the file's write lock from its first statement, so
/// nothing read inside it can change before it commits (a deferred one would fail with
/// `SQLITE_BUSY_SNAPSHOT` instead of waiting out the busy timeout).
pub async fn begin_immediate<'c>(
    conn: &'c mut SqliteConnection,
    what: &'static str,
    op: &'static str,
    key: &str,
) -> Result<Transaction<'c, Sqlite>> {
    conn.begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(|e| error(what, op, key, e))
}
