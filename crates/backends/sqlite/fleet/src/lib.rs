#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Connection, Sqlite, SqliteConnection, Transaction};
use switchyard_core::fleet::adapter::{
    Attempt, CatalogOps, CounterOps, DeadLetterOps, EventOps, KvOps, LockOps, PoolOps,
    QueueBatchOps, QueueFlowOps, QueueOps, ScheduleOps, StreamOps, TaskOps, WorkerOps,
};
use switchyard_core::fleet::{
    ConfigWrite, DEFAULT_MAX_RESULT_BYTES, Delivery, EventStream, IdempotencyKey, InFlight,
    LocalTopics, LockGrant, PoolClaim, PoolItem, Priority, QueueStats, RateLimit, Receipt, RunAt,
    Submit, SubmitOutcome, Tags, TaskHead, WorkerRecord, WorkerState, delay_ms, random_token,
    task_id_of, ttl_ms,
};
use switchyard_core::pycompat::{Dumps, float_repr};
use switchyard_core::{Error, Result};
use switchyard_sqlite_support::{self as support, Create, Location, OpenOptions};
use tokio::sync::{MappedMutexGuard, MutexGuard, Notify};

const WHAT: &str = "SqliteFleetBackend";

/// SQLite's clock in unix seconds, millisecond resolution; evaluated once per statement.
macro_rules! now_sql {
    () => {
        "((julianday('now') - 2440587.5) * 86400.0)"
    };
}

/// The whole and fractional tokens of the limited queue's flow row `f` now: the stored bucket
/// refilled at `rate_max` per `rate_per_ms` since `refilled_at`, capped at `rate_max` (ADR
/// 0290). The trigger `switchyard_reserve_token` spells the same sum.
macro_rules! tokens_sql {
    () => {
        concat!(
            "MIN(f.rate_max, f.tokens + MAX(0.0, ",
            now_sql!(),
            " - f.refilled_at) * f.rate_max * 1000.0 / f.rate_per_ms)"
        )
    };
}

// One room per area of the port (ADR 0161); shared plumbing stays here. Declared after
// `now_sql!` so they can use it.
mod batch;
mod batches;
mod catalog;
mod counters;
mod dead_letters;
mod events;
mod flow;
mod kv;
mod locks;
mod pools;
mod queue;
mod schedules;
mod streams;
mod tasks;
mod workers;

use batch::{Arg, Batcher, is_recorded};
use queue::requeue;

switchyard_sqlite_support::embed_migrations!(
    /// The fleet's migrations, embedded (ADR 0346). Other switchyard stores
    /// (the SQLite event store) may share the file and its `_sqlx_migrations` table with versions
    /// of their own, which are not ours to check: [`support::shared_file_migrator`] leaves them
    /// alone.
    const MIGRATIONS = "migrations",
    "20700001_fleet_seed_tables.sql",
    "20700002_fleet_switchyard_extras.sql",
    "20700003_fleet_one_statement_reserve.sql",
    "20700004_fleet_queue_flow.sql",
    "20700005_fleet_tasks.sql",
    "20700006_fleet_task_id_reuse.sql"
);

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
    /// The largest result `queue_complete` stores, in bytes (ADR 0380). Default
    /// [`DEFAULT_MAX_RESULT_BYTES`] (1 MiB).
    pub max_result_bytes: usize,
}

impl Default for SqliteFleetOptions {
    fn default() -> Self {
        SqliteFleetOptions {
            busy_timeout: Duration::from_secs(10),
            readers: 4,
            max_poll: Duration::from_millis(100),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }
}

/// [`FleetBackend`](switchyard_core::fleet::FleetBackend) on a SQLite file. Clones share the
/// connections.
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
    pushed: Arc<Notify>,
    /// Wakes this process's blocked readers of end events when a recorded task ends (other
    /// processes' ends are polled).
    ended: Arc<Notify>,
    max_result_bytes: usize,
    topics: LocalTopics,
}

impl fmt::Debug for SqliteFleetBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(WHAT)
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

/// Maps a sqlx error as every SQLite adapter does (a closed pool is [`Error::Closed`], busy past
/// the timeout and I/O are transient), except a unique clash, which is transient here too: no
/// fleet statement expects one, and the only one that can happen is a fresh random receipt
/// meeting a row already in `queue_processing`, which the caller's retry (a new receipt) gets
/// past (ADR 0163).
///
/// A clash on `switchyard_tasks` is a task id taken (ADR 0380): `AlreadyExists` with the id left
/// empty, which the caller, who knows the ids it wrote, fills in ([`taken`]).
fn db(op: &'static str, key: impl fmt::Display, e: sqlx::Error) -> Error {
    if support::is_unique_violation(&e) {
        if let sqlx::Error::Database(d) = &e
            && d.message().contains("switchyard_tasks")
        {
            return Error::AlreadyExists {
                what: "task",
                id: String::new(),
            };
        }
        return Error::unavailable(op, key.to_string(), e);
    }
    support::error(WHAT, op, key, e)
}

/// Names the taken id of an `AlreadyExists` from [`db`]: the first of `ids` that has a record
/// now (or the first of them, if that record went meanwhile). Other errors pass as they are.
async fn taken(
    readers: &SqlitePool,
    name: &str,
    ids: impl IntoIterator<Item = &str>,
    e: Error,
) -> Error {
    let Error::AlreadyExists { what: "task", id } = &e else {
        return e;
    };
    if !id.is_empty() {
        return e;
    }
    let mut first = None;
    for id in ids {
        first.get_or_insert(id);
        let found: std::result::Result<Option<i64>, _> =
            sqlx::query_scalar("SELECT 1 FROM switchyard_tasks WHERE name = ?1 AND task_id = ?2")
                .bind(name)
                .bind(id)
                .fetch_optional(readers)
                .await;
        if let Ok(Some(_)) = found {
            return Error::AlreadyExists {
                what: "task",
                id: id.to_owned(),
            };
        }
    }
    Error::AlreadyExists {
        what: "task",
        id: first.unwrap_or_default().to_owned(),
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

/// `json.dumps(v)`, as the seed's Python peers write the document (ADR 0177).
fn json_text<T: serde::Serialize + ?Sized>(field: &'static str, v: &T) -> Result<String> {
    Dumps::DEFAULT.dumps(v).map_err(|e| match e {
        Error::InvalidInput { reason, .. } => Error::invalid(field, reason),
        e => e,
    })
}

fn parse_json(location: impl fmt::Display, text: Option<&str>, default: Value) -> Result<Value> {
    match text {
        None | Some("") => Ok(default),
        Some(t) => serde_json::from_str(t).map_err(|e| Error::corrupt(location.to_string(), e)),
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

    /// Opens a `sqlite://PATH` (or `sqlite:PATH`, `file://PATH`, `file:PATH`, bare path) URL
    /// with default options; a `?query` is ignored.
    pub async fn open_url(url: &str) -> Result<Self> {
        let location = Location::url(url, WHAT)?;
        Self::open_with(location.into_path(), SqliteFleetOptions::default()).await
    }

    /// Opens (creating if missing, with its parent directories) the file at `path`, and migrates
    /// it. A file the seed created is adopted and stays readable by the seed. WAL,
    /// `synchronous=NORMAL` and the busy timeout are checked to have taken effect.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteFleetOptions) -> Result<Self> {
        let location = Location::path(path, WHAT)?;
        let open = OpenOptions::default()
            .busy_timeout(options.busy_timeout)
            .readers(options.readers)
            .create(Create::FileAndParents)
            // A batch streams one result per statement; room for all of them spares the
            // connection thread a wait (and a wake-up) per 50 (ADR 0150).
            .writer_row_buffer(4096);
        let db = support::open(
            &location,
            &open,
            &support::shared_file_migrator(MIGRATIONS).await?,
            WHAT,
        )
        .await?;
        let writer: batch::Writer = Arc::new(tokio::sync::Mutex::new(Some(db.writer)));
        let batch = Batcher::spawn(writer.clone())
            .map_err(|e| Error::unavailable("open", location.to_string(), e))?;
        Ok(SqliteFleetBackend {
            inner: Arc::new(Inner {
                batch,
                writer,
                readers: db.readers,
                path: db.path,
                max_poll: options.max_poll.max(Duration::from_millis(1)),
                pushed: Arc::new(Notify::new()),
                ended: Arc::new(Notify::new()),
                max_result_bytes: options.max_result_bytes,
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

    /// Reserves up to `max` ready tasks in one step, in serve order; empty when none is ready,
    /// the queue is paused or its rate limit has no whole token (all checked by the statement
    /// that reserves, ADR 0290).
    async fn try_reserve(
        &self,
        op: &'static str,
        name: &str,
        max: usize,
        visibility_ms: u64,
    ) -> Result<Vec<Delivery>> {
        // Hot path, one group-committed statement shared with the batch's other reserves of
        // the queue: pop and register, unless a scheduled task is due (then it must be moved
        // first, to keep its place in the tier).
        let rows = self
            .inner
            .batch
            .reserve(name, secs(visibility_ms), max)
            .await?;
        if !rows.is_empty() {
            return deliveries_of(op, name, &rows);
        }
        let mut w = self.writer().await?;
        // Empty, held back, or something is due: move due tasks and pop in one write
        // transaction.
        let mut tx = begin(&mut w, op, name).await?;
        let got = if drain_scheduled(&mut tx, op, name).await? > 0 {
            let rows = sqlx::query(pop_sql(false))
                .bind(name)
                .bind(secs(visibility_ms))
                .bind(to_i64(max))
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| db(op, name, e))?;
            deliveries_of(op, name, &rows)?
        } else {
            Vec::new()
        };
        tx.commit().await.map_err(|e| db(op, name, e))?;
        Ok(got)
    }

    /// Whether a reserve could take something now, and if not, when it could next (a read;
    /// reserve decides).
    async fn readiness(&self, op: &'static str, name: &str) -> Result<Ready> {
        let (waiting, next_due, paused, token_ms): (i64, Option<f64>, i64, Option<f64>) =
            sqlx::query_as(concat!(
                "SELECT EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND tier IN ('high', 'normal', 'low')), ",
                "(SELECT MIN(available_at) FROM queue_scheduled WHERE name = ?1) - ",
                now_sql!(),
                ", COALESCE((SELECT paused FROM switchyard_queue_flow WHERE name = ?1), 0), ",
                "(SELECT (1.0 - ",
                tokens_sql!(),
                ") * f.rate_per_ms / f.rate_max FROM switchyard_queue_flow f ",
                "WHERE f.name = ?1 AND f.rate_max IS NOT NULL)"
            ))
            .bind(name)
            .fetch_one(self.r())
            .await
            .map_err(|e| db(op, name, e))?;
        Ok(Ready::judge(waiting == 1, next_due, paused != 0, token_ms))
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

/// Starts a write transaction that holds the file's write lock from its first statement
/// (`BEGIN IMMEDIATE`), so nothing read inside it can change before it commits.
async fn begin<'c>(
    conn: &'c mut SqliteConnection,
    op: &'static str,
    key: &str,
) -> Result<Transaction<'c, Sqlite>> {
    support::begin_immediate(conn, WHAT, op, key).await
}

/// Moves the queue's due scheduled tasks back to their tiers, in due order; how many. Nothing
/// while the queue is paused: they stay scheduled until a reserve or promotion after the
/// resume, as on every backend (guarantees `queue.pause` and `queue.promote_due`). The reserve's
/// slow path and `queue_promote_due` both move due tasks through here.
async fn drain_scheduled(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
) -> Result<usize> {
    let mut due: Vec<(i64, f64, String, Vec<u8>, i64)> = sqlx::query_as(concat!(
        "DELETE FROM queue_scheduled WHERE name = ?1 AND available_at <= ",
        now_sql!(),
        " AND NOT EXISTS (SELECT 1 FROM switchyard_queue_flow f WHERE f.name = ?1 AND f.paused <> 0)",
        " RETURNING id, CAST(available_at AS REAL), tier, COALESCE(body, X''), attempts"
    ))
    .bind(name)
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    due.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let n = due.len();
    // Records of scheduled tasks follow them to their tier (ADR 0380); a queue without any
    // costs one look.
    let recorded = n > 0
        && sqlx::query_scalar::<_, i64>(
            "SELECT EXISTS (SELECT 1 FROM switchyard_tasks WHERE name = ?1 AND state = 'scheduled' \
             AND row_id IS NOT NULL)",
        )
        .bind(name)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?
            != 0;
    for (id, _, tier, body, attempts) in due {
        if !recorded {
            insert_task(conn, op, name, &tier, &body, attempts).await?;
            continue;
        }
        let row = insert_task_row(conn, op, name, &tier, &body, attempts).await?;
        tasks::moved(conn, op, name, "scheduled", id, "waiting", row).await?;
    }
    Ok(n)
}

/// The pop's SQL: `INSERT INTO queue_processing … SELECT` up to `?3` heads of the tiers in serve
/// order, each under a fresh random receipt (the `switchyard_reserve_pop` trigger deletes each
/// popped row, `switchyard_reserve_token` takes a token of a limited queue); parameters name,
/// visibility in seconds, most tasks. A paused queue takes nothing, a limited one at most its
/// whole tokens, judged in this statement (ADR 0290). With `unless_due`, takes nothing while a
/// scheduled task of the queue is due.
fn pop_sql(unless_due: bool) -> &'static str {
    macro_rules! head {
        () => {
            concat!(
                "INSERT INTO queue_processing (name, task_id, body, deadline, tier, attempts, src_id) ",
                // A recorded task's receipt starts with `t` (ADR 0380, see `is_recorded`).
                "SELECT name, CASE WHEN EXISTS (SELECT 1 FROM switchyard_tasks t WHERE t.name = queues.name ",
                "AND t.state = 'waiting' AND t.row_id = queues.id) THEN 't' ELSE '' END || ",
                "lower(hex(randomblob(16))), body, ",
                now_sql!(),
                " + ?2, tier, attempts + 1, id FROM queues WHERE id IN (SELECT id FROM (",
                " SELECT id, 0 AS p FROM (SELECT id FROM queues WHERE name = ?1 AND tier = 'high' ORDER BY id LIMIT ?3)",
                " UNION ALL SELECT id, 1 FROM (SELECT id FROM queues WHERE name = ?1 AND tier = 'normal' ORDER BY id LIMIT ?3)",
                " UNION ALL SELECT id, 2 FROM (SELECT id FROM queues WHERE name = ?1 AND tier = 'low' ORDER BY id LIMIT ?3)",
                // A negative LIMIT is no limit in SQLite: the token count is floored at 0.
                ") ORDER BY p, id LIMIT COALESCE((SELECT CASE WHEN f.paused <> 0 THEN 0 ",
                "WHEN f.rate_max IS NULL THEN ?3 ELSE MIN(?3, MAX(0, CAST(",
                tokens_sql!(),
                " AS INTEGER))) END FROM switchyard_queue_flow f WHERE f.name = ?1), ?3))"
            )
        };
    }
    macro_rules! returning {
        () => {
            " RETURNING task_id, tier, COALESCE(body, X''), attempts, deadline, src_id"
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

/// The deliveries a pop's `RETURNING` rows describe, in serve order (tier, then age).
fn deliveries_of(op: &'static str, name: &str, rows: &[SqliteRow]) -> Result<Vec<Delivery>> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let (receipt, tier, body, attempts, deadline, src): (
            String,
            String,
            Vec<u8>,
            i64,
            f64,
            i64,
        ) = sqlx::FromRow::from_row(row).map_err(|e| db(op, name, e))?;
        let priority = tier_of(&tier);
        out.push((
            Priority::ORDER.iter().position(|p| *p == priority),
            src,
            Delivery {
                receipt: Receipt::new(receipt),
                task_id: task_id_of(&body),
                body,
                attempt: attempts_u32(attempts),
                priority,
                visible_until: deadline,
            },
        ));
    }
    out.sort_by_key(|d| (d.0, d.1));
    Ok(out.into_iter().map(|d| d.2).collect())
}

/// What a waiting reserve learnt from a look at the queue.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ready {
    /// A task may be taken now.
    Now,
    /// Nothing can be taken before this long from now (`None`: not known; poll).
    After(Option<Duration>),
}

impl Ready {
    /// `waiting`: a task sits in a tier; `next_due`: seconds until the earliest scheduled task
    /// is due (≤ 0: due); `token_ms`: milliseconds until the next whole token of a limited queue
    /// (≤ 0: one is there).
    fn judge(waiting: bool, next_due: Option<f64>, paused: bool, token_ms: Option<f64>) -> Ready {
        // A resume in this process wakes the reserve; another process's is polled for.
        if paused {
            return Ready::After(None);
        }
        // Whole milliseconds, rounded up and one more, so the look after the nap finds the
        // instant passed rather than a hair before it.
        let after =
            |ms: f64| Duration::from_millis(((ms.max(0.0)).ceil() as u64).saturating_add(1));
        let due = next_due.is_some_and(|s| s <= 0.0);
        if waiting || due {
            return match token_ms {
                Some(ms) if ms > 0.0 => Ready::After(Some(after(ms))),
                _ => Ready::Now,
            };
        }
        Ready::After(next_due.map(|s| after(s * 1000.0)))
    }
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

/// [`insert_task`], answering the new row's id (for a record to point at).
async fn insert_task_row(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    tier: &str,
    body: &[u8],
    attempts: i64,
) -> Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO queues (name, tier, body, attempts) VALUES (?1, ?2, ?3, ?4) RETURNING id",
    )
    .bind(name)
    .bind(tier)
    .bind(body)
    .bind(attempts)
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))
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

/// Drops the lowest-scored entries beyond `max_len` (0 = no cap) without counting the stream
/// (the seed counted the whole stream on every push).
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

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use switchyard_conformance::harness::TempSqlite;

    use super::*;

    #[tokio::test]
    async fn a_unique_clash_stays_transient() {
        let file = TempSqlite::new();
        let fleet = SqliteFleetBackend::open(file.path()).await.expect("open");
        let clash = {
            let mut w = fleet.writer().await.expect("writer");
            sqlx::query(
                "INSERT INTO locks (name, token, expires_at) VALUES ('l', 'a', 0), ('l', 'b', 0)",
            )
            .execute(&mut *w)
            .await
            .expect_err("the primary key refuses the second row")
        };
        assert!(support::is_unique_violation(&clash), "{clash}");
        // The shared mapping says `Rejected`; the fleet keeps it retryable (ADR 0163).
        let err = db("lock_acquire", "l", clash);
        assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
        fleet.close().await;
    }

    #[tokio::test]
    async fn urls_open_files_and_memory_is_refused() {
        let file = TempSqlite::new();
        let url = format!("sqlite://{}?mode=rwc", file.path().display());
        let fleet = SqliteFleetBackend::open_url(&url).await.expect("open");
        assert_eq!(fleet.path(), file.path());
        fleet.close().await;
        for bad in [":memory:", "sqlite::memory:", "file::memory:?cache=shared"] {
            let err = SqliteFleetBackend::open_url(bad).await.expect_err(bad);
            assert!(matches!(err, Error::Config { .. }), "{bad}: {err:?}");
        }
    }

    #[tokio::test]
    async fn emit_spells_the_score_as_python_str() {
        let file = TempSqlite::new();
        let fleet = SqliteFleetBackend::open(file.path()).await.expect("open");
        let mut emits = fleet.event_subscribe("s.emit").await.expect("subscribe");
        for score in [1e-5, 1e16, 0.1] {
            fleet
                .stream_push("s", format!("e{score}").as_bytes(), score, 0, None)
                .await
                .expect("push");
        }
        let mut got = Vec::new();
        for _ in 0..3 {
            let m = tokio::time::timeout(Duration::from_secs(5), emits.next())
                .await
                .expect("emit within 5 s")
                .expect("subscription open");
            got.push(String::from_utf8(m).expect("utf8"));
        }
        assert_eq!(got, ["1e-05", "1e+16", "0.1"]);
        fleet.close().await;
    }
}
