//! The event store, observed.

use std::time::Duration;

use async_trait::async_trait;

use super::{Observed, PortKind};
use crate::Result;
use crate::context::{RunContext, RunSummary, SessionClaim};
use crate::event::{Event, Payload, RunResumed, RunStarted};
use crate::status::RunStatus;
use crate::store::{Appended, EventStore, QueuedRun};

const PORT: PortKind = PortKind::EventStore;

#[async_trait]
impl<S: EventStore + ?Sized> EventStore for Observed<S> {
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>> {
        let work = self.inner.append(ctx, payloads, origin);
        self.call(PORT, "append", work).await
    }

    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended> {
        let work = self.inner.append_if_open(ctx, payloads, origin);
        self.call(PORT, "append_if_open", work).await
    }

    async fn read(&self, ctx: &RunContext, offset: i64, limit: Option<i64>) -> Result<Vec<Event>> {
        self.call(PORT, "read", self.inner.read(ctx, offset, limit))
            .await
    }

    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>> {
        self.call(PORT, "read_run", self.inner.read_run(ctx, from_seq))
            .await
    }

    async fn claim_start(
        &self,
        ctx: &RunContext,
        opening: RunStarted,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        let work = self.inner.claim_start(ctx, opening, origin, stale_after);
        self.call(PORT, "claim_start", work).await
    }

    async fn claim_resume(
        &self,
        ctx: &RunContext,
        resumed: RunResumed,
        origin: &str,
    ) -> Result<Option<Event>> {
        let work = self.inner.claim_resume(ctx, resumed, origin);
        self.call(PORT, "claim_resume", work).await
    }

    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        self.call(PORT, "list_runs", self.inner.list_runs(ctx, status))
            .await
    }

    // Forwarded, not left to the trait's default: an adapter's own `run_status` is one read
    // where the default folds the whole run.
    async fn run_status(&self, ctx: &RunContext) -> Result<RunStatus> {
        self.call(PORT, "run_status", self.inner.run_status(ctx))
            .await
    }

    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        self.call(PORT, "line_push", self.inner.line_push(ctx, entry))
            .await
    }

    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        self.call(PORT, "line_read", self.inner.line_read(ctx, limit))
            .await
    }

    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool> {
        self.call(PORT, "line_remove", self.inner.line_remove(ctx, run_id))
            .await
    }
}
