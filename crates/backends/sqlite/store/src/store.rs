//! `SqliteEventStore`: the adapter.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, FixedOffset, Timelike, Utc};
use sqlx::sqlite::{SqliteConnection, SqlitePool};
use sqlx::{Connection, Row, Sqlite, Transaction};
use switchyard_core::event::{Event, Payload, stamp};
use switchyard_core::status::{RunStatus, can_resume, lifecycle_status};
use switchyard_core::store::adapter::EventStoreOps;
use switchyard_core::store::{MAX_LINE, QueuedRun, checks};
use switchyard_core::{Appended, Clock, Error, Result, RunContext, RunSummary, SessionClaim};
use switchyard_sqlite_support::events::{LogRef, decode, decode_rows, to_i64};
use switchyard_sqlite_support::{self as support, Create, Location, OpenOptions};

use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use crate::sql;

switchyard_sqlite_support::embed_migrations!(
    /// The event store's migrations, embedded (ADR 0346). Other switchyard stores
    /// (the SQLite fleet backend) may share the file and its `_sqlx_migrations` table with versions
    /// of their own, which are not ours to check: [`support::shared_file_migrator`] leaves them
    /// alone.
    const MIGRATIONS = "migrations",
    "0001_events.sql",
    "0002_open_runs.sql",
    "0003_session_line.sql"
);

/// What this adapter is called in errors.
const WHAT: &str = "SqliteEventStore";

/// Runs whose next seq the writer remembers; past this the memory is dropped and rebuilt on use.
const REMEMBERED_RUNS: usize = 65_536;

/// How to open a [`SqliteEventStore`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    busy_timeout: Duration,
    readers: u32,
    clock: Option<Arc<dyn Clock>>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(10),
            readers: 4,
            clock: None,
        }
    }
}

impl SqliteOptions {
    /// How long a write waits for another process's write lock before failing with
    /// [`Error::Unavailable`]. Default 10 s (the seed: 5 s).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Connections of the read pool (at least 1). Default 4.
    pub fn readers(mut self, readers: u32) -> Self {
        self.readers = readers.max(1);
        self
    }

    /// Stamps `ts` from `clock` instead of SQLite's clock. For tests that pin time.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }
}

/// An [`EventStore`](switchyard_core::EventStore) on one SQLite file, shareable with agentdeck 3.1.0's `SqliteEventStore`.
///
/// One writer connection serves every write, so writers of this process queue on it instead of
/// contending for the file lock, and writers of other processes wait on the busy timeout; a read
/// pool serves reads from WAL snapshots. An append to a run whose next seq the writer knows is one
/// `INSERT` statement (its own transaction); anything else is one `BEGIN IMMEDIATE` transaction
/// that reads the next seq under the lock (ADR 0100).
pub struct SqliteEventStore {
    writer: Mutex<Option<Writer>>,
    readers: SqlitePool,
    clock: Option<Arc<dyn Clock>>,
    path: PathBuf,
}

impl fmt::Debug for SqliteEventStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(WHAT)
            .field("path", &self.path)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// The writer connection and what it knows.
struct Writer {
    conn: SqliteConnection,
    /// What the writer knows of the runs it wrote last, keyed by (namespace, log key, run id). A
    /// hint: if another process appended since, the unique index `events_by_run` refuses the insert
    /// and the append is redone in a transaction that reads the seq (ADR 0100).
    next: HashMap<(String, String, String), Hint>,
}

/// What the writer remembers of a run after writing it.
#[derive(Debug, Clone, Copy)]
struct Hint {
    /// The seq the run's next event takes.
    next: u64,
    /// The run's status after the write, when the writer knows it (it wrote or read the latest
    /// lifecycle event). Every writer of the file, the seed's included, takes seq MAX + 1 under the
    /// file's write lock, so an insert at `next` that the unique index accepts proves nothing was
    /// written to the run since, and this status still holds: the conditional append checks it
    /// without reading (ADR 0365).
    status: Option<RunStatus>,
}

impl Hint {
    /// The hint after `events` were written from `seq` on to a run whose status was `before`.
    fn after(seq: u64, before: Option<RunStatus>, events: &[Event]) -> Hint {
        let last = events
            .iter()
            .filter_map(|e| lifecycle_status(e.kind()))
            .next_back();
        Hint {
            next: seq + events.len() as u64,
            status: last.or(before),
        }
    }
}

impl Writer {
    fn remember(&mut self, log: &LogRef<'_>, run_id: &str, next: Hint) {
        if self.next.len() >= REMEMBERED_RUNS {
            self.next.clear();
        }
        self.next.insert(
            (
                log.namespace.to_owned(),
                log.log_key.to_owned(),
                run_id.to_owned(),
            ),
            next,
        );
    }

    fn known(&self, log: &LogRef<'_>, run_id: &str) -> Option<Hint> {
        // The map is keyed by owned strings; a lookup allocates the key once.
        self.next
            .get(&(
                log.namespace.to_owned(),
                log.log_key.to_owned(),
                run_id.to_owned(),
            ))
            .copied()
    }

    fn forget(&mut self, log: &LogRef<'_>, run_id: &str) {
        self.next.remove(&(
            log.namespace.to_owned(),
            log.log_key.to_owned(),
            run_id.to_owned(),
        ));
    }
}

/// Maps a sqlx error: a unique-index clash is the backend refusing (someone wrote a seq outside a
/// write lock); a closed pool is [`Error::Closed`]; the rest (busy past the timeout, I/O) is
/// transient.
fn backend(op: &'static str, key: impl fmt::Display, e: sqlx::Error) -> Error {
    support::error(WHAT, op, key, e)
}

impl SqliteEventStore {
    /// Opens (creating if missing) the file at `path` with default options, and migrates it.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Opens (creating if missing; its directory must exist) the file at `path`, and migrates it.
    /// A file the seed created is migrated in place and stays readable by the seed. WAL,
    /// `synchronous=NORMAL` and the busy timeout are checked to have taken effect.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let location = Location::path(path, WHAT)?;
        let open = OpenOptions::default()
            .busy_timeout(options.busy_timeout)
            .readers(options.readers)
            .create(Create::File);
        let db = support::open(
            &location,
            &open,
            &support::shared_file_migrator(MIGRATIONS).await?,
            WHAT,
        )
        .await?;
        Ok(Self {
            writer: Mutex::new(Some(Writer {
                conn: db.writer,
                next: HashMap::new(),
            })),
            readers: db.readers,
            clock: options.clock,
            path: db.path,
        })
    }

    /// The file this store writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes both pools, waiting for in-flight calls. Later calls fail with [`Error::Closed`].
    pub async fn close(&self) {
        if let Some(w) = self.writer.lock().await.take() {
            let _ = w.conn.close().await;
        }
        self.readers.close().await;
    }

    /// The writer, or [`Error::Closed`].
    async fn writer(&self) -> Result<MappedMutexGuard<'_, Writer>> {
        MutexGuard::try_map(self.writer.lock().await, Option::as_mut)
            .map_err(|_| Error::Closed { what: WHAT })
    }

    /// The store's "now": the injected clock, else this machine's clock at SQLite's millisecond
    /// precision (the seed's `strftime('%f')` expression reads the same clock; ADR 0100).
    fn now(&self) -> DateTime<FixedOffset> {
        match &self.clock {
            Some(clock) => stamp(clock.now()),
            None => {
                let now = Utc::now();
                let millis = now.nanosecond() / 1_000_000 * 1_000_000;
                now.with_nanosecond(millis).unwrap_or(now).fixed_offset()
            }
        }
    }

    /// The run's next seq and the store's "now", read under the write lock.
    async fn head(
        &self,
        conn: &mut SqliteConnection,
        op: &'static str,
        log: &LogRef<'_>,
        run_id: &str,
    ) -> Result<(u64, DateTime<FixedOffset>)> {
        let max: Option<i64> = sqlx::query_scalar(sql::MAX_SEQ)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(run_id)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| backend(op, log, e))?;
        let now = self.now();
        let next = match max {
            None => 0,
            Some(max) => {
                u64::try_from(max).map_err(|_| {
                    Error::corrupt(
                        format!("{log} run {run_id:?}"),
                        format!("negative seq {max}"),
                    )
                })? + 1
            }
        };
        Ok((next, now))
    }

    /// Stamps and inserts `payloads` from `seq` on, at `ts`, inside the caller's transaction.
    #[allow(clippy::too_many_arguments)]
    async fn insert(
        &self,
        conn: &mut SqliteConnection,
        op: &'static str,
        log: &LogRef<'_>,
        ctx: &RunContext,
        origin: &str,
        payloads: Vec<Payload>,
        seq: u64,
        ts: DateTime<FixedOffset>,
    ) -> Result<Vec<Event>> {
        let stamped = Event::stamp_batch(ctx, origin, seq, ts, payloads);
        write_rows(conn, log, ctx.run_id(), &stamped)
            .await
            .map_err(|e| backend(op, log, e))?;
        Ok(stamped)
    }

    /// The latest lifecycle status of a run, from `events_life` (one index seek).
    async fn life(
        conn: &mut SqliteConnection,
        op: &'static str,
        log: &LogRef<'_>,
        run_id: &str,
    ) -> Result<Option<RunStatus>> {
        let kind: Option<String> = sqlx::query_scalar(sql::LIFE)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(run_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| backend(op, log, e))?;
        Ok(kind.as_deref().and_then(lifecycle_status))
    }

    /// The one-statement path: the batch stamped from the remembered seq, inserted as its own
    /// transaction, and the hint moved past it. If another process appended meanwhile, the unique
    /// index refuses the whole statement and the batch comes back (`Ok(Err(payloads))`) for the
    /// locked path. A batch longer than one statement always takes the locked path.
    #[allow(clippy::too_many_arguments)]
    async fn write_at_hint(
        &self,
        w: &mut Writer,
        op: &'static str,
        log: &LogRef<'_>,
        ctx: &RunContext,
        origin: &str,
        payloads: Vec<Payload>,
        hint: Hint,
    ) -> Result<std::result::Result<Vec<Event>, Vec<Payload>>> {
        if payloads.len() > sql::INSERT_CHUNK {
            return Ok(Err(payloads));
        }
        let run_id = ctx.run_id();
        let events = Event::stamp_batch(ctx, origin, hint.next, self.now(), payloads);
        match write_rows(&mut w.conn, log, run_id, &events).await {
            Ok(()) => {
                w.remember(log, run_id, Hint::after(hint.next, hint.status, &events));
                Ok(Ok(events))
            }
            Err(e) if support::is_unique_violation(&e) => {
                w.forget(log, run_id);
                Ok(Err(events.into_iter().map(|e| e.payload).collect()))
            }
            Err(e) => {
                w.forget(log, run_id);
                Err(backend(op, log, e))
            }
        }
    }
}

/// Inserts stamped events, `INSERT_CHUNK` rows per statement (one statement for most appends).
async fn write_rows(
    conn: &mut SqliteConnection,
    log: &LogRef<'_>,
    run_id: &str,
    events: &[Event],
) -> std::result::Result<(), sqlx::Error> {
    for chunk in events.chunks(sql::INSERT_CHUNK) {
        let statement = sql::insert(chunk.len());
        let mut query = sqlx::query(statement);
        for event in chunk {
            query = query
                .bind(log.namespace)
                .bind(log.log_key)
                .bind(run_id)
                .bind(to_i64(event.seq))
                .bind(event.to_json());
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

async fn begin<'c>(
    conn: &'c mut SqliteConnection,
    op: &'static str,
    log: &LogRef<'_>,
) -> Result<Transaction<'c, Sqlite>> {
    support::begin_immediate(conn, WHAT, op, &log.to_string()).await
}

#[async_trait]
impl EventStoreOps for SqliteEventStore {
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>> {
        let log = LogRef::of(ctx);
        let run_id = ctx.run_id();
        let mut w = self.writer().await?;
        let mut payloads = payloads;
        if let Some(hint) = w.known(&log, run_id) {
            match self
                .write_at_hint(&mut w, "append", &log, ctx, origin, payloads, hint)
                .await?
            {
                Ok(events) => return Ok(events),
                Err(back) => payloads = back,
            }
        }
        let mut tx = begin(&mut w.conn, "append", &log).await?;
        let (seq, ts) = self.head(&mut tx, "append", &log, run_id).await?;
        let events = self
            .insert(&mut tx, "append", &log, ctx, origin, payloads, seq, ts)
            .await?;
        tx.commit().await.map_err(|e| backend("append", &log, e))?;
        // The status is known only if the batch set it: the locked path did not read it.
        w.remember(&log, run_id, Hint::after(seq, None, &events));
        Ok(events)
    }

    /// When the writer knows the run's next seq and its status is open (it wrote or read the
    /// latest lifecycle event), one `INSERT` at that seq: the unique index accepting it proves
    /// nothing was written to the run since, so the status still holds. Otherwise one
    /// `BEGIN IMMEDIATE` transaction on the writer, the lock every write of the file takes (the
    /// seed's too): the run's latest lifecycle kind (one seek in `events_life`), then, only while
    /// it is open, the next seq and the insert of the batch. Nothing can write the run between the
    /// check and the insert (ADR 0365).
    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended> {
        const OP: &str = "append_if_open";
        let log = LogRef::of(ctx);
        let run_id = ctx.run_id();
        let mut w = self.writer().await?;
        let mut payloads = payloads;
        if let Some(hint) = w.known(&log, run_id)
            && let Some(before) = hint.status
            && before.is_open()
        {
            match self
                .write_at_hint(&mut w, OP, &log, ctx, origin, payloads, hint)
                .await?
            {
                Ok(events) => return Ok(Appended::stored(events, before)),
                Err(back) => payloads = back,
            }
        }
        let mut tx = begin(&mut w.conn, OP, &log).await?;
        let status = Self::life(&mut tx, OP, &log, run_id)
            .await?
            .unwrap_or(RunStatus::Pending);
        if !status.is_open() {
            // Dropping the transaction rolls it back; it wrote nothing.
            return Ok(Appended::NotOpen(status));
        }
        let (seq, ts) = self.head(&mut tx, OP, &log, run_id).await?;
        let events = self
            .insert(&mut tx, OP, &log, ctx, origin, payloads, seq, ts)
            .await?;
        tx.commit().await.map_err(|e| backend(OP, &log, e))?;
        w.remember(&log, run_id, Hint::after(seq, Some(status), &events));
        Ok(Appended::stored(events, status))
    }

    async fn read(
        &self,
        ctx: &RunContext,
        offset: u64,
        limit: Option<NonZeroU64>,
    ) -> Result<Vec<Event>> {
        let log = LogRef::of(ctx);
        let rows: Vec<(i64, String)> = sqlx::query_as(sql::READ)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(limit.map_or(-1, |l| to_i64(l.get())))
            .bind(to_i64(offset))
            .fetch_all(&self.readers)
            .await
            .map_err(|e| backend("read", &log, e))?;
        decode_rows(rows)
    }

    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>> {
        let log = LogRef::of(ctx);
        let rows: Vec<(i64, String)> = sqlx::query_as(sql::READ_RUN)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(ctx.run_id())
            .bind(to_i64(from_seq))
            .fetch_all(&self.readers)
            .await
            .map_err(|e| backend("read_run", &log, e))?;
        decode_rows(rows)
    }

    async fn claim_start(
        &self,
        ctx: &RunContext,
        opening: Payload,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        const OP: &str = "claim_start";
        let log = LogRef::of(ctx);
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w.conn, OP, &log).await?;
        let (seq, now) = self.head(&mut tx, OP, &log, ctx.run_id()).await?;
        // The run's next seq is 0 exactly when it has no event in this log.
        checks::run_is_new(seq > 0, ctx)?;
        let stale_before = checks::stale_before(now, stale_after);
        // Only the open runs come back, sorted by run id: the first fresh one is the holder every
        // caller names.
        let open: Vec<String> = sqlx::query_scalar(sql::OPEN_RUNS)
            .bind(log.namespace)
            .bind(log.log_key)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| backend(OP, &log, e))?;
        let mut overridden = Vec::with_capacity(open.len());
        for run_id in open {
            let tail: Option<(i64, String)> = sqlx::query_as(sql::TAIL)
                .bind(log.namespace)
                .bind(log.log_key)
                .bind(&run_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| backend(OP, &log, e))?;
            let Some((id, data)) = tail else { continue };
            let tail = decode(id, &data)?;
            if tail.ts > stale_before {
                // Dropping the transaction rolls it back; nothing was written.
                let claim = SessionClaim {
                    held_by: Some(run_id),
                    overridden: Vec::new(),
                };
                return Ok((claim, None));
            }
            overridden.push(tail);
        }
        let mut written = self
            .insert(&mut tx, OP, &log, ctx, origin, vec![opening], seq, now)
            .await?;
        tx.commit().await.map_err(|e| backend(OP, &log, e))?;
        w.remember(&log, ctx.run_id(), Hint::after(seq, None, &written));
        let claim = SessionClaim {
            held_by: None,
            overridden,
        };
        Ok((claim, written.pop()))
    }

    async fn claim_resume(
        &self,
        ctx: &RunContext,
        resumed: Payload,
        origin: &str,
    ) -> Result<Option<Event>> {
        let run_id = ctx.run_id();
        const OP: &str = "claim_resume";
        let log = LogRef::of(ctx);
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w.conn, OP, &log).await?;
        let resumable = Self::life(&mut tx, OP, &log, run_id)
            .await?
            .is_some_and(can_resume);
        if !resumable {
            return Ok(None);
        }
        let (seq, now) = self.head(&mut tx, OP, &log, run_id).await?;
        let mut written = self
            .insert(&mut tx, OP, &log, ctx, origin, vec![resumed], seq, now)
            .await?;
        tx.commit().await.map_err(|e| backend(OP, &log, e))?;
        w.remember(&log, run_id, Hint::after(seq, None, &written));
        Ok(written.pop())
    }

    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        let rows = sqlx::query(sql::LIST_RUNS)
            .bind(ctx.namespace_key())
            .fetch_all(&self.readers)
            .await
            .map_err(|e| {
                backend(
                    "list_runs",
                    format!("events[namespace={:?}]", ctx.namespace_key()),
                    e,
                )
            })?;
        let mut runs = Vec::with_capacity(rows.len());
        for row in rows {
            let kind: Option<String> = row
                .try_get("kind")
                .map_err(|e| backend("list_runs", "kind", e))?;
            let Some(run_status) = kind.as_deref().and_then(lifecycle_status) else {
                continue;
            };
            if status.is_some_and(|wanted| wanted != run_status) {
                continue;
            }
            runs.push(RunSummary {
                log_key: row
                    .try_get("log_key")
                    .map_err(|e| backend("list_runs", "log_key", e))?,
                run_id: row
                    .try_get("run_id")
                    .map_err(|e| backend("list_runs", "run_id", e))?,
                status: run_status,
            });
        }
        Ok(runs)
    }

    /// The fold of the run's events, read from `events_life` in one seek instead of reading the run.
    async fn run_status(&self, ctx: &RunContext) -> Result<RunStatus> {
        let run_id = ctx.run_id();
        let log = LogRef::of(ctx);
        let mut conn = self
            .readers
            .acquire()
            .await
            .map_err(|e| backend("run_status", &log, e))?;
        Ok(Self::life(&mut conn, "run_status", &log, run_id)
            .await?
            .unwrap_or(RunStatus::Pending))
    }

    /// One `BEGIN IMMEDIATE` transaction on the writer: the line's count, last place and whether
    /// the run already waits, then the insert. The file's write lock orders pushes, the seed's
    /// writes and ours alike (guarantee `line.order`).
    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        const OP: &str = "line_push";
        let log = LogRef::of(ctx);
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w.conn, OP, &log).await?;
        let (count, last, waits): (i64, i64, i64) = sqlx::query_as(sql::LINE_STATE)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(&entry.run_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| backend(OP, &log, e))?;
        if waits != 0 {
            return Err(Error::AlreadyExists {
                what: "waiting run",
                id: entry.run_id.clone(),
            });
        }
        let count = u64::try_from(count).unwrap_or(0);
        if count >= MAX_LINE as u64 {
            return Err(checks::line_full(ctx));
        }
        let pos = last
            .checked_add(1)
            .ok_or_else(|| Error::corrupt(log.to_string(), "the line's places ran out"))?;
        sqlx::query(sql::LINE_PUSH)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(pos)
            .bind(&entry.run_id)
            .bind(entry.to_json())
            .execute(&mut *tx)
            .await
            .map_err(|e| backend(OP, &log, e))?;
        tx.commit().await.map_err(|e| backend(OP, &log, e))?;
        Ok(count + 1)
    }

    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        const OP: &str = "line_read";
        let log = LogRef::of(ctx);
        let rows: Vec<(i64, String)> = sqlx::query_as(sql::LINE_READ)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.readers)
            .await
            .map_err(|e| backend(OP, &log, e))?;
        rows.iter()
            .map(|(pos, entry)| {
                QueuedRun::from_json(entry, &format!("events_line {log} place {pos}"))
            })
            .collect()
    }

    /// One statement on the writer, so it queues behind a push in flight.
    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool> {
        const OP: &str = "line_remove";
        let log = LogRef::of(ctx);
        let mut w = self.writer().await?;
        let done = sqlx::query(sql::LINE_REMOVE)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(run_id)
            .execute(&mut w.conn)
            .await
            .map_err(|e| backend(OP, &log, e))?;
        Ok(done.rows_affected() > 0)
    }
}
