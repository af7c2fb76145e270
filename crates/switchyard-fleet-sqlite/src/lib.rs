//! # switchyard-fleet-sqlite
//!
//! [`FleetBackend`] on one SQLite file, through sqlx, on the seed's tables (ADR 0070, 0071). The
//! typed layer (`Queue<T>`, `Consumer`, …) over it is `switchyard-fleet`.
//!
//! * The tables are fleet-framework 0.1.0's (`kv`, `pool_items`, `queues`, …), created with
//!   `IF NOT EXISTS`, so a file the seed created is adopted in place. Our extra state (claim
//!   tokens, delivery receipts, attempt counts, tiers of retries, lock fences, generations of
//!   removed workers) sits in extra columns and tables the seed never reads.
//! * WAL, `synchronous=NORMAL`, a busy timeout; one writer connection (this process's writes
//!   queue on its mutex instead of fighting for the file lock) and a read pool.
//! * The queue's hot one-statement writes (push, reserve, ack, extend) are group-committed: one
//!   task runs every pending one in a single `BEGIN IMMEDIATE … COMMIT`, each in its own
//!   savepoint, and replies after COMMIT (ADR 0150, `batch.rs`).
//! * Every operation is one statement, or one `BEGIN IMMEDIATE` transaction (fleet flaw S1: the
//!   seed's autocommit steps delivered 396 duplicates out of 3,000 across processes).
//! * Every instant is SQLite's clock (`julianday('now')`), evaluated inside the statement that
//!   uses it (fleet flaw R3).
//! * Pub/sub (`event_publish` / `event_subscribe`) is in-process only: SQLite has no
//!   notification channel (ADR 0072).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, Sqlite, SqliteConnection, Transaction};
use switchyard_core::fleet::{
    ConfigWrite, Delivery, EventStream, FleetBackend, IdempotencyKey, LocalTopics, LockGrant,
    PoolClaim, PoolItem, Priority, QueueStats, Receipt, SubmitOutcome, Tags, WorkerRecord,
    WorkerState, check_hold, check_name, random_token, task_id_of, ttl_ms,
};
use switchyard_core::{Error, Result};
use tokio::sync::{MappedMutexGuard, MutexGuard, Notify};

use switchyard_fleet::pyjson;

mod batch;
use batch::{Arg, Batcher};

const WHAT: &str = "SqliteFleetBackend";

/// SQLite's clock in unix seconds, millisecond resolution; evaluated once per statement.
macro_rules! now_sql {
    () => {
        "((julianday('now') - 2440587.5) * 86400.0)"
    };
}

/// How often `open` retries the migration when another process migrates the same file at once.
const MIGRATE_ATTEMPTS: u32 = 10;

/// Options of [`SqliteFleetBackend::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteFleetOptions {
    /// How long a write waits for another process's write lock. Default 10 s.
    pub busy_timeout: Duration,
    /// Connections of the read pool (at least 1). Default 4.
    pub readers: u32,
    /// Longest pause between two polls of a blocking `queue_reserve` or `lock_acquire` (other
    /// processes' pushes and releases are only seen by polling). Default 100 ms.
    pub max_poll: Duration,
}

impl Default for SqliteFleetOptions {
    fn default() -> Self {
        SqliteFleetOptions {
            busy_timeout: Duration::from_secs(10),
            readers: 4,
            max_poll: Duration::from_millis(100),
        }
    }
}

/// [`FleetBackend`] on a SQLite file. Clones share the connections.
#[derive(Clone)]
pub struct SqliteFleetBackend {
    inner: Arc<Inner>,
}

struct Inner {
    /// The one writer connection; `None` once closed. Held for a whole operation (or a whole
    /// batch of `batch`), so this process's writes queue here in order.
    writer: batch::Writer,
    /// Group commit of the one-statement queue writes, on `writer`.
    batch: Batcher,
    readers: SqlitePool,
    path: PathBuf,
    max_poll: Duration,
    /// Wakes this process's blocked reservers on a push (other processes are polled).
    pushed: Notify,
    topics: LocalTopics,
}

impl fmt::Debug for SqliteFleetBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(WHAT)
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

/// Maps a sqlx error; a closed pool is [`Error::Closed`], the rest (busy past the timeout, I/O)
/// is transient.
fn db(op: &'static str, key: impl fmt::Display, e: sqlx::Error) -> Error {
    match e {
        sqlx::Error::PoolClosed => Error::Closed { what: WHAT },
        e => Error::unavailable(op, key.to_string(), e),
    }
}

fn tier_name(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

/// Tier of a stored row; anything unknown is served as normal.
fn tier_of(s: &str) -> Priority {
    match s {
        "high" => Priority::High,
        "low" => Priority::Low,
        _ => Priority::Normal,
    }
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn ttl_secs(ttl: Option<Duration>) -> Option<f64> {
    ttl_ms(ttl).map(secs)
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn attempts_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

fn json_text(field: &'static str, v: &Value) -> Result<String> {
    pyjson::to_string(v).map_err(|e| Error::invalid(field, e))
}

fn parse_json(location: impl fmt::Display, text: Option<&str>, default: Value) -> Result<Value> {
    match text {
        None | Some("") => Ok(default),
        Some(t) => serde_json::from_str(t).map_err(|e| Error::corrupt(location.to_string(), e)),
    }
}

fn check_object(field: &'static str, v: &Value) -> Result<()> {
    if v.is_object() {
        Ok(())
    } else {
        Err(Error::invalid(field, "must be a JSON object"))
    }
}

fn tags_match(tags: &Tags, where_: &Tags) -> bool {
    where_.iter().all(|(k, v)| tags.get(k) == Some(v))
}

impl SqliteFleetBackend {
    /// Opens (creating if missing) the file at `path` with default options, and migrates it.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteFleetOptions::default()).await
    }

    /// Opens a `sqlite://PATH` (or `file://PATH`, or bare path) URL with default options.
    pub async fn open_url(url: &str) -> Result<Self> {
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("file://"))
            .unwrap_or(url);
        Self::open(path).await
    }

    /// Opens (creating if missing, with its parent directory) the file at `path`, and migrates
    /// it. A file the seed created is adopted and stays readable by the seed.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteFleetOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        if shown.is_empty() || shown == ":memory:" || shown.starts_with("file::memory:") {
            return Err(Error::config(
                "path",
                "SqliteFleetBackend needs a file (WAL and a read pool); use a temporary file for tests",
            ));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::config("path", format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        let base = SqliteConnectOptions::new()
            .filename(&path)
            .busy_timeout(options.busy_timeout)
            .synchronous(SqliteSynchronous::Normal);
        // One writer connection, behind an async mutex rather than a pool of one: a pool
        // returns its connection through a spawned task after every statement.
        let mut writer = base
            .clone()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // A batch streams one result per statement; room for all of them spares the
            // connection thread a wait (and a wake-up) per 50.
            .row_buffer_size(4096)
            .connect()
            .await
            .map_err(|e| db("open", &shown, e))?;
        migrate(&mut writer, &shown).await?;
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut writer)
            .await
            .map_err(|e| db("open", &shown, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            let _ = writer.close().await;
            return Err(Error::config(
                "path",
                format!("{shown}: SQLite refused WAL (journal_mode is {mode})"),
            ));
        }
        let readers = SqlitePoolOptions::new()
            .max_connections(options.readers.max(1))
            .min_connections(0)
            .test_before_acquire(false)
            .connect_with(base.read_only(true))
            .await
            .map_err(|e| db("open", &shown, e))?;
        let writer: batch::Writer = Arc::new(tokio::sync::Mutex::new(Some(writer)));
        let batch = Batcher::spawn(writer.clone())
            .map_err(|e| Error::unavailable("open", shown.clone(), e))?;
        Ok(SqliteFleetBackend {
            inner: Arc::new(Inner {
                batch,
                writer,
                readers,
                path,
                max_poll: options.max_poll.max(Duration::from_millis(1)),
                pushed: Notify::new(),
                topics: LocalTopics::default(),
            }),
        })
    }

    /// The file this backend uses.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Closes the writer and the read pool, after in-flight calls. Later calls fail with
    /// [`Error::Closed`].
    pub async fn close(&self) {
        if let Some(conn) = self.inner.writer.lock().await.take() {
            let _ = conn.close().await;
        }
        self.inner.readers.close().await;
    }

    fn r(&self) -> &SqlitePool {
        &self.inner.readers
    }

    /// The writer connection, or [`Error::Closed`].
    async fn writer(&self) -> Result<MappedMutexGuard<'_, SqliteConnection>> {
        MutexGuard::try_map(self.inner.writer.lock().await, Option::as_mut)
            .map_err(|_| Error::Closed { what: WHAT })
    }

    fn publish(&self, topic: &str, body: Vec<u8>) {
        self.inner.topics.publish(topic, body);
    }

    async fn try_reserve(&self, name: &str, visibility_ms: u64) -> Result<Option<Delivery>> {
        let receipt = random_token();
        // Hot path, one group-committed statement: pop and register, unless a scheduled task
        // is due (then it must be moved first, to keep its place in the tier).
        let rows = self
            .inner
            .batch
            .write(
                "queue_reserve",
                name,
                pop_sql(true),
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Text(receipt.clone()),
                    Arg::Real(secs(visibility_ms)),
                ],
            )
            .await?;
        if let Some(row) = rows.first() {
            return delivery_of(name, &receipt, row).map(Some);
        }
        let mut w = self.writer().await?;
        // Empty, or something is due: move due tasks and pop in one write transaction.
        let mut tx = begin(&mut w, "queue_reserve", name).await?;
        let got = if drain_scheduled(&mut tx, name).await? > 0 {
            pop(&mut tx, name, &receipt, visibility_ms, false).await?
        } else {
            None
        };
        tx.commit()
            .await
            .map_err(|e| db("queue_reserve", name, e))?;
        Ok(got)
    }

    /// Whether a task is waiting or a scheduled one is due (a read; reserve decides).
    async fn has_ready(&self, name: &str) -> Result<bool> {
        let ready: i64 = sqlx::query_scalar(concat!(
            "SELECT EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND tier IN ('high', 'normal', 'low')) ",
            "OR EXISTS (SELECT 1 FROM queue_scheduled WHERE name = ?1 AND available_at <= ",
            now_sql!(),
            ")"
        ))
        .bind(name)
        .fetch_one(self.r())
        .await
        .map_err(|e| db("queue_reserve", name, e))?;
        Ok(ready == 1)
    }

    /// Sets the idempotency key if absent or expired; `true` if it set. One statement.
    async fn kv_set_nx_on(
        conn: &mut SqliteConnection,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> std::result::Result<bool, sqlx::Error> {
        let res = sqlx::query(concat!(
            "INSERT INTO kv (ns, key, value, expires_at) VALUES (?1, ?2, ?3, ",
            now_sql!(),
            " + ?4) ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, ",
            "expires_at = excluded.expires_at WHERE kv.expires_at IS NOT NULL AND kv.expires_at <= ",
            now_sql!()
        ))
        .bind(ns)
        .bind(key)
        .bind(value)
        .bind(ttl_secs(ttl))
        .execute(&mut *conn)
        .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn worker_exists(
        conn: &mut SqliteConnection,
        at: &str,
        wid: &str,
    ) -> std::result::Result<bool, sqlx::Error> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM workers WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(at)
        .bind(wid)
        .fetch_optional(&mut *conn)
        .await?;
        Ok(found.is_some())
    }
}

async fn migrate(writer: &mut SqliteConnection, shown: &str) -> Result<()> {
    let mut migrator = sqlx::migrate!("./migrations");
    // Other switchyard stores may share the file and its `_sqlx_migrations` table; our versions
    // (2070xxxx) never clash with theirs, and theirs are not ours to check.
    migrator.set_ignore_missing(true);
    let mut attempt = 1;
    loop {
        match migrator.run(&mut *writer).await {
            Ok(()) => return Ok(()),
            // Two processes opening a new file at once race to record the migration; the loser
            // finds it applied on the next round.
            Err(_) if attempt < MIGRATE_ATTEMPTS => {
                tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
                attempt += 1;
            }
            Err(e) => return Err(Error::unavailable("migrate", shown.to_string(), e)),
        }
    }
}

/// Starts a write transaction that holds the file's write lock from its first statement, so
/// nothing read inside it can change before it commits (a deferred one would fail with
/// `SQLITE_BUSY_SNAPSHOT` instead of waiting).
async fn begin<'c>(
    conn: &'c mut SqliteConnection,
    op: &'static str,
    key: &str,
) -> Result<Transaction<'c, Sqlite>> {
    conn.begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(|e| db(op, key, e))
}

/// Moves the queue's due scheduled tasks back to their tiers, in due order; how many.
async fn drain_scheduled(conn: &mut SqliteConnection, name: &str) -> Result<usize> {
    let mut due: Vec<(i64, f64, String, Vec<u8>, i64)> = sqlx::query_as(concat!(
        "DELETE FROM queue_scheduled WHERE name = ?1 AND available_at <= ",
        now_sql!(),
        " RETURNING id, CAST(available_at AS REAL), tier, COALESCE(body, X''), attempts"
    ))
    .bind(name)
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| db("queue_reserve", name, e))?;
    due.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let n = due.len();
    for (_, _, tier, body, attempts) in due {
        insert_task(conn, "queue_reserve", name, &tier, &body, attempts).await?;
    }
    Ok(n)
}

/// The pop's SQL: `INSERT INTO queue_processing … SELECT` the head of the best tier (the
/// `switchyard_reserve_pop` trigger deletes the popped row); parameters name, receipt,
/// visibility in seconds. With `unless_due`, takes nothing while a scheduled task of the queue
/// is due.
fn pop_sql(unless_due: bool) -> &'static str {
    macro_rules! head {
        () => {
            concat!(
                "INSERT INTO queue_processing (name, task_id, body, deadline, tier, attempts, src_id) ",
                "SELECT name, ?2, body, ",
                now_sql!(),
                " + ?3, tier, attempts + 1, id FROM queues WHERE id = (SELECT id FROM (",
                " SELECT id, 0 AS p FROM (SELECT id FROM queues WHERE name = ?1 AND tier = 'high' ORDER BY id LIMIT 1)",
                " UNION ALL SELECT id, 1 FROM (SELECT id FROM queues WHERE name = ?1 AND tier = 'normal' ORDER BY id LIMIT 1)",
                " UNION ALL SELECT id, 2 FROM (SELECT id FROM queues WHERE name = ?1 AND tier = 'low' ORDER BY id LIMIT 1)",
                ") ORDER BY p LIMIT 1)"
            )
        };
    }
    macro_rules! returning {
        () => {
            " RETURNING tier, COALESCE(body, X''), attempts, deadline"
        };
    }
    if unless_due {
        concat!(
            head!(),
            " AND NOT EXISTS (SELECT 1 FROM queue_scheduled WHERE name = ?1 AND available_at <= ",
            now_sql!(),
            ")",
            returning!()
        )
    } else {
        concat!(head!(), returning!())
    }
}

/// The delivery a pop's `RETURNING` row describes.
fn delivery_of(name: &str, receipt: &str, row: &SqliteRow) -> Result<Delivery> {
    let (tier, body, attempts, deadline): (String, Vec<u8>, i64, f64) =
        sqlx::FromRow::from_row(row).map_err(|e| db("queue_reserve", name, e))?;
    Ok(Delivery {
        receipt: Receipt::new(receipt),
        task_id: task_id_of(&body),
        body,
        attempt: attempts_u32(attempts),
        priority: tier_of(&tier),
        visible_until: deadline,
    })
}

/// Takes the head of the best tier into a reservation under `receipt`, in one statement (the
/// `switchyard_reserve_pop` trigger deletes the popped row). With `unless_due`, takes nothing
/// while a scheduled task of the queue is due.
async fn pop(
    conn: &mut SqliteConnection,
    name: &str,
    receipt: &str,
    visibility_ms: u64,
    unless_due: bool,
) -> Result<Option<Delivery>> {
    let row = sqlx::query(pop_sql(unless_due))
        .bind(name)
        .bind(receipt)
        .bind(secs(visibility_ms))
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| db("queue_reserve", name, e))?;
    row.map(|row| delivery_of(name, receipt, &row)).transpose()
}

/// Appends a task to its tier; parameters name, tier, body, attempts.
const INSERT_TASK: &str = "INSERT INTO queues (name, tier, body, attempts) VALUES (?1, ?2, ?3, ?4)";

async fn insert_task(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    tier: &str,
    body: &[u8],
    attempts: i64,
) -> Result<()> {
    sqlx::query(INSERT_TASK)
        .bind(name)
        .bind(tier)
        .bind(body)
        .bind(attempts)
        .execute(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
    Ok(())
}

type ItemRow = (String, Vec<u8>, Option<String>, Option<f64>, Option<f64>);

fn item_from_row(pool: &str, row: ItemRow) -> Result<PoolItem> {
    let (id, payload, tags, expires_at, in_use_until) = row;
    let tags = match parse_json(
        format_args!("pool_items[{pool:?}, {id:?}].tags"),
        tags.as_deref(),
        Value::Object(Map::new()),
    )? {
        Value::Object(m) => m,
        _ => {
            return Err(Error::corrupt(
                format!("pool_items[{pool:?}, {id:?}].tags"),
                "not a JSON object",
            ));
        }
    };
    Ok(PoolItem {
        id,
        payload,
        tags,
        expires_at,
        in_use_until,
    })
}

#[async_trait]
impl FleetBackend for SqliteFleetBackend {
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        check_name("ns", ns)?;
        sqlx::query(concat!(
            "INSERT OR REPLACE INTO kv (ns, key, value, expires_at) VALUES (?1, ?2, ?3, ",
            now_sql!(),
            " + ?4)"
        ))
        .bind(ns)
        .bind(key)
        .bind(value)
        .bind(ttl_secs(ttl))
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("kv_set", ns, e))?;
        Ok(())
    }

    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool> {
        check_name("ns", ns)?;
        let mut conn = self.writer().await?;
        Self::kv_set_nx_on(&mut conn, ns, key, value, ttl)
            .await
            .map_err(|e| db("kv_set_nx", ns, e))
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        check_name("ns", ns)?;
        // Expired rows are filtered, never deleted on read (fleet flaw S2).
        sqlx::query_scalar(concat!(
            "SELECT COALESCE(value, X'') FROM kv WHERE ns = ?1 AND key = ?2 ",
            "AND (expires_at IS NULL OR expires_at > ",
            now_sql!(),
            ")"
        ))
        .bind(ns)
        .bind(key)
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("kv_get", ns, e))
    }

    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool> {
        check_name("ns", ns)?;
        let live: Option<i64> = sqlx::query_scalar(concat!(
            "DELETE FROM kv WHERE ns = ?1 AND key = ?2 ",
            "RETURNING (expires_at IS NULL OR expires_at > ",
            now_sql!(),
            ")"
        ))
        .bind(ns)
        .bind(key)
        .fetch_optional(&mut *self.writer().await?)
        .await
        .map_err(|e| db("kv_del", ns, e))?;
        Ok(live == Some(1))
    }

    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        check_name("pool", name)?;
        let tags = pyjson::to_string(tags).map_err(|e| Error::invalid("tags", e))?;
        // An upsert, not INSERT OR REPLACE: no whole-pool prune (fleet flaw P1).
        sqlx::query(concat!(
            "INSERT INTO pool_items (name, item_id, payload, tags, expires_at) VALUES (?1, ?2, ?3, ?4, ",
            now_sql!(),
            " + ?5) ON CONFLICT (name, item_id) DO UPDATE SET payload = excluded.payload, ",
            "tags = excluded.tags, expires_at = excluded.expires_at"
        ))
        .bind(name)
        .bind(id)
        .bind(payload)
        .bind(tags)
        .bind(ttl_secs(ttl))
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("pool_put", name, e))?;
        Ok(())
    }

    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>> {
        check_name("pool", name)?;
        let rows: Vec<ItemRow> = sqlx::query_as(concat!(
            "SELECT i.item_id, COALESCE(i.payload, X''), i.tags, CAST(i.expires_at AS REAL), ",
            "CAST(c.until AS REAL) FROM pool_items i LEFT JOIN pool_claims c ",
            "ON c.name = i.name AND c.item_id = i.item_id AND c.until > ",
            now_sql!(),
            " WHERE i.name = ?1 AND (i.expires_at IS NULL OR i.expires_at > ",
            now_sql!(),
            ") ORDER BY i.item_id"
        ))
        .bind(name)
        .fetch_all(self.r())
        .await
        .map_err(|e| db("pool_list", name, e))?;
        rows.into_iter().map(|r| item_from_row(name, r)).collect()
    }

    async fn pool_size(&self, name: &str) -> Result<u64> {
        check_name("pool", name)?;
        let n: i64 = sqlx::query_scalar(concat!(
            "SELECT COUNT(*) FROM pool_items WHERE name = ?1 AND (expires_at IS NULL OR expires_at > ",
            now_sql!(),
            ")"
        ))
        .bind(name)
        .fetch_one(self.r())
        .await
        .map_err(|e| db("pool_size", name, e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool> {
        check_name("pool", name)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "pool_remove", name).await?;
        sqlx::query("DELETE FROM pool_claims WHERE name = ?1 AND item_id = ?2")
            .bind(name)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("pool_remove", name, e))?;
        let live: Option<i64> = sqlx::query_scalar(concat!(
            "DELETE FROM pool_items WHERE name = ?1 AND item_id = ?2 ",
            "RETURNING (expires_at IS NULL OR expires_at > ",
            now_sql!(),
            ")"
        ))
        .bind(name)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db("pool_remove", name, e))?;
        tx.commit().await.map_err(|e| db("pool_remove", name, e))?;
        Ok(live == Some(1))
    }

    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool> {
        check_name("pool", name)?;
        let res = sqlx::query(concat!(
            "DELETE FROM pool_claims WHERE name = ?1 AND item_id = ?2 AND token = ?3 AND until > ",
            now_sql!()
        ))
        .bind(name)
        .bind(id)
        .bind(token)
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("pool_release", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold: Duration,
    ) -> Result<Option<PoolClaim>> {
        check_name("pool", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "pool_claim_any", name).await?;
        // Live, unclaimed items, latest expiry first, never-expiring last; tags are compared in
        // Rust (JSON equality) on the rows of this one query: one round trip (flaw P2).
        let rows: Vec<ItemRow> = sqlx::query_as(concat!(
            "SELECT i.item_id, COALESCE(i.payload, X''), i.tags, CAST(i.expires_at AS REAL), NULL ",
            "FROM pool_items i LEFT JOIN pool_claims c ON c.name = i.name AND c.item_id = i.item_id ",
            "AND c.until > ",
            now_sql!(),
            " WHERE i.name = ?1 AND c.item_id IS NULL AND (i.expires_at IS NULL OR i.expires_at > ",
            now_sql!(),
            ") ORDER BY i.expires_at IS NULL, i.expires_at DESC, i.item_id"
        ))
        .bind(name)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("pool_claim_any", name, e))?;
        let mut chosen = None;
        for row in rows {
            match item_from_row(name, row) {
                Ok(item) if tags_match(&item.tags, where_) => {
                    chosen = Some(item);
                    break;
                }
                Ok(_) => {}
                // An item whose tags do not decode cannot be matched; it must not block the pool.
                Err(e) => tracing::warn!(pool = name, error = %e, "skipping a corrupt pool item"),
            }
        }
        let Some(mut item) = chosen else {
            tx.commit()
                .await
                .map_err(|e| db("pool_claim_any", name, e))?;
            return Ok(None);
        };
        let token = random_token();
        let until: f64 = sqlx::query_scalar(concat!(
            "INSERT OR REPLACE INTO pool_claims (name, item_id, until, token) VALUES (?1, ?2, ",
            now_sql!(),
            " + ?3, ?4) RETURNING until"
        ))
        .bind(name)
        .bind(&item.id)
        .bind(secs(hold_ms))
        .bind(&token)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| db("pool_claim_any", name, e))?;
        tx.commit()
            .await
            .map_err(|e| db("pool_claim_any", name, e))?;
        item.in_use_until = Some(until);
        Ok(Some(PoolClaim { item, token }))
    }

    async fn lock_acquire(
        &self,
        name: &str,
        hold: Duration,
        wait: Duration,
    ) -> Result<Option<LockGrant>> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut backoff = Duration::from_millis(50);
        loop {
            let token = random_token();
            let mut w = self.writer().await?;
            let mut tx = begin(&mut w, "lock_acquire", name).await?;
            let won = sqlx::query(concat!(
                "INSERT INTO locks (name, token, expires_at) VALUES (?1, ?2, ",
                now_sql!(),
                " + ?3) ON CONFLICT (name) DO UPDATE SET token = excluded.token, ",
                "expires_at = excluded.expires_at WHERE locks.expires_at <= ",
                now_sql!()
            ))
            .bind(name)
            .bind(&token)
            .bind(secs(hold_ms))
            .execute(&mut *tx)
            .await
            .map_err(|e| db("lock_acquire", name, e))?
            .rows_affected()
                == 1;
            if won {
                let fence: i64 = sqlx::query_scalar(
                    "INSERT INTO switchyard_lock_fences (name, fence) VALUES (?1, 1) \
                     ON CONFLICT (name) DO UPDATE SET fence = fence + 1 RETURNING fence",
                )
                .bind(name)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| db("lock_acquire", name, e))?;
                tx.commit().await.map_err(|e| db("lock_acquire", name, e))?;
                return Ok(Some(LockGrant {
                    token,
                    fence: u64::try_from(fence).unwrap_or(0),
                }));
            }
            tx.rollback()
                .await
                .map_err(|e| db("lock_acquire", name, e))?;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            tokio::time::sleep(backoff.min(left)).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
        check_name("lock", name)?;
        let res = sqlx::query(concat!(
            "DELETE FROM locks WHERE name = ?1 AND token = ?2 AND expires_at > ",
            now_sql!()
        ))
        .bind(name)
        .bind(token)
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("lock_release", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let res = sqlx::query(concat!(
            "UPDATE locks SET expires_at = ",
            now_sql!(),
            " + ?3 WHERE name = ?1 AND token = ?2 AND expires_at > ",
            now_sql!()
        ))
        .bind(name)
        .bind(token)
        .bind(secs(hold_ms))
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("lock_extend", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64> {
        check_name("counter", name)?;
        // Read and write under one write lock (fleet flaw S3: three autocommit statements could
        // return another process's total). Checked in Rust: SQLite would turn an overflow into a REAL.
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "counter_incr", name).await?;
        let current: Option<i64> =
            sqlx::query_scalar("SELECT CAST(value AS INTEGER) FROM counters WHERE name = ?1")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db("counter_incr", name, e))?;
        let next = current
            .unwrap_or(0)
            .checked_add(by)
            .ok_or_else(|| Error::invalid("by", "overflows the counter"))?;
        sqlx::query("INSERT OR REPLACE INTO counters (name, value) VALUES (?1, ?2)")
            .bind(name)
            .bind(next)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("counter_incr", name, e))?;
        tx.commit().await.map_err(|e| db("counter_incr", name, e))?;
        Ok(next)
    }

    async fn counter_get(&self, name: &str) -> Result<i64> {
        check_name("counter", name)?;
        let v: Option<i64> =
            sqlx::query_scalar("SELECT CAST(value AS INTEGER) FROM counters WHERE name = ?1")
                .bind(name)
                .fetch_optional(self.r())
                .await
                .map_err(|e| db("counter_get", name, e))?;
        Ok(v.unwrap_or(0))
    }

    async fn counter_set(&self, name: &str, value: i64) -> Result<()> {
        check_name("counter", name)?;
        sqlx::query("INSERT OR REPLACE INTO counters (name, value) VALUES (?1, ?2)")
            .bind(name)
            .bind(value)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("counter_set", name, e))?;
        Ok(())
    }

    async fn counter_del(&self, name: &str) -> Result<bool> {
        check_name("counter", name)?;
        let res = sqlx::query("DELETE FROM counters WHERE name = ?1")
            .bind(name)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("counter_del", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()> {
        check_name("queue", name)?;
        self.inner
            .batch
            .write(
                "queue_push",
                name,
                INSERT_TASK,
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Text(tier_name(priority).to_string()),
                    Arg::Blob(body.to_vec()),
                    Arg::Int(0),
                ],
            )
            .await?;
        self.inner.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_submit_once(
        &self,
        name: &str,
        body: &[u8],
        priority: Priority,
        idem: IdempotencyKey<'_>,
    ) -> Result<SubmitOutcome> {
        check_name("queue", name)?;
        check_name("idem.ns", idem.ns)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "queue_submit_once", name).await?;
        let set = Self::kv_set_nx_on(&mut tx, idem.ns, idem.key, idem.value, idem.ttl)
            .await
            .map_err(|e| db("queue_submit_once", name, e))?;
        if !set {
            let stored: Option<Vec<u8>> = sqlx::query_scalar(
                "SELECT COALESCE(value, X'') FROM kv WHERE ns = ?1 AND key = ?2",
            )
            .bind(idem.ns)
            .bind(idem.key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db("queue_submit_once", name, e))?;
            tx.rollback()
                .await
                .map_err(|e| db("queue_submit_once", name, e))?;
            return Ok(SubmitOutcome::Duplicate(stored.unwrap_or_default()));
        }
        insert_task(
            &mut tx,
            "queue_submit_once",
            name,
            tier_name(priority),
            body,
            0,
        )
        .await?;
        tx.commit()
            .await
            .map_err(|e| db("queue_submit_once", name, e))?;
        self.inner.pushed.notify_waiters();
        Ok(SubmitOutcome::Enqueued)
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM queues WHERE name = ?1 AND tier IN ('high', 'normal', 'low')",
        )
        .bind(name)
        .fetch_one(self.r())
        .await
        .map_err(|e| db("queue_size", name, e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        check_name("queue", name)?;
        // One statement is one read transaction: every count comes from the same snapshot, and
        // `now` is evaluated once. Cut-offs are those of sweep and drain (`<= now`).
        type Row = (i64, i64, i64, i64, i64, i64, i64, i64);
        let row: Row = sqlx::query_as(concat!(
            "SELECT (SELECT COUNT(*) FROM queues WHERE name = ?1 AND tier = 'high'), ",
            "(SELECT COUNT(*) FROM queues WHERE name = ?1 AND tier = 'normal'), ",
            "(SELECT COUNT(*) FROM queues WHERE name = ?1 AND tier = 'low'), ",
            "(SELECT COUNT(*) FROM queue_processing WHERE name = ?1), ",
            "(SELECT COUNT(*) FROM queue_processing WHERE name = ?1 AND deadline <= ",
            now_sql!(),
            "), (SELECT COUNT(*) FROM queue_scheduled WHERE name = ?1), ",
            "(SELECT COUNT(*) FROM queue_scheduled WHERE name = ?1 AND available_at <= ",
            now_sql!(),
            "), (SELECT COUNT(*) FROM queue_dead WHERE name = ?1)"
        ))
        .bind(name)
        .fetch_one(self.r())
        .await
        .map_err(|e| db("queue_stats", name, e))?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        let mut stats = QueueStats::default();
        stats.high = n(row.0);
        stats.normal = n(row.1);
        stats.low = n(row.2);
        stats.in_flight = n(row.3);
        stats.overdue = n(row.4);
        stats.scheduled = n(row.5);
        stats.due = n(row.6);
        stats.dead = n(row.7);
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        let mut out = Vec::new();
        // One read transaction, so the three tiers are one snapshot (rolled back if dropped).
        let mut conn = self
            .r()
            .begin()
            .await
            .map_err(|e| db("queue_peek", name, e))?;
        for p in Priority::ORDER {
            if out.len() >= n {
                break;
            }
            let bodies: Vec<Vec<u8>> = sqlx::query_scalar(
                "SELECT COALESCE(body, X'') FROM queues WHERE name = ?1 AND tier = ?2 ORDER BY id LIMIT ?3",
            )
            .bind(name)
            .bind(tier_name(p))
            .bind(to_i64(n - out.len()))
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| db("queue_peek", name, e))?;
            out.extend(bodies);
        }
        conn.commit().await.map_err(|e| db("queue_peek", name, e))?;
        Ok(out)
    }

    async fn queue_reserve(
        &self,
        name: &str,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Delivery>> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut poll = Duration::from_millis(5);
        let mut first = true;
        loop {
            let notified = self.inner.pushed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Always try once, so `timeout = 0` takes a ready task (flaw Q2). Later polls look on
            // the read pool first, so idle reservers do not take the file's write lock.
            if (first || self.has_ready(name).await?)
                && let Some(d) = self.try_reserve(name, visibility_ms).await?
            {
                return Ok(Some(d));
            }
            first = false;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            // A push of this process wakes us; other processes' pushes and due scheduled tasks
            // are found by polling with backoff.
            let _ = tokio::time::timeout(left.min(poll), notified).await;
            poll = (poll * 2).min(self.inner.max_poll);
        }
    }

    async fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool> {
        check_name("queue", name)?;
        // RETURNING, not rows_affected: a batch reports rows per statement, not changes.
        let rows = self
            .inner
            .batch
            .write(
                "queue_ack",
                name,
                "DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2 RETURNING 1",
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Text(receipt.as_str().to_string()),
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        delay: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "queue_nack", name).await?;
        let held: Option<(String, i64)> = sqlx::query_as(
            "DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2 RETURNING tier, attempts",
        )
        .bind(name)
        .bind(receipt.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db("queue_nack", name, e))?;
        let Some((tier, attempts)) = held else {
            tx.rollback().await.map_err(|e| db("queue_nack", name, e))?;
            return Ok(false);
        };
        match ttl_ms(Some(delay)) {
            // A row of its own per retry: identical bodies never collapse (flaw Q12).
            Some(ms) => {
                sqlx::query(concat!(
                    "INSERT INTO queue_scheduled (name, available_at, body, tier, attempts) VALUES (?1, ",
                    now_sql!(),
                    " + ?2, ?3, ?4, ?5)"
                ))
                .bind(name)
                .bind(secs(ms))
                .bind(body)
                .bind(&tier)
                .bind(attempts)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("queue_nack", name, e))?;
            }
            None => insert_task(&mut tx, "queue_nack", name, &tier, body, attempts).await?,
        }
        tx.commit().await.map_err(|e| db("queue_nack", name, e))?;
        self.inner.pushed.notify_waiters();
        Ok(true)
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let rows = self
            .inner
            .batch
            .write(
                "queue_extend",
                name,
                concat!(
                    "UPDATE queue_processing SET deadline = ",
                    now_sql!(),
                    " + ?3 WHERE name = ?1 AND task_id = ?2 RETURNING 1"
                ),
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Text(receipt.as_str().to_string()),
                    Arg::Real(secs(visibility_ms)),
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    async fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "queue_fail", name).await?;
        let res = sqlx::query("DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2")
            .bind(name)
            .bind(receipt.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db("queue_fail", name, e))?;
        if res.rows_affected() != 1 {
            tx.rollback().await.map_err(|e| db("queue_fail", name, e))?;
            return Ok(false);
        }
        sqlx::query("INSERT INTO queue_dead (name, body) VALUES (?1, ?2)")
            .bind(name)
            .bind(body)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("queue_fail", name, e))?;
        tx.commit().await.map_err(|e| db("queue_fail", name, e))?;
        Ok(true)
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "queue_sweep_expired", name).await?;
        // The DELETE decides: a reservation acked or swept by someone else is simply not there
        // (flaw Q4).
        let mut lapsed: Vec<(f64, String, Vec<u8>, i64)> = sqlx::query_as(concat!(
            "DELETE FROM queue_processing WHERE name = ?1 AND deadline <= ",
            now_sql!(),
            " RETURNING CAST(deadline AS REAL), tier, COALESCE(body, X''), attempts"
        ))
        .bind(name)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("queue_sweep_expired", name, e))?;
        lapsed.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, tier, body, attempts) in &lapsed {
            insert_task(&mut tx, "queue_sweep_expired", name, tier, body, *attempts).await?;
        }
        tx.commit()
            .await
            .map_err(|e| db("queue_sweep_expired", name, e))?;
        if !lapsed.is_empty() {
            self.inner.pushed.notify_waiters();
        }
        Ok(lapsed.len() as u64)
    }

    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()> {
        check_name("queue", name)?;
        sqlx::query("INSERT INTO queue_dead (name, body) VALUES (?1, ?2)")
            .bind(name)
            .bind(body)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("queue_dead", name, e))?;
        Ok(())
    }

    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "SELECT COALESCE(body, X'') FROM queue_dead WHERE name = ?1 ORDER BY id LIMIT ?2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.r())
        .await
        .map_err(|e| db("dlq_peek", name, e))
    }

    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut rows: Vec<(i64, Vec<u8>)> = sqlx::query_as(
            "DELETE FROM queue_dead WHERE id IN \
             (SELECT id FROM queue_dead WHERE name = ?1 ORDER BY id LIMIT ?2) \
             RETURNING id, COALESCE(body, X'')",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(&mut *self.writer().await?)
        .await
        .map_err(|e| db("dlq_pop", name, e))?;
        rows.sort_by_key(|r| r.0);
        Ok(rows.into_iter().map(|r| r.1).collect())
    }

    async fn dlq_length(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM queue_dead WHERE name = ?1")
            .bind(name)
            .fetch_one(self.r())
            .await
            .map_err(|e| db("dlq_length", name, e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn dlq_clear(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let res = sqlx::query("DELETE FROM queue_dead WHERE name = ?1")
            .bind(name)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("dlq_clear", name, e))?;
        Ok(res.rows_affected())
    }

    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64> {
        check_name("queue", name)?;
        if n == 0 {
            return Ok(0);
        }
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "dlq_requeue", name).await?;
        let mut rows: Vec<(i64, Vec<u8>)> = sqlx::query_as(
            "DELETE FROM queue_dead WHERE id IN \
             (SELECT id FROM queue_dead WHERE name = ?1 ORDER BY id LIMIT ?2) \
             RETURNING id, COALESCE(body, X'')",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("dlq_requeue", name, e))?;
        rows.sort_by_key(|r| r.0);
        for (_, body) in &rows {
            insert_task(&mut tx, "dlq_requeue", name, tier_name(priority), body, 0).await?;
        }
        tx.commit().await.map_err(|e| db("dlq_requeue", name, e))?;
        if !rows.is_empty() {
            self.inner.pushed.notify_waiters();
        }
        Ok(rows.len() as u64)
    }

    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()> {
        check_name("stream", name)?;
        if !score.is_finite() {
            return Err(Error::invalid("score", "must be finite"));
        }
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "stream_push", name).await?;
        // An identical envelope moves to the new score (T3, the seed's Redis ZSET).
        sqlx::query("DELETE FROM streams WHERE name = ?1 AND body = ?2")
            .bind(name)
            .bind(envelope)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("stream_push", name, e))?;
        sqlx::query("INSERT INTO streams (name, score, body) VALUES (?1, ?2, ?3)")
            .bind(name)
            .bind(score)
            .bind(envelope)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("stream_push", name, e))?;
        if let Some(ttl) = ttl_secs(ttl) {
            sqlx::query("DELETE FROM streams WHERE name = ?1 AND score < ?2")
                .bind(name)
                .bind(score - ttl)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("stream_push", name, e))?;
        }
        trim_len(&mut tx, name, max_len).await?;
        tx.commit().await.map_err(|e| db("stream_push", name, e))?;
        self.publish(
            &format!("{name}.emit"),
            pyjson::float_repr(score).into_bytes(),
        );
        Ok(())
    }

    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("stream", name)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut rows: Vec<(f64, Vec<u8>)> = sqlx::query_as(
            "DELETE FROM streams WHERE id IN \
             (SELECT id FROM streams WHERE name = ?1 ORDER BY score, body LIMIT ?2) \
             RETURNING CAST(score AS REAL), COALESCE(body, X'')",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(&mut *self.writer().await?)
        .await
        .map_err(|e| db("stream_pop", name, e))?;
        rows.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(rows.into_iter().map(|r| r.1).collect())
    }

    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("stream", name)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "SELECT COALESCE(body, X'') FROM streams WHERE name = ?1 ORDER BY score, body LIMIT ?2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.r())
        .await
        .map_err(|e| db("stream_peek", name, e))
    }

    async fn stream_length(&self, name: &str) -> Result<u64> {
        check_name("stream", name)?;
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM streams WHERE name = ?1")
            .bind(name)
            .fetch_one(self.r())
            .await
            .map_err(|e| db("stream_length", name, e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()> {
        check_name("stream", name)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "stream_trim", name).await?;
        if let Some(ttl) = ttl_secs(ttl) {
            sqlx::query(concat!(
                "DELETE FROM streams WHERE name = ?1 AND score < ",
                now_sql!(),
                " - ?2"
            ))
            .bind(name)
            .bind(ttl)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("stream_trim", name, e))?;
        }
        trim_len(&mut tx, name, max_len).await?;
        tx.commit().await.map_err(|e| db("stream_trim", name, e))?;
        Ok(())
    }

    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        check_name("topic", topic)?;
        self.publish(topic, body.to_vec());
        Ok(())
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        check_name("topic", topic)?;
        Ok(self.inner.topics.subscribe(topic))
    }

    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()> {
        check_name("automation_type", automation_type)?;
        check_name("worker_id", worker_id)?;
        let hw = json_text("hardware", hardware)?;
        // Insert-or-update-hardware in one statement; the insert trigger lifts the generation
        // above the one a removed worker left behind (flaw W3).
        sqlx::query(
            "INSERT INTO workers (automation_type, worker_id, hardware, config, config_gen, state, \
             last_seen, last_error, stats) VALUES (?1, ?2, ?3, '{}', 0, 'IDLE', 0, NULL, '{}') \
             ON CONFLICT (automation_type, worker_id) DO UPDATE SET hardware = excluded.hardware",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(hw)
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("worker_register", automation_type, e))?;
        Ok(())
    }

    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)> {
        // One row: config and generation are read together (flaw W1).
        let row: Option<(Option<String>, Option<i64>)> = sqlx::query_as(
            "SELECT config, config_gen FROM workers WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("worker_get_config", automation_type, e))?;
        match row {
            None => Ok((Value::Object(Map::new()), 0)),
            Some((config, generation)) => Ok((
                parse_json(
                    format_args!("workers[{automation_type:?}, {worker_id:?}].config"),
                    config.as_deref(),
                    Value::Object(Map::new()),
                )?,
                u64::try_from(generation.unwrap_or(0)).unwrap_or(0),
            )),
        }
    }

    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite> {
        check_object("config", config)?;
        let text = json_text("config", config)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "worker_set_config", automation_type).await?;
        let current: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT config_gen FROM workers WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db("worker_set_config", automation_type, e))?;
        let Some(current) = current else {
            tx.rollback()
                .await
                .map_err(|e| db("worker_set_config", automation_type, e))?;
            return Ok(ConfigWrite::NotRegistered);
        };
        let current = u64::try_from(current.unwrap_or(0)).unwrap_or(0);
        if expected_gen.is_some_and(|e| e != current) {
            tx.rollback()
                .await
                .map_err(|e| db("worker_set_config", automation_type, e))?;
            return Ok(ConfigWrite::GenMismatch { current });
        }
        let generation = current + 1;
        sqlx::query(
            "UPDATE workers SET config = ?3, config_gen = ?4 \
             WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(text)
        .bind(i64::try_from(generation).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("worker_set_config", automation_type, e))?;
        tx.commit()
            .await
            .map_err(|e| db("worker_set_config", automation_type, e))?;
        Ok(ConfigWrite::Applied { generation })
    }

    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool> {
        let res = sqlx::query(
            "UPDATE workers SET state = ?3, last_error = ?4, last_seen = ?5, applied_gen = ?6 \
             WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(state.state)
        .bind(state.last_error.filter(|e| !e.is_empty()))
        .bind(state.last_seen)
        .bind(
            state
                .applied_gen
                .map(|g| i64::try_from(g).unwrap_or(i64::MAX)),
        )
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("worker_set_state", automation_type, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool> {
        let text = json_text("stats", stats)?;
        let res = sqlx::query(
            "UPDATE workers SET stats = ?3 WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(text)
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("worker_set_stats", automation_type, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool> {
        if !ts.is_finite() {
            return Err(Error::invalid("ts", "must be finite"));
        }
        let text = json_text("frame", frame)?;
        let op = "worker_stats_push";
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, automation_type).await?;
        if !Self::worker_exists(&mut tx, automation_type, worker_id)
            .await
            .map_err(|e| db(op, automation_type, e))?
        {
            tx.rollback()
                .await
                .map_err(|e| db(op, automation_type, e))?;
            return Ok(false);
        }
        // An identical frame moves to the new ts, as in the seed's Redis ZSET.
        sqlx::query(
            "DELETE FROM worker_stats_history \
             WHERE automation_type = ?1 AND worker_id = ?2 AND frame = ?3",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(&text)
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, automation_type, e))?;
        sqlx::query(
            "INSERT INTO worker_stats_history (automation_type, worker_id, ts, frame) \
             VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(ts)
        .bind(&text)
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, automation_type, e))?;
        if max_entries > 0 {
            sqlx::query(
                "DELETE FROM worker_stats_history WHERE rowid IN (SELECT rowid \
                 FROM worker_stats_history WHERE automation_type = ?1 AND worker_id = ?2 \
                 ORDER BY ts DESC, frame DESC LIMIT -1 OFFSET ?3)",
            )
            .bind(automation_type)
            .bind(worker_id)
            .bind(to_i64(max_entries))
            .execute(&mut *tx)
            .await
            .map_err(|e| db(op, automation_type, e))?;
        }
        tx.commit().await.map_err(|e| db(op, automation_type, e))?;
        Ok(true)
    }

    async fn worker_stats_history(
        &self,
        automation_type: &str,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let frames: Vec<Option<String>> = sqlx::query_scalar(
            "SELECT frame FROM worker_stats_history \
             WHERE automation_type = ?1 AND worker_id = ?2 AND ts >= ?3 \
             ORDER BY ts, frame LIMIT ?4",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(since)
        .bind(to_i64(limit))
        .fetch_all(self.r())
        .await
        .map_err(|e| db("worker_stats_history", automation_type, e))?;
        // A frame that does not parse is skipped, as the seed does.
        Ok(frames
            .iter()
            .filter_map(|f| serde_json::from_str(f.as_deref()?).ok())
            .collect())
    }

    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>> {
        type Row = (
            Option<String>,
            Option<String>,
            Option<i64>,
            Option<String>,
            Option<f64>,
            Option<String>,
            Option<i64>,
            Option<String>,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT hardware, config, config_gen, state, CAST(last_seen AS REAL), last_error, \
             applied_gen, stats FROM workers WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("worker_get", automation_type, e))?;
        let Some((hw, config, generation, state, last_seen, last_error, applied, stats)) = row
        else {
            return Ok(None);
        };
        let loc = |col: &str| format!("workers[{automation_type:?}, {worker_id:?}].{col}");
        let empty = || Value::Object(Map::new());
        Ok(Some(WorkerRecord {
            hardware: parse_json(loc("hardware"), hw.as_deref(), empty())?,
            config: parse_json(loc("config"), config.as_deref(), empty())?,
            config_gen: u64::try_from(generation.unwrap_or(0)).unwrap_or(0),
            state: state
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "IDLE".to_string()),
            last_seen: last_seen.unwrap_or(0.0),
            last_error: last_error.filter(|e| !e.is_empty()),
            applied_gen: applied.and_then(|g| u64::try_from(g).ok()),
            stats: parse_json(loc("stats"), stats.as_deref(), empty())?,
        }))
    }

    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>> {
        sqlx::query_as(
            "SELECT automation_type, worker_id FROM workers \
             WHERE ?1 IS NULL OR automation_type = ?1 ORDER BY automation_type, worker_id",
        )
        .bind(automation_type)
        .fetch_all(self.r())
        .await
        .map_err(|e| db("worker_list", automation_type.unwrap_or("*"), e))
    }

    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool> {
        let op = "worker_remove";
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, automation_type).await?;
        // The delete trigger keeps the generation (flaw W3); the history goes too (flaw W5).
        let res = sqlx::query("DELETE FROM workers WHERE automation_type = ?1 AND worker_id = ?2")
            .bind(automation_type)
            .bind(worker_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db(op, automation_type, e))?;
        sqlx::query(
            "DELETE FROM worker_stats_history WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, automation_type, e))?;
        tx.commit().await.map_err(|e| db(op, automation_type, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        check_name("automation_type", automation_type)?;
        sqlx::query("INSERT OR REPLACE INTO catalog (automation_type, doc) VALUES (?1, ?2)")
            .bind(automation_type)
            .bind(doc)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("catalog_set", automation_type, e))?;
        Ok(())
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT COALESCE(doc, X'') FROM catalog WHERE automation_type = ?1")
            .bind(automation_type)
            .fetch_optional(self.r())
            .await
            .map_err(|e| db("catalog_get", automation_type, e))
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let rows: Vec<(String, Vec<u8>)> =
            sqlx::query_as("SELECT automation_type, COALESCE(doc, X'') FROM catalog")
                .fetch_all(self.r())
                .await
                .map_err(|e| db("catalog_all", "catalog", e))?;
        Ok(rows.into_iter().collect())
    }
}

/// Drops the lowest-scored entries beyond `max_len` (0 = no cap) without counting the stream
/// (fleet flaw S4).
async fn trim_len(conn: &mut SqliteConnection, name: &str, max_len: u64) -> Result<()> {
    if max_len == 0 {
        return Ok(());
    }
    sqlx::query(
        "DELETE FROM streams WHERE id IN (SELECT id FROM streams WHERE name = ?1 \
         ORDER BY score DESC, body DESC LIMIT -1 OFFSET ?2)",
    )
    .bind(name)
    .bind(i64::try_from(max_len).unwrap_or(i64::MAX))
    .execute(&mut *conn)
    .await
    .map_err(|e| db("stream_trim", name, e))?;
    Ok(())
}
