#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod sql;
mod subscribe;
mod wake;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value as Json;
use sqlx::postgres::PgPool;
use switchyard_core::pycompat::Dumps;
use switchyard_core::stream::{Capabilities, validate_event_name, validate_run_id};
use switchyard_core::{Error, ItemStream, Result, StreamBridge};
use switchyard_postgres_support::{
    self as support, Notifications, PoolOptions, PostgresUrl, Schema,
};

use crate::wake::Watchers;

switchyard_postgres_support::embed_migrations!(
    /// The bridge's migrations, recorded in `<schema>.bridge_migrations` (ADR 0221).
    /// The migration files, embedded (ADR 0346), with a test that the list names every file.
    const MIGRATIONS = "migrations", "1_bridge.sql"
);

const WHAT: &str = "PostgresStreamBridge";

/// Entries a snapshot reads at most (the Redis bridge's `XREAD COUNT`).
pub(crate) const READ_COUNT: i64 = 64;

/// Settings of a [`PostgresStreamBridge`].
#[derive(Debug, Clone)]
pub struct PostgresStreamBridgeConfig {
    /// `postgres://` or `postgresql://` URL.
    pub url: String,
    /// The schema of the bridge's tables, created when missing. Default (`None`): the URL's
    /// `?schema=`, else `switchyard`.
    pub schema: Option<String>,
    /// Retained data events per run. At least 1. Default 256.
    pub queue_maxsize: usize,
    /// Streams not published to for this long are removed by the retention sweep (the Redis
    /// bridge's rolling TTL); `None` or zero keeps them until `cleanup`. Default 24 h.
    pub stream_ttl: Option<Duration>,
    /// Connections of the pool for publishes and snapshots (one more listens). Default 4.
    pub max_connections: u32,
    /// How long opening may take to reach the server and migrate. Default 10 s.
    pub connect_timeout: Duration,
    /// Longest a publish or snapshot waits for a pooled connection, and longest one of its
    /// statements may run (PostgreSQL's `statement_timeout`), before it fails with
    /// `Error::Unavailable`. Default (`None`): 10 s to acquire and the server's statement limit.
    pub command_timeout: Option<Duration>,
}

impl PostgresStreamBridgeConfig {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: None,
            queue_maxsize: switchyard_core::stream::DEFAULT_QUEUE_MAXSIZE,
            stream_ttl: Some(Duration::from_secs(86_400)),
            max_connections: 4,
            connect_timeout: Duration::from_secs(10),
            command_timeout: None,
        }
    }
}

/// The stream bridge on PostgreSQL. Cheap to clone.
///
/// Each run's retained events are rows of `bridge_entries`, ids `<ms>-<seq>` from the database
/// clock as Redis Streams makes them, trimmed to the newest `queue_maxsize` by the publish
/// itself; the end mark is an entry. Every publish NOTIFYs the bridge's channel; each bridge holds
/// one `LISTEN` connection and wakes its local subscribers, which then read their snapshot, so two
/// gateways on one database serve one run's stream from either (ADR 0224). It follows the Redis
/// bridge on every point where the seed's two backends differ (`Capabilities::SHARED_LOG`).
#[derive(Debug, Clone)]
pub struct PostgresStreamBridge {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) pool: PgPool,
    // Whether the server is known to be down: publishes then fail at once, naming the refused
    // connection, instead of waiting the acquire timeout (ADR 0355).
    circuit: support::Circuit,
    pub(crate) watchers: Arc<Watchers>,
    pub(crate) channel: String,
    maxsize: i64,
    closed: AtomicBool,
    // Dropping these stops listening and sweeping.
    notifications: std::sync::Mutex<Option<Notifications>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl PostgresStreamBridge {
    /// Connects, migrates the schema (ADR 0221) and starts listening.
    pub async fn connect(config: PostgresStreamBridgeConfig) -> Result<Self> {
        if config.queue_maxsize == 0 {
            return Err(Error::config(
                "stream_bridge.queue_maxsize",
                "must be at least 1 (0 would retain nothing)",
            ));
        }
        let maxsize = i64::try_from(config.queue_maxsize).map_err(|_| {
            Error::config(
                "stream_bridge.queue_maxsize",
                "is larger than PostgreSQL can count",
            )
        })?;
        let url = PostgresUrl::parse(&config.url, "stream_bridge.url")?;
        let schema = Schema::new(
            config
                .schema
                .or_else(|| url.schema().map(str::to_owned))
                .unwrap_or_else(|| support::DEFAULT_SCHEMA.to_owned()),
        )?;
        let mut options = PoolOptions::default()
            .max_connections(config.max_connections)
            .connect_timeout(config.connect_timeout)
            .schema(schema.clone())
            .application_name(WHAT);
        if let Some(timeout) = config.command_timeout {
            options = options.acquire_timeout(timeout).statement_timeout(timeout);
        }
        let pool = support::connect(&url, &options, WHAT).await?;
        if let Err(e) = support::migrate(
            &pool,
            &schema,
            "bridge_migrations",
            &support::embedded_migrator(MIGRATIONS).await?,
            WHAT,
        )
        .await
        {
            pool.close().await;
            return Err(e);
        }
        // One channel per schema, so bridges on other schemas do not wake ours. Channel names are
        // identifiers: at most 63 bytes, and a schema name is at most 63 of ASCII.
        let channel: String = format!("swyd_bridge_{schema}").chars().take(63).collect();
        let notifications = Notifications::listen(&pool, &[&channel], WHAT).await?;
        let watchers = Arc::new(Watchers::default());
        let mut tasks = vec![wake::dispatch(&notifications, watchers.clone())];
        if let Some(ttl) = config.stream_ttl.filter(|ttl| !ttl.is_zero()) {
            tasks.push(tokio::spawn(sweep(pool.clone(), channel.clone(), ttl)));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                circuit: support::Circuit::new(&url, &pool, WHAT),
                pool,
                watchers,
                channel,
                maxsize,
                closed: AtomicBool::new(false),
                notifications: std::sync::Mutex::new(Some(notifications)),
                tasks,
            }),
        })
    }

    /// Subscribers of this bridge waiting for a wake-up right now.
    pub fn waiting_subscribers(&self) -> usize {
        self.inner.watchers.len()
    }

    async fn add(
        &self,
        op: &'static str,
        run_id: &str,
        end: bool,
        event: Option<&str>,
        data: Option<String>,
    ) -> Result<String> {
        self.inner.check_open()?;
        validate_run_id(run_id)?;
        // N + 1 for the end mark: it never evicts one of the N retained data events.
        let maxlen = if end {
            self.inner.maxsize.saturating_add(1)
        } else {
            self.inner.maxsize
        };
        let publish = sqlx::query_scalar(sql::PUBLISH)
            .bind(run_id)
            .bind(end)
            .bind(event)
            .bind(data)
            .bind(maxlen)
            .bind(&self.inner.channel)
            .fetch_one(&self.inner.pool);
        let publish = async {
            publish
                .await
                .map_err(|e| support::error(WHAT, op, run_id, e))
        };
        self.inner.circuit.guard(op, run_id, publish).await
    }
}

impl Inner {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed { what: WHAT });
        }
        Ok(())
    }
}

/// Removes streams idle for `ttl`, every `ttl / 4` (at most every minute, at least every
/// second). A failed sweep is retried at the next turn.
async fn sweep(pool: PgPool, channel: String, ttl: Duration) {
    let every = (ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        if let Err(e) = sqlx::query(sql::SWEEP)
            .bind(ttl.as_secs_f64())
            .bind(&channel)
            .execute(&pool)
            .await
        {
            tracing::warn!(error = %e, "stream bridge retention sweep failed; retrying later");
        }
    }
}

#[async_trait]
impl StreamBridge for PostgresStreamBridge {
    fn capabilities(&self) -> Capabilities {
        // Retained entries in a table with Redis-style ids and the end mark as an entry, so it
        // takes the Redis bridge's side of every difference.
        Capabilities::SHARED_LOG
    }

    async fn publish(&self, run_id: &str, event: &str, data: &Json) -> Result<String> {
        validate_event_name(event)?;
        // The bytes the Redis bridge stores: `json.dumps(data, ensure_ascii=False,
        // separators=(",", ":"))` (ADR 0177).
        let json = Dumps::DEFAULT
            .ensure_ascii(false)
            .compact(true)
            .to_string(data);
        self.add("publish", run_id, false, Some(event), Some(json))
            .await
    }

    async fn publish_end(&self, run_id: &str) -> Result<()> {
        self.add("publish_end", run_id, true, None, None)
            .await
            .map(drop)
    }

    fn subscribe(
        &self,
        run_id: &str,
        last_event_id: Option<&str>,
        heartbeat: Duration,
    ) -> ItemStream {
        subscribe::subscribe(self.inner.clone(), run_id, last_event_id, heartbeat)
    }

    async fn cleanup(&self, run_id: &str, delay: Duration) -> Result<()> {
        self.inner.check_open()?;
        validate_run_id(run_id)?;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let cleanup = async {
            sqlx::query(sql::CLEANUP)
                .bind(run_id)
                .bind(&self.inner.channel)
                .execute(&self.inner.pool)
                .await
                .map_err(|e| support::error(WHAT, "cleanup", run_id, e))
        };
        self.inner.circuit.guard("cleanup", run_id, cleanup).await?;
        Ok(())
    }

    async fn stream_exists(&self, run_id: &str) -> Result<bool> {
        self.inner.check_open()?;
        validate_run_id(run_id)?;
        let exists = async {
            sqlx::query_scalar(sql::EXISTS)
                .bind(run_id)
                .fetch_one(&self.inner.pool)
                .await
                .map_err(|e| support::error(WHAT, "stream_exists", run_id, e))
        };
        self.inner
            .circuit
            .guard("stream_exists", run_id, exists)
            .await
    }

    async fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.watchers.close();
        drop(
            self.inner
                .notifications
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        for task in &self.inner.tasks {
            task.abort();
        }
        self.inner.pool.close().await;
        Ok(())
    }
}
