//! `PostgresEventStore`: the adapter.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use sqlx::Row;
use sqlx::postgres::PgPool;
use switchyard_core::event::{Event, Payload, format_ts, parse_ts, stamp};
use switchyard_core::status::{RunStatus, is_lifecycle, lifecycle_status};
use switchyard_core::store::adapter::{Call, EventStoreOps};
use switchyard_core::store::checks;
use switchyard_core::{Appended, Clock, Error, Result, RunContext, RunSummary, SessionClaim};
use switchyard_postgres_support::events::{LogRef, decode_rows, seq_of, to_i64};
use switchyard_postgres_support::{self as support, PoolOptions, PostgresUrl, Schema};

use crate::json::{self, Parts};
use crate::sql;

switchyard_postgres_support::embed_migrations!(
    /// The store's migrations, recorded in `<schema>.store_migrations` (ADR 0221).
    /// The migration files, embedded (ADR 0346), with a test that the list names every file.
    const MIGRATIONS = "migrations",
    "1_events.sql",
    "2_lost_claims_commit_without_flush.sql",
    "3_append_if_open.sql"
);

/// The store's migration record table.
const MIGRATIONS_TABLE: &str = "store_migrations";

/// What this adapter is called in errors and in `pg_stat_activity`.
const WHAT: &str = "PostgresEventStore";

/// How to open a [`PostgresEventStore`].
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    pool: PoolOptions,
    schema: Option<String>,
    clock: Option<Arc<dyn Clock>>,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            pool: PoolOptions::default().application_name(WHAT),
            schema: None,
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
    /// else `switchyard`. A name is lowercase letters, digits and `_`; another is refused at open
    /// with [`Error::Config`].
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Stamps `ts` from `clock` instead of the database's clock. For tests that pin time.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }
}

/// An [`EventStore`](switchyard_core::EventStore) on PostgreSQL.
///
/// An append is one statement: it takes the run's row lock, its next seqs and the database
/// clock, and writes the batch (ADR 0222); `append_if_open` is one call of a function of the
/// schema that does the same after reading the run's status under that lock (ADR 0365). A claim
/// is one call of a function of the schema under the log's row lock (ADR 0223). The open runs of
/// a log are a partial index of the `runs` table, so a claim never reads a log's history;
/// `run_status` and `list_runs` read `runs` alone.
pub struct PostgresEventStore {
    pool: PgPool,
    // Whether the server is known to be down: calls then fail at once, naming the refused
    // connection, instead of waiting the acquire timeout for a pool that cannot connect
    // (ADR 0355).
    circuit: support::Circuit,
    clock: Option<Arc<dyn Clock>>,
    schema: Schema,
    url: String,
}

impl fmt::Debug for PostgresEventStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(WHAT)
            .field("url", &self.url)
            .field("schema", &self.schema.as_str())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

fn backend(op: &'static str, key: impl fmt::Display, e: sqlx::Error) -> Error {
    support::error(WHAT, op, key, e)
}

impl PostgresEventStore {
    /// Opens the store on `url` (`postgres://` or `postgresql://`) with default options,
    /// creating its schema and tables when missing.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, PostgresOptions::default()).await
    }

    /// Opens the store on `url`, creating the schema and migrating it (ADR 0221). Fails with
    /// [`Error::Config`] for a bad URL, schema name or credentials, or a schema another build
    /// migrated, and with [`Error::Unavailable`] when the server cannot be reached within the
    /// connect timeout.
    pub async fn open_with(url: &str, options: PostgresOptions) -> Result<Self> {
        let url = PostgresUrl::parse(url, "url")?;
        let schema = Schema::new(
            options
                .schema
                .or_else(|| url.schema().map(str::to_owned))
                .unwrap_or_else(|| support::DEFAULT_SCHEMA.to_owned()),
        )?;
        let pool_options = options.pool.schema(schema.clone());
        let pool = support::connect(&url, &pool_options, WHAT).await?;
        if let Err(e) = support::migrate(
            &pool,
            &schema,
            MIGRATIONS_TABLE,
            &support::embedded_migrator(MIGRATIONS).await?,
            WHAT,
        )
        .await
        {
            pool.close().await;
            return Err(e);
        }
        Ok(Self {
            circuit: support::Circuit::new(&url, &pool, WHAT),
            pool,
            clock: options.clock,
            schema,
            url: url.redacted().to_string(),
        })
    }

    /// The schema the store's tables live in.
    pub fn schema(&self) -> &str {
        self.schema.as_str()
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
    fn layout(
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
        let (events, parts) = PostgresEventStore::layout(ctx, origin, payloads)?;
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
        let (first, ts): (i64, String) = sqlx::query_as(sql::APPEND)
            .bind(log.namespace)
            .bind(log.log_key)
            .bind(ctx.run_id())
            .bind(batch.n)
            .bind(self.injected_now())
            .bind(batch.life)
            .bind(batch.heads)
            .bind(batch.mid)
            .bind(batch.tails)
            .bind(batch.kinds)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| backend("append", &log, e))?;
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
        let (first, ts, before): (Option<i64>, Option<String>, Option<String>) =
            sqlx::query_as(sql::APPEND_IF_OPEN)
                .bind(log.namespace)
                .bind(log.log_key)
                .bind(ctx.run_id())
                .bind(batch.n)
                .bind(self.injected_now())
                .bind(batch.life)
                .bind(batch.heads)
                .bind(batch.mid)
                .bind(batch.tails)
                .bind(batch.kinds)
                .fetch_one(&self.pool)
                .await
                .map_err(|e| backend(OP, &log, e))?;
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
        let rows: Vec<(i64, String)> = sqlx::query_as(sql::READ)
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
        let rows: Vec<(i64, String)> = sqlx::query_as(sql::READ_RUN)
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
        let (mut events, parts) = Self::layout(ctx, origin, [opening])?;
        let Some(part) = parts.into_iter().next() else {
            return Err(Error::invalid("opening", "no event to write"));
        };
        // Microseconds, saturated: a window past 292,000 years is "never stale" (guarantee
        // `claim.no_overflow`).
        let stale_after_us = i64::try_from(stale_after.as_micros()).unwrap_or(i64::MAX);
        let rows = sqlx::query(sql::CLAIM_START)
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
        let (mut events, parts) = Self::layout(ctx, origin, [resumed])?;
        let Some(part) = parts.into_iter().next() else {
            return Err(Error::invalid("resumed", "no event to write"));
        };
        let row: Option<(i64, String)> = sqlx::query_as(sql::RESUME)
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
        let rows: Vec<(String, String, String)> = sqlx::query_as(sql::LIST_RUNS)
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
        let kind: Option<Option<String>> = sqlx::query_scalar(sql::STATUS)
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
