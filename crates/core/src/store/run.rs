//! A run handle: the port's calls for one run, with the context and origin given once.
//!
//! Every port call takes the [`RunContext`] and addresses its log and run (guarantee
//! `store.envelope_from_context`, ADR 0363). [`Run`] holds the context and the `origin`, so a
//! caller writing many events for one run states them once (ADR 0252).

use std::time::Duration;

use crate::Result;
use crate::context::{RunContext, RunSummary, SessionClaim};
use crate::event::{Event, Payload, RunResumed, RunStarted};
use crate::status::RunStatus;

use super::{Appended, EventStore};

/// One run of an [`EventStore`]: `store.run(&ctx)`.
///
/// Every call writes `origin` into the events' envelope: the name of the invocable (agent,
/// workflow or skill) the caller addressed, as opposed to the one that ran; the gateway uses the
/// `invocable` of the run's `run.started` unless told otherwise. It defaults to `""`; set it
/// with [`Run::origin`].
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use switchyard_core::event::{InvocableKind, RunStarted};
/// use switchyard_core::{Appended, EventStore, MemoryEventStore, Payload, RunContext, RunStatus};
///
/// // What the facade's `open_event_store` returns; for a concrete store use `Run::new`.
/// let store: Arc<dyn EventStore> = Arc::new(MemoryEventStore::new());
/// let ctx = RunContext::new("run-1").with_session("s1");
/// let run = store.run(&ctx).origin("helper");
/// let (claim, _started) = run
///     .start(
///         RunStarted::new("helper", InvocableKind::Agent, vec![]),
///         Duration::from_secs(300),
///     )
///     .await?;
/// assert!(claim.won());
/// run.append(vec![Payload::text_delta("m1", "Hello")]).await?;
/// assert_eq!(run.status().await?, RunStatus::Running);
/// assert_eq!(run.read(0).await?.len(), 2);
/// // Only while the run is open; a run never started is pending and refuses, writing nothing.
/// assert!(run.append_if_open(vec![Payload::text_delta("m1", "!")]).await?.is_stored());
/// let other = RunContext::new("run-2");
/// assert_eq!(
///     store.run(&other).append_if_open(vec![Payload::text_delta("m1", "?")]).await?,
///     Appended::NotOpen(RunStatus::Pending)
/// );
/// # Ok::<(), switchyard_core::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Run<'a, S: ?Sized> {
    store: &'a S,
    ctx: &'a RunContext,
    origin: &'a str,
}

impl<'a, S: EventStore + ?Sized> Run<'a, S> {
    /// The run of `ctx` in `store`, origin `""`.
    pub fn new(store: &'a S, ctx: &'a RunContext) -> Self {
        Run {
            store,
            ctx,
            origin: "",
        }
    }

    /// Writes `origin` into every event this handle appends (see the type's docs).
    pub fn origin(self, origin: &'a str) -> Self {
        Run { origin, ..self }
    }

    /// The context.
    pub fn context(&self) -> &RunContext {
        self.ctx
    }

    /// The log it writes to ([`RunContext::log_key`]).
    pub fn log_key(&self) -> &str {
        self.ctx.log_key()
    }

    /// Claims the log and appends `opening` ([`EventStore::claim_start`]): a fresh open run
    /// refuses with `held_by`, stale ones are stepped over after `stale_after`.
    pub async fn start(
        &self,
        opening: RunStarted,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        self.store
            .claim_start(self.ctx, opening, self.origin, stale_after)
            .await
    }

    /// Appends payloads ([`EventStore::append`]).
    pub async fn append(&self, payloads: Vec<Payload>) -> Result<Vec<Event>> {
        self.store.append(self.ctx, payloads, self.origin).await
    }

    /// Appends payloads only while the run is open, in one step with the check
    /// ([`EventStore::append_if_open`]): [`Appended::NotOpen`] with the status, and nothing
    /// written, for a pending or finished run.
    pub async fn append_if_open(&self, payloads: Vec<Payload>) -> Result<Appended> {
        self.store
            .append_if_open(self.ctx, payloads, self.origin)
            .await
    }

    /// Resumes the run if it waits for a human or is paused, exactly once
    /// ([`EventStore::claim_resume`]); `None` when it was not resumable or another resume won.
    pub async fn resume(&self, resumed: RunResumed) -> Result<Option<Event>> {
        self.store
            .claim_resume(self.ctx, resumed, self.origin)
            .await
    }

    /// The run's events with `seq >= from_seq` ([`EventStore::read_run`]).
    pub async fn read(&self, from_seq: u64) -> Result<Vec<Event>> {
        self.store.read_run(self.ctx, from_seq).await
    }

    /// The run's folded status ([`EventStore::run_status`]).
    pub async fn status(&self) -> Result<RunStatus> {
        self.store.run_status(self.ctx).await
    }
}

/// Runs of a namespace (`None`: the runs with no namespace) with their status, optionally only
/// those in `status`: [`EventStore::list_runs`] without a context to make up.
pub async fn list_runs_in<S: EventStore + ?Sized>(
    store: &S,
    namespace: Option<&str>,
    status: Option<RunStatus>,
) -> Result<Vec<RunSummary>> {
    // list_runs reads only the context's namespace (guarantee `read.list_runs`); the run id is
    // never looked at.
    let ctx = RunContext::new("");
    let ctx = match namespace {
        Some(ns) => ctx.with_namespace(ns)?,
        None => ctx,
    };
    store.list_runs(&ctx, status).await
}
