//! What an event store adapter implements (ADR 0371): [`EventStoreOps`], one method per port call
//! holding only the step the backend must take itself, with arguments already checked.
//!
//! Callers never see this trait. They call the port, [`EventStore`](super::EventStore), which core
//! implements once for every type implementing [`EventStoreOps`] (`front.rs`). That front does, for
//! every adapter alike:
//!
//! * **payload validation** (guarantee `store.validated_input`): every payload of a batch, the
//!   opening of a claim and the event of a resume pass [`Payload::validate`] before the adapter
//!   sees them;
//! * **empty batches** (guarantees `store.atomic_batches` and `store.append_if_open`): `append`
//!   of nothing answers `[]`, and `append_if_open` of nothing answers from
//!   [`EventStoreOps::run_status`]; neither reaches the adapter's append;
//! * **paging** (guarantee `read.append_order`): a negative limit is refused, a negative offset
//!   counts as 0, a limit of 0 answers `[]`; `read_run` from a seq past any stored one (above
//!   `i64::MAX`, which no backend stores) answers `[]`;
//! * **the adapter's [`guard`](EventStoreOps::guard)** around its step: a networked adapter's
//!   circuit (ADR 0355).
//!
//! Spans and metrics per call are not the front's: the
//! [`Observed`](crate::observe::Observed) decorator adds them to any port (ADR 0374).
//!
//! What stays with the adapter is what it reads or decides inside its one atomic step: its clock's
//! "now" and `stale_before` ([`checks::stale_before`](super::checks::stale_before), guarantee
//! `claim.no_overflow`), whether the run id is taken
//! ([`checks::run_is_new`](super::checks::run_is_new)), the run's status under its lock.

mod front;

use std::fmt::Debug;
use std::future::Future;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;

use super::{Appended, QueuedRun};
use crate::Result;
use crate::context::{RunContext, RunSummary, SessionClaim};
use crate::event::{Event, Payload};
use crate::status::{RunStatus, status_of};

/// One call of an adapter, as [`EventStoreOps::guard`] receives and returns it.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// The event store as an adapter implements it (ADR 0371). Each method keeps the guarantees of the
/// [`EventStore`](super::EventStore) method of the same name, for arguments that have passed the
/// checks its rustdoc names; it does not repeat them.
#[async_trait]
pub trait EventStoreOps: Send + Sync + Debug {
    /// As [`EventStore::append`](super::EventStore::append), for a batch that is not empty and
    /// whose payloads are valid.
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>>;

    /// As [`EventStore::append_if_open`](super::EventStore::append_if_open), for a batch that is
    /// not empty and whose payloads are valid: the run's status and the write in one indivisible
    /// step (ADR 0365).
    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended>;

    /// As [`EventStore::read`](super::EventStore::read), for an `offset` of 0 or more and a
    /// `limit` that is `None` (all) or at least 1; neither exceeds `i64::MAX`.
    async fn read(
        &self,
        ctx: &RunContext,
        offset: u64,
        limit: Option<NonZeroU64>,
    ) -> Result<Vec<Event>>;

    /// As [`EventStore::read_run`](super::EventStore::read_run), for a `from_seq` of at most
    /// `i64::MAX`.
    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>>;

    /// As [`EventStore::claim_start`](super::EventStore::claim_start), for a valid `opening`
    /// (a `run.started` payload). `stale_after` is any duration: the adapter computes
    /// `stale_before` from its own "now", read in its atomic step, without overflow
    /// ([`checks::stale_before`](super::checks::stale_before)).
    async fn claim_start(
        &self,
        ctx: &RunContext,
        opening: Payload,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)>;

    /// As [`EventStore::claim_resume`](super::EventStore::claim_resume), for a valid `resumed`
    /// (a `run.resumed` payload).
    async fn claim_resume(
        &self,
        ctx: &RunContext,
        resumed: Payload,
        origin: &str,
    ) -> Result<Option<Event>>;

    /// As [`EventStore::list_runs`](super::EventStore::list_runs).
    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>>;

    /// As [`EventStore::run_status`](super::EventStore::run_status). The default folds the whole
    /// run ([`read_run`](Self::read_run) from 0); an adapter that keeps the status overrides it
    /// with one lookup. The front also answers an empty `append_if_open` from it.
    async fn run_status(&self, ctx: &RunContext) -> Result<RunStatus> {
        Ok(status_of(&EventStoreOps::read_run(self, ctx, 0).await?))
    }

    /// As [`EventStore::line_push`](super::EventStore::line_push): in one indivisible step,
    /// refuse a run id the line holds or a full line ([`MAX_LINE`](super::MAX_LINE)), else
    /// add the entry at the end and answer its place.
    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64>;

    /// As [`EventStore::line_read`](super::EventStore::line_read), for a `limit` of 1 to
    /// [`MAX_LINE`](super::MAX_LINE).
    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>>;

    /// As [`EventStore::line_remove`](super::EventStore::line_remove).
    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool>;

    /// Runs one call of this adapter: `op` is the port method's name and `key` the log key (the
    /// namespace key for `list_runs`). The default runs `call` as it is. An adapter whose backend
    /// can be known to be down wraps it in its circuit, so the call fails at once instead of
    /// waiting out a reconnect (ADR 0355).
    fn guard<'a, T: Send + 'a>(
        &'a self,
        op: &'static str,
        key: &'a str,
        call: Call<'a, T>,
    ) -> Call<'a, T> {
        let _ = (op, key);
        call
    }
}

#[cfg(test)]
mod tests;
