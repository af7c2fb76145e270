//! The `EventStore` port: the run log.

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;

use crate::Result;
use crate::context::{RunContext, RunSummary, SessionClaim};
use crate::event::{Event, Payload, RunResumed, RunStarted};
use crate::status::{RunStatus, status_of};

/// An append-only store of run events with session claims: the persistence port of an agent
/// runtime.
///
/// A *log* is the events of one `(namespace, log_key)`; the log key is the session id, or the run
/// id for a run without a session ([`RunContext::log_key`]). A log holds one or more *runs*. An
/// *open* run is one whose latest lifecycle event is not terminal (running, paused, waiting for a
/// human); a run with no lifecycle event is pending and holds nothing.
///
/// # Guarantees
///
/// Every adapter keeps all of these; the conformance suite (`event_store_suite!`) has a case named
/// after each.
///
/// Adapters do not implement this trait: they implement [`adapter::EventStoreOps`], and core
/// implements `EventStore` once over it, validating payloads, answering empty batches and pages
/// and applying the paging rules for every adapter alike (ADR 0371).
///
/// 1. **Dense seqs** (`store.dense_seqs`). `append` stamps its payloads in order with the run's
///    next `seq`: 0 for the first event of a run, then +1 per event, per `(namespace, log_key,
///    run_id)`. Concurrent appenders to one run all succeed (no `Contended` error, whatever their
///    number) and no seq is ever skipped or given twice.
/// 2. **One store clock** (`store.store_clock`). The store stamps `ts` from its own clock
///    (SQLite's, Redis `TIME`, or the injected [`Clock`](crate::Clock)), never the caller's; every
///    event of one batch shares one `ts`.
/// 3. **Atomic batches** (`store.atomic_batches`). A batch is written whole or not at all, and
///    `append` returns once it is durable in the backend. An empty batch returns `[]` and does no
///    I/O.
/// 4. **Validated input** (`store.validated_input`). A payload that breaks a rule of the event
///    model is refused with [`Error::InvalidInput`](crate::Error::InvalidInput) naming the field;
///    nothing of the batch is written.
/// 5. **Log and envelope from the context** (`store.envelope_from_context`). Every call addresses
///    the log of `ctx` ([`RunContext::log_key`]: its session, or its run id when it has none) and
///    its run; `run_id`, `session_id` and `namespace` in the envelope come from `ctx`, `origin`
///    from the call. No call can file a run's events under another log (ADR 0363).
/// 6. **Reads in append order** (`read.append_order`). `read` returns a log's events oldest first;
///    `offset` counts events from the start of the log (a negative offset counts as 0); `limit`
///    `None` means all, `0` returns `[]`, and a negative limit is
///    [`Error::InvalidInput`](crate::Error::InvalidInput).
/// 7. **`read_run` from a seq, served by the backend** (`read.run_from_seq`). `read_run` returns
///    one run's events with `seq >= from_seq`, in append order, without transferring the earlier
///    ones.
/// 8. **Isolation** (`read.isolation`). Namespaces, logs and runs never see each other's events,
///    whatever their ids contain (`:`, `%`, `{`, `}`, `/`, spaces, unicode, very long ids).
/// 9. **Claims are atomic and scoped to the log** (`claim.atomic`). `claim_start` computes
///    `stale_before = now - stale_after` on the store clock and looks at every open run of the log
///    in one indivisible step:
///    * an open run whose latest event (of any kind) has `ts > stale_before` is *fresh* and refuses
///      the claim: the result names it in `held_by` (the smallest run id among the fresh open runs,
///      so every caller sees the same holder) and nothing is written;
///    * otherwise every open run is *stale* (`ts == stale_before` is stale) and its latest event
///      goes into `overridden`, ordered by run id; the store writes nothing for it;
///    * terminal and pending runs hold nothing;
///    * when nothing refuses, `opening` is stamped and appended, and returned with the claim.
///
///    Of any number of concurrent `claim_start` calls on one log that find it free, exactly one
///    wins. Losing is data (`held_by`), never an error.
/// 10. **Claim cost is bounded by open runs** (`claim.bounded_cost`). The work of a claim grows
///     with the open runs of the log, not with its history: a session with 500 closed runs claims
///     about as fast as a fresh one.
/// 11. **Resume exactly once** (`claim.resume_once`). In one step `claim_resume` appends
///     `resumed` and returns the event if the run of `ctx` is waiting for a human or paused, and
///     returns `None` otherwise; of concurrent resumes of one run exactly one gets the event.
/// 12. **`list_runs` by value** (`read.list_runs`). Every run of the namespace, across all logs,
///     that has at least one lifecycle event, with its folded status; `status` filters by value
///     (the seed compares by identity and matches nothing for a plain string). Order is
///     unspecified.
/// 13. **`run_status`** (`read.run_status`) is the fold of the run's events; an unknown run is
///     [`RunStatus::Pending`].
/// 14. **Corrupt data is typed and contained** (`read.corrupt_contained`). A stored record that
///     does not decode is reported as [`Error::Corrupt`](crate::Error::Corrupt) naming its key or
///     row; other logs stay readable.
/// 15. **No input overflows** (`claim.no_overflow`). Any `stale_after`, up to `Duration::MAX`, is
///     accepted: one that reaches before the earliest instant the store can represent means "no
///     open run is ever stale" (the claim is refused while any run is open), never a panic or an
///     error.
/// 16. **Run ids are never reused** (`claim.run_ids_unique`). `claim_start` for a `ctx.run_id` that
///     already has events in the log (running, finished or pending) returns
///     [`Error::AlreadyExists`](crate::Error::AlreadyExists) and writes nothing; this is checked in
///     the same indivisible step as the claim, so of concurrent starts of one new id at most one
///     opens it (ADR 0191).
/// 17. **Appends only to open runs** (`store.append_if_open`). `append_if_open` writes its batch
///     only while the run of `ctx` is open: running, paused or waiting for a human, its status
///     folded from its lifecycle events as `run_status` folds it (the last one wins). The check
///     and the write are one indivisible step, one call to the backend (a script, a statement or
///     function call, a transaction; never a status read and then an append), so no event is
///     ever stored after the run's terminal event by this call:
///     * an open run: the batch is stamped and written as `append` writes it (guarantees
///       `store.dense_seqs`, `store.store_clock`, `store.atomic_batches`, `store.validated_input`
///       and `store.envelope_from_context` hold) and comes back in [`Appended::Stored`] with
///       the run's status after it (the batch's last lifecycle event's, else the open status the
///       run had, known from the same step); the batch may end the run itself (a terminal event
///       is how a run ends);
///     * otherwise nothing is written and the result is [`Appended::NotOpen`] with the status:
///       [`RunStatus::Pending`] for a run with no lifecycle event (never started, or unknown), or
///       its terminal status. Refusal is data, never an error;
///     * an empty batch writes nothing and answers from the run's status (`Stored([])` while
///       open).
///
///     `append` itself stays unconditional, as in the seed (ADR 0005, f1); ADR 0365.
/// 18. **A session's line keeps claim order** (`line.order`). Beside each log the store keeps a
///     line of runs waiting for the session ([`QueuedRun`]), never in the log itself, so no
///     reader of the log (a seed process included) sees a waiting run, which holds nothing.
///     `line_push` puts the run of `ctx` at the end in one indivisible step and answers its
///     place (1 for the first); concurrent pushes all succeed with distinct places, in the
///     order their steps ran. A run id already in the line is
///     [`Error::AlreadyExists`](crate::Error::AlreadyExists), and a line holding
///     [`MAX_LINE`] runs refuses more with [`Error::Rejected`](crate::Error::Rejected);
///     neither writes anything. `line_read` answers the first `limit` waiting runs, oldest
///     first, and `line_remove` takes one out by id, answering whether it was there. Lines of
///     different logs never see each other (guarantee `read.isolation`). ADR 0394.
/// 19. **Enqueued runs start exactly once, in claim order** (`claim.enqueue`). A claim with
///     [`Multitask::Enqueue`] ([`line::claim`]) on a held session waits in the line and answers
///     its place; [`line::hand_off`] starts the first waiting run with its own `claim_start`
///     when no fresh open run holds the session, and takes it out of the line. Of any number of
///     concurrent claims and hand-offs, every waiting run starts exactly once, in the order it
///     joined the line, and none starts while the run before it is open and fresh. ADR 0394.
/// 20. **Interrupt and rollback end the holder first** (`claim.interrupt`). A claim with
///     [`Multitask::Interrupt`] or [`Multitask::Rollback`] ends every run that holds the
///     session with `run.cancelled` (reason `interrupted by run …` or `rolled back for run …`),
///     stored before its own `run.started`, then starts; the holder's worker is refused its
///     next `append_if_open`, and the ending events come back in [`Claimed::Started`]. Stale
///     runs the claim steps over are ended the same way. A waiting line is left as it is.
///     ADR 0394.
#[async_trait]
pub trait EventStore: Send + Sync + Debug {
    /// Stamps and appends `payloads` to the run of `ctx`, in its log ([`RunContext::log_key`]).
    /// See guarantees `store.dense_seqs`, `store.store_clock`, `store.atomic_batches`,
    /// `store.validated_input` and `store.envelope_from_context`.
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>>;

    /// Stamps and appends `payloads` to the run of `ctx` only while that run is open, in the same
    /// indivisible step as the check; a run that is pending or finished gets
    /// [`Appended::NotOpen`] with its status and nothing is written. See guarantee
    /// `store.append_if_open` (ADR 0365).
    ///
    /// A status read followed by an append is the race this call removes, so every adapter
    /// implements it natively ([`adapter::EventStoreOps::append_if_open`]).
    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended>;

    /// Events of the log of `ctx` (its session's, or its own for a run without one), oldest
    /// first. See guarantee `read.append_order`.
    async fn read(&self, ctx: &RunContext, offset: i64, limit: Option<i64>) -> Result<Vec<Event>>;

    /// The events of the run of `ctx` with `seq >= from_seq`. See guarantee `read.run_from_seq`.
    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>>;

    /// Claims the log of `ctx` for its run and appends `opening`, unless a fresh open run holds
    /// it or the run id is taken. See guarantees `claim.atomic`, `claim.bounded_cost`,
    /// `claim.no_overflow` and `claim.run_ids_unique`.
    async fn claim_start(
        &self,
        ctx: &RunContext,
        opening: RunStarted,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)>;

    /// Resumes the run of `ctx` if it waits for a human or is paused, exactly once. See
    /// guarantee `claim.resume_once`.
    async fn claim_resume(
        &self,
        ctx: &RunContext,
        resumed: RunResumed,
        origin: &str,
    ) -> Result<Option<Event>>;

    /// Runs of the namespace of `ctx` with their status (its run id is not looked at). See
    /// guarantee `read.list_runs`.
    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>>;

    /// The folded status of the run of `ctx`. See guarantee `read.run_status`.
    async fn run_status(&self, ctx: &RunContext) -> Result<RunStatus> {
        Ok(status_of(&self.read_run(ctx, 0).await?))
    }

    /// Puts the run of `ctx` (`entry.run_id`) at the end of its log's line and answers its
    /// place, 1 for the first. See guarantee `line.order`; [`line::claim`] is the verb callers
    /// use.
    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64>;

    /// The first `limit` runs waiting in the line of the log of `ctx`, oldest first. See
    /// guarantee `line.order`.
    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>>;

    /// Takes `run_id` out of the line of the log of `ctx`; `true` when it was there. See
    /// guarantee `line.order`.
    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool>;
}

/// What [`EventStore::append_if_open`] did (guarantee `store.append_if_open`, ADR 0365).
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a conditional append may have written nothing: look at the outcome"]
pub enum Appended {
    /// The run was open: the batch is stored, stamped (`events` is empty for an empty batch),
    /// and `status` is the run's status once it is stored: the batch's last lifecycle event's,
    /// else the open status the run had (running, paused or waiting for a human).
    Stored {
        /// The stored events, in order.
        events: Vec<Event>,
        /// The run's status after the batch.
        status: RunStatus,
    },
    /// The run was not open and nothing was written: [`RunStatus::Pending`] when it has no
    /// lifecycle event (never started, or unknown to the store), else its terminal status
    /// (completed, failed or cancelled).
    NotOpen(RunStatus),
}

impl Appended {
    /// A stored batch of a run whose status was `before`: the status after it is the batch's
    /// last lifecycle event's, else `before`.
    pub fn stored(events: Vec<Event>, before: RunStatus) -> Appended {
        let status = crate::status::status_after(before, &events);
        Appended::Stored { events, status }
    }

    /// True when the batch was stored.
    pub fn is_stored(&self) -> bool {
        matches!(self, Appended::Stored { .. })
    }

    /// The stored events, or `None` when the run was not open.
    pub fn into_stored(self) -> Option<Vec<Event>> {
        match self {
            Appended::Stored { events, .. } => Some(events),
            Appended::NotOpen(_) => None,
        }
    }

    /// The status that refused the append, or `None` when it was stored.
    pub fn not_open(&self) -> Option<RunStatus> {
        match self {
            Appended::Stored { .. } => None,
            Appended::NotOpen(status) => Some(*status),
        }
    }
}

impl dyn EventStore {
    /// Claims the log of `ctx` with a multitask strategy; see [`line::claim`] (guarantees
    /// `claim.atomic`, `claim.enqueue`, `claim.interrupt`).
    pub async fn claim(
        &self,
        ctx: &RunContext,
        opening: RunStarted,
        origin: &str,
        stale_after: Duration,
        strategy: Multitask,
    ) -> Result<Claimed> {
        line::claim(self, ctx, opening, origin, stale_after, strategy).await
    }

    /// Starts the first waiting run of the session of `ctx` if it is free; see
    /// [`line::hand_off`] (guarantee `claim.enqueue`).
    pub async fn hand_off(&self, ctx: &RunContext) -> Result<Option<HandedOff>> {
        line::hand_off(self, ctx).await
    }

    /// Where the waiting run of `ctx` stands, after a hand-off; see [`line::turn`].
    pub async fn turn(&self, ctx: &RunContext) -> Result<(Turn, Option<HandedOff>)> {
        line::turn(self, ctx).await
    }

    /// The run of `ctx`: the port's calls with the log key taken from the context, so a call can
    /// never write into another run's log (ADR 0252). See [`Run`].
    pub fn run<'a>(&'a self, ctx: &'a RunContext) -> Run<'a, dyn EventStore> {
        Run::new(self, ctx)
    }

    /// Runs of a namespace (`None`: runs without one); see [`list_runs_in`].
    pub async fn list_runs_in(
        &self,
        namespace: Option<&str>,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        list_runs_in(self, namespace, status).await
    }
}

/// Checks and computations every adapter must do the same way. The front
/// ([`adapter`]) calls [`payloads`](checks::payloads), [`page`](checks::page) and
/// [`empty_append`](checks::empty_append) for every adapter; an adapter calls
/// [`stale_before`](checks::stale_before) and [`run_is_new`](checks::run_is_new) inside its
/// atomic step, where its "now" and the run's existence are known.
pub mod checks {
    use super::Appended;
    use crate::context::RunContext;
    use crate::event::Payload;
    use crate::status::RunStatus;
    use crate::{Error, Result};

    /// Validates every payload of a batch (guarantee `store.validated_input`).
    pub fn payloads(payloads: &[Payload]) -> Result<()> {
        payloads.iter().try_for_each(Payload::validate)
    }

    /// Refuses a negative limit and clamps a negative offset (guarantee `read.append_order`).
    /// Returns `(offset, limit)` with `None` meaning "all".
    pub fn page(offset: i64, limit: Option<i64>) -> Result<(u64, Option<u64>)> {
        let limit = match limit {
            Some(l) if l < 0 => {
                return Err(Error::invalid("limit", format!("must be >= 0, got {l}")));
            }
            Some(l) => Some(l.unsigned_abs()),
            None => None,
        };
        Ok((offset.max(0).unsigned_abs(), limit))
    }

    /// `stale_after` as a chrono delta; absurdly large values saturate.
    pub fn stale_delta(stale_after: std::time::Duration) -> chrono::TimeDelta {
        chrono::TimeDelta::from_std(stale_after).unwrap_or(chrono::TimeDelta::MAX)
    }

    /// `now - stale_after` (guarantee `claim.atomic`) without overflow: a `stale_after` reaching
    /// before the earliest representable instant means "nothing is ever stale", so it saturates to
    /// that instant (guarantee `claim.no_overflow`).
    pub fn stale_before(
        now: chrono::DateTime<chrono::FixedOffset>,
        stale_after: std::time::Duration,
    ) -> chrono::DateTime<chrono::FixedOffset> {
        now.checked_sub_signed(stale_delta(stale_after))
            .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC.fixed_offset())
    }

    /// What a conditional append of an empty batch answers, from the run's `status`: it writes
    /// nothing either way (guarantee `store.append_if_open`).
    pub fn empty_append(status: RunStatus) -> Appended {
        if status.is_open() {
            Appended::Stored {
                events: Vec::new(),
                status,
            }
        } else {
            Appended::NotOpen(status)
        }
    }

    /// The refusal of a push to a line that holds [`MAX_LINE`](super::MAX_LINE) runs (guarantee
    /// `line.order`), the same from every adapter.
    pub fn line_full(ctx: &RunContext) -> Error {
        Error::Rejected {
            op: "line_push",
            key: ctx.log_key().to_string(),
            message: format!(
                "{} runs already wait for this session; wait for some to start, or claim with \
                 another strategy",
                super::MAX_LINE
            ),
        }
    }

    /// Refuses a claim for a run id the log already holds (guarantee `claim.run_ids_unique`).
    pub fn run_is_new(exists: bool, ctx: &RunContext) -> Result<()> {
        if exists {
            Err(Error::AlreadyExists {
                what: "run",
                id: ctx.run_id().to_string(),
            })
        } else {
            Ok(())
        }
    }
}

pub mod adapter;
pub mod line;
mod memory;
mod run;
pub use line::{Claimed, HandedOff, MAX_LINE, Multitask, QueuedRun, Turn};
pub use memory::MemoryEventStore;
pub use run::{Run, list_runs_in};
