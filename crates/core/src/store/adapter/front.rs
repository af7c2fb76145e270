//! The port's front (ADR 0371): [`EventStore`] implemented once for every [`EventStoreOps`]. Here,
//! and only here, payloads are validated, empty batches and pages answered and the paging rules
//! applied; the adapter's step then runs, inside its guard, with what passed. Spans and metrics
//! are not the front's: the `observe::Observed` decorator wraps the port for them (ADR 0374).

use std::num::NonZeroU64;
use std::time::Duration;

use async_trait::async_trait;

use super::EventStoreOps;
use crate::Result;
use crate::context::{RunContext, RunSummary, SessionClaim};
use crate::event::{Event, Payload, RunResumed, RunStarted};
use crate::status::RunStatus;
use crate::store::{Appended, EventStore, MAX_LINE, QueuedRun, checks};

#[async_trait]
impl<T: EventStoreOps> EventStore for T {
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>> {
        // Guarantee `store.atomic_batches`: an empty batch does no I/O.
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        checks::payloads(&payloads)?;
        let key = ctx.log_key();
        let call = EventStoreOps::append(self, ctx, payloads, origin);
        self.guard("append", key, call).await
    }

    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended> {
        const OP: &str = "append_if_open";
        checks::payloads(&payloads)?;
        let key = ctx.log_key();
        if payloads.is_empty() {
            // Guarantee `store.append_if_open`: nothing to write, so the status, one read, is the
            // whole answer.
            let call = EventStoreOps::run_status(self, ctx);
            let status = self.guard(OP, key, call).await?;
            return Ok(checks::empty_append(status));
        }
        let call = EventStoreOps::append_if_open(self, ctx, payloads, origin);
        self.guard(OP, key, call).await
    }

    async fn read(&self, ctx: &RunContext, offset: i64, limit: Option<i64>) -> Result<Vec<Event>> {
        // Guarantee `read.append_order`.
        let (offset, limit) = checks::page(offset, limit)?;
        let limit = match limit {
            Some(0) => return Ok(Vec::new()),
            limit => limit.and_then(NonZeroU64::new),
        };
        let key = ctx.log_key();
        let call = EventStoreOps::read(self, ctx, offset, limit);
        self.guard("read", key, call).await
    }

    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>> {
        // Seqs are dense from 0 and stored as signed 64-bit numbers: none reaches past i64::MAX.
        if i64::try_from(from_seq).is_err() {
            return Ok(Vec::new());
        }
        let key = ctx.log_key();
        let call = EventStoreOps::read_run(self, ctx, from_seq);
        self.guard("read_run", key, call).await
    }

    async fn claim_start(
        &self,
        ctx: &RunContext,
        opening: RunStarted,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        let opening = Payload::RunStarted(opening);
        checks::payloads(std::slice::from_ref(&opening))?;
        let key = ctx.log_key();
        let call = EventStoreOps::claim_start(self, ctx, opening, origin, stale_after);
        self.guard("claim_start", key, call).await
    }

    async fn claim_resume(
        &self,
        ctx: &RunContext,
        resumed: RunResumed,
        origin: &str,
    ) -> Result<Option<Event>> {
        let resumed = Payload::RunResumed(resumed);
        checks::payloads(std::slice::from_ref(&resumed))?;
        let key = ctx.log_key();
        let call = EventStoreOps::claim_resume(self, ctx, resumed, origin);
        self.guard("claim_resume", key, call).await
    }

    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        let key = ctx.namespace_key();
        let call = EventStoreOps::list_runs(self, ctx, status);
        self.guard("list_runs", key, call).await
    }

    async fn run_status(&self, ctx: &RunContext) -> Result<RunStatus> {
        let key = ctx.log_key();
        let call = EventStoreOps::run_status(self, ctx);
        self.guard("run_status", key, call).await
    }

    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        // Guarantee `line.order`: the entry is the run of `ctx`, and its opening is valid.
        if entry.run_id != ctx.run_id() {
            return Err(crate::Error::invalid(
                "run_id",
                format!(
                    "the line entry is for run {:?}, the context for run {:?}",
                    entry.run_id,
                    ctx.run_id()
                ),
            ));
        }
        Payload::RunStarted(entry.opening.clone()).validate()?;
        let key = ctx.log_key();
        let call = EventStoreOps::line_push(self, ctx, entry);
        self.guard("line_push", key, call).await
    }

    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        let limit = limit.min(MAX_LINE);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let key = ctx.log_key();
        let call = EventStoreOps::line_read(self, ctx, limit);
        self.guard("line_read", key, call).await
    }

    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool> {
        let key = ctx.log_key();
        let call = EventStoreOps::line_remove(self, ctx, run_id);
        self.guard("line_remove", key, call).await
    }
}
