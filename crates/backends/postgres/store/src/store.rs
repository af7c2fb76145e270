//! `PostgresEventStore`: the adapter.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use sqlx::postgres::PgPool;
use sqlx::{Connection, Row};
use switchyard_core::event::{Event, Payload, format_ts, parse_ts, stamp};
use switchyard_core::status::{RunStatus, is_lifecycle, lifecycle_status};
use switchyard_core::store::adapter::{Call, EventStoreOps};
use switchyard_core::store::{MAX_LINE, QueuedRun, checks};
use switchyard_core::{Appended, Clock, Error, Result, RunContext, RunSummary, SessionClaim};
use switchyard_postgres_support::events::{LogRef, decode_rows, seq_of, to_i64};
use switchyard_postgres_support::{self as support, PoolOptions, PostgresUrl, Schema};

use crate::group::{self, Groups};
use crate::json::{self, Parts};
use crate::{key, sql};

switchyard_postgres_support::embed_migrations!(
    /// The store's migrations, recorded in `<schema>.store_migrations` (ADR 0221).
    /// The migration files, embedded (ADR 0346), with a test that the list names every file.
    const MIGRATIONS = "migrations",
    "1_events.sql",
    "2_lost_claims_commit_without_flush.sql",
    "3_append_if_open.sql",
    "4_line.sql"
);

/// The migrations of agentdeck's layout (ADR 0377), in a module of their own (the macro's test
/// has one name per module).
mod agentdeck_migrations {
    switchyard_postgres_support::embed_migrations!(
        /// agentdeck 3.1.0's table and indexes, and our trigger-kept table and functions.
        const MIGRATIONS = "migrations/agentdeck",
        "1_agentdeck_events.sql",
        "2_append_group.sql",
        "3_next_seq_by_seek.sql",
        "4_line.sql"
    );

    pub(super) fn all() -> &'static [switchyard_postgres_support::EmbeddedMigration] {
        MIGRATIONS
    }
}

/// The store's migration record table (in either layout's schema).
const MIGRATIONS_TABLE: &str = "store_migrations";

/// What this adapter is called in errors and in `pg_stat_activity`.
const WHAT: &str = "PostgresEventStore";

/// The tables a [`PostgresEventStore`] keeps its events in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostgresLayout {
    /// agentdeck 3.1.0's own (ADR 0377): one `events` table with `data JSONB`, shared with
    /// agentdeck's Python `PostgresEventStore`, every write under the same per-log advisory lock.
    /// Default schema `agentdeck_events`, agentdeck's.
    #[default]
    Agentdeck,
    /// switchyard's own (ADRs 0222, 0223): `events` with `data TEXT` holding `Event::to_json()`'s
    /// bytes, `runs` and `logs` tables and row locks; no Python store reads it. Default schema
    /// `switchyard`. Kept for databases made before agentdeck's layout was the default
    /// (ADR 0378).
    Switchyard,
}

impl PostgresLayout {
    /// The schema the layout's tables live in when neither the options nor the URL name one.
    pub fn default_schema(self) -> &'static str {
        match self {
            PostgresLayout::Agentdeck => AGENTDECK_SCHEMA,
            PostgresLayout::Switchyard => support::DEFAULT_SCHEMA,
        }
    }

    /// The type of `events.data` in this layout, as `information_schema` names it.
    fn data_type(self) -> &'static str {
        match self {
            PostgresLayout::Agentdeck => "jsonb",
            PostgresLayout::Switchyard => "text",
        }
    }
}

/// agentdeck's default schema (`_DEFAULT_SCHEMA` of its Postgres store).
const AGENTDECK_SCHEMA: &str = "agentdeck_events";

/// How to open a [`PostgresEventStore`].
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    pool: PoolOptions,
    schema: Option<String>,
    layout: Option<PostgresLayout>,
    clock: Option<Arc<dyn Clock>>,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            pool: PoolOptions::default().application_name(WHAT),
            schema: None,
            layout: None,
            clock: None,
        }
    }
}

impl PostgresOptions {
    /// Connections of the pool at most. Default 10. Appenders of one run take turns on its row
    /// lock whatever the size; more connections serve more runs at once.
    pub fn max_connections(mut self, n: u32) -> Self {
        self.pool = self.pool.max_connections(n);
        self
    }

    /// How long opening may take to reach the server and migrate. Default 10 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.pool = self.pool.connect_timeout(timeout);
        self
    }

    /// How long a call waits for a pooled connection before [`Error::Unavailable`]. Default
    /// 10 s.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.pool = self.pool.acquire_timeout(timeout);
        self
    }

    /// Longest one statement may run, lock waits included, before the call fails with
    /// [`Error::Unavailable`] and writes nothing (PostgreSQL's `statement_timeout`). Default:
    /// the server's setting.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.pool = self.pool.statement_timeout(timeout);
        self
    }

    /// Whether idle connections are checked before use (one round trip). Default on.
    pub fn check_on_acquire(mut self, check: bool) -> Self {
        self.pool = self.pool.check_on_acquire(check);
        self
    }

    /// The schema of the store's tables, created when missing. Default: the URL's `?schema=`,
    /// else the layout's ([`PostgresLayout::default_schema`]: `agentdeck_events` for agentdeck's
    /// layout). A name is lowercase letters, digits and `_`; another is refused at open with
    /// [`Error::Config`]. A Python agentdeck service sharing the store opens
    /// `PostgresEventStore(dsn, schema=…)` with the same name.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// The tables the events live in. Default [`PostgresLayout::Agentdeck`]. Opening a schema that
    /// holds the other layout's tables fails with [`Error::Config`] (ADR 0378).
    pub fn layout(mut self, layout: PostgresLayout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// Stamps `ts` from `clock` instead of the database's clock. For tests that pin time.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }
}

/// An [`EventStore`](switchyard_core::EventStore) on PostgreSQL, in one of two layouts.
///
/// On agentdeck's layout (the default, ADR 0377) every write is one call of a function of the
/// schema that first takes agentdeck's advisory lock of the log, so the Python store's writes and
/// ours take turns; the trigger-kept `event_runs` table gives claims a log's open runs and
/// `run_status` and `list_runs` a run's status in one read.
///
/// On the switchyard layout (ADRs 0222, 0378) an append is one statement: it takes the run's row
/// lock, its next seqs and the database clock, and writes the batch; `append_if_open` is one call
/// of a function of the schema that does the same after reading the run's status under that lock
/// (ADR 0365). A claim is one call of a function of the schema under the log's row lock (ADR
/// 0223). The open runs of a log are a partial index of the `runs` table, so a claim never reads
/// a log's history; `run_status` and `list_runs` read `runs` alone.
///
/// In both layouts a session's line of waiting runs (ADR 0394) is the table `switchyard_line`,
/// beside `events`: a push is one call of the schema's `line_push` function under an advisory
/// lock of the line, so concurrent pushes take distinct places in the order they ran.
pub struct PostgresEventStore {
    pool: PgPool,
    // Whether the server is known to be down: calls then fail at once, naming the refused
    // connection, instead of waiting the acquire timeout for a pool that cannot connect
    // (ADR 0355).
    circuit: support::Circuit,
    clock: Option<Arc<dyn Clock>>,
    layout: PostgresLayout,
    schema: Schema,
    url: String,
    // The logs' lanes of concurrent appends, on agentdeck's layout (ADR 0386).
    groups: Arc<Groups>,
}

impl fmt::Debug for PostgresEventStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(WHAT)
            .field("url", &self.url)
            .field("schema", &self.schema.as_str())
            .field("layout", &self.layout)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

pub(crate) fn backend(op: &'static str, key: impl fmt::Display, e: sqlx::Error) -> Error {
    support::error(WHAT, op, key, e)
}

/// `schema.events` has a `data` column of type `found`, which is not `layout`'s.
fn wrong_layout(layout: PostgresLayout, schema: &str, found: &str) -> Error {
    let holds = match found {
        "jsonb" => "agentdeck's layout (data JSONB): open it with PostgresLayout::Agentdeck",
        "text" => {
            "the switchyard layout (data TEXT, ADR 0222): open it with \
             PostgresLayout::Switchyard, or convert it to agentdeck's layout as ADR 0378 says"
        }
        _ => "neither layout's events table: give the store another schema",
    };
    Error::config(
        "schema",
        format!(
            "schema {schema:?} cannot hold {WHAT}'s {layout:?} layout: its events.data is \
             {found}, so it holds {holds}, or name another schema"
        ),
    )
}

/// How errors name the line of `log` (ADR 0394): `switchyard_line[namespace="…", log_key="…"]`.
fn line_of(log: &LogRef<'_>) -> String {
    format!(
        "switchyard_line[namespace={:?}, log_key={:?}]",
        log.namespace, log.log_key
    )
}

/// The lock key of `ctx`'s log in agentdeck's layout.
fn lock_key_of(log: &LogRef<'_>) -> i64 {
    key::log_lock_key(log.namespace, log.log_key)
}

impl PostgresEventStore {
    /// Opens the store on `url` (`postgres://` or `postgresql://`) with default options,
    /// creating its schema and tables when missing.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, PostgresOptions::default()).await
    }

    /// Opens the store on `url`, creating the schema and migrating it (ADR 0221). Fails with
    /// [`Error::Config`] for a bad URL, schema name or credentials, a schema another build
    /// migrated or that holds the other layout's tables (ADR 0378), and with
    /// [`Error::Unavailable`] when the server cannot be reached within the connect timeout.
    pub async fn open_with(url: &str, options: PostgresOptions) -> Result<Self> {
        let url = PostgresUrl::parse(url, "url")?;
        let named = options.schema.or_else(|| url.schema().map(str::to_owned));
        let layout = options.layout.unwrap_or_default();
        let schema = Schema::new(
            named
                .clone()
                .unwrap_or_else(|| layout.default_schema().to_owned()),
        )?;
        let pool_options = options.pool.schema(schema.clone());
        let pool = support::connect(&url, &pool_options, WHAT).await?;
        let defaulted = options.layout.is_none() && named.is_none();
        if let Err(e) = Self::prepare(&pool, layout, &schema, defaulted).await {
            pool.close().await;
            return Err(e);
        }
        Ok(Self {
            circuit: support::Circuit::new(&url, &pool, WHAT),
            groups: Groups::new(pool.clone()),
            pool,
            clock: options.clock,
            layout,
            schema,
            url: url.redacted().to_string(),
        })
    }

    /// Checks that `schema` holds `layout`'s tables or none, and migrates it. `defaulted`: neither
    /// the layout nor the schema was chosen, so a database whose store is in the switchyard
    /// layout's default schema is refused rather than silently left behind (ADR 0378).
    async fn prepare(
        pool: &PgPool,
        layout: PostgresLayout,
        schema: &Schema,
        defaulted: bool,
    ) -> Result<()> {
        let data_type = |schema: String| async move {
            sqlx::query_scalar::<_, String>(sql::agentdeck::DATA_TYPE)
                .bind(schema.clone())
                .fetch_optional(pool)
                .await
                .map_err(|e| backend("open", &schema, e))
        };
        match data_type(schema.as_str().to_owned()).await? {
            Some(found) if found == layout.data_type() => {}
            Some(found) => return Err(wrong_layout(layout, schema.as_str(), &found)),
            None if defaulted => {
                let old = PostgresLayout::Switchyard;
                if data_type(old.default_schema().to_owned()).await?.as_deref()
                    == Some(old.data_type())
                {
                    return Err(Error::config(
                        "schema",
                        format!(
                            "{WHAT}'s default is now agentdeck's layout in schema \
                             {AGENTDECK_SCHEMA:?}, and schema {:?} holds an event store of the \
                             switchyard layout: to keep using it, open it with \
                             PostgresOptions::layout(PostgresLayout::Switchyard); to move it to \
                             agentdeck's layout, convert it as ADR 0378 says; to start afresh \
                             beside it, name the schema (PostgresOptions::schema or ?schema=)",
                            old.default_schema()
                        ),
                    ));
                }
            }
            None => {}
        }
        match layout {
            PostgresLayout::Switchyard => {
                support::migrate(
                    pool,
                    schema,
                    MIGRATIONS_TABLE,
                    &support::embedded_migrator(MIGRATIONS).await?,
                    WHAT,
                )
                .await
            }
            PostgresLayout::Agentdeck => {
                let migrator = support::embedded_migrator(agentdeck_migrations::all()).await?;
                // agentdeck creates its schema's objects holding a session advisory lock named
                // after the schema; ours take the same lock, on a connection of their own (the
                // migration runs on another), so the two never race their CREATEs. Closing that
                // connection releases the lock, whatever happened.
                let mut setup = pool
                    .acquire()
                    .await
                    .map_err(|e| backend("open", schema, e))?
                    .detach();
                let locked = sqlx::query("SELECT pg_advisory_lock($1)")
                    .bind(key::setup_lock_key(schema.as_str()))
                    .execute(&mut setup)
                    .await
                    .map_err(|e| backend("open", schema, e));
                let migrated = match locked {
                    Ok(_) => {
                        support::migrate(pool, schema, MIGRATIONS_TABLE, &migrator, WHAT).await
                    }
                    Err(e) => Err(e),
                };
                let _ = setup.close().await;
                migrated
            }
        }
    }

    /// The schema the store's tables live in.
    pub fn schema(&self) -> &str {
        self.schema.as_str()
    }

    /// The layout of the store's tables.
    pub fn layout(&self) -> PostgresLayout {
        self.layout
    }

    /// Closes the pool, waiting for in-flight calls. Later calls fail with [`Error::Closed`].
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The injected clock's "now" as RFC 3339 text, or `None` for the database clock.
    fn injected_now(&self) -> Option<String> {
        self.clock
            .as_ref()
            .map(|clock| format_ts(&stamp(clock.now())))
    }

    /// `payloads` stamped with a placeholder seq and ts, and their JSON parts: the database puts
    /// in the real ones.
    fn stamped(
        ctx: &RunContext,
        origin: &str,
        payloads: impl IntoIterator<Item = Payload>,
    ) -> Result<(Vec<Event>, Vec<Parts>)> {
        let events = Event::stamp_batch(ctx, origin, 0, stamp(Utc::now()), payloads);
        let parts = events.iter().map(json::split).collect::<Result<Vec<_>>>()?;
        Ok((events, parts))
    }
}

/// A batch as the append statement and `append_if_open` take it: the events with placeholder
/// seq and ts, and their JSON parts column by column.
struct Batch {
    events: Vec<Event>,
    n: i64,
    life: Option<String>,
    heads: Vec<String>,
    mid: String,
    tails: Vec<String>,
    kinds: Vec<String>,
}

impl Batch {
    fn new(ctx: &RunContext, origin: &str, payloads: Vec<Payload>) -> Result<Self> {
        let life = payloads
            .iter()
            .rev()
            .map(Payload::kind)
            .find(|kind| is_lifecycle(kind))
            .map(str::to_owned);
        let (events, parts) = PostgresEventStore::stamped(ctx, origin, payloads)?;
        let n = i64::try_from(events.len())
            .map_err(|_| Error::invalid("payloads", "too many events in one batch"))?;
        let mid = parts.first().map(|p| p.mid.clone()).unwrap_or_default();
        let kinds = events.iter().map(|e| e.kind().to_owned()).collect();
        let (heads, tails) = parts.into_iter().map(|p| (p.head, p.tail)).unzip();
        Ok(Batch {
            events,
            n,
            life,
            heads,
            mid,
            tails,
            kinds,
        })
    }
}

impl PostgresEventStore {
    /// The call of a batch write (`append` or `append_if_open`) with its arguments bound, for
    /// this store's layout: `statements` is the pair (agentdeck's layout, the switchyard
    /// layout). The batch's column arrays are moved into the query; its events stay to be
    /// restamped from the answer.
    fn write_query<'q, O>(
        &self,
        statements: (&'q str, &'q str),
        log: &LogRef<'q>,
        ctx: &'q RunContext,
        batch: &mut Batch,
    ) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>
    where
        O: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    {
        let heads = std::mem::take(&mut batch.heads);
        let mid = std::mem::take(&mut batch.mid);
        let tails = std::mem::take(&mut batch.tails);
        match self.layout {
            PostgresLayout::Agentdeck => sqlx::query_as(statements.0)
                .bind(lock_key_of(log))
                .bind(log.namespace)
                .bind(log.log_key)
                .bind(ctx.run_id())
                .bind(self.injected_now())
                .bind(heads)
                .bind(mid)
                .bind(tails),
            PostgresLayout::Switchyard => sqlx::query_as(statements.1)
                .bind(log.namespace)
                .bind(log.log_key)
                .bind(ctx.run_id())
                .bind(batch.n)
                .bind(self.injected_now())
                .bind(batch.life.take())
                .bind(heads)
                .bind(mid)
                .bind(tails)
                .bind(std::mem::take(&mut batch.kinds)),
        }
    }
}

impl PostgresEventStore {
    /// `batch` as an op of its log's next group (ADR 0386), its column arrays moved into it; or
    /// `None`, and the batch untouched, when it goes in a call of its own: on the switchyard
    /// layout (which locks per run, not per log), with an injected clock (each call reads it),
    /// and when a text holds a NUL, which PostgreSQL refuses: that refusal must be its caller's
    /// alone, not its group's.
    fn grouped(
        &self,
        log: &LogRef<'_>,
        ctx: &RunContext,
        batch: &mut Batch,
        guarded: bool,
    ) -> Option<group::Op> {
        const NUL: &str = "\\u0000";
        if self.layout != PostgresLayout::Agentdeck || self.clock.is_some() {
            return None;
        }
        let nul = [log.namespace, log.log_key, ctx.run_id()]
            .iter()
            .any(|s| s.contains('\0'))
            || batch.mid.contains(NUL)
            || batch
                .heads
                .iter()
                .chain(&batch.tails)
                .any(|p| p.contains(NUL));
        if nul {
            return None;
        }
        Some(group::Op {
            lock_key: lock_key_of(log),
            namespace: log.namespace.to_owned(),
            log_key: log.log_key.to_owned(),
            run_id: ctx.run_id().to_owned(),
            guarded,
            mid: std::mem::take(&mut batch.mid),
            heads: std::mem::take(&mut batch.heads),
            tails: std::mem::take(&mut batch.tails),
        })
    }
}

/// Gives the events of a batch the seqs from `first` on and `ts`.
fn restamp(events: &mut [Event], first: u64, ts: &str, log: &LogRef<'_>) -> Result<()> {
    let ts = parse_ts(ts).map_err(|e| Error::corrupt(log.to_string(), e))?;
    for (event, seq) in events.iter_mut().zip(first..) {
        event.seq = seq;
        event.ts = ts;
    }
    Ok(())
}

#[async_trait]
impl EventStoreOps for PostgresEventStore {
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>> {
        let log = LogRef::of(ctx);
        let mut batch = Batch::new(ctx, origin, payloads)?;
        let (first, ts) = match self.grouped(&log, ctx, &mut batch, false) {
            Some(op) => match self.groups.run(op).await? {
                (Some(first), Some(ts), _) => (first, ts),
                other => {
                    return Err(Error::corrupt(
                        log.to_string(),
                        format!("append_group replied {other:?} to an unconditional append"),
                    ));
                }
            },
            None => self
                .write_query((sql::agentdeck::APPEND, sql::APPEND), &log, ctx, &mut batch)
                .fetch_one(&self.pool)
                .await
                .map_err(|e| backend("append", &log, e))?,
        };
        restamp(&mut batch.events, seq_of(first, &log)?, &ts, &log)?;
        Ok(batch.events)
    }

    /// One call of the schema's `append_if_open` function: the run's row lock, its status and the
    /// write in one round trip (ADR 0365).
    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended> {
        const OP: &str = "append_if_open";
        let log = LogRef::of(ctx);
        let mut batch = Batch::new(ctx, origin, payloads)?;
        let (first, ts, before): group::Row = match self.grouped(&log, ctx, &mut batch, true) {
            Some(op) => self.groups.run(op).await?,
            None => self
                .write_query(
                    (sql::agentdeck::APPEND_IF_OPEN, sql::APPEND_IF_OPEN),
                    &log,
                    ctx,
                    &mut batch,
                )
                .fetch_one(&self.pool)
                .await
                .map_err(|e| backend(OP, &log, e))?,
        };
        match (first, ts, before) {
            (Some(first), Some(ts), Some(kind)) => {
                let before = lifecycle_status(&kind)
                    .filter(|status| status.is_open())
                    .ok_or_else(|| {
                        Error::corrupt(
                            format!("{log} run {:?}", ctx.run_id()),
                            format!(
                                "the schema's append_if_open function stored the batch of a \
                                 run whose status was {kind:?}, which is not open: the schema \
                                 holds another build's function"
                            ),
                        )
                    })?;
                restamp(&mut batch.events, seq_of(first, &log)?, &ts, &log)?;
                Ok(Appended::stored(batch.events, before))
            }
            (None, None, Some(kind)) => {
                let status = lifecycle_status(&kind).unwrap_or(RunStatus::Pending);
                if status.is_open() || !(kind.is_empty() || is_lifecycle(&kind)) {
                    return Err(Error::corrupt(
                        format!("{log} run {:?}", ctx.run_id()),
                        format!(
                            "the schema's append_if_open function refused the append with the \
                             status {kind:?}, which is open or no lifecycle kind; nothing was \
                             written: the schema holds another build's function"
                        ),
                    ));
                }
                Ok(Appended::NotOpen(status))
            }
            other => Err(Error::corrupt(
                log.to_string(),
                format!("append_if_open replied {other:?}"),
            )),
        }
    }

    async fn read(
        &self,
        ctx: &RunContext,
        offset: u64,
        limit: Option<NonZeroU64>,
    ) -> Result<Vec<Event>> {
        let log = LogRef::of(ctx);
        let statement = match self.layout {
            PostgresLayout::Agentdeck => sql::agentdeck::READ,
            PostgresLayout::Switchyard => sql::READ,
        };
        let rows: Vec<(i64, String)> = sqlx::query_as(statement)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(limit.map(|l| to_i64(l.get())))
            .bind(to_i64(offset))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend("read", &log, e))?;
        decode_rows(rows)
    }

    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>> {
        let log = LogRef::of(ctx);
        let statement = match self.layout {
            PostgresLayout::Agentdeck => sql::agentdeck::READ_RUN,
            PostgresLayout::Switchyard => sql::READ_RUN,
        };
        let rows: Vec<(i64, String)> = sqlx::query_as(statement)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(ctx.run_id())
            .bind(to_i64(from_seq))
            .fetch_all(&self.pool)
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
        let (mut events, parts) = Self::stamped(ctx, origin, [opening])?;
        let Some(part) = parts.into_iter().next() else {
            return Err(Error::invalid("opening", "no event to write"));
        };
        // Microseconds, saturated: a window past 292,000 years is "never stale" (guarantee
        // `claim.no_overflow`).
        let stale_after_us = i64::try_from(stale_after.as_micros()).unwrap_or(i64::MAX);
        let query = match self.layout {
            PostgresLayout::Agentdeck => {
                sqlx::query(sql::agentdeck::CLAIM_START).bind(lock_key_of(&log))
            }
            PostgresLayout::Switchyard => sqlx::query(sql::CLAIM_START),
        };
        let rows = query
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(ctx.run_id())
            .bind(stale_after_us)
            .bind(self.injected_now())
            .bind(part.head)
            .bind(part.mid)
            .bind(part.tail)
            .fetch_all(&self.pool)
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            // An append created the run between the function's check and its insert.
            Err(e) if support::is_unique_violation(&e) => {
                return Err(Error::AlreadyExists {
                    what: "run",
                    id: ctx.run_id().to_string(),
                });
            }
            Err(e) => return Err(backend(OP, &log, e)),
        };
        let mut claim = SessionClaim::default();
        let mut won = None;
        for row in rows {
            let outcome: String = row.try_get(0).map_err(|e| backend(OP, &log, e))?;
            let run_id: Option<String> = row.try_get(1).map_err(|e| backend(OP, &log, e))?;
            match outcome.as_str() {
                "exists" => checks::run_is_new(true, ctx)?,
                "held" => claim.held_by = run_id,
                "overridden" => {
                    let data: Option<String> = row.try_get(3).map_err(|e| backend(OP, &log, e))?;
                    let tail =
                        Event::from_json(data.as_deref().unwrap_or_default()).map_err(|e| {
                            Error::corrupt(
                                format!("{log} run {:?} latest event", run_id.unwrap_or_default()),
                                e,
                            )
                        })?;
                    claim.overridden.push(tail);
                }
                "won" => {
                    won = row
                        .try_get::<Option<String>, _>(2)
                        .map_err(|e| backend(OP, &log, e))?
                }
                other => {
                    return Err(Error::corrupt(
                        log.to_string(),
                        format!("claim_start replied {other:?}"),
                    ));
                }
            }
        }
        if claim.held_by.is_some() {
            claim.overridden.clear();
            return Ok((claim, None));
        }
        let Some(ts) = won else {
            return Err(Error::corrupt(
                log.to_string(),
                "claim_start replied neither held nor won",
            ));
        };
        restamp(&mut events, 0, &ts, &log)?;
        Ok((claim, events.pop()))
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
        let (mut events, parts) = Self::stamped(ctx, origin, [resumed])?;
        let Some(part) = parts.into_iter().next() else {
            return Err(Error::invalid("resumed", "no event to write"));
        };
        let query = match self.layout {
            PostgresLayout::Agentdeck => {
                sqlx::query_as(sql::agentdeck::RESUME).bind(lock_key_of(&log))
            }
            PostgresLayout::Switchyard => sqlx::query_as(sql::RESUME),
        };
        let row: Option<(i64, String)> = query
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(run_id)
            .bind(self.injected_now())
            .bind(part.head)
            .bind(part.mid)
            .bind(part.tail)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend(OP, &log, e))?;
        let Some((seq, ts)) = row else {
            return Ok(None);
        };
        restamp(&mut events, seq_of(seq, &log)?, &ts, &log)?;
        Ok(events.pop())
    }

    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        let key = || format!("runs[namespace={:?}]", ctx.namespace_key());
        let statement = match self.layout {
            PostgresLayout::Agentdeck => sql::agentdeck::LIST_RUNS,
            PostgresLayout::Switchyard => sql::LIST_RUNS,
        };
        let rows: Vec<(String, String, String)> = sqlx::query_as(statement)
            .bind(ctx.namespace_key())
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend("list_runs", key(), e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(log_key, run_id, kind)| {
                let run_status = lifecycle_status(&kind)?;
                status
                    .is_none_or(|wanted| wanted == run_status)
                    .then_some(RunSummary {
                        log_key,
                        run_id,
                        status: run_status,
                    })
            })
            .collect())
    }

    /// The run's latest lifecycle kind from its `runs` row: one lookup, no event read.
    async fn run_status(&self, ctx: &RunContext) -> Result<RunStatus> {
        let run_id = ctx.run_id();
        let log = LogRef::of(ctx);
        let statement = match self.layout {
            PostgresLayout::Agentdeck => sql::agentdeck::STATUS,
            PostgresLayout::Switchyard => sql::STATUS,
        };
        let kind: Option<Option<String>> = sqlx::query_scalar(statement)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend("run_status", &log, e))?;
        Ok(kind
            .flatten()
            .as_deref()
            .and_then(lifecycle_status)
            .unwrap_or(RunStatus::Pending))
    }

    /// One call of the schema's `line_push` function (migration 4 of either layout): under the
    /// line's own advisory lock, the refusals and the insert at the end, so concurrent pushes
    /// take distinct places in the order they ran and none fails for having raced another.
    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        const OP: &str = "line_push";
        let log = LogRef::of(ctx);
        let max = i64::try_from(MAX_LINE).unwrap_or(i64::MAX);
        let (outcome, place): (String, Option<i64>) = sqlx::query_as(sql::line::PUSH)
            .bind(key::line_lock_key(log.namespace, log.log_key))
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(&entry.run_id)
            .bind(entry.to_json())
            .bind(max)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| backend(OP, line_of(&log), e))?;
        match (outcome.as_str(), place) {
            ("pushed", Some(place)) if place > 0 => Ok(place.unsigned_abs()),
            ("exists", None) => Err(Error::AlreadyExists {
                what: "waiting run",
                id: entry.run_id.clone(),
            }),
            ("full", None) => Err(checks::line_full(ctx)),
            other => Err(Error::corrupt(
                line_of(&log),
                format!(
                    "the schema's line_push function replied {other:?}: the schema holds \
                     another build's function"
                ),
            )),
        }
    }

    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        let log = LogRef::of(ctx);
        let rows: Vec<(i64, String)> = sqlx::query_as(sql::line::READ)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend("line_read", line_of(&log), e))?;
        rows.iter()
            .map(|(pos, entry)| {
                QueuedRun::from_json(entry, &format!("{} row pos={pos}", line_of(&log)))
            })
            .collect()
    }

    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool> {
        let log = LogRef::of(ctx);
        let removed: Option<i64> = sqlx::query_scalar(sql::line::REMOVE)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend("line_remove", line_of(&log), e))?;
        Ok(removed.is_some())
    }

    /// Every call runs inside the circuit: it fails at once while the server is known to be
    /// down, naming the refused connection, instead of waiting the acquire timeout (ADR 0355).
    fn guard<'a, T: Send + 'a>(
        &'a self,
        op: &'static str,
        key: &'a str,
        call: Call<'a, T>,
    ) -> Call<'a, T> {
        Box::pin(self.circuit.guard(op, key, call))
    }
}
