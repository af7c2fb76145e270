//! Shared by the integration tests: a store on a temporary file that lives as long as the store.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchyard_conformance::harness::TempSqlite;
use switchyard_core::event::{Event, Payload, RunResumed, RunStarted};
use switchyard_core::store::QueuedRun;
use switchyard_core::{
    Appended, Clock, EventStore, Result, RunContext, RunStatus, RunSummary, SessionClaim,
};
use switchyard_store_sqlite::{SqliteEventStore, SqliteOptions};

/// A [`SqliteEventStore`] that owns its temporary file, removed when the last clone drops.
#[derive(Debug)]
pub struct TempStore {
    pub store: SqliteEventStore,
    pub file: TempSqlite,
}

impl TempStore {
    pub async fn new(clock: Option<Arc<dyn Clock>>) -> Self {
        let file = TempSqlite::new();
        let mut options = SqliteOptions::default();
        if let Some(clock) = clock {
            options = options.clock(clock);
        }
        let store = SqliteEventStore::open_with(file.path(), options)
            .await
            .expect("open the SQLite store");
        Self { store, file }
    }
}

#[async_trait]
impl EventStore for TempStore {
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>> {
        self.store.append(ctx, payloads, origin).await
    }

    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended> {
        self.store.append_if_open(ctx, payloads, origin).await
    }

    async fn read(&self, ctx: &RunContext, offset: i64, limit: Option<i64>) -> Result<Vec<Event>> {
        self.store.read(ctx, offset, limit).await
    }

    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>> {
        self.store.read_run(ctx, from_seq).await
    }

    async fn claim_start(
        &self,
        ctx: &RunContext,
        opening: RunStarted,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        self.store
            .claim_start(ctx, opening, origin, stale_after)
            .await
    }

    async fn claim_resume(
        &self,
        ctx: &RunContext,
        resumed: RunResumed,
        origin: &str,
    ) -> Result<Option<Event>> {
        self.store.claim_resume(ctx, resumed, origin).await
    }

    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        self.store.list_runs(ctx, status).await
    }

    async fn run_status(&self, ctx: &RunContext) -> Result<RunStatus> {
        self.store.run_status(ctx).await
    }

    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        self.store.line_push(ctx, entry).await
    }

    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        self.store.line_read(ctx, limit).await
    }

    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool> {
        self.store.line_remove(ctx, run_id).await
    }
}

/// A raw connection to the store's file, as another process (or the Python seed) would have.
pub async fn raw(path: &std::path::Path) -> sqlx::SqliteConnection {
    use sqlx::Connection;
    use sqlx::sqlite::SqliteConnectOptions;
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .busy_timeout(Duration::from_secs(10));
    sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("raw connection")
}
